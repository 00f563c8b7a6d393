/* Per-ISA building blocks of the float32 GEMM (gemm.c drives them; gemm_<isa>.c define them).
 *
 * Register microkernel: c[0:MR, 0:NR] (+)= ap · bp over kc steps, where
 *   ap is a packed A micro-panel: kc groups of MR floats (column k of the MR rows),
 *   bp holds kc rows of NR floats, row k at bp + k * ldb (packed: ldb == NR; the unpacked
 *   path points it straight at a row-major B with ldb = its row stride),
 *   c(i, j) = c[i * ldc + j]; accumulate != 0 adds to c, else overwrites it;
 *   tail != NULL (only with the last depth block): before the store each value v (the sum,
 *   plus c when accumulating) becomes act(v * alpha + col[j] + row[i]) (etch_sgemm_tail_one),
 *   so bias and a simple activation cost no second pass over the tile;
 *   pf != NULL: a software prefetch of one 64-byte line every ETCH_SGEMM_PF_K steps of k,
 *   from pf on (the driver points it at a share of the next B panel: weights that come from
 *   memory then arrive spread over the tiles, not in a burst when the panel starts).
 * Matrix-vector kernels (M == 1):
 *   gemv_n: y[j] = sum_k x[k * x_s] * b[k * ldb + j], j < n   (B rows contiguous)
 *   gemv_t: y[j] = sum_k x[k] * b[j * ldb + k],       j < n   (B columns contiguous)
 *   gemv_p (optional): the same over a B prepacked by etch_opt_sgemm_pack_b, so that decode
 *           reads the packed copy prefill reads too (and the original weight can be left
 *           unread): y[j] = sum_k x[k * x_s] * B(k, j0 + j), j < n, the sum in k order; B's
 *           depth block from row pc (kb = min(kc, K - pc) rows) holds column panel jp (a
 *           multiple of nr) at bp + pc * npad + jp * kb as [kb][nr] (npad = N rounded up to
 *           nr; columns past N are zeros); j0 is a multiple of nr. nr is the ISA's own
 *           (the scalar one takes any nr <= ETCH_SGEMM_MAX_NR, for tests of other shapes). */
#ifndef ETCH_KERNELS_OPTIMIZED_GEMM_ISA_H
#define ETCH_KERNELS_OPTIMIZED_GEMM_ISA_H

#include <stdint.h>

#include "etch/kernel.h"

/* What the microkernel applies at its store (see above). col: NR floats (the bias of the
 * tile's columns, beta folded in) or NULL; row: MR floats (the bias of its rows) or NULL;
 * alpha == 1 skips the product. act: ETCH_SGEMM_ACT_*; lo/hi are the clamp bounds. */
enum { ETCH_SGEMM_ACT_NONE = 0, ETCH_SGEMM_ACT_RELU = 1, ETCH_SGEMM_ACT_CLAMP = 2 };
typedef struct etch_sgemm_tail {
    float alpha;
    const float *col, *row;
    int act;
    float lo, hi;
} etch_sgemm_tail;

/* The tail on one value of row i, column j: the reference every microkernel matches (the
 * operations in this order; relu max(v, 0), clamp min(max(v, lo), hi), NaN passing through
 * both as in the element-wise kernels). */
static inline float etch_sgemm_tail_one(const etch_sgemm_tail *t, float v, int i, int j) {
    if (t->alpha != 1.0f)
        v *= t->alpha;
    if (t->col)
        v += t->col[j];
    if (t->row)
        v += t->row[i];
    if (v != v)
        return v;
    if (t->act == ETCH_SGEMM_ACT_RELU)
        v = v > 0.0f ? v : 0.0f;
    else if (t->act == ETCH_SGEMM_ACT_CLAMP) {
        v = v > t->lo ? v : t->lo;
        v = v < t->hi ? v : t->hi;
    }
    return v;
}

typedef void (*etch_sgemm_ukr_fn)(int64_t kc, const float *ap, const float *bp, int64_t ldb,
                                  float *c, int64_t ldc, int accumulate,
                                  const etch_sgemm_tail *tail, const char *pf);
/* Optional: the microkernel for the first mm < mr rows of a panel only (full NR columns,
 * stored straight to c; NULL: the full microkernel into a stack tile). */
typedef void (*etch_sgemm_ukr_rows_fn)(int mm, int64_t kc, const float *ap, const float *bp,
                                       int64_t ldb, float *c, int64_t ldc, int accumulate,
                                       const etch_sgemm_tail *tail, const char *pf);
/* Optional (NULL: gemm.c's generic packing): pack rows [0, mm) (mm <= mr) of a row-major A
 * (a(i, k) = a[i * lda + k]) over kb columns into kb groups of mr floats, zero rows past mm. */
typedef void (*etch_sgemm_pack_a_fn)(const float *a, int64_t lda, int64_t mm, int64_t kb,
                                     float *ap);
typedef void (*etch_sgemv_n_fn)(int64_t K, int64_t n, const float *x, int64_t x_s,
                                const float *b, int64_t ldb, float *y);
typedef void (*etch_sgemv_t_fn)(int64_t K, int64_t n, const float *x, const float *b,
                                int64_t ldb, float *y);

typedef void (*etch_sgemv_p_fn)(int nr, int64_t K, int64_t kc, int64_t npad, int64_t j0,
                                int64_t n, const float *x, int64_t x_s, const float *bp,
                                float *y);

typedef struct etch_sgemm_isa {
    const char *name;
    int mr, nr;           /* microkernel tile */
    int64_t mc, kc, nc;   /* cache blocking (mc multiple of mr, nc multiple of nr) */
    etch_sgemm_ukr_fn ukr;
    etch_sgemv_n_fn gemv_n;
    etch_sgemv_t_fn gemv_t;
    etch_sgemm_pack_a_fn pack_a_rm; /* optional */
    int pf_b; /* prepacked B: prefetch (pf) this many column panels ahead (0: none) */
    etch_sgemm_ukr_rows_fn ukr_rows; /* optional */
    etch_sgemv_p_fn gemv_p;          /* optional (NULL: M == 1 reads the unpacked B) */
} etch_sgemm_isa;

#define ETCH_SGEMM_PF_K 4
#define ETCH_SGEMM_MAX_MR 16
#define ETCH_SGEMM_MAX_NR 32

extern const etch_sgemm_isa etch_sgemm_isa_scalar;
extern const etch_sgemm_isa etch_sgemm_isa_avx2;
extern const etch_sgemm_isa etch_sgemm_isa_avx512;
extern const etch_sgemm_isa etch_sgemm_isa_neon;

/* The building blocks for an instruction set (the scalar ones when it is not compiled in). */
const etch_sgemm_isa *etch_sgemm_isa_for(int isa);

/* etch_opt_sgemm with given building blocks (tests drive the blocking logic with tile shapes
 * of instruction sets this CPU lacks). */
struct etch_sgemm_desc;
void etch_opt_sgemm_isa(etch_kernel_context *ctx, const struct etch_sgemm_desc *d,
                        const etch_sgemm_isa *isa);

#endif
