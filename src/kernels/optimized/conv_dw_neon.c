/* Depthwise 3x3 convolution, padding 1, NEON: blocks of 4 interior output columns; stride 2
 * uses de-interleaving loads (vld2q) for the even and odd input columns. */
#include <arm_neon.h>

#include "kernels/optimized/opt_conv.h"

int64_t etch_opt_dw3x3_cols_neon(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    int64_t ow = ow0;
    const float *w = a->w;
    for (; ow + 4 <= ow1; ow += 4) {
        float32x4_t acc = vdupq_n_f32(a->bias);
        for (int kh = 0; kh < 3; kh++) {
            const float *r = a->r[kh];
            if (!r)
                continue;
            if (a->stride == 1) {
                const float *p = r + ow - 1;
                acc = vfmaq_f32(acc, vld1q_f32(p), vdupq_n_f32(w[kh * 3 + 0]));
                acc = vfmaq_f32(acc, vld1q_f32(p + 1), vdupq_n_f32(w[kh * 3 + 1]));
                acc = vfmaq_f32(acc, vld1q_f32(p + 2), vdupq_n_f32(w[kh * 3 + 2]));
            } else {
                const float *p = r + 2 * ow;
                float32x4x2_t l = vld2q_f32(p - 2), m = vld2q_f32(p);
                acc = vfmaq_f32(acc, l.val[1], vdupq_n_f32(w[kh * 3 + 0]));
                acc = vfmaq_f32(acc, m.val[0], vdupq_n_f32(w[kh * 3 + 1]));
                acc = vfmaq_f32(acc, m.val[1], vdupq_n_f32(w[kh * 3 + 2]));
            }
        }
        vst1q_f32(a->out + ow, acc);
    }
    return ow;
}
