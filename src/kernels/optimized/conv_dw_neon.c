/* Depthwise 3x3 convolution, padding 1, NEON: blocks of 4 interior output columns, the last
 * one overlapping the previous when the range is not a whole number of blocks; stride 2 uses
 * de-interleaving loads (vld2q) for the even and odd input columns. */
#include <arm_neon.h>

#include "kernels/optimized/opt_conv.h"

/* out[ow, ow + 4) */
static inline void block4(const etch_dw3x3_row *a, int64_t ow) {
    const float *w = a->w;
    float32x4_t acc = vdupq_n_f32(a->bias);
    for (int kh = 0; kh < 3; kh++) {
        const float *r = a->r[kh];
        if (!r)
            continue;
        float32x4_t x0, x1, x2;
        if (a->stride == 1) {
            const float *p = r + ow - 1;
            x0 = vld1q_f32(p);
            x1 = vld1q_f32(p + 1);
            x2 = vld1q_f32(p + 2);
        } else {
            const float *p = r + 2 * ow;
            float32x4x2_t l = vld2q_f32(p - 2), m = vld2q_f32(p);
            x0 = l.val[1];
            x1 = m.val[0];
            x2 = m.val[1];
        }
        acc = vfmaq_f32(acc, x0, vdupq_n_f32(w[kh * 3 + 0]));
        acc = vfmaq_f32(acc, x1, vdupq_n_f32(w[kh * 3 + 1]));
        acc = vfmaq_f32(acc, x2, vdupq_n_f32(w[kh * 3 + 2]));
    }
    vst1q_f32(a->out + ow, acc);
}

int64_t etch_opt_dw3x3_cols_neon(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    if (ow1 - ow0 < 4)
        return ow0;
    int64_t ow = ow0;
    for (; ow + 4 <= ow1; ow += 4)
        block4(a, ow);
    if (ow < ow1)
        block4(a, ow1 - 4);
    return ow1;
}
