/* AVX-512 register tile of the channel-blocked convolution (conv_nchwc.h), for the 16-wide
 * channel tiles with a blocked output: the pack holds a lane's 16 output channels contiguous,
 * so one zmm of weights meets one broadcast input per pixel, and each pixel's 16 channels are
 * one accumulator (its low half the tile's first output block, its high half the second).
 * The tile runs its repetitions (nchwc_tile.reps) two at a time where it can: 2 * np pixels,
 * up to 12 accumulators, enough independent FMAs to keep both FMA units busy (np alone would
 * leave them waiting on the FMA latency for np < 8). Every output value is the same chain of
 * FMAs, in the same order, as in the AVX2 tile, so the two give the same bits.
 * 8-wide tiles and NCHW outputs go to the AVX2 tile. The walk over blocks, taps and lanes is
 * the AVX2 tile's (conv_nchwc_taps.inc). */
#include <immintrin.h>

#include "kernels/optimized/conv_nchwc.h"

#define AI static inline __attribute__((always_inline))
#define MAXA (2 * NCHWC_MR) /* accumulators: two repetitions of at most NCHWC_MR pixels */

enum { IN_NCHW = 0, IN_BLK = 1, IN_RUN = 2 }; /* lanes: stride ls; 8 at stride 1; cb at stride 1 */

/* pixel j's FMA of one lane step (accumulator aj, input pointer qj) */
#define FMA1(j)                                                                                \
    do {                                                                                       \
        if (na > (j))                                                                          \
            a##j = _mm512_fmadd_ps(_mm512_set1_ps(q##j[o_]), w_, a##j);                        \
    } while (0)

/* One lane step: the 16 weights of lane l against input lane l of every pixel. */
#define LANE(l, lstride)                                                                       \
    do {                                                                                       \
        const __m512 w_ = _mm512_loadu_ps(wp + (l) * 16);                                      \
        const int64_t o_ = off + (l) * (lstride);                                              \
        FMA1(0);                                                                               \
        FMA1(1);                                                                               \
        FMA1(2);                                                                               \
        FMA1(3);                                                                               \
        FMA1(4);                                                                               \
        FMA1(5);                                                                               \
        FMA1(6);                                                                               \
        FMA1(7);                                                                               \
        FMA1(8);                                                                               \
        FMA1(9);                                                                               \
        FMA1(10);                                                                              \
        FMA1(11);                                                                              \
    } while (0)

/* Both output blocks of pixel j (at o + 8 j and o + obs + 8 j) as one vector, and back. */
AI __m512 load_px(const float *o, int64_t obs, int j) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(o + 8 * j)),
                              _mm256_loadu_ps(o + obs + 8 * j), 1);
}
AI void store_px(float *o, int64_t obs, int j, __m512 v) {
    _mm256_storeu_ps(o + 8 * j, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(o + obs + 8 * j, _mm512_extractf32x8_ps(v, 1));
}

/* na (1..12) pixels: pixel j reads from q[j] and writes its blocked output at out + 8 j; the
 * call stands for `calls` repetitions (1 or 2) of the tile, whose prefetch slices it issues.
 * Returns the prefetch cursor advanced over them. */
AI const char *tile_body(const nchwc_tile *t, const int na, const int mode,
                         const float *const q[MAXA], float *out, const char *pf,
                         const int calls) {
    const float *q0 = q[0], *q1 = na > 1 ? q[1] : q0, *q2 = na > 2 ? q[2] : q0;
    const float *q3 = na > 3 ? q[3] : q0, *q4 = na > 4 ? q[4] : q0, *q5 = na > 5 ? q[5] : q0;
    const float *q6 = na > 6 ? q[6] : q0, *q7 = na > 7 ? q[7] : q0, *q8 = na > 8 ? q[8] : q0;
    const float *q9 = na > 9 ? q[9] : q0, *q10 = na > 10 ? q[10] : q0;
    const float *q11 = na > 11 ? q[11] : q0;
    const char *const pf_end = (const char *)t->pf_end;
    const int64_t pf_n = t->pf_n * calls, obs = t->obs;
#define PREFETCH()                                                                             \
    for (int64_t q_ = 0; q_ < pf_n && pf < pf_end; q_++, pf += 64)                             \
    _mm_prefetch(pf, _MM_HINT_T1)
    const __m512 b = _mm512_loadu_ps(t->bias);
    __m512 a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b;
    __m512 a6 = b, a7 = b, a8 = b, a9 = b, a10 = b, a11 = b;
    if (t->accumulate) { /* the partial sums of the blocks before b0 */
#define LOADA(j)                                                                               \
    if (na > (j))                                                                              \
        a##j = load_px(out, obs, j);
        LOADA(0) LOADA(1) LOADA(2) LOADA(3) LOADA(4) LOADA(5)
        LOADA(6) LOADA(7) LOADA(8) LOADA(9) LOADA(10) LOADA(11)
#undef LOADA
    }
    const int64_t oct = 16;
#include "kernels/optimized/conv_nchwc_taps.inc"
#undef PREFETCH
    if (t->act) { /* max/min return their second operand when either is NaN: NaN passes */
        const __m512 lo = _mm512_set1_ps(t->lo), hi = _mm512_set1_ps(t->hi);
#define CLAMP(j)                                                                               \
    if (na > (j))                                                                              \
        a##j = _mm512_min_ps(hi, _mm512_max_ps(lo, a##j));
        CLAMP(0) CLAMP(1) CLAMP(2) CLAMP(3) CLAMP(4) CLAMP(5)
        CLAMP(6) CLAMP(7) CLAMP(8) CLAMP(9) CLAMP(10) CLAMP(11)
#undef CLAMP
    }
#define STORE(j)                                                                               \
    if (na > (j))                                                                              \
        store_px(out, obs, j, a##j);
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
    STORE(6) STORE(7) STORE(8) STORE(9) STORE(10) STORE(11)
#undef STORE
    return pf;
}
#undef LANE
#undef FMA1

/* The tile's reps repetitions of np pixels, two at a time (2 np accumulators), an odd last one
 * alone. */
AI void tile_impl(const nchwc_tile *t, const int np, const int mode) {
    const float *q[MAXA];
    for (int j = 0; j < np; j++)
        q[j] = t->px[j];
    const int64_t reps = t->reps > 1 ? t->reps : 1, pstep = t->pstep;
    float *out = t->out;
    const char *pf = (const char *)t->pf;
    int64_t r = 0;
    for (; r + 2 <= reps; r += 2, out += 2 * 8 * np) {
        for (int j = 0; j < np; j++) {
            q[np + j] = q[j] + pstep;
        }
        pf = tile_body(t, 2 * np, mode, q, out, pf, 2);
        for (int j = 0; j < np; j++)
            q[j] += 2 * pstep;
    }
    if (r < reps)
        tile_body(t, np, mode, q, out, pf, 1);
}

#define INST(np, mode)                                                                         \
    static void tile_##np##_##mode(const nchwc_tile *t) { tile_impl(t, np, mode); }
#define INST_NP(mode)                                                                          \
    INST(1, mode) INST(2, mode) INST(3, mode) INST(4, mode) INST(5, mode) INST(6, mode)
INST_NP(0)
INST_NP(1)
INST_NP(2)

#define ROW(mode)                                                                              \
    {tile_1_##mode, tile_2_##mode, tile_3_##mode, tile_4_##mode, tile_5_##mode, tile_6_##mode}
static const nchwc_tile_fn tiles[3][NCHWC_MR] = {ROW(0), ROW(1), ROW(2)};

void etch_nchwc_tile_avx512(const nchwc_tile *t) {
    if (t->oct != 16 || t->out_nchw) {
        etch_nchwc_tile_avx2(t);
        return;
    }
    const int mode = t->ls != 1 ? IN_NCHW : (t->cb_last == 8 ? IN_BLK : IN_RUN);
    tiles[mode][t->np - 1](t);
}
