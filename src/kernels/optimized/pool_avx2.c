/* max_pool2d rows, AVX2: 8 interior output columns at once (dilation 1, stride 1 or 2), each
 * lane walking its window in the portable kernel's order and keeping the first maximum or the
 * last NaN, with its index in 32-bit lanes (the caller checks H * W < 2^31). */
#include <immintrin.h>

#include "kernels/optimized/opt_conv.h"

static inline __m256 even8(__m256 a, __m256 b) {
    __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

int64_t etch_opt_maxpool_cols_avx2(const etch_maxpool_row *a, int64_t ow0, int64_t ow1) {
    const int64_t sw = a->sw, W = a->W;
    const __m256i lane = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32((int)sw));
    int64_t ow = ow0;
    for (; ow + 8 <= ow1; ow += 8) {
        const int64_t c0 = ow * sw - a->pw; /* first window column of lane 0 */
        /* stride 2 reads 16 columns from c0 + kw': the last one must exist */
        if (sw == 2 && c0 + (a->kw - 1) + 15 >= W)
            break;
        __m256 best = _mm256_set1_ps(-__builtin_inff());
        __m256i bidx = _mm256_add_epi32(_mm256_set1_epi32((int)(a->h0 * W + c0)), lane);
        for (int64_t ih = a->h0; ih < a->h1; ih++) {
            const float *row = a->plane + ih * W + c0;
            for (int64_t k = 0; k < a->kw; k++) {
                __m256 v = sw == 1 ? _mm256_loadu_ps(row + k)
                                   : even8(_mm256_loadu_ps(row + k), _mm256_loadu_ps(row + k + 8));
                __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ),
                                           _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                __m256i cur =
                    _mm256_add_epi32(_mm256_set1_epi32((int)(ih * W + c0 + k)), lane);
                best = _mm256_blendv_ps(best, v, take);
                bidx = _mm256_blendv_epi8(bidx, cur, _mm256_castps_si256(take));
            }
        }
        _mm256_storeu_ps(a->out + ow, best);
        _mm256_storeu_si256((__m256i *)(a->idx + ow),
                            _mm256_cvtepi32_epi64(_mm256_castsi256_si128(bidx)));
        _mm256_storeu_si256((__m256i *)(a->idx + ow + 4),
                            _mm256_cvtepi32_epi64(_mm256_extracti128_si256(bidx, 1)));
    }
    return ow;
}
