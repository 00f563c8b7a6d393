/* NEON register tile of the channel-blocked convolution (conv_nchwc.h): up to 6 output pixels
 * x 16 output channels in 24 q-register accumulators (4 of weights, 1 broadcast), or x 8
 * channels in 12. Specialised on the pixel count, the tile width and the input layout, as the
 * AVX2 kernel is, so that the accumulators stay in registers; each pixel has its own input
 * pointer. */
#include <arm_neon.h>

#include "kernels/optimized/conv_nchwc.h"

#define AI static inline __attribute__((always_inline))

enum { IN_NCHW = 0, IN_BLK = 1 };

/* The accumulators are named variables (pixel j: cj0..cj3; cj2, cj3 only in 16-wide tiles), so
 * that they stay in registers across the loops. */
#define PIX(j, x)                                                                              \
    do {                                                                                       \
        if (np > (j)) {                                                                        \
            const float32x4_t x_ = (x);                                                        \
            c##j##0 = vfmaq_f32(c##j##0, x_, w0);                                              \
            c##j##1 = vfmaq_f32(c##j##1, x_, w1);                                              \
            if (two) {                                                                         \
                c##j##2 = vfmaq_f32(c##j##2, x_, w2);                                          \
                c##j##3 = vfmaq_f32(c##j##3, x_, w3);                                          \
            }                                                                                  \
        }                                                                                      \
    } while (0)

#define LANE(l, lstride)                                                                       \
    do {                                                                                       \
        const float *wl = wp + (l) * oct;                                                      \
        const float32x4_t w0 = vld1q_f32(wl), w1 = vld1q_f32(wl + 4);                          \
        const float32x4_t w2 = two ? vld1q_f32(wl + 8) : w0;                                   \
        const float32x4_t w3 = two ? vld1q_f32(wl + 12) : w1;                                  \
        const int64_t o_ = off + (l) * (lstride);                                              \
        PIX(0, vld1q_dup_f32(p0 + o_));                                                        \
        PIX(1, vld1q_dup_f32(p1 + o_));                                                        \
        PIX(2, vld1q_dup_f32(p2 + o_));                                                        \
        PIX(3, vld1q_dup_f32(p3 + o_));                                                        \
        PIX(4, vld1q_dup_f32(p4 + o_));                                                        \
        PIX(5, vld1q_dup_f32(p5 + o_));                                                        \
        __asm__ volatile("" ::: "memory"); /* no loads hoisted across lanes: no spills */      \
    } while (0)

#define DECL(j) float32x4_t c##j##0 = bv0, c##j##1 = bv1, c##j##2 = bv2, c##j##3 = bv3

AI void tile_impl(const nchwc_tile *t, const int np, const int two, const int mode) {
    const int64_t oct = two ? 16 : 8;
    const int nv = two ? 4 : 2;
    const float32x4_t bv0 = vld1q_f32(t->bias), bv1 = vld1q_f32(t->bias + 4);
    const float32x4_t bv2 = two ? vld1q_f32(t->bias + 8) : bv0;
    const float32x4_t bv3 = two ? vld1q_f32(t->bias + 12) : bv1;
    DECL(0);
    DECL(1);
    DECL(2);
    DECL(3);
    DECL(4);
    DECL(5);
    if (t->accumulate) { /* blocked output: the partial sums of the blocks before b0 */
        const float *o = t->out;
#define LOADC(j)                                                                               \
    if (np > (j)) {                                                                            \
        c##j##0 = vld1q_f32(o + (j) * 8);                                                      \
        c##j##1 = vld1q_f32(o + (j) * 8 + 4);                                                  \
        if (two) {                                                                             \
            c##j##2 = vld1q_f32(o + t->obs + (j) * 8);                                         \
            c##j##3 = vld1q_f32(o + t->obs + (j) * 8 + 4);                                     \
        }                                                                                      \
    }
        LOADC(0)
        LOADC(1)
        LOADC(2)
        LOADC(3)
        LOADC(4)
        LOADC(5)
#undef LOADC
    }
    /* pixels past np point at pixel 0 (never read) */
    const float *p0 = t->px[0], *p1 = np > 1 ? t->px[1] : p0, *p2 = np > 2 ? t->px[2] : p0;
    const float *p3 = np > 3 ? t->px[3] : p0, *p4 = np > 4 ? t->px[4] : p0;
    const float *p5 = np > 5 ? t->px[5] : p0;
    const int64_t ls = mode == IN_NCHW ? t->ls : 1;
    const int64_t nkh = t->nkh, nkw = t->nkw, khs = t->khs, kws = t->kws, KW = t->KW;
    if (mode == IN_BLK && nkh == 1 && nkw == 1) { /* one tap (1x1): one loop over the blocks */
        const int64_t bs = t->bs, wbs = t->wbs;
        int64_t off = t->b0 * bs;
        const float *wp = t->w + t->b0 * wbs + (t->kh0 * KW + t->kw0) * 8 * oct;
        for (int64_t b = t->b0; b < t->b1; b++, off += bs, wp += wbs)
            for (int l = 0; l < 8; l++)
                LANE(l, 1);
    } else
    for (int64_t b = t->b0; b < t->b1; b++) {
        const int64_t cb = mode != IN_NCHW ? 8 : (b == t->nb - 1 ? t->cb_last : 8);
        const float *wb = t->w + b * t->wbs + (t->kh0 * KW + t->kw0) * cb * oct;
        const int64_t wkw = cb * oct, wkh = KW * cb * oct;
        for (int64_t kh = 0; kh < nkh; kh++) {
            const float *wp = wb + kh * wkh;
            int64_t off = b * t->bs + kh * khs;
            for (int64_t kw = 0; kw < nkw; kw++, off += kws, wp += wkw) {
                if (mode != IN_NCHW) {
                    LANE(0, 1);
                    LANE(1, 1);
                    LANE(2, 1);
                    LANE(3, 1);
                    LANE(4, 1);
                    LANE(5, 1);
                    LANE(6, 1);
                    LANE(7, 1);
                } else {
                    for (int64_t l = 0; l < cb; l++)
                        LANE(l, ls);
                }
            }
        }
    }
    float32x4_t acc[NCHWC_MR][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13},
                                    {c20, c21, c22, c23}, {c30, c31, c32, c33},
                                    {c40, c41, c42, c43}, {c50, c51, c52, c53}};
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
#undef PIX
#undef DECL

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
