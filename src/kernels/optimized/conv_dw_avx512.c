/* Depthwise 3x3 convolution, padding 1, AVX-512: blocks of 16 interior output columns, the
 * last one overlapping the previous when the range is not a whole number of blocks (shorter
 * ranges go to the AVX2 code); stride 2 splits 32 input columns into even and odd lanes. */
#include <immintrin.h>

#include "kernels/optimized/opt_conv.h"

/* out[ow, ow + 16) */
static inline void block16(const etch_dw3x3_row *a, int64_t ow) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const float *w = a->w;
    __m512 acc = _mm512_set1_ps(a->bias);
    for (int kh = 0; kh < 3; kh++) {
        const float *r = a->r[kh];
        if (!r)
            continue;
        __m512 x0, x1, x2;
        if (a->stride == 1) {
            const float *p = r + ow - 1;
            x0 = _mm512_loadu_ps(p);
            x1 = _mm512_loadu_ps(p + 1);
            x2 = _mm512_loadu_ps(p + 2);
        } else { /* output ow reads input columns 2*ow - 1, 2*ow, 2*ow + 1 */
            const float *p = r + 2 * ow;
            __m512 m0 = _mm512_loadu_ps(p), m1 = _mm512_loadu_ps(p + 16);
            x0 = _mm512_permutex2var_ps(_mm512_loadu_ps(p - 2), od, _mm512_loadu_ps(p + 14));
            x1 = _mm512_permutex2var_ps(m0, ev, m1);
            x2 = _mm512_permutex2var_ps(m0, od, m1);
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 0]), x0, acc);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 1]), x1, acc);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 2]), x2, acc);
    }
    _mm512_storeu_ps(a->out + ow, acc);
}

int64_t etch_opt_dw3x3_cols_avx512(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    if (ow1 - ow0 < 16)
        return etch_opt_dw3x3_cols_avx2(a, ow0, ow1);
    int64_t ow = ow0;
    for (; ow + 16 <= ow1; ow += 16)
        block16(a, ow);
    if (ow < ow1)
        block16(a, ow1 - 16);
    return ow1;
}
