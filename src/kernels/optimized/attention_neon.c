/* NEON block functions of the optimized attention (see opt_attention.h). */
#include <arm_neon.h>

#include "kernels/optimized/opt_attention.h"

/* Four keys at a time share each load of q; the tail of hd % 4 is scalar. */
static void scores_neon(float *s, const float *q, const float *k, int64_t n, int64_t hd,
                        int64_t rs, float scale) {
    const int64_t hv = hd & ~(int64_t)3;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = k + j * rs, *k1 = k0 + rs, *k2 = k1 + rs, *k3 = k2 + rs;
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < hv; d += 4) {
            const float32x4_t qv = vld1q_f32(q + d);
            a0 = vfmaq_f32(a0, qv, vld1q_f32(k0 + d));
            a1 = vfmaq_f32(a1, qv, vld1q_f32(k1 + d));
            a2 = vfmaq_f32(a2, qv, vld1q_f32(k2 + d));
            a3 = vfmaq_f32(a3, qv, vld1q_f32(k3 + d));
        }
        float r0 = vaddvq_f32(a0), r1 = vaddvq_f32(a1), r2 = vaddvq_f32(a2);
        float r3 = vaddvq_f32(a3);
        for (int64_t d = hv; d < hd; d++) {
            r0 += q[d] * k0[d];
            r1 += q[d] * k1[d];
            r2 += q[d] * k2[d];
            r3 += q[d] * k3[d];
        }
        s[j] = r0 * scale;
        s[j + 1] = r1 * scale;
        s[j + 2] = r2 * scale;
        s[j + 3] = r3 * scale;
    }
    for (; j < n; j++) {
        const float *kr = k + j * rs;
        float32x4_t a = vdupq_n_f32(0.0f);
        for (int64_t d = 0; d < hv; d += 4)
            a = vfmaq_f32(a, vld1q_f32(q + d), vld1q_f32(kr + d));
        float r = vaddvq_f32(a);
        for (int64_t d = hv; d < hd; d++)
            r += q[d] * kr[d];
        s[j] = r * scale;
    }
}

static void accum_neon(float *acc, const float *p, const float *v, int64_t n, int64_t hd,
                       int64_t rs) {
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        float32x4_t a0 = vld1q_f32(acc + d), a1 = vld1q_f32(acc + d + 4);
        float32x4_t a2 = vld1q_f32(acc + d + 8), a3 = vld1q_f32(acc + d + 12);
        for (int64_t j = 0; j < n; j++) {
            const float *vr = v + j * rs + d;
            a0 = vfmaq_n_f32(a0, vld1q_f32(vr), p[j]);
            a1 = vfmaq_n_f32(a1, vld1q_f32(vr + 4), p[j]);
            a2 = vfmaq_n_f32(a2, vld1q_f32(vr + 8), p[j]);
            a3 = vfmaq_n_f32(a3, vld1q_f32(vr + 12), p[j]);
        }
        vst1q_f32(acc + d, a0);
        vst1q_f32(acc + d + 4, a1);
        vst1q_f32(acc + d + 8, a2);
        vst1q_f32(acc + d + 12, a3);
    }
    for (; d + 4 <= hd; d += 4) {
        float32x4_t a = vld1q_f32(acc + d);
        for (int64_t j = 0; j < n; j++)
            a = vfmaq_n_f32(a, vld1q_f32(v + j * rs + d), p[j]);
        vst1q_f32(acc + d, a);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += p[j] * v[j * rs + d];
        acc[d] = a;
    }
}

/* Eight int8 values minus a zero point (exact in int16), as two vectors of four floats. */
static inline void q8_load8(const int8_t *p, int16x8_t z, float32x4_t *lo, float32x4_t *hi) {
    const int16x8_t w = vsubq_s16(vmovl_s8(vld1_s8(p)), z);
    *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
    *hi = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)));
}

static void scores_q8_neon(float *s, const float *q, const int8_t *k, const float *ks,
                           const int8_t *kz, int64_t n, int64_t hd, float scale) {
    const int64_t hv = hd & ~(int64_t)7;
    for (int64_t j = 0; j < n; j++) {
        const int8_t *kr = k + j * hd;
        const int16x8_t z = vdupq_n_s16(kz[j]);
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
        for (int64_t d = 0; d < hv; d += 8) {
            float32x4_t lo, hi;
            q8_load8(kr + d, z, &lo, &hi);
            a0 = vfmaq_f32(a0, vld1q_f32(q + d), lo);
            a1 = vfmaq_f32(a1, vld1q_f32(q + d + 4), hi);
        }
        float r = vaddvq_f32(vaddq_f32(a0, a1));
        for (int64_t d = hv; d < hd; d++)
            r += q[d] * (float)((int32_t)kr[d] - (int32_t)kz[j]);
        s[j] = r * (ks[j] * scale);
    }
}

static void accum_q8_neon(float *acc, const float *p, const int8_t *v, const float *vs,
                          const int8_t *vz, int64_t n, int64_t hd) {
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        float32x4_t a0 = vld1q_f32(acc + d), a1 = vld1q_f32(acc + d + 4);
        float32x4_t a2 = vld1q_f32(acc + d + 8), a3 = vld1q_f32(acc + d + 12);
        for (int64_t j = 0; j < n; j++) {
            const float w = p[j] * vs[j];
            const int16x8_t z = vdupq_n_s16(vz[j]);
            float32x4_t x0, x1, x2, x3;
            q8_load8(v + j * hd + d, z, &x0, &x1);
            q8_load8(v + j * hd + d + 8, z, &x2, &x3);
            a0 = vfmaq_n_f32(a0, x0, w);
            a1 = vfmaq_n_f32(a1, x1, w);
            a2 = vfmaq_n_f32(a2, x2, w);
            a3 = vfmaq_n_f32(a3, x3, w);
        }
        vst1q_f32(acc + d, a0);
        vst1q_f32(acc + d + 4, a1);
        vst1q_f32(acc + d + 8, a2);
        vst1q_f32(acc + d + 12, a3);
    }
    for (; d + 8 <= hd; d += 8) {
        float32x4_t a0 = vld1q_f32(acc + d), a1 = vld1q_f32(acc + d + 4);
        for (int64_t j = 0; j < n; j++) {
            float32x4_t x0, x1;
            q8_load8(v + j * hd + d, vdupq_n_s16(vz[j]), &x0, &x1);
            a0 = vfmaq_n_f32(a0, x0, p[j] * vs[j]);
            a1 = vfmaq_n_f32(a1, x1, p[j] * vs[j]);
        }
        vst1q_f32(acc + d, a0);
        vst1q_f32(acc + d + 4, a1);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += (p[j] * vs[j]) * (float)((int32_t)v[j * hd + d] - (int32_t)vz[j]);
        acc[d] = a;
    }
}

const etch_attn_isa etch_attn_neon = {scores_neon,    accum_neon, NULL, NULL,
                                      scores_q8_neon, accum_q8_neon};
