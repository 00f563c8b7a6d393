/* Depthwise 3x3 convolution, padding 1, AVX-512: blocks of 16 interior output columns (two at
 * a time), the last one overlapping the previous when the range is not a whole number of
 * blocks (shorter ranges go to the AVX2 code); stride 2 splits 32 input columns into even and
 * odd lanes. */
#include <immintrin.h>

#include "kernels/optimized/opt_conv.h"

/* the three input vectors of kernel row kh for out[ow, ow + 16) */
static inline void load16(const etch_dw3x3_row *a, const float *r, int64_t ow, __m512 *x) {
    if (a->stride == 1) {
        const float *p = r + ow - 1;
        x[0] = _mm512_loadu_ps(p);
        x[1] = _mm512_loadu_ps(p + 1);
        x[2] = _mm512_loadu_ps(p + 2);
    } else { /* output ow reads input columns 2*ow - 1, 2*ow, 2*ow + 1 */
        const __m512i ev =
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i od =
            _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        const float *p = r + 2 * ow;
        __m512 m0 = _mm512_loadu_ps(p), m1 = _mm512_loadu_ps(p + 16);
        x[0] = _mm512_permutex2var_ps(_mm512_loadu_ps(p - 2), od, _mm512_loadu_ps(p + 14));
        x[1] = _mm512_permutex2var_ps(m0, ev, m1);
        x[2] = _mm512_permutex2var_ps(m0, od, m1);
    }
}

/* out[ow, ow + 16 * NB) with NB independent accumulators (same per-element order) */
#define DW_BLOCKS16(NB)                                                                      \
    static inline void blocks16_##NB(const etch_dw3x3_row *a, int64_t ow) {                 \
        __m512 acc[NB];                                                                      \
        for (int b = 0; b < NB; b++)                                                         \
            acc[b] = _mm512_set1_ps(a->bias);                                                \
        for (int kh = 0; kh < 3; kh++) {                                                     \
            const float *r = a->r[kh];                                                       \
            if (!r)                                                                          \
                continue;                                                                    \
            const __m512 w0 = _mm512_set1_ps(a->w[kh * 3 + 0]),                              \
                         w1 = _mm512_set1_ps(a->w[kh * 3 + 1]),                              \
                         w2 = _mm512_set1_ps(a->w[kh * 3 + 2]);                              \
            for (int b = 0; b < NB; b++) {                                                   \
                __m512 x[3];                                                                 \
                load16(a, r, ow + 16 * b, x);                                                \
                acc[b] = _mm512_fmadd_ps(w0, x[0], acc[b]);                                  \
                acc[b] = _mm512_fmadd_ps(w1, x[1], acc[b]);                                  \
                acc[b] = _mm512_fmadd_ps(w2, x[2], acc[b]);                                  \
            }                                                                                \
        }                                                                                    \
        for (int b = 0; b < NB; b++)                                                         \
            _mm512_storeu_ps(a->out + ow + 16 * b, acc[b]);                                  \
    }
DW_BLOCKS16(1)
DW_BLOCKS16(2)

int64_t etch_opt_dw3x3_cols_avx512(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    if (ow1 - ow0 < 16)
        return etch_opt_dw3x3_cols_avx2(a, ow0, ow1);
    int64_t ow = ow0;
    for (; ow + 32 <= ow1; ow += 32)
        blocks16_2(a, ow);
    for (; ow + 16 <= ow1; ow += 16)
        blocks16_1(a, ow);
    if (ow < ow1)
        blocks16_1(a, ow1 - 16);
    return ow1;
}
