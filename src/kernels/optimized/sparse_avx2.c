/* 2:4 sparse float32 tiles, AVX2 + FMA (sparse.h): 8 output columns a vector. A group's 4
 * inputs x[4g..4g+3] are broadcast to both 128-bit halves and each column's kept input
 * picked with vpermilps (which reads the low 2 bits of each index: the 2-bit indices as
 * they are), so there is no gather; up to 4 rows share each weight load. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/sparse.h"

#define SP_R 4 /* rows a pass */

static inline __m256 group_x(const float *x) {
    return _mm256_broadcast_ps((const __m128 *)(const void *)x);
}

void etch_sp24_tiles_avx2(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M, float *c,
                          int64_t ldc, int64_t t0, int64_t t1) {
    /* the last group may be shorter than 4: its x is read from a padded copy */
    const int64_t tail = w->K % 4, gfull = w->K / 4;
    for (int64_t t = t0; t < t1; t++) {
        const int nc = (int)(w->N - t * SP_NT < SP_NT ? w->N - t * SP_NT : SP_NT);
        const float *vt = w->vals + t * w->G * 2 * SP_NT;
        const uint8_t *it = w->idx + t * w->G * SP_NT;
        for (int64_t m0 = 0; m0 < M; m0 += SP_R) {
            const int R = (int)(M - m0 < SP_R ? M - m0 : SP_R);
            __m256 acc[SP_R][2];
            for (int r = 0; r < SP_R; r++)
                acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int64_t g = 0; g < w->G; g++) {
                const __m256i b = _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(it + g * SP_NT)));
                const __m256i i1 = _mm256_srli_epi32(b, 2);
                const __m256 v0 = _mm256_loadu_ps(vt + g * 2 * SP_NT);
                const __m256 v1 = _mm256_loadu_ps(vt + g * 2 * SP_NT + SP_NT);
                for (int r = 0; r < R; r++) {
                    const float *xr = x + (m0 + r) * ldx + 4 * g;
                    float pad[4] = {0, 0, 0, 0};
                    if (g == gfull && tail) {
                        memcpy(pad, xr, (size_t)tail * sizeof(float));
                        xr = pad;
                    }
                    const __m256 xg = group_x(xr);
                    acc[r][0] = _mm256_fmadd_ps(v0, _mm256_permutevar_ps(xg, b), acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(v1, _mm256_permutevar_ps(xg, i1), acc[r][1]);
                }
            }
            for (int r = 0; r < R; r++) {
                float o[SP_NT];
                _mm256_storeu_ps(o, _mm256_add_ps(acc[r][0], acc[r][1]));
                memcpy(c + (m0 + r) * ldc + t * SP_NT, o, (size_t)nc * sizeof(float));
            }
        }
    }
}
