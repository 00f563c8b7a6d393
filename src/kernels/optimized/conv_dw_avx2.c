/* Depthwise 3x3 convolution, padding 1, AVX2 + FMA: blocks of 8 interior output columns (four
 * at a time, for independent FMA chains) or 4; stride 2 reads two vectors and splits even and
 * odd input columns. A range that is not a whole number of blocks ends with one block
 * overlapping the previous one (it recomputes the same values), so only ranges shorter than 4
 * columns are left to the caller. */
#include <immintrin.h>

#include "kernels/optimized/opt_conv.h"

/* lanes 0, 2, 4, ... (even) or 1, 3, 5, ... (odd) of the 16 floats a:b */
static inline __m256 even8(__m256 a, __m256 b) {
    __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
static inline __m256 odd8(__m256 a, __m256 b) {
    __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* the three input vectors of kernel row kh for out[ow, ow + 8) */
static inline void load8(const etch_dw3x3_row *a, const float *r, int64_t ow, __m256 *x) {
    if (a->stride == 1) {
        const float *p = r + ow - 1;
        x[0] = _mm256_loadu_ps(p);
        x[1] = _mm256_loadu_ps(p + 1);
        x[2] = _mm256_loadu_ps(p + 2);
    } else { /* output ow reads input columns 2*ow - 1, 2*ow, 2*ow + 1 */
        const float *p = r + 2 * ow;
        __m256 m0 = _mm256_loadu_ps(p), m1 = _mm256_loadu_ps(p + 8);
        x[0] = odd8(_mm256_loadu_ps(p - 2), _mm256_loadu_ps(p + 6));
        x[1] = even8(m0, m1);
        x[2] = odd8(m0, m1);
    }
}

/* out[ow, ow + 8 * NB): NB independent accumulators (the FMA latency chain of one block is
 * the bottleneck otherwise); every element sums in the same order whatever NB is */
#define DW_BLOCKS8(NB)                                                                       \
    static inline void blocks8_##NB(const etch_dw3x3_row *a, int64_t ow) {                  \
        __m256 acc[NB];                                                                      \
        for (int b = 0; b < NB; b++)                                                         \
            acc[b] = _mm256_set1_ps(a->bias);                                                \
        for (int kh = 0; kh < 3; kh++) {                                                     \
            const float *r = a->r[kh];                                                       \
            if (!r)                                                                          \
                continue;                                                                    \
            const __m256 w0 = _mm256_set1_ps(a->w[kh * 3 + 0]),                              \
                         w1 = _mm256_set1_ps(a->w[kh * 3 + 1]),                              \
                         w2 = _mm256_set1_ps(a->w[kh * 3 + 2]);                              \
            for (int b = 0; b < NB; b++) {                                                   \
                __m256 x[3];                                                                 \
                load8(a, r, ow + 8 * b, x);                                                  \
                acc[b] = _mm256_fmadd_ps(w0, x[0], acc[b]);                                  \
                acc[b] = _mm256_fmadd_ps(w1, x[1], acc[b]);                                  \
                acc[b] = _mm256_fmadd_ps(w2, x[2], acc[b]);                                  \
            }                                                                                \
        }                                                                                    \
        for (int b = 0; b < NB; b++)                                                         \
            _mm256_storeu_ps(a->out + ow + 8 * b, acc[b]);                                   \
    }
DW_BLOCKS8(1)
DW_BLOCKS8(4)

/* out[ow, ow + 4) */
static inline void block4(const etch_dw3x3_row *a, int64_t ow) {
    const float *w = a->w;
    __m128 acc = _mm_set1_ps(a->bias);
    for (int kh = 0; kh < 3; kh++) {
        const float *r = a->r[kh];
        if (!r)
            continue;
        __m128 x0, x1, x2;
        if (a->stride == 1) {
            const float *p = r + ow - 1;
            x0 = _mm_loadu_ps(p);
            x1 = _mm_loadu_ps(p + 1);
            x2 = _mm_loadu_ps(p + 2);
        } else {
            const float *p = r + 2 * ow;
            __m128 l0 = _mm_loadu_ps(p - 2), l1 = _mm_loadu_ps(p + 2);
            __m128 m0 = _mm_loadu_ps(p), m1 = _mm_loadu_ps(p + 4);
            x0 = _mm_shuffle_ps(l0, l1, _MM_SHUFFLE(3, 1, 3, 1));
            x1 = _mm_shuffle_ps(m0, m1, _MM_SHUFFLE(2, 0, 2, 0));
            x2 = _mm_shuffle_ps(m0, m1, _MM_SHUFFLE(3, 1, 3, 1));
        }
        acc = _mm_fmadd_ps(_mm_set1_ps(w[kh * 3 + 0]), x0, acc);
        acc = _mm_fmadd_ps(_mm_set1_ps(w[kh * 3 + 1]), x1, acc);
        acc = _mm_fmadd_ps(_mm_set1_ps(w[kh * 3 + 2]), x2, acc);
    }
    _mm_storeu_ps(a->out + ow, acc);
}

int64_t etch_opt_dw3x3_cols_avx2(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    int64_t ow = ow0;
    if (ow1 - ow0 >= 8) {
        for (; ow + 32 <= ow1; ow += 32)
            blocks8_4(a, ow);
        for (; ow + 8 <= ow1; ow += 8)
            blocks8_1(a, ow);
        if (ow < ow1)
            blocks8_1(a, ow1 - 8);
        return ow1;
    }
    if (ow1 - ow0 >= 4) {
        block4(a, ow0);
        if (ow0 + 4 < ow1)
            block4(a, ow1 - 4);
        return ow1;
    }
    return ow0;
}
