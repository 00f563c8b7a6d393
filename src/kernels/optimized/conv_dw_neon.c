/* Depthwise 3x3 convolution, padding 1, NEON: blocks of 4 interior output columns (four at a
 * time), the last one overlapping the previous when the range is not a whole number of blocks;
 * stride 2 uses de-interleaving loads (vld2q) for the even and odd input columns. */
#include <arm_neon.h>

#include "kernels/optimized/opt_conv.h"

/* the three input vectors of kernel row kh for out[ow, ow + 4) */
static inline void load4(const etch_dw3x3_row *a, const float *r, int64_t ow, float32x4_t *x) {
    if (a->stride == 1) {
        const float *p = r + ow - 1;
        x[0] = vld1q_f32(p);
        x[1] = vld1q_f32(p + 1);
        x[2] = vld1q_f32(p + 2);
    } else {
        const float *p = r + 2 * ow;
        float32x4x2_t l = vld2q_f32(p - 2), m = vld2q_f32(p);
        x[0] = l.val[1];
        x[1] = m.val[0];
        x[2] = m.val[1];
    }
}

/* out[ow, ow + 4 * NB) with NB independent accumulators (same per-element order) */
#define DW_BLOCKS4(NB)                                                                       \
    static inline void blocks4_##NB(const etch_dw3x3_row *a, int64_t ow) {                  \
        float32x4_t acc[NB];                                                                 \
        for (int b = 0; b < NB; b++)                                                         \
            acc[b] = vdupq_n_f32(a->bias);                                                   \
        for (int kh = 0; kh < 3; kh++) {                                                     \
            const float *r = a->r[kh];                                                       \
            if (!r)                                                                          \
                continue;                                                                    \
            const float32x4_t w0 = vdupq_n_f32(a->w[kh * 3 + 0]),                            \
                              w1 = vdupq_n_f32(a->w[kh * 3 + 1]),                            \
                              w2 = vdupq_n_f32(a->w[kh * 3 + 2]);                            \
            for (int b = 0; b < NB; b++) {                                                   \
                float32x4_t x[3];                                                            \
                load4(a, r, ow + 4 * b, x);                                                  \
                acc[b] = vfmaq_f32(acc[b], x[0], w0);                                        \
                acc[b] = vfmaq_f32(acc[b], x[1], w1);                                        \
                acc[b] = vfmaq_f32(acc[b], x[2], w2);                                        \
            }                                                                                \
        }                                                                                    \
        for (int b = 0; b < NB; b++)                                                         \
            vst1q_f32(a->out + ow + 4 * b, acc[b]);                                          \
    }
DW_BLOCKS4(1)
DW_BLOCKS4(4)

int64_t etch_opt_dw3x3_cols_neon(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    if (ow1 - ow0 < 4)
        return ow0;
    int64_t ow = ow0;
    for (; ow + 16 <= ow1; ow += 16)
        blocks4_4(a, ow);
    for (; ow + 4 <= ow1; ow += 4)
        blocks4_1(a, ow);
    if (ow < ow1)
        blocks4_1(a, ow1 - 4);
    return ow1;
}
