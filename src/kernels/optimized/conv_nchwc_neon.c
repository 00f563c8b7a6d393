/* NEON register tile of the channel-blocked convolution (conv_nchwc.h): up to 6 output pixels
 * x 16 output channels in 24 q-register accumulators (4 of weights, 1 broadcast), or x 8
 * channels in 12. Specialised on the pixel count, the tile width and the input layout, as the
 * AVX2 kernel is, so that the accumulators stay in registers; each pixel has its own input
 * pointer. */
#include <arm_neon.h>

#include "kernels/optimized/conv_nchwc.h"

#define AI static inline __attribute__((always_inline))

enum { IN_NCHW = 0, IN_BLK = 1 };

#define LANE(l, lstride)                                                                       \
    do {                                                                                       \
        const float *wl = wp + (l) * oct;                                                      \
        const float32x4_t w0 = vld1q_f32(wl), w1 = vld1q_f32(wl + 4);                          \
        const float32x4_t w2 = two ? vld1q_f32(wl + 8) : w0, w3 = two ? vld1q_f32(wl + 12) : w1; \
        for (int j = 0; j < np; j++) {                                                         \
            const float32x4_t x = vld1q_dup_f32(px[j] + off + (l) * (lstride));                \
            acc[j][0] = vfmaq_f32(acc[j][0], x, w0);                                           \
            acc[j][1] = vfmaq_f32(acc[j][1], x, w1);                                           \
            if (two) {                                                                         \
                acc[j][2] = vfmaq_f32(acc[j][2], x, w2);                                       \
                acc[j][3] = vfmaq_f32(acc[j][3], x, w3);                                       \
            }                                                                                  \
        }                                                                                      \
    } while (0)

AI void tile_impl(const nchwc_tile *t, const int np, const int two, const int mode) {
    const int64_t oct = two ? 16 : 8;
    const int nv = two ? 4 : 2;
    float32x4_t acc[NCHWC_MR][4];
    float32x4_t bv[4];
    const float *px[NCHWC_MR];
    for (int v = 0; v < 4; v++)
        bv[v] = v < nv ? vld1q_f32(t->bias + 4 * v) : vdupq_n_f32(0.0f);
    for (int j = 0; j < np; j++) {
        for (int v = 0; v < 4; v++)
            acc[j][v] = bv[v];
        px[j] = t->px[j];
    }
    const int64_t ls = mode == IN_NCHW ? t->ls : 1;
    const int64_t nkh = t->nkh, nkw = t->nkw, khs = t->khs, kws = t->kws, KW = t->KW;
    for (int64_t b = 0; b < t->nb; b++) {
        const int64_t cb = mode != IN_NCHW ? 8 : (b == t->nb - 1 ? t->cb_last : 8);
        const float *wb = t->w + b * t->wbs + (t->kh0 * KW + t->kw0) * cb * oct;
        for (int64_t kh = 0; kh < nkh; kh++) {
            const float *wr = wb + kh * KW * cb * oct;
            for (int64_t kw = 0; kw < nkw; kw++) {
                const int64_t off = b * t->bs + kh * khs + kw * kws;
                const float *wp = wr + kw * cb * oct;
                if (mode != IN_NCHW) {
                    for (int l = 0; l < 8; l++)
                        LANE(l, 1);
                } else {
                    for (int64_t l = 0; l < cb; l++)
                        LANE(l, ls);
                }
            }
        }
    }
    if (t->act) {
        const float32x4_t lo = vdupq_n_f32(t->lo), hi = vdupq_n_f32(t->hi);
        for (int j = 0; j < np; j++)
            for (int v = 0; v < nv; v++) {
                float32x4_t x = acc[j][v];
                /* NaN passes through (vmaxq would return NaN too; keep it explicit) */
                const uint32x4_t keep = vceqq_f32(x, x);
                float32x4_t y = vminq_f32(hi, vmaxq_f32(lo, x));
                acc[j][v] = vbslq_f32(keep, y, x);
            }
    }
    if (!t->out_nchw) {
        for (int j = 0; j < np; j++) {
            vst1q_f32(t->out + j * 8, acc[j][0]);
            vst1q_f32(t->out + j * 8 + 4, acc[j][1]);
            if (two) {
                vst1q_f32(t->out + t->obs + j * 8, acc[j][2]);
                vst1q_f32(t->out + t->obs + j * 8 + 4, acc[j][3]);
            }
        }
    } else {
        float tmp[NCHWC_MR][16];
        for (int j = 0; j < np; j++)
            for (int v = 0; v < 4; v++)
                vst1q_f32(tmp[j] + 4 * v, acc[j][v]);
        for (int c = 0; c < t->oc_valid; c++)
            for (int j = 0; j < np; j++)
                t->out[c * t->obs + j] = tmp[j][c];
    }
}
#undef LANE

#define INST(np, two, mode)                                                                    \
    static void tile_##np##_##two##_##mode(const nchwc_tile *t) { tile_impl(t, np, two, mode); }
#define INST_NP(two, mode)                                                                     \
    INST(1, two, mode) INST(2, two, mode) INST(3, two, mode) INST(4, two, mode)                \
    INST(5, two, mode) INST(6, two, mode)
INST_NP(0, 0)
INST_NP(0, 1)
INST_NP(1, 0)
INST_NP(1, 1)

#define ROW(two, mode)                                                                         \
    {tile_1_##two##_##mode, tile_2_##two##_##mode, tile_3_##two##_##mode,                     \
     tile_4_##two##_##mode, tile_5_##two##_##mode, tile_6_##two##_##mode}
static const nchwc_tile_fn tiles[2][2][NCHWC_MR] = {
    {ROW(0, 0), ROW(0, 1)},
    {ROW(1, 0), ROW(1, 1)},
};

void etch_nchwc_tile_neon(const nchwc_tile *t) {
    const int mode = t->ls != 1 || t->cb_last != 8 ? IN_NCHW : IN_BLK;
    tiles[t->oct == 16][mode][t->np - 1](t);
}
