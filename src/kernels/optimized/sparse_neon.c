/* 2:4 sparse float32 tiles, NEON (sparse.h): 8 output columns as two 4-lane halves. Each
 * column's kept input is picked from the group's 4 inputs x[4g..4g+3] with a byte table
 * lookup (vqtbl1q_u8; lane l reads bytes 4 i_l .. 4 i_l + 3), so there is no gather; up to 4
 * rows share each weight load. */
#include <arm_neon.h>
#include <string.h>

#include "kernels/optimized/sparse.h"

#define SP_R 4 /* rows a pass */

/* byte indices 4 i_l + {0, 1, 2, 3} for the 4 two-bit indices in the low bytes of i */
static inline uint8x16_t lanes_of(uint8x8_t i) {
    const uint32x4_t w = vmovl_u16(vget_low_u16(vmovl_u8(i)));
    return vreinterpretq_u8_u32(vmlaq_n_u32(vdupq_n_u32(0x03020100u), w, 0x04040404u));
}

void etch_sp24_tiles_neon(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M, float *c,
                          int64_t ldc, int64_t t0, int64_t t1) {
    const int64_t tail = w->K % 4, gfull = w->K / 4;
    const uint8x8_t three = vdup_n_u8(3);
    for (int64_t t = t0; t < t1; t++) {
        const int nc = (int)(w->N - t * SP_NT < SP_NT ? w->N - t * SP_NT : SP_NT);
        const float *vt = w->vals + t * w->G * 2 * SP_NT;
        const uint8_t *it = w->idx + t * w->G * SP_NT;
        for (int64_t m0 = 0; m0 < M; m0 += SP_R) {
            const int R = (int)(M - m0 < SP_R ? M - m0 : SP_R);
            float32x4_t acc[SP_R][4];
            for (int r = 0; r < SP_R; r++)
                for (int h = 0; h < 4; h++)
                    acc[r][h] = vdupq_n_f32(0.0f);
            for (int64_t g = 0; g < w->G; g++) {
                const uint8x8_t b = vld1_u8(it + g * SP_NT);
                const uint8x8_t i0 = vand_u8(b, three), i1 = vshr_n_u8(b, 2);
                const uint8x16_t l0a = lanes_of(i0), l0b = lanes_of(vext_u8(i0, i0, 4));
                const uint8x16_t l1a = lanes_of(i1), l1b = lanes_of(vext_u8(i1, i1, 4));
                const float *v = vt + g * 2 * SP_NT;
                const float32x4_t v0a = vld1q_f32(v), v0b = vld1q_f32(v + 4);
                const float32x4_t v1a = vld1q_f32(v + 8), v1b = vld1q_f32(v + 12);
                for (int r = 0; r < R; r++) {
                    const float *xr = x + (m0 + r) * ldx + 4 * g;
                    float pad[4] = {0, 0, 0, 0};
                    if (g == gfull && tail) {
                        memcpy(pad, xr, (size_t)tail * sizeof(float));
                        xr = pad;
                    }
                    const uint8x16_t xg = vreinterpretq_u8_f32(vld1q_f32(xr));
                    acc[r][0] = vfmaq_f32(acc[r][0], v0a,
                                          vreinterpretq_f32_u8(vqtbl1q_u8(xg, l0a)));
                    acc[r][1] = vfmaq_f32(acc[r][1], v0b,
                                          vreinterpretq_f32_u8(vqtbl1q_u8(xg, l0b)));
                    acc[r][2] = vfmaq_f32(acc[r][2], v1a,
                                          vreinterpretq_f32_u8(vqtbl1q_u8(xg, l1a)));
                    acc[r][3] = vfmaq_f32(acc[r][3], v1b,
                                          vreinterpretq_f32_u8(vqtbl1q_u8(xg, l1b)));
                }
            }
            for (int r = 0; r < R; r++) {
                float o[SP_NT];
                vst1q_f32(o, vaddq_f32(acc[r][0], acc[r][2]));
                vst1q_f32(o + 4, vaddq_f32(acc[r][1], acc[r][3]));
                memcpy(c + (m0 + r) * ldc + t * SP_NT, o, (size_t)nc * sizeof(float));
            }
        }
    }
}
