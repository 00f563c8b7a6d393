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
/* An operand packed once, e.g. a constant weight at method load (etch_opt_sgemm_pack_a/_b),
 * in the layout the microkernel of one instruction set reads: for each depth block of kc
 * (the last one shorter), every MR-row panel of A / NR-column panel of B, zero-padded. The
 * GEMM uses it only when isa, outer, K and kc match the call (else it packs as usual), so a
 * stale one (ISA switched with etch_isa_set after packing) is harmless. */
typedef struct etch_sgemm_packed {
    const void *isa;   /* the etch_sgemm_isa it was packed for */
    int64_t outer, K;  /* outer: M for A, N for B */
    int64_t kc;        /* depth block */
    const float *data; /* etch_opt_sgemm_packed_size bytes */
} etch_sgemm_packed;

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
    /* optional: the same a / b packed beforehand (NULL: none; ignored when they do not match
     * the call). With a packed B the packed path also serves small M (> 1); the result then
     * equals the unprepacked one within rounding (the same as it when M > 2 MR). */
    const etch_sgemm_packed *a_packed, *b_packed;
} etch_sgemm_desc;

void etch_opt_sgemm(etch_kernel_context *ctx, const etch_sgemm_desc *d);

/* Prepacking for instruction set `isa` (an etch_sgemm_isa; NULL: the active one): bytes of
 * packed data for A (M x K, is_a) or B (K x N, outer = N); 0 for an empty operand. */
struct etch_sgemm_isa;
size_t etch_opt_sgemm_packed_size(const struct etch_sgemm_isa *isa, bool is_a, int64_t outer,
                                  int64_t K);
/* Pack a(i,k) = a[i*rs + k*cs] (M x K) / b(k,j) = b[k*rs + j*cs] (K x N) into dst
 * (etch_opt_sgemm_packed_size bytes, float-aligned) and describe it in *out. */
void etch_opt_sgemm_pack_a(const struct etch_sgemm_isa *isa, const float *a, int64_t rs,
                           int64_t cs, int64_t M, int64_t K, float *dst, etch_sgemm_packed *out);
void etch_opt_sgemm_pack_b(const struct etch_sgemm_isa *isa, const float *b, int64_t rs,
                           int64_t cs, int64_t K, int64_t N, float *dst, etch_sgemm_packed *out);

/* Kernels (table_gemm.inc). */
ETCH_OPT_KERNEL(mm_out);
ETCH_OPT_KERNEL(bmm_out);
ETCH_OPT_KERNEL(addmm_out);
ETCH_OPT_KERNEL(linear_out);

/* Load-time prepare functions (etch_kernels_register_prepare): a constant weight packed for
 * the active ISA behind a header the kernel checks at every call. */
size_t etch_opt_mm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs, void *buf,
                           size_t cap);
size_t etch_opt_addmm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                              void *buf, size_t cap);
size_t etch_opt_linear_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                               void *buf, size_t cap);

#endif
