/* AVX2 + FMA building blocks of the float32 GEMM (see gemm_isa.h): a 6 x 16 register
 * microkernel (12 accumulators, 2 B vectors, 1 broadcast) and the matrix-vector kernels. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/gemm_isa.h"

#define MR 6
#define NR 16

/* The tail (gemm_isa.h) on one vector of row i (by value: accumulators whose address is
 * taken would live in memory). */
static inline __m256 tail_vec(const etch_sgemm_tail *t, __m256 v, const float *col, int i) {
    if (t->alpha != 1.0f)
        v = _mm256_mul_ps(v, _mm256_set1_ps(t->alpha));
    if (col)
        v = _mm256_add_ps(v, _mm256_loadu_ps(col));
    if (t->row)
        v = _mm256_add_ps(v, _mm256_broadcast_ss(t->row + i));
    if (t->act == ETCH_SGEMM_ACT_RELU) /* max(0, v): NaN (second operand) passes */
        v = _mm256_max_ps(_mm256_setzero_ps(), v);
    else if (t->act == ETCH_SGEMM_ACT_CLAMP)
        v = _mm256_min_ps(_mm256_set1_ps(t->hi), _mm256_max_ps(_mm256_set1_ps(t->lo), v));
    return v;
}
#define TAIL_ROW(t, lo, hi, i)                                                                 \
    do {                                                                                       \
        lo = tail_vec(t, lo, (t)->col, i);                                                     \
        hi = tail_vec(t, hi, (t)->col ? (t)->col + 8 : NULL, i);                               \
    } while (0)

/* Row i of a 6 x 16 tile (lo, hi: its two vectors) to c: added to what is there when
 * accumulating, the register tail (bias, alpha, relu/clamp) applied, stored. */
#define STORE_ROW(i, lo, hi)                                                                   \
    do {                                                                                       \
        float *r = c + (i) * ldc;                                                              \
        if (accumulate) {                                                                      \
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(r));                                        \
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(r + 8));                                    \
        }                                                                                      \
        if (tail)                                                                              \
            TAIL_ROW(tail, lo, hi, i);                                                         \
        _mm256_storeu_ps(r, lo);                                                               \
        _mm256_storeu_ps(r + 8, hi);                                                           \
    } while (0)

static void ukr_avx2(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,
                     int64_t ldc, int accumulate, const etch_sgemm_tail *tail, const char *pf) {
    for (int i = 0; i < MR; i++)
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#define STEP(a, b)                                                                             \
    do {                                                                                       \
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps((b) + 8);                   \
        __m256 av = _mm256_broadcast_ss((a) + 0);                                              \
        c00 = _mm256_fmadd_ps(av, b0, c00);                                                    \
        c01 = _mm256_fmadd_ps(av, b1, c01);                                                    \
        av = _mm256_broadcast_ss((a) + 1);                                                     \
        c10 = _mm256_fmadd_ps(av, b0, c10);                                                    \
        c11 = _mm256_fmadd_ps(av, b1, c11);                                                    \
        av = _mm256_broadcast_ss((a) + 2);                                                     \
        c20 = _mm256_fmadd_ps(av, b0, c20);                                                    \
        c21 = _mm256_fmadd_ps(av, b1, c21);                                                    \
        av = _mm256_broadcast_ss((a) + 3);                                                     \
        c30 = _mm256_fmadd_ps(av, b0, c30);                                                    \
        c31 = _mm256_fmadd_ps(av, b1, c31);                                                    \
        av = _mm256_broadcast_ss((a) + 4);                                                     \
        c40 = _mm256_fmadd_ps(av, b0, c40);                                                    \
        c41 = _mm256_fmadd_ps(av, b1, c41);                                                    \
        av = _mm256_broadcast_ss((a) + 5);                                                     \
        c50 = _mm256_fmadd_ps(av, b0, c50);                                                    \
        c51 = _mm256_fmadd_ps(av, b1, c51);                                                    \
    } while (0)
    int64_t k = 0;
    if (pf)
        for (; k + ETCH_SGEMM_PF_K <= kc; k += ETCH_SGEMM_PF_K, pf += 64) {
            _mm_prefetch(pf, _MM_HINT_T1);
            STEP(ap, bp);
            STEP(ap + MR, bp + ldb);
            STEP(ap + 2 * MR, bp + 2 * ldb);
            STEP(ap + 3 * MR, bp + 3 * ldb);
            ap += 4 * MR;
            bp += 4 * ldb;
        }
    for (; k < kc; k++) {
        STEP(ap, bp);
        ap += MR;
        bp += ldb;
    }
#undef STEP
    STORE_ROW(0, c00, c01);
    STORE_ROW(1, c10, c11);
    STORE_ROW(2, c20, c21);
    STORE_ROW(3, c30, c31);
    STORE_ROW(4, c40, c41);
    STORE_ROW(5, c50, c51);
}

/* The microkernel for the bottom panel's mm < MR rows (M = 64 = 10 x 6 + 4): only those rows
 * computed and stored, straight to C (the packed panel still has MR floats per k). One
 * function per row count (R constant after inlining), named accumulators so they stay in
 * registers. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif
static ALWAYS_INLINE void ukr_rows_body(const int R, int64_t kc, const float *ap,
                                        const float *bp, int64_t ldb, float *c, int64_t ldc,
                                        int accumulate, const etch_sgemm_tail *tail,
                                        const char *pf) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        if (pf && (k & (ETCH_SGEMM_PF_K - 1)) == 0) {
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
        }
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        __m256 av = _mm256_broadcast_ss(ap);
        c00 = _mm256_fmadd_ps(av, b0, c00);
        c01 = _mm256_fmadd_ps(av, b1, c01);
        if (R > 1) {
            av = _mm256_broadcast_ss(ap + 1);
            c10 = _mm256_fmadd_ps(av, b0, c10);
            c11 = _mm256_fmadd_ps(av, b1, c11);
        }
        if (R > 2) {
            av = _mm256_broadcast_ss(ap + 2);
            c20 = _mm256_fmadd_ps(av, b0, c20);
            c21 = _mm256_fmadd_ps(av, b1, c21);
        }
        if (R > 3) {
            av = _mm256_broadcast_ss(ap + 3);
            c30 = _mm256_fmadd_ps(av, b0, c30);
            c31 = _mm256_fmadd_ps(av, b1, c31);
        }
        if (R > 4) {
            av = _mm256_broadcast_ss(ap + 4);
            c40 = _mm256_fmadd_ps(av, b0, c40);
            c41 = _mm256_fmadd_ps(av, b1, c41);
        }
        ap += MR;
        bp += ldb;
    }
    STORE_ROW(0, c00, c01);
    if (R > 1)
        STORE_ROW(1, c10, c11);
    if (R > 2)
        STORE_ROW(2, c20, c21);
    if (R > 3)
        STORE_ROW(3, c30, c31);
    if (R > 4)
        STORE_ROW(4, c40, c41);
}

#define UKR_ROWS(R)                                                                            \
    static void ukr_avx2_##R(int64_t kc, const float *ap, const float *bp, int64_t ldb,        \
                             float *c, int64_t ldc, int accumulate,                            \
                             const etch_sgemm_tail *tail, const char *pf) {                    \
        ukr_rows_body(R, kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);                       \
    }
UKR_ROWS(1)
UKR_ROWS(2)
UKR_ROWS(3)
UKR_ROWS(4)
UKR_ROWS(5)
#undef UKR_ROWS

static void ukr_rows_avx2(int mm, int64_t kc, const float *ap, const float *bp, int64_t ldb,
                          float *c, int64_t ldc, int accumulate, const etch_sgemm_tail *tail,
                          const char *pf) {
    switch (mm) {
    case 1:
        ukr_avx2_1(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    case 2:
        ukr_avx2_2(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    case 3:
        ukr_avx2_3(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    case 4:
        ukr_avx2_4(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    case 5:
        ukr_avx2_5(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    default:
        ukr_avx2(kc, ap, bp, ldb, c, ldc, accumulate, tail, pf);
        break;
    }
}

/* Row-major A rows [0, mm) x kb columns -> kb groups of 6: eight columns at a time, the six
 * rows (two zero rows added) transposed 8 x 8 in registers; each group stored 8 wide, the
 * two extra floats overwritten by the next group (so the vector part stops one group short
 * of the end, which the scalar loop writes). */
static void pack_a_rm_avx2(const float *a, int64_t lda, int64_t mm, int64_t kb, float *ap) {
    int64_t k = 0;
    if (mm == MR) {
        const float *r0 = a, *r1 = a + lda, *r2 = a + 2 * lda, *r3 = a + 3 * lda,
                    *r4 = a + 4 * lda, *r5 = a + 5 * lda;
        const __m256 z = _mm256_setzero_ps();
        for (; k + 8 < kb; k += 8) {
            const __m256 x0 = _mm256_loadu_ps(r0 + k), x1 = _mm256_loadu_ps(r1 + k),
                         x2 = _mm256_loadu_ps(r2 + k), x3 = _mm256_loadu_ps(r3 + k),
                         x4 = _mm256_loadu_ps(r4 + k), x5 = _mm256_loadu_ps(r5 + k);
            /* 2 x 2 interleaves, then 4 x 4 blocks, then the 128-bit halves */
            const __m256 t0 = _mm256_unpacklo_ps(x0, x1), t1 = _mm256_unpackhi_ps(x0, x1);
            const __m256 t2 = _mm256_unpacklo_ps(x2, x3), t3 = _mm256_unpackhi_ps(x2, x3);
            const __m256 t4 = _mm256_unpacklo_ps(x4, x5), t5 = _mm256_unpackhi_ps(x4, x5);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
            const __m256 u4 = _mm256_shuffle_ps(t4, z, 0x44), u5 = _mm256_shuffle_ps(t4, z, 0xee);
            const __m256 u6 = _mm256_shuffle_ps(t5, z, 0x44), u7 = _mm256_shuffle_ps(t5, z, 0xee);
            /* u0: rows 0-3 of column 0 (low) / 4 (high); u4: rows 4-5 (+2 zeros) likewise */
            float *dst = ap + k * MR;
            _mm256_storeu_ps(dst + 0 * MR, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(dst + 1 * MR, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(dst + 2 * MR, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(dst + 3 * MR, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(dst + 4 * MR, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(dst + 5 * MR, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(dst + 6 * MR, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(dst + 7 * MR, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    }
    for (; k < kb; k++)
        for (int64_t r = 0; r < MR; r++)
            ap[k * MR + r] = r < mm ? a[r * lda + k] : 0.0f;
}

/* y[0:n) = sum_k x[k] * B[k, 0:n): four rows of B per pass over y (y stays in L1). */
static void gemv_n_avx2(int64_t K, int64_t n, const float *x, int64_t x_s, const float *b,
                        int64_t ldb, float *y) {
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++)
        y[j] = 0.0f;
    for (; k + 4 <= K; k += 4) {
        const float x0 = x[k * x_s], x1 = x[(k + 1) * x_s], x2 = x[(k + 2) * x_s],
                    x3 = x[(k + 3) * x_s];
        const __m256 v0 = _mm256_set1_ps(x0), v1 = _mm256_set1_ps(x1), v2 = _mm256_set1_ps(x2),
                     v3 = _mm256_set1_ps(x3);
        const float *r0 = b + k * ldb, *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
        int64_t j = 0;
        for (; j + 16 <= n; j += 16) {
            __m256 ya = _mm256_loadu_ps(y + j), yb = _mm256_loadu_ps(y + j + 8);
            ya = _mm256_fmadd_ps(v0, _mm256_loadu_ps(r0 + j), ya);
            yb = _mm256_fmadd_ps(v0, _mm256_loadu_ps(r0 + j + 8), yb);
            ya = _mm256_fmadd_ps(v1, _mm256_loadu_ps(r1 + j), ya);
            yb = _mm256_fmadd_ps(v1, _mm256_loadu_ps(r1 + j + 8), yb);
            ya = _mm256_fmadd_ps(v2, _mm256_loadu_ps(r2 + j), ya);
            yb = _mm256_fmadd_ps(v2, _mm256_loadu_ps(r2 + j + 8), yb);
            ya = _mm256_fmadd_ps(v3, _mm256_loadu_ps(r3 + j), ya);
            yb = _mm256_fmadd_ps(v3, _mm256_loadu_ps(r3 + j + 8), yb);
            _mm256_storeu_ps(y + j, ya);
            _mm256_storeu_ps(y + j + 8, yb);
        }
        for (; j < n; j++)
            y[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j];
    }
    for (; k < K; k++) {
        const float xv = x[k * x_s];
        const __m256 v = _mm256_set1_ps(xv);
        const float *r = b + k * ldb;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8)
            _mm256_storeu_ps(y + j,
                             _mm256_fmadd_ps(v, _mm256_loadu_ps(r + j), _mm256_loadu_ps(y + j)));
        for (; j < n; j++)
            y[j] += xv * r[j];
    }
}

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* y[j] = x · B[:, j] with columns contiguous: four dot products at a time. */
static void gemv_t_avx2(int64_t K, int64_t n, const float *x, const float *b, int64_t ldb,
                        float *y) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *c0 = b + j * ldb, *c1 = c0 + ldb, *c2 = c1 + ldb, *c3 = c2 + ldb;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
               a3 = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            const __m256 xv = _mm256_loadu_ps(x + k);
            a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(c0 + k), a0);
            a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(c1 + k), a1);
            a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(c2 + k), a2);
            a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(c3 + k), a3);
        }
        float s0 = hsum(a0), s1 = hsum(a1), s2 = hsum(a2), s3 = hsum(a3);
        for (; k < K; k++) {
            s0 += x[k] * c0[k];
            s1 += x[k] * c1[k];
            s2 += x[k] * c2[k];
            s3 += x[k] * c3[k];
        }
        y[j] = s0;
        y[j + 1] = s1;
        y[j + 2] = s2;
        y[j + 3] = s3;
    }
    for (; j < n; j++) {
        const float *col = b + j * ldb;
        __m256 a0 = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(col + k), a0);
        float s = hsum(a0);
        for (; k < K; k++)
            s += x[k] * col[k];
        y[j] = s;
    }
}

/* gemv_p (gemm_isa.h) over 16-wide panels: four panels (64 columns, 8 accumulators, four
 * weight streams) at a time, then single panels; each accumulator sums its column in k order. */
static void gemv_p_avx2(int nr, int64_t K, int64_t kc, int64_t npad, int64_t j0, int64_t n,
                        const float *x, int64_t x_s, const float *bp, float *y) {
    (void)nr; /* NR (16) */
    int64_t jp = j0;
    const int64_t j1 = j0 + n;
    for (; jp + 64 <= j1; jp += 64) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb, *b1 = b0 + 16 * kb;
            const float *b2 = b1 + 16 * kb, *b3 = b2 + 16 * kb;
            for (int64_t k = 0; k < kb; k++, b0 += 16, b1 += 16, b2 += 16, b3 += 16) {
                const __m256 xv = _mm256_set1_ps(x[(pc + k) * x_s]);
                a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0), a0);
                a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + 8), a1);
                a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1), a2);
                a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b1 + 8), a3);
                a4 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2), a4);
                a5 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b2 + 8), a5);
                a6 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3), a6);
                a7 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b3 + 8), a7);
            }
        }
        float *o = y + (jp - j0);
        _mm256_storeu_ps(o, a0);
        _mm256_storeu_ps(o + 8, a1);
        _mm256_storeu_ps(o + 16, a2);
        _mm256_storeu_ps(o + 24, a3);
        _mm256_storeu_ps(o + 32, a4);
        _mm256_storeu_ps(o + 40, a5);
        _mm256_storeu_ps(o + 48, a6);
        _mm256_storeu_ps(o + 56, a7);
    }
    for (; jp < j1; jp += 16) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb;
            for (int64_t k = 0; k < kb; k++, b0 += 16) {
                const __m256 xv = _mm256_set1_ps(x[(pc + k) * x_s]);
                a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0), a0);
                a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b0 + 8), a1);
            }
        }
        float t[16];
        _mm256_storeu_ps(t, a0);
        _mm256_storeu_ps(t + 8, a1);
        const int64_t m = j1 - jp < 16 ? j1 - jp : 16;
        memcpy(y + (jp - j0), t, (size_t)m * sizeof(float));
    }
}

/* kc 512, mc 96: the A block (192 KiB) stays in L2, a B micro-panel (32 KiB) streams
 * through L1 (the best of the settings tried on a Zen core; see bench/gemm/RESULTS.md). */
const etch_sgemm_isa etch_sgemm_isa_avx2 = {
    "avx2", MR, NR, 96, 512, 1024, ukr_avx2, gemv_n_avx2, gemv_t_avx2, pack_a_rm_avx2, 1,
    ukr_rows_avx2, gemv_p_avx2};
