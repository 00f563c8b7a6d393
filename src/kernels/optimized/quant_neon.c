/* NEON inner loops of the integer kernels (see quant.h): int4 nibbles widened and converted
 * in registers (float activations) or widened to int16 and multiplied-accumulated into int32
 * with smlal (8da4w); the int8 GEMM microkernel 4 x 8 over int8 activations: sdot when the
 * CPU has the dot-product extension (detected at run time: etch_quant_features), else smull
 * + sadalp (16-bit products are exact: |-128 * -128| < 2^15, pairs summed into int32). */
#include <arm_neon.h>
#include <string.h>

#include "kernels/optimized/quant.h"

static inline __attribute__((always_inline)) void q4f_block(const etch_q4_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    const uint8x16_t m15 = vdupq_n_u8(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        float32x4_t acc[ETCH_Q4_MR];
        float accs[ETCH_Q4_MR];
        for (int i = 0; i < MM; i++) {
            acc[i] = vdupq_n_f32(0.0f);
            accs[i] = 0.0f;
        }
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *b = row + g * G / 2;
            const float s = w->scales[n * ng + g];
            const float z = w->zeros ? w->zeros[n * ng + g] : 0.0f;
            float32x4_t d[ETCH_Q4_MR];
            for (int i = 0; i < MM; i++)
                d[i] = vdupq_n_f32(0.0f);
            int64_t c = 0;
            for (; c < full; c += 32) {
                const uint8x16_t v = vld1q_u8(b + c / 2);
                const uint8x16_t hb = vshrq_n_u8(v, 4), lb = vandq_u8(v, m15);
                const uint16x8_t h0 = vmovl_u8(vget_low_u8(hb)), h1 = vmovl_u8(vget_high_u8(hb));
                const uint16x8_t l0 = vmovl_u8(vget_low_u8(lb)), l1 = vmovl_u8(vget_high_u8(lb));
                float32x4_t wv[8];
                wv[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(h0)));
                wv[1] = vcvtq_f32_u32(vmovl_u16(vget_high_u16(h0)));
                wv[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(h1)));
                wv[3] = vcvtq_f32_u32(vmovl_u16(vget_high_u16(h1)));
                wv[4] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(l0)));
                wv[5] = vcvtq_f32_u32(vmovl_u16(vget_high_u16(l0)));
                wv[6] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(l1)));
                wv[7] = vcvtq_f32_u32(vmovl_u16(vget_high_u16(l1)));
                for (int i = 0; i < MM; i++) {
                    const float *x = j->xd + i * K + g * G + c;
                    for (int t = 0; t < 8; t++)
                        d[i] = vfmaq_f32(d[i], wv[t], vld1q_f32(x + 4 * t));
                }
            }
            for (int i = 0; i < MM; i++) {
                const float *x = j->xd + i * K + g * G;
                float r = 0.0f;
                for (int64_t e = c; e < G; e += 2)
                    r += (float)(b[e / 2] >> 4) * x[e] + (float)(b[e / 2] & 15) * x[e + 1];
                acc[i] = vfmaq_n_f32(acc[i], d[i], s);
                accs[i] += s * (r - (8.0f + z) * j->xsum[i * ng + g]);
            }
        }
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n - n0)] = vaddvq_f32(acc[i]) + accs[i];
    }
}

static void q4_f32_neon(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4f_block(j, n0, n1, 1); break;
    case 2: q4f_block(j, n0, n1, 2); break;
    case 3: q4f_block(j, n0, n1, 3); break;
    default: q4f_block(j, n0, n1, 4); break;
    }
}

static inline __attribute__((always_inline)) void q4i_block(const etch_q4_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    const uint8x16_t m15 = vdupq_n_u8(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        float32x4_t acc[ETCH_Q4_MR];
        float accs[ETCH_Q4_MR];
        for (int i = 0; i < MM; i++) {
            acc[i] = vdupq_n_f32(0.0f);
            accs[i] = 0.0f;
        }
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *b = row + g * G / 2;
            const float s = w->scales[n * ng + g];
            int32x4_t d[ETCH_Q4_MR];
            for (int i = 0; i < MM; i++)
                d[i] = vdupq_n_s32(0);
            int64_t c = 0;
            for (; c < full; c += 32) {
                const uint8x16_t v = vld1q_u8(b + c / 2);
                const uint8x16_t hb = vshrq_n_u8(v, 4), lb = vandq_u8(v, m15);
                int16x8_t wv[4];
                wv[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(hb)));
                wv[1] = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(hb)));
                wv[2] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(lb)));
                wv[3] = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(lb)));
                for (int i = 0; i < MM; i++) {
                    const int16_t *x = j->xa + i * K + g * G + c;
                    for (int t = 0; t < 4; t++) {
                        const int16x8_t xv = vld1q_s16(x + 8 * t);
                        d[i] = vmlal_s16(d[i], vget_low_s16(wv[t]), vget_low_s16(xv));
                        d[i] = vmlal_s16(d[i], vget_high_s16(wv[t]), vget_high_s16(xv));
                    }
                }
            }
            for (int i = 0; i < MM; i++) {
                const int16_t *x = j->xa + i * K + g * G;
                int32_t r = 0;
                for (int64_t e = c; e < G; e += 2)
                    r += (b[e / 2] >> 4) * x[e] + (b[e / 2] & 15) * x[e + 1];
                acc[i] = vfmaq_n_f32(acc[i], vcvtq_f32_s32(d[i]), s);
                const int32_t sa = j->sa[i * ng + g];
                if (w->zeros)
                    accs[i] += s * ((float)r - (8.0f + w->zeros[n * ng + g]) * (float)sa);
                else
                    accs[i] += s * (float)(r - 8 * sa);
            }
        }
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n - n0)] = vaddvq_f32(acc[i]) + accs[i];
    }
}

static void q4_8da4w_neon(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4i_block(j, n0, n1, 1); break;
    case 2: q4i_block(j, n0, n1, 2); break;
    case 3: q4i_block(j, n0, n1, 3); break;
    default: q4i_block(j, n0, n1, 4); break;
    }
}

/* sdot: per block of 4 k the panel's 32 bytes as two vectors (columns 0-3, 4-7; 4 k each),
 * each row's 4 bytes duplicated into every lane; a lane's 4 products add into its int32. */
__attribute__((target("arch=armv8.2-a+dotprod"))) static void
q8_ukr_sdot(int mm, int64_t kb, const uint8_t *a, int64_t lda, const int8_t *panel,
            int32_t *acc) {
    (void)mm;
    int32x4_t lo[4], hi[4];
    for (int i = 0; i < 4; i++)
        lo[i] = hi[i] = vdupq_n_s32(0);
    for (int64_t k = 0; k < kb; k++) {
        const int8x16_t b0 = vld1q_s8(panel), b1 = vld1q_s8(panel + 16);
        panel += 32;
        for (int i = 0; i < 4; i++) {
            int32_t v;
            memcpy(&v, a + i * lda + 4 * k, 4);
            const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(v));
            lo[i] = vdotq_s32(lo[i], b0, av);
            hi[i] = vdotq_s32(hi[i], b1, av);
        }
    }
    for (int i = 0; i < 4; i++) {
        vst1q_s32(acc + i * 8, lo[i]);
        vst1q_s32(acc + i * 8 + 4, hi[i]);
    }
}

/* Plain NEON: smull of 8 bytes (2 columns x 4 k) with the row's 4 bytes twice, sadalp
 * into lanes [c k01, c k23, c' k01, c' k23]; the pairs are added at the end. */
static void q8_ukr_neon(int mm, int64_t kb, const uint8_t *a, int64_t lda, const int8_t *panel,
                        int32_t *acc) {
    (void)mm;
    int32x4_t c[4][4];
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 4; t++)
            c[i][t] = vdupq_n_s32(0);
    for (int64_t k = 0; k < kb; k++) {
        const int8x16_t b0 = vld1q_s8(panel), b1 = vld1q_s8(panel + 16);
        panel += 32;
        for (int i = 0; i < 4; i++) {
            int32_t v;
            memcpy(&v, a + i * lda + 4 * k, 4);
            const int8x8_t av = vreinterpret_s8_s32(vdup_n_s32(v));
            c[i][0] = vpadalq_s16(c[i][0], vmull_s8(vget_low_s8(b0), av));
            c[i][1] = vpadalq_s16(c[i][1], vmull_s8(vget_high_s8(b0), av));
            c[i][2] = vpadalq_s16(c[i][2], vmull_s8(vget_low_s8(b1), av));
            c[i][3] = vpadalq_s16(c[i][3], vmull_s8(vget_high_s8(b1), av));
        }
    }
    for (int i = 0; i < 4; i++) {
        vst1q_s32(acc + i * 8, vpaddq_s32(c[i][0], c[i][1]));
        vst1q_s32(acc + i * 8 + 4, vpaddq_s32(c[i][2], c[i][3]));
    }
}

/* 8w: one activation row and one weight row at a time, 16 k per step: the bytes widened
 * (int8 -> int16 -> int32), converted, FMA into four chains; the K tail scalar. */
static void q8w_f32_neon(const etch_q8w_job *j, int64_t n0, int64_t n1) {
    const etch_q8w_weights *w = j->w;
    const int64_t K = w->K;
    for (int64_t n = n0; n < n1; n++) {
        const int8_t *b = w->data + n * w->ldw;
        for (int i = 0; i < j->mm; i++) {
            const float *x = j->x + i * j->ldx;
            float32x4_t a[4];
            for (int t = 0; t < 4; t++)
                a[t] = vdupq_n_f32(0.0f);
            int64_t k = 0;
            for (; k + 16 <= K; k += 16) {
                const int8x16_t v = vld1q_s8(b + k);
                const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
                a[0] = vfmaq_f32(a[0], vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))),
                                 vld1q_f32(x + k));
                a[1] = vfmaq_f32(a[1], vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))),
                                 vld1q_f32(x + k + 4));
                a[2] = vfmaq_f32(a[2], vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))),
                                 vld1q_f32(x + k + 8));
                a[3] = vfmaq_f32(a[3], vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))),
                                 vld1q_f32(x + k + 12));
            }
            float t = vaddvq_f32(vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3])));
            for (; k < K; k++)
                t += x[k] * (float)b[k];
            j->out[i * j->ldo + (n - n0)] = t;
        }
    }
}

void etch_quant_isa_neon(etch_quant_isa *q, unsigned features) {
    q->q8w_f32 = q8w_f32_neon;
    q->q4_f32 = q4_f32_neon;
    q->q4_8da4w = q4_8da4w_neon;
    q->q4_act_i8 = false;
    q->q8_mr = 4;
    q->q8_nr = 8;
    q->q8_a_signed = true;
    q->q8_ukr = (features & ETCH_QF_DOTPROD) ? q8_ukr_sdot : q8_ukr_neon;
}
