/* Shared helpers of the optimized element-wise family (eltwise.c, softmax.c, norm.c, copy.c):
 * argument checks that decide the fast path, and the broadcasting row walker. */
#ifndef ETCH_KERNELS_OPTIMIZED_ELTWISE_UTIL_H
#define ETCH_KERNELS_OPTIMIZED_ELTWISE_UTIL_H

#include "kernels/optimized/opt_eltwise.h"

/* The tensor in v, or NULL when v is not a tensor or is inconsistent (rank > 16, unknown
 * dtype, negative size, no data while it has elements). The fast paths call this and leave
 * anything NULL to the portable kernel, which reports the problem. */
etch_tensor *etch_ew_tensor(etch_value *v);
/* Float tensor (as etch_ew_tensor). */
etch_tensor *etch_ew_float(etch_value *v);
bool etch_ew_same_layout(const etch_tensor *a, const etch_tensor *b); /* sizes + dim order */
/* An Int/Double/Bool Scalar that converts to float without leaving float's range. */
bool etch_ew_scalar_f(const etch_value *v, float *out);
/* Resize without recording a failure (the caller falls back to the portable kernel, which
 * reports it); also false when out then has elements but no data. */
bool etch_ew_resize(etch_tensor *out, size_t dim, const int64_t *sizes);

/* Broadcasting walk over a contiguous output: up to 3 operands (0 = output), each with an
 * element size and element strides per dim (0 = broadcast). Dims of size 1 are dropped and
 * contiguous dims merged, so the innermost dim is a run where every input is either a full
 * row (stride 1) or one value (stride 0). */
#define ETCH_EW_MAX_OPS 3
typedef struct etch_ew_walk {
    int nops, ndim;
    int64_t sizes[ETCH_MAX_DIMS];
    int64_t st[ETCH_EW_MAX_OPS][ETCH_MAX_DIMS];
    char *base[ETCH_EW_MAX_OPS];
    int64_t esize[ETCH_EW_MAX_OPS];
    int64_t numel;
} etch_ew_walk;

/* Row callback: ptrs[k] at the run's first element, bcast[k] != 0 when operand k is one
 * value over the run; n elements. */
typedef void (*etch_ew_row_fn)(void *arg, char **ptrs, const int *bcast, int64_t n);

/* out (contiguous, already sized) as operand 0. */
void etch_ew_walk_init(etch_ew_walk *w, etch_tensor *out);
/* A contiguous tensor broadcasting to out's shape (right-aligned). */
void etch_ew_walk_add(etch_ew_walk *w, const etch_tensor *t);
/* A single value (stride 0 everywhere). */
void etch_ew_walk_add_value(etch_ew_walk *w, const void *p, int64_t esize);
/* Merge dims (call once, after the operands). */
void etch_ew_walk_finish(etch_ew_walk *w);
/* Run fn over all elements, split over the method's threads in chunks of >= grain. */
void etch_ew_walk_run(etch_kernel_context *ctx, etch_ew_walk *w, int64_t grain,
                      etch_ew_row_fn fn, void *arg);

/* Flat parallel loop: fn(arg, begin, end) over [0, n) in chunks of >= grain (serial when n
 * is small or there is one thread). */
void etch_ew_parallel(etch_kernel_context *ctx, int64_t n, int64_t grain, etch_parallel_fn fn,
                      void *arg);

/* Grains (elements per task) for cheap and for transcendental row functions. */
#define ETCH_EW_GRAIN_CHEAP 32768
#define ETCH_EW_GRAIN_MATH 4096

/* Apply the fused activation (if any) to a Float out after a portable fallback. */
void etch_ew_epilogue_after_fallback(etch_kernel_context *ctx, etch_tensor *out);

#endif
