/* NEON block functions of the optimized attention (see opt_attention.h). */
#include <arm_neon.h>

#include "kernels/optimized/opt_attention.h"

/* Four keys at a time share each load of q; the tail of hd % 4 is scalar. */
static void scores_neon(float *s, const float *q, const float *k, int64_t n, int64_t hd,
                        float scale) {
    const int64_t hv = hd & ~(int64_t)3;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = k + j * hd, *k1 = k0 + hd, *k2 = k1 + hd, *k3 = k2 + hd;
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
        const float *kr = k + j * hd;
        float32x4_t a = vdupq_n_f32(0.0f);
        for (int64_t d = 0; d < hv; d += 4)
            a = vfmaq_f32(a, vld1q_f32(q + d), vld1q_f32(kr + d));
        float r = vaddvq_f32(a);
        for (int64_t d = hv; d < hd; d++)
            r += q[d] * kr[d];
        s[j] = r * scale;
    }
}

static void accum_neon(float *acc, const float *p, const float *v, int64_t n, int64_t hd) {
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        float32x4_t a0 = vld1q_f32(acc + d), a1 = vld1q_f32(acc + d + 4);
        float32x4_t a2 = vld1q_f32(acc + d + 8), a3 = vld1q_f32(acc + d + 12);
        for (int64_t j = 0; j < n; j++) {
            const float *vr = v + j * hd + d;
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
            a = vfmaq_n_f32(a, vld1q_f32(v + j * hd + d), p[j]);
        vst1q_f32(acc + d, a);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += p[j] * v[j * hd + d];
        acc[d] = a;
    }
}

const etch_attn_isa etch_attn_neon = {scores_neon, accum_neon, NULL, NULL};
