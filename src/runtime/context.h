/* The kernel context: what a kernel sees of the method that calls it. */
#ifndef ETCH_RUNTIME_CONTEXT_H
#define ETCH_RUNTIME_CONTEXT_H

#include "etch/kernel.h"

struct etch_kernel_context {
    etch_status status;
    const char *op_name;
    uint8_t *temp;
    size_t temp_size;
    size_t temp_used;
    const etch_threadpool_iface *threadpool;
    const etch_epilogue *epilogue; /* fused activation of the current call; NULL: none */
    const void *prepared;          /* the call site's prepared data (NULL: none) */
    size_t prepared_size;
    uint64_t blocked; /* arguments stored channel-blocked (etch_kernel_blocked_args) */
    uint64_t replaces; /* prepare: constant arguments its buffer stands in for
                          (etch_kernel_prepared_replaces) */
    /* the calls the current one runs as one (etch_kernel_chain_*): its chain's instructions,
     * the first call's pc (chain_len 0: it runs alone) and the method's operators */
    const struct etch_instr *chain_instrs;
    const struct etch_op_rt *chain_ops;
    uint32_t chain_pc, chain_len;
    bool checking; /* a load-time check (etch_kernel_checking): validate, compute nothing */
};

/* A context over optional scratch memory (tests and runners calling kernels directly). */
void etch_kernel_context_init(etch_kernel_context *ctx, const char *op_name, void *temp,
                              size_t temp_size, const etch_threadpool_iface *threadpool);

#endif
