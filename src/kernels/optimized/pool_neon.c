/* max_pool2d rows, NEON: 4 interior output columns at once (dilation 1, stride 1 or 2; stride
 * 2 de-interleaves with vld2q), each lane walking its window in the portable kernel's order and
 * keeping the first maximum or the last NaN, with its index in 32-bit lanes (the caller checks
 * H * W < 2^31). */
#include <arm_neon.h>
#include <math.h>

#include "kernels/optimized/opt_conv.h"

int64_t etch_opt_maxpool_cols_neon(const etch_maxpool_row *a, int64_t ow0, int64_t ow1) {
    const int64_t sw = a->sw, W = a->W;
    const int32_t lane_init[4] = {0, 1, 2, 3};
    const int32x4_t lane = vmulq_n_s32(vld1q_s32(lane_init), (int32_t)sw);
    int64_t ow = ow0;
    for (; ow + 4 <= ow1; ow += 4) {
        const int64_t c0 = ow * sw - a->pw; /* first window column of lane 0 */
        /* stride 2 reads 8 columns from c0 + k: the last one must exist */
        if (sw == 2 && c0 + (a->kw - 1) + 7 >= W)
            break;
        float32x4_t best = vdupq_n_f32(-INFINITY);
        int32x4_t bidx = vaddq_s32(vdupq_n_s32((int32_t)(a->h0 * W + c0)), lane);
        for (int64_t ih = a->h0; ih < a->h1; ih++) {
            const float *row = a->plane + ih * W + c0;
            for (int64_t k = 0; k < a->kw; k++) {
                float32x4_t v = sw == 1 ? vld1q_f32(row + k) : vld2q_f32(row + k).val[0];
                uint32x4_t take = vorrq_u32(vcgtq_f32(v, best), vmvnq_u32(vceqq_f32(v, v)));
                int32x4_t cur = vaddq_s32(vdupq_n_s32((int32_t)(ih * W + c0 + k)), lane);
                best = vbslq_f32(take, v, best);
                bidx = vbslq_s32(take, cur, bidx);
            }
        }
        vst1q_f32(a->out + ow, best);
        vst1q_s64(a->idx + ow, vmovl_s32(vget_low_s32(bidx)));
        vst1q_s64(a->idx + ow + 2, vmovl_s32(vget_high_s32(bidx)));
    }
    return ow;
}
