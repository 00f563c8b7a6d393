/* Depthwise 3x3 convolution, padding 1, AVX-512: blocks of 16 interior output columns (the
 * AVX2 code finishes the row); stride 2 splits 32 input columns into even and odd lanes. */
#include <immintrin.h>

#include "kernels/optimized/opt_conv.h"

int64_t etch_opt_dw3x3_cols_avx512(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    int64_t ow = ow0;
    const float *w = a->w;
    if (a->stride == 1) {
        for (; ow + 16 <= ow1; ow += 16) {
            __m512 acc = _mm512_set1_ps(a->bias);
            for (int kh = 0; kh < 3; kh++) {
                const float *r = a->r[kh];
                if (!r)
                    continue;
                const float *p = r + ow - 1;
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 0]), _mm512_loadu_ps(p), acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 1]), _mm512_loadu_ps(p + 1), acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 2]), _mm512_loadu_ps(p + 2), acc);
            }
            _mm512_storeu_ps(a->out + ow, acc);
        }
    } else {
        const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                             28, 30);
        const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                             29, 31);
        for (; ow + 16 <= ow1; ow += 16) {
            __m512 acc = _mm512_set1_ps(a->bias);
            for (int kh = 0; kh < 3; kh++) {
                const float *r = a->r[kh];
                if (!r)
                    continue;
                const float *p = r + 2 * ow;
                __m512 l0 = _mm512_loadu_ps(p - 2), l1 = _mm512_loadu_ps(p + 14);
                __m512 m0 = _mm512_loadu_ps(p), m1 = _mm512_loadu_ps(p + 16);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 0]),
                                      _mm512_permutex2var_ps(l0, od, l1), acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 1]),
                                      _mm512_permutex2var_ps(m0, ev, m1), acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[kh * 3 + 2]),
                                      _mm512_permutex2var_ps(m0, od, m1), acc);
            }
            _mm512_storeu_ps(a->out + ow, acc);
        }
    }
    return etch_opt_dw3x3_cols_avx2(a, ow, ow1);
}
