/* Small helpers of the chain functions (etch/kernel.h, "chained calls"): reading a call's
 * arguments as the chain functions see them, and running a chain's calls one by one. */
#ifndef ETCH_KERNELS_OPTIMIZED_CHAIN_UTIL_H
#define ETCH_KERNELS_OPTIMIZED_CHAIN_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "etch/kernel.h"

static inline bool etch_chain_is_const(const etch_tensor *t) {
    return t && (t->flags & ETCH_TENSOR_CONSTANT);
}

/* args[k] as a tensor, or NULL (out of range, None, another kind). */
static inline etch_tensor *etch_chain_tensor_arg(etch_value **args, size_t nargs, size_t k) {
    return k < nargs && args[k] && args[k]->tag == ETCH_VALUE_TENSOR ? args[k]->u.tensor : NULL;
}

static inline bool etch_chain_int_arg(etch_value **args, size_t nargs, size_t k, int64_t *v) {
    return k < nargs && args[k] && args[k]->tag == ETCH_VALUE_INT && ((*v = args[k]->u.i), true);
}

static inline bool etch_chain_named(const etch_kernel_call *c, const char *name) {
    return c->kernel && c->kernel->name && strcmp(c->kernel->name, name) == 0;
}

static inline bool etch_chain_no_epilogue(const etch_kernel_call *c) {
    return !c->epilogue || c->epilogue->act == ETCH_ACT_NONE;
}

/* Run the calls one by one (what the chain stands for). */
static inline void etch_chain_run_each(etch_kernel_context *ctx) {
    const size_t n = etch_kernel_chain_length(ctx);
    for (size_t i = 0; i < n; i++)
        if (etch_kernel_chain_run(ctx, i) != ETCH_OK)
            return;
}

#endif
