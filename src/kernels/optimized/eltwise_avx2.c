/* AVX2 + FMA row functions (eltwise_simd.h over 8-lane vectors). */
#include <immintrin.h>
#include <stdint.h>

#define VF __m256
#define VI __m256i
#define VM __m256
#define VL 8
#define VEC_TABLE etch_opt_vec_avx2
#define VEC_NAME "avx2"

#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vset1(x) _mm256_set1_ps(x)
#define vadd _mm256_add_ps
#define vsub _mm256_sub_ps
#define vmul _mm256_mul_ps
#define vdiv _mm256_div_ps
#define vfma _mm256_fmadd_ps
#define vmaxn _mm256_max_ps /* returns the second operand when either is NaN */
#define vminn _mm256_min_ps
#define vsqrt _mm256_sqrt_ps
#define vabs(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x)
#define vcopysign(m, s)                                                                      \
    _mm256_or_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), m),                                 \
                 _mm256_and_ps(_mm256_set1_ps(-0.0f), s))
#define vround(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vcvt _mm256_cvtps_epi32
#define vi_half(k) _mm256_srai_epi32(k, 1)
#define vi_sub _mm256_sub_epi32
#define vpow2(k)                                                                             \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23))
#define vlt(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define vblend(m, a, b) _mm256_blendv_ps(a, b, m)

static inline __m256 vmask8(const uint8_t *p) {
    const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(m, _mm256_setzero_si256()));
}
static inline float vhsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float vhmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#include "kernels/optimized/eltwise_simd.h"
