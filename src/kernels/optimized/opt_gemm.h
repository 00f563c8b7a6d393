/* Optimized gemm kernels (entry points listed in table_gemm.inc) and the float32 GEMM that
 * convolution and the other kernels build on. */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_GEMM_H
#define ETCH_KERNELS_OPTIMIZED_OPT_GEMM_H

#include "kernels/optimized/opt.h"

/* c = alpha * a·b + beta * bias, then the epilogue, all float32:
 *   a(i,k) = a[i*a_rs + k*a_cs]        (any strides: transposes are free)
 *   b(k,j) = b[k*b_rs + j*b_cs]
 *   c(i,j) = c[i*ldc + j]              (rows may be padded; c must not overlap a, b or bias)
 *   bias(i,j) = bias[i*bias_rs + j*bias_cs] when bias != NULL (stride 0 broadcasts)
 * M, N or K may be 0 (K == 0 gives beta * bias). Uses the method's thread pool through ctx
 * and scratch from etch_kernel_temp_try (a path without scratch when it is short), so it
 * never fails and never allocates; the scratch is given back when it returns. ctx may be
 * NULL (one thread, no scratch). Implementation: gemm.c (+ gemm_<isa>.c).
 * Call it from the kernel's own thread, not from inside an etch_kernel_parallel_for chunk
 * (the scratch arena is not thread-safe); inside a chunk pass ctx = NULL. Scratch it takes
 * from what is left of the arena, per task (thread): (mc * kc + kc * nc) floats, about 2.3 MiB
 * for AVX2 when N is wide, shrinking nc then mc down to about 150 KiB before it falls back to
 * the direct path (about half the speed on large products): leave it some of the arena. */
typedef struct etch_sgemm_desc {
    int64_t M, N, K;
    const float *a;
    int64_t a_rs, a_cs;
    const float *b;
    int64_t b_rs, b_cs;
    float *c;
    int64_t ldc;
    const float *bias;
    int64_t bias_rs, bias_cs;
    float alpha, beta;
    const etch_epilogue *epilogue; /* NULL: none */
} etch_sgemm_desc;

void etch_opt_sgemm(etch_kernel_context *ctx, const etch_sgemm_desc *d);

/* Kernels (table_gemm.inc). */
ETCH_OPT_KERNEL(mm_out);
ETCH_OPT_KERNEL(bmm_out);
ETCH_OPT_KERNEL(addmm_out);
ETCH_OPT_KERNEL(linear_out);

#endif
