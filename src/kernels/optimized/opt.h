/* Shared declarations of the optimized kernels (src/kernels/optimized). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_H
#define ETCH_KERNELS_OPTIMIZED_OPT_H

#include "etch/kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#define ETCH_OPT_X86 1
#else
#define ETCH_OPT_X86 0
#endif
#if defined(__aarch64__)
#define ETCH_OPT_NEON 1
#else
#define ETCH_OPT_NEON 0
#endif

/* Plain (fusing = false) or activation-fusing table. */
const etch_kernel *etch_opt_table(bool fusing, size_t *count);

/* Register the optimized kernels' layout functions (layout.c). */
etch_status etch_opt_register_layouts(void);

/* Apply ETCH_ISA from the environment (or the best ISA when unset). */
etch_status etch_opt_select_isa_from_env(void);

/* The tensor behind `v` when a fast path may index it with plain int64 arithmetic: a tensor
 * of `dtype` (contiguous when asked), every size in [0, ETCH_OPT_SIZE_LIMIT], fewer than 2^50
 * elements, data present unless empty and aligned to the element size; NULL otherwise (the
 * caller takes the portable path). */
#define ETCH_OPT_SIZE_LIMIT 0x3fffffffLL /* as the portable kernels: larger sizes go there */
etch_tensor *etch_opt_fast_tensor(etch_value *v, int dtype, bool contiguous);
/* The Float tensor behind `v` (rank <= ETCH_MAX_DIMS) whose data, when bound, is naturally
 * aligned, as the matmul kernels' fast paths and prepare functions take it (its data may be
 * unbound at load; a memory plan may place a tensor at any offset: the portable kernels take
 * the others); NULL otherwise. */
etch_tensor *etch_opt_float_arg(etch_value *v);

#define ETCH_OPT_KERNEL(name) \
    void etch_opt_##name(etch_kernel_context *ctx, etch_value **args, size_t nargs)

#endif
