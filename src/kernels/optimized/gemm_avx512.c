/* AVX-512 building blocks of the float32 GEMM (see gemm_isa.h): the AVX2 structure with
 * 512-bit vectors, a 12 x 32 register microkernel (24 accumulators, 2 B vectors, 1
 * broadcast), and the matrix-vector kernels. */
#include <immintrin.h>

#include "kernels/optimized/gemm_isa.h"

#define MR 12
#define NR 32

static void ukr_avx512(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,
                       int64_t ldc, int accumulate, const etch_sgemm_tail *tail,
                       const char *pf) {
    __m512 lo[MR], hi[MR];
    for (int i = 0; i < MR; i++) {
        lo[i] = _mm512_setzero_ps();
        hi[i] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        if (pf && (k & (ETCH_SGEMM_PF_K - 1)) == 0) {
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
        }
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        /* fully unrolled: the accumulators live in zmm registers */
#define ROW(i)                                                                                 \
    do {                                                                                       \
        const __m512 av = _mm512_set1_ps(ap[i]);                                               \
        lo[i] = _mm512_fmadd_ps(av, b0, lo[i]);                                                \
        hi[i] = _mm512_fmadd_ps(av, b1, hi[i]);                                                \
    } while (0)
        ROW(0);
        ROW(1);
        ROW(2);
        ROW(3);
        ROW(4);
        ROW(5);
        ROW(6);
        ROW(7);
        ROW(8);
        ROW(9);
        ROW(10);
        ROW(11);
#undef ROW
        ap += MR;
        bp += ldb;
    }
    for (int i = 0; i < MR; i++) {
        float *r = c + i * ldc;
        __m512 l = lo[i], h = hi[i];
        if (accumulate) {
            l = _mm512_add_ps(l, _mm512_loadu_ps(r));
            h = _mm512_add_ps(h, _mm512_loadu_ps(r + 16));
        }
        if (tail) { /* gemm_isa.h's order; max/min pass a NaN second operand */
            if (tail->alpha != 1.0f) {
                const __m512 al = _mm512_set1_ps(tail->alpha);
                l = _mm512_mul_ps(l, al);
                h = _mm512_mul_ps(h, al);
            }
            if (tail->col) {
                l = _mm512_add_ps(l, _mm512_loadu_ps(tail->col));
                h = _mm512_add_ps(h, _mm512_loadu_ps(tail->col + 16));
            }
            if (tail->row) {
                const __m512 rb = _mm512_set1_ps(tail->row[i]);
                l = _mm512_add_ps(l, rb);
                h = _mm512_add_ps(h, rb);
            }
            if (tail->act == ETCH_SGEMM_ACT_RELU) {
                l = _mm512_max_ps(_mm512_setzero_ps(), l);
                h = _mm512_max_ps(_mm512_setzero_ps(), h);
            } else if (tail->act == ETCH_SGEMM_ACT_CLAMP) {
                const __m512 vlo = _mm512_set1_ps(tail->lo), vhi = _mm512_set1_ps(tail->hi);
                l = _mm512_min_ps(vhi, _mm512_max_ps(vlo, l));
                h = _mm512_min_ps(vhi, _mm512_max_ps(vlo, h));
            }
        }
        _mm512_storeu_ps(r, l);
        _mm512_storeu_ps(r + 16, h);
    }
}

static void gemv_n_avx512(int64_t K, int64_t n, const float *x, int64_t x_s, const float *b,
                          int64_t ldb, float *y) {
    for (int64_t j = 0; j < n; j++)
        y[j] = 0.0f;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        const float x0 = x[k * x_s], x1 = x[(k + 1) * x_s], x2 = x[(k + 2) * x_s],
                    x3 = x[(k + 3) * x_s];
        const __m512 v0 = _mm512_set1_ps(x0), v1 = _mm512_set1_ps(x1), v2 = _mm512_set1_ps(x2),
                     v3 = _mm512_set1_ps(x3);
        const float *r0 = b + k * ldb, *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
        int64_t j = 0;
        for (; j + 16 <= n; j += 16) {
            __m512 acc = _mm512_loadu_ps(y + j);
            acc = _mm512_fmadd_ps(v0, _mm512_loadu_ps(r0 + j), acc);
            acc = _mm512_fmadd_ps(v1, _mm512_loadu_ps(r1 + j), acc);
            acc = _mm512_fmadd_ps(v2, _mm512_loadu_ps(r2 + j), acc);
            acc = _mm512_fmadd_ps(v3, _mm512_loadu_ps(r3 + j), acc);
            _mm512_storeu_ps(y + j, acc);
        }
        for (; j < n; j++)
            y[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j];
    }
    for (; k < K; k++) {
        const float xv = x[k * x_s];
        const __m512 v = _mm512_set1_ps(xv);
        const float *r = b + k * ldb;
        int64_t j = 0;
        for (; j + 16 <= n; j += 16)
            _mm512_storeu_ps(y + j,
                             _mm512_fmadd_ps(v, _mm512_loadu_ps(r + j), _mm512_loadu_ps(y + j)));
        for (; j < n; j++)
            y[j] += xv * r[j];
    }
}

static void gemv_t_avx512(int64_t K, int64_t n, const float *x, const float *b, int64_t ldb,
                          float *y) {
    for (int64_t j = 0; j < n; j++) {
        const float *col = b + j * ldb;
        __m512 acc = _mm512_setzero_ps();
        int64_t k = 0;
        for (; k + 16 <= K; k += 16)
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(col + k), acc);
        float s = _mm512_reduce_add_ps(acc);
        for (; k < K; k++)
            s += x[k] * col[k];
        y[j] = s;
    }
}

/* gemv_p (gemm_isa.h) over 32-wide panels: four panels (128 columns, 8 accumulators, four
 * weight streams) at a time, then single panels (the last one stored under a mask); each
 * accumulator sums its column in k order. */
static void gemv_p_avx512(int nr, int64_t K, int64_t kc, int64_t npad, int64_t j0, int64_t n,
                          const float *x, int64_t x_s, const float *bp, float *y) {
    (void)nr; /* NR (32) */
    int64_t jp = j0;
    const int64_t j1 = j0 + n;
    for (; jp + 128 <= j1; jp += 128) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb, *b1 = b0 + NR * kb;
            const float *b2 = b1 + NR * kb, *b3 = b2 + NR * kb;
            for (int64_t k = 0; k < kb; k++, b0 += NR, b1 += NR, b2 += NR, b3 += NR) {
                const __m512 xv = _mm512_set1_ps(x[(pc + k) * x_s]);
                a0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b0), a0);
                a1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b0 + 16), a1);
                a2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b1), a2);
                a3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b1 + 16), a3);
                a4 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b2), a4);
                a5 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b2 + 16), a5);
                a6 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b3), a6);
                a7 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b3 + 16), a7);
            }
        }
        float *o = y + (jp - j0);
        _mm512_storeu_ps(o, a0);
        _mm512_storeu_ps(o + 16, a1);
        _mm512_storeu_ps(o + 32, a2);
        _mm512_storeu_ps(o + 48, a3);
        _mm512_storeu_ps(o + 64, a4);
        _mm512_storeu_ps(o + 80, a5);
        _mm512_storeu_ps(o + 96, a6);
        _mm512_storeu_ps(o + 112, a7);
    }
    for (; jp < j1; jp += NR) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb;
            for (int64_t k = 0; k < kb; k++, b0 += NR) {
                const __m512 xv = _mm512_set1_ps(x[(pc + k) * x_s]);
                a0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b0), a0);
                a1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(b0 + 16), a1);
            }
        }
        const int64_t m = j1 - jp < NR ? j1 - jp : NR;
        float *o = y + (jp - j0);
        const __mmask16 m0 = (__mmask16)(m >= 16 ? 0xffffu : (1u << m) - 1u);
        const __mmask16 m1 = (__mmask16)(m >= 32 ? 0xffffu : m > 16 ? (1u << (m - 16)) - 1u : 0u);
        _mm512_mask_storeu_ps(o, m0, a0);
        _mm512_mask_storeu_ps(o + 16, m1, a1);
    }
}

/* kc 256: a B micro-panel (32 KiB) streams through L1/L2; mc 192: the A block in L2. */
const etch_sgemm_isa etch_sgemm_isa_avx512 = {
    "avx512", MR, NR, 192, 256, 1024, ukr_avx512, gemv_n_avx512, gemv_t_avx512, NULL, 1, NULL,
    gemv_p_avx512};
