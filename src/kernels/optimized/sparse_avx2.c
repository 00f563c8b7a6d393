/* 2:4 sparse float32 tiles, AVX2 + FMA (sparse.h): 8 output columns a vector, the two kept
 * weights of each column's group multiplied by x gathered at their 2-bit indices. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/sparse.h"

void etch_sp24_tiles_avx2(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M, float *c,
                          int64_t ldc, int64_t t0, int64_t t1) {
    const __m256i three = _mm256_set1_epi32(3);
    for (int64_t t = t0; t < t1; t++) {
        const int nc = (int)(w->N - t * SP_NT < SP_NT ? w->N - t * SP_NT : SP_NT);
        const float *vt = w->vals + t * w->G * 2 * SP_NT;
        const uint8_t *it = w->idx + t * w->G * SP_NT;
        int64_t m = 0;
        for (; m + 2 <= M; m += 2) { /* two rows share the weight loads */
            const float *x0 = x + m * ldx, *x1 = x0 + ldx;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
            for (int64_t g = 0; g < w->G; g++) {
                const __m256i b = _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(it + g * SP_NT)));
                const __m256i i0 = _mm256_and_si256(b, three), i1 = _mm256_srli_epi32(b, 2);
                const __m256 v0 = _mm256_loadu_ps(vt + g * 2 * SP_NT);
                const __m256 v1 = _mm256_loadu_ps(vt + g * 2 * SP_NT + SP_NT);
                a0 = _mm256_fmadd_ps(v0, _mm256_i32gather_ps(x0 + 4 * g, i0, 4), a0);
                a1 = _mm256_fmadd_ps(v1, _mm256_i32gather_ps(x0 + 4 * g, i1, 4), a1);
                b0 = _mm256_fmadd_ps(v0, _mm256_i32gather_ps(x1 + 4 * g, i0, 4), b0);
                b1 = _mm256_fmadd_ps(v1, _mm256_i32gather_ps(x1 + 4 * g, i1, 4), b1);
            }
            float r[2][SP_NT];
            _mm256_storeu_ps(r[0], _mm256_add_ps(a0, a1));
            _mm256_storeu_ps(r[1], _mm256_add_ps(b0, b1));
            memcpy(c + m * ldc + t * SP_NT, r[0], (size_t)nc * sizeof(float));
            memcpy(c + (m + 1) * ldc + t * SP_NT, r[1], (size_t)nc * sizeof(float));
        }
        for (; m < M; m++) {
            const float *x0 = x + m * ldx;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            for (int64_t g = 0; g < w->G; g++) {
                const __m256i b = _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(it + g * SP_NT)));
                const __m256i i0 = _mm256_and_si256(b, three), i1 = _mm256_srli_epi32(b, 2);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(vt + g * 2 * SP_NT),
                                     _mm256_i32gather_ps(x0 + 4 * g, i0, 4), a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(vt + g * 2 * SP_NT + SP_NT),
                                     _mm256_i32gather_ps(x0 + 4 * g, i1, 4), a1);
            }
            float r[SP_NT];
            _mm256_storeu_ps(r, _mm256_add_ps(a0, a1));
            memcpy(c + m * ldc + t * SP_NT, r, (size_t)nc * sizeof(float));
        }
    }
}
