/* arm64 Advanced SIMD building blocks of the float32 GEMM (see gemm_isa.h): an 8 x 12
 * register microkernel (24 accumulators of 4 lanes, 3 B vectors, 2 A vectors, lane-indexed
 * FMA) and the matrix-vector kernels. */
#include <arm_neon.h>

#include "kernels/optimized/gemm_isa.h"

#define MR 8
#define NR 12

static void ukr_neon(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,
                     int64_t ldc, int accumulate, const etch_sgemm_tail *tail, const char *pf) {
    float32x4_t acc[MR][3];
    for (int i = 0; i < MR; i++)
        acc[i][0] = acc[i][1] = acc[i][2] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < kc; k++) {
        if (pf && (k & (ETCH_SGEMM_PF_K - 1)) == 0) {
            __builtin_prefetch(pf, 0, 2);
            pf += 64;
        }
        const float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4), b2 = vld1q_f32(bp + 8);
        const float32x4_t a0 = vld1q_f32(ap), a1 = vld1q_f32(ap + 4);
#define ROW(i, av, lane)                                                                       \
    do {                                                                                       \
        acc[i][0] = vfmaq_laneq_f32(acc[i][0], b0, av, lane);                                  \
        acc[i][1] = vfmaq_laneq_f32(acc[i][1], b1, av, lane);                                  \
        acc[i][2] = vfmaq_laneq_f32(acc[i][2], b2, av, lane);                                  \
    } while (0)
        ROW(0, a0, 0);
        ROW(1, a0, 1);
        ROW(2, a0, 2);
        ROW(3, a0, 3);
        ROW(4, a1, 0);
        ROW(5, a1, 1);
        ROW(6, a1, 2);
        ROW(7, a1, 3);
#undef ROW
        ap += MR;
        bp += ldb;
    }
    for (int i = 0; i < MR; i++) {
        float *r = c + i * ldc;
        for (int v = 0; v < 3; v++) {
            float32x4_t x = acc[i][v];
            if (accumulate)
                x = vaddq_f32(x, vld1q_f32(r + 4 * v));
            if (tail) { /* gemm_isa.h's order; vmaxq/vminq return NaN for a NaN operand */
                if (tail->alpha != 1.0f)
                    x = vmulq_n_f32(x, tail->alpha);
                if (tail->col)
                    x = vaddq_f32(x, vld1q_f32(tail->col + 4 * v));
                if (tail->row)
                    x = vaddq_f32(x, vdupq_n_f32(tail->row[i]));
                if (tail->act == ETCH_SGEMM_ACT_RELU)
                    x = vmaxq_f32(x, vdupq_n_f32(0.0f));
                else if (tail->act == ETCH_SGEMM_ACT_CLAMP)
                    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(tail->lo)), vdupq_n_f32(tail->hi));
            }
            vst1q_f32(r + 4 * v, x);
        }
    }
}

static void gemv_n_neon(int64_t K, int64_t n, const float *x, int64_t x_s, const float *b,
                        int64_t ldb, float *y) {
    for (int64_t j = 0; j < n; j++)
        y[j] = 0.0f;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        const float x0 = x[k * x_s], x1 = x[(k + 1) * x_s], x2 = x[(k + 2) * x_s],
                    x3 = x[(k + 3) * x_s];
        const float32x4_t xv = {x0, x1, x2, x3};
        const float *r0 = b + k * ldb, *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) {
            float32x4_t ya = vld1q_f32(y + j), yb = vld1q_f32(y + j + 4);
            ya = vfmaq_laneq_f32(ya, vld1q_f32(r0 + j), xv, 0);
            yb = vfmaq_laneq_f32(yb, vld1q_f32(r0 + j + 4), xv, 0);
            ya = vfmaq_laneq_f32(ya, vld1q_f32(r1 + j), xv, 1);
            yb = vfmaq_laneq_f32(yb, vld1q_f32(r1 + j + 4), xv, 1);
            ya = vfmaq_laneq_f32(ya, vld1q_f32(r2 + j), xv, 2);
            yb = vfmaq_laneq_f32(yb, vld1q_f32(r2 + j + 4), xv, 2);
            ya = vfmaq_laneq_f32(ya, vld1q_f32(r3 + j), xv, 3);
            yb = vfmaq_laneq_f32(yb, vld1q_f32(r3 + j + 4), xv, 3);
            vst1q_f32(y + j, ya);
            vst1q_f32(y + j + 4, yb);
        }
        for (; j < n; j++)
            y[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j];
    }
    for (; k < K; k++) {
        const float xv = x[k * x_s];
        const float *r = b + k * ldb;
        int64_t j = 0;
        for (; j + 4 <= n; j += 4)
            vst1q_f32(y + j, vfmaq_n_f32(vld1q_f32(y + j), vld1q_f32(r + j), xv));
        for (; j < n; j++)
            y[j] += xv * r[j];
    }
}

static void gemv_t_neon(int64_t K, int64_t n, const float *x, const float *b, int64_t ldb,
                        float *y) {
    for (int64_t j = 0; j < n; j++) {
        const float *col = b + j * ldb;
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            a0 = vfmaq_f32(a0, vld1q_f32(x + k), vld1q_f32(col + k));
            a1 = vfmaq_f32(a1, vld1q_f32(x + k + 4), vld1q_f32(col + k + 4));
        }
        float s = vaddvq_f32(vaddq_f32(a0, a1));
        for (; k < K; k++)
            s += x[k] * col[k];
        y[j] = s;
    }
}

/* gemv_p (gemm_isa.h) over 12-wide panels: two panels (24 columns, 6 accumulators, two weight
 * streams) at a time, then single panels; each accumulator sums its columns in k order. */
static void gemv_p_neon(int nr, int64_t K, int64_t kc, int64_t npad, int64_t j0, int64_t n,
                        const float *x, int64_t x_s, const float *bp, float *y) {
    (void)nr; /* NR (12) */
    int64_t jp = j0;
    const int64_t j1 = j0 + n;
    for (; jp + 2 * NR <= j1; jp += 2 * NR) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb, *b1 = b0 + NR * kb;
            for (int64_t k = 0; k < kb; k++, b0 += NR, b1 += NR) {
                const float xv = x[(pc + k) * x_s];
                a0 = vfmaq_n_f32(a0, vld1q_f32(b0), xv);
                a1 = vfmaq_n_f32(a1, vld1q_f32(b0 + 4), xv);
                a2 = vfmaq_n_f32(a2, vld1q_f32(b0 + 8), xv);
                a3 = vfmaq_n_f32(a3, vld1q_f32(b1), xv);
                a4 = vfmaq_n_f32(a4, vld1q_f32(b1 + 4), xv);
                a5 = vfmaq_n_f32(a5, vld1q_f32(b1 + 8), xv);
            }
        }
        float *o = y + (jp - j0);
        vst1q_f32(o, a0);
        vst1q_f32(o + 4, a1);
        vst1q_f32(o + 8, a2);
        vst1q_f32(o + 12, a3);
        vst1q_f32(o + 16, a4);
        vst1q_f32(o + 20, a5);
    }
    for (; jp < j1; jp += NR) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0;
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t kb = K - pc < kc ? K - pc : kc;
            const float *b0 = bp + pc * npad + jp * kb;
            for (int64_t k = 0; k < kb; k++, b0 += NR) {
                const float xv = x[(pc + k) * x_s];
                a0 = vfmaq_n_f32(a0, vld1q_f32(b0), xv);
                a1 = vfmaq_n_f32(a1, vld1q_f32(b0 + 4), xv);
                a2 = vfmaq_n_f32(a2, vld1q_f32(b0 + 8), xv);
            }
        }
        float t[NR];
        vst1q_f32(t, a0);
        vst1q_f32(t + 4, a1);
        vst1q_f32(t + 8, a2);
        for (int64_t l = 0; l < NR && jp + l < j1; l++)
            y[jp - j0 + l] = t[l];
    }
}

/* kc 256: a B micro-panel (12 KiB) stays in L1; mc 128: the A block (128 KiB) in L2. */
const etch_sgemm_isa etch_sgemm_isa_neon = {
    "neon", MR, NR, 128, 256, 1020, ukr_neon, gemv_n_neon, gemv_t_neon, NULL, 0, NULL,
    gemv_p_neon};
