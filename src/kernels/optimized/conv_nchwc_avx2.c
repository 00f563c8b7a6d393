/* AVX2 + FMA register tile of the channel-blocked convolution (conv_nchwc.h): up to 6 output
 * pixels x 16 output channels in 12 accumulators (2 ymm of weights, 1 broadcast), or x 8
 * channels in 6. Specialised on the pixel count, the tile width and the input layout (blocked
 * with a pixel stride of 8 floats, i.e. stride 1; blocked with any stride; NCHW with a lane
 * stride of H*W and a short last block), so that the accumulators stay in registers. AVX-512
 * machines run this kernel too (conv_nchwc.c). */
#include <immintrin.h>

#include "kernels/optimized/conv_nchwc.h"

#define AI static inline __attribute__((always_inline))

enum { IN_NCHW = 0, IN_BLK = 1, IN_BLK_S1 = 2 };

/* One lane step: the weights of lane l (two vectors, or one) against input lane l of each
 * pixel. */
#define LANE(l, ipx, ps_, lstride)                                                             \
    do {                                                                                       \
        const __m256 w0 = _mm256_loadu_ps(wp + (l) * oct);                                     \
        const __m256 w1 = two ? _mm256_loadu_ps(wp + (l) * oct + 8) : w0;                      \
        for (int j = 0; j < np; j++) {                                                         \
            const __m256 x = _mm256_broadcast_ss((ipx) + j * (ps_) + (l) * (lstride));         \
            acc[j][0] = _mm256_fmadd_ps(x, w0, acc[j][0]);                                     \
            if (two)                                                                           \
                acc[j][1] = _mm256_fmadd_ps(x, w1, acc[j][1]);                                 \
        }                                                                                      \
    } while (0)

AI void tile_impl(const nchwc_tile *t, const int np, const int two, const int mode) {
    const int64_t oct = two ? 16 : 8;
    __m256 acc[NCHWC_MR][2];
    const __m256 b0 = _mm256_loadu_ps(t->bias), b1 = two ? _mm256_loadu_ps(t->bias + 8) : b0;
    for (int j = 0; j < np; j++) {
        acc[j][0] = b0;
        acc[j][1] = b1;
    }
    const int64_t ps = mode == IN_BLK_S1 ? 8 : t->ps, ls = mode == IN_NCHW ? t->ls : 1;
    const int64_t nkh = t->nkh, nkw = t->nkw, khs = t->khs, kws = t->kws, KW = t->KW;
    for (int64_t b = 0; b < t->nb; b++) {
        const int64_t cb = mode != IN_NCHW ? 8 : (b == t->nb - 1 ? t->cb_last : 8);
        const float *ib = t->in + b * t->bs;
        const float *wb = t->w + b * t->wbs + (t->kh0 * KW + t->kw0) * cb * oct;
        for (int64_t kh = 0; kh < nkh; kh++) {
            const float *ir = ib + kh * khs;
            const float *wr = wb + kh * KW * cb * oct;
            for (int64_t kw = 0; kw < nkw; kw++) {
                const float *ip = ir + kw * kws;
                const float *wp = wr + kw * cb * oct;
                if (mode != IN_NCHW) {
                    LANE(0, ip, ps, 1);
                    LANE(1, ip, ps, 1);
                    LANE(2, ip, ps, 1);
                    LANE(3, ip, ps, 1);
                    LANE(4, ip, ps, 1);
                    LANE(5, ip, ps, 1);
                    LANE(6, ip, ps, 1);
                    LANE(7, ip, ps, 1);
                } else {
                    for (int64_t l = 0; l < cb; l++)
                        LANE(l, ip, ps, ls);
                }
            }
        }
    }
    if (t->act) {
        const __m256 lo = _mm256_set1_ps(t->lo), hi = _mm256_set1_ps(t->hi);
        for (int j = 0; j < np; j++) {
            /* max/min return their second operand when either is NaN: NaN passes through */
            acc[j][0] = _mm256_min_ps(hi, _mm256_max_ps(lo, acc[j][0]));
            acc[j][1] = _mm256_min_ps(hi, _mm256_max_ps(lo, acc[j][1]));
        }
    }
    if (!t->out_nchw) {
        for (int j = 0; j < np; j++) {
            _mm256_storeu_ps(t->out + j * 8, acc[j][0]);
            if (two)
                _mm256_storeu_ps(t->out + t->obs + j * 8, acc[j][1]);
        }
    } else {
        float tmp[NCHWC_MR][16];
        for (int j = 0; j < np; j++) {
            _mm256_storeu_ps(tmp[j], acc[j][0]);
            _mm256_storeu_ps(tmp[j] + 8, acc[j][1]);
        }
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
INST_NP(0, 2)
INST_NP(1, 0)
INST_NP(1, 1)
INST_NP(1, 2)

#define ROW(two, mode)                                                                         \
    {tile_1_##two##_##mode, tile_2_##two##_##mode, tile_3_##two##_##mode,                     \
     tile_4_##two##_##mode, tile_5_##two##_##mode, tile_6_##two##_##mode}
static const nchwc_tile_fn tiles[2][3][NCHWC_MR] = {
    {ROW(0, 0), ROW(0, 1), ROW(0, 2)},
    {ROW(1, 0), ROW(1, 1), ROW(1, 2)},
};

void etch_nchwc_tile_avx2(const nchwc_tile *t) {
    const int mode = t->ls != 1 || t->cb_last != 8 ? IN_NCHW : (t->ps == 8 ? IN_BLK_S1 : IN_BLK);
    tiles[t->oct == 16][mode][t->np - 1](t);
}
