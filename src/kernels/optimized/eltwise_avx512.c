/* AVX-512 (F/DQ/BW/VL) row functions (eltwise_simd.h over 16-lane vectors). */
#include <immintrin.h>
#include <stdint.h>

#define VF __m512
#define VI __m512i
#define VM __mmask16
#define VL 16
#define VEC_TABLE etch_opt_vec_avx512
#define VEC_NAME "avx512"

#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps(p, v)
#define vset1(x) _mm512_set1_ps(x)
#define vadd _mm512_add_ps
#define vsub _mm512_sub_ps
#define vmul _mm512_mul_ps
#define vdiv _mm512_div_ps
#define vfma _mm512_fmadd_ps
#define vmaxn _mm512_max_ps /* returns the second operand when either is NaN */
#define vminn _mm512_min_ps
#define vsqrt _mm512_sqrt_ps
#define vabs(x) _mm512_abs_ps(x)
#define vcopysign(m, s)                                                                      \
    _mm512_or_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), m),                                 \
                 _mm512_and_ps(_mm512_set1_ps(-0.0f), s))
#define vround(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vcvt _mm512_cvtps_epi32
#define vi_half(k) _mm512_srai_epi32(k, 1)
#define vi_sub _mm512_sub_epi32
#define vpow2(k)                                                                             \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23))
#define vlt(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define vblend(m, a, b) _mm512_mask_blend_ps(m, a, b)

static inline __mmask16 vmask8(const uint8_t *p) {
    return _mm_test_epi8_mask(_mm_loadu_si128((const __m128i *)(const void *)p),
                              _mm_set1_epi8(-1));
}
static inline float vhsum(__m512 v) { return _mm512_reduce_add_ps(v); }
static inline float vhmax(__m512 v) { return _mm512_reduce_max_ps(v); }

#include "kernels/optimized/eltwise_simd.h"
