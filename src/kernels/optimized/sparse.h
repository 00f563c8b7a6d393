/* 2:4 sparse float32 linear (sparse.c + sparse_<isa>.c): a constant weight in which every
 * group of 4 consecutive input channels holds at most 2 nonzeros is compressed at load into
 * values + 2-bit indices, and mm / addmm / linear on it read only the kept half (scalar, AVX2,
 * which AVX-512 runs too, and NEON tile kernels).
 *
 * Compressed layout, in tiles of SP_NT = 8 output columns (the last tile zero-padded), for
 * tile t and group g (input channels 4g..4g+3; the last group may be shorter):
 *   vals[((t * G + g) * 2 + s) * 8 + c]  the s-th kept weight of column 8t + c (0 when none)
 *   idx[(t * G + g) * 8 + c]             i0 | i1 << 2: its channels 4g + i0 and 4g + i1,
 *                                        always < K (a missing weight gets index 0)
 * y(m, 8t + c) = sum_g vals[..0..] * x(m, 4g + i0) + vals[..1..] * x(m, 4g + i1). */
#ifndef ETCH_KERNELS_OPTIMIZED_SPARSE_H
#define ETCH_KERNELS_OPTIMIZED_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/optimized/opt.h"

#define SP_NT 8

typedef struct etch_sp24 {
    int64_t K, N, G, T; /* G = ceil(K / 4) groups, T = ceil(N / 8) tiles */
    const float *vals;
    const uint8_t *idx;
} etch_sp24;

/* Is b(k, j) = w[k * rs + j * cs] (K x N) 2:4 sparse along k? */
bool etch_sp24_check(const float *w, int64_t rs, int64_t cs, int64_t K, int64_t N);
/* Bytes of the compressed form (vals then idx, each 64-byte aligned). */
size_t etch_sp24_size(int64_t K, int64_t N);
/* Compress a 2:4 weight (etch_sp24_check true) into dst (etch_sp24_size bytes, 64-aligned). */
void etch_sp24_compress(const float *w, int64_t rs, int64_t cs, int64_t K, int64_t N,
                        void *dst, etch_sp24 *out);

/* c(m, j) = sum_k x(m, k) b(k, j) for rows [0, M) (x rows ldx apart, contiguous along k; c
 * rows ldc apart) over column tiles [t0, t1), for one instruction set. */
typedef void (*etch_sp24_tiles_fn)(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M,
                                   float *c, int64_t ldc, int64_t t0, int64_t t1);
void etch_sp24_tiles_scalar(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M,
                            float *c, int64_t ldc, int64_t t0, int64_t t1);
void etch_sp24_tiles_avx2(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M, float *c,
                          int64_t ldc, int64_t t0, int64_t t1);
void etch_sp24_tiles_neon(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M, float *c,
                          int64_t ldc, int64_t t0, int64_t t1);
/* The active instruction set's tile function (AVX-512 runs the AVX2 one: 8-column tiles). */
etch_sp24_tiles_fn etch_sp24_tiles_active(void);

/* The whole product, threaded over column tiles through ctx (may be NULL), then
 * out = alpha * product + beta * bias(j) (bias NULL: none; stride bias_cs, 0 broadcasts) and
 * the epilogue (NULL: none). */
void etch_sp24_linear(etch_kernel_context *ctx, const etch_sp24 *w, const float *x, int64_t ldx,
                      int64_t M, float *c, int64_t ldc, float alpha, float beta,
                      const float *bias, int64_t bias_cs, const etch_epilogue *e);

/* Kernels (table_gemm.inc): aten::mm / addmm / linear, from the compressed weight when the
 * call site's prepared data holds one, else etch_opt_mm_out / addmm_out / linear_out. */
ETCH_OPT_KERNEL(sparse_mm_out);
ETCH_OPT_KERNEL(sparse_addmm_out);
ETCH_OPT_KERNEL(sparse_linear_out);
/* Their prepare functions: the compressed weight when it is a constant 2:4 weight and the
 * call has at most ETCH_SP24_ROWS_MAX rows, else the dense prepare (gemm_ops.c). */
#define ETCH_SP24_ROWS_MAX 4 /* bench/sparse: faster up to 4 rows, even at 8, slower beyond */
size_t etch_opt_sparse_mm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                  void *buf, size_t cap);
size_t etch_opt_sparse_addmm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                     void *buf, size_t cap);
size_t etch_opt_sparse_linear_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                      void *buf, size_t cap);

#endif
