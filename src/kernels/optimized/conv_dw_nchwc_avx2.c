/* The channel-blocked row functions (nchwc.h: depthwise convolution, max pooling, the mean
 * over H and W) for AVX2 + FMA: one ymm register holds one pixel's 8 channels. The body is
 * nchwc_body.inc; this file defines its vocabulary. */
#include <immintrin.h>

#include "kernels/optimized/nchwc.h"

typedef __m256 v8f;
typedef __m256i v8i;
typedef struct {
    __m256d a, b; /* lanes 0-3, 4-7 */
} v8d;

static inline v8f v8_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v8_store(float *p, v8f x) { _mm256_storeu_ps(p, x); }
static inline v8f v8_set1(float x) { return _mm256_set1_ps(x); }
static inline v8f v8_fma(v8f a, v8f b, v8f c) { return _mm256_fmadd_ps(a, b, c); }
static inline v8f v8_add(v8f a, v8f b) { return _mm256_add_ps(a, b); }
static inline v8f v8_sub(v8f a, v8f b) { return _mm256_sub_ps(a, b); }
/* max_ps / min_ps return the second operand when either is NaN */
static inline v8f v8_maxn(v8f c, v8f x) { return _mm256_max_ps(c, x); }
static inline v8f v8_minn(v8f c, v8f x) { return _mm256_min_ps(c, x); }
static inline v8i v8i_set1(int32_t x) { return _mm256_set1_epi32(x); }
static inline void v8_maxsel(v8f v, v8i pos, v8f *best, v8i *idx) {
    const __m256 take =
        _mm256_or_ps(_mm256_cmp_ps(v, *best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    *best = _mm256_blendv_ps(*best, v, take);
    *idx = _mm256_blendv_epi8(*idx, pos, _mm256_castps_si256(take));
}
static inline void v8i_store64(int64_t *p, v8i x) {
    _mm256_storeu_si256((__m256i *)p, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(x)));
    _mm256_storeu_si256((__m256i *)(p + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(x, 1)));
}
static inline v8d v8d_zero(void) { return (v8d){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
static inline v8d v8d_addf(v8d s, v8f x) {
    s.a = _mm256_add_pd(s.a, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    s.b = _mm256_add_pd(s.b, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    return s;
}
static inline v8d v8d_add(v8d s, v8d t) {
    return (v8d){_mm256_add_pd(s.a, t.a), _mm256_add_pd(s.b, t.b)};
}
static inline void v8d_store(double *p, v8d x) {
    _mm256_storeu_pd(p, x.a);
    _mm256_storeu_pd(p + 4, x.b);
}

#define NCHWC_FN(name) nchwc_##name##_avx2
#define NCHWC_TABLE etch_opt_nchwc_rows_avx2
#include "kernels/optimized/nchwc_body.inc"
