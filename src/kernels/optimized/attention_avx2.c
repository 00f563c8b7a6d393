/* AVX2+FMA block functions of the optimized attention (see opt_attention.h). */
#include <immintrin.h>

#include "kernels/optimized/opt_attention.h"

static inline float hsum8(__m256 x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight keys at a time share each load of q; their eight sums are reduced together (two
 * rounds of hadd and one cross-lane add); the tail of hd % 8 is scalar. */
static void scores_avx2(float *s, const float *q, const float *k, int64_t n, int64_t hd,
                        float scale) {
    const int64_t hv = hd & ~(int64_t)7;
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *kr = k + j * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t d = 0; d < hv; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + d), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + hd + d), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 2 * hd + d), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 3 * hd + d), a3);
            a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 4 * hd + d), a4);
            a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 5 * hd + d), a5);
            a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 6 * hd + d), a6);
            a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 7 * hd + d), a7);
        }
        const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
        __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                 _mm256_permute2f128_ps(u0, u1, 0x31));
        if (hv < hd) {
            float t[8];
            _mm256_storeu_ps(t, r);
            for (int i = 0; i < 8; i++)
                for (int64_t d = hv; d < hd; d++)
                    t[i] += q[d] * kr[i * hd + d];
            r = _mm256_loadu_ps(t);
        }
        _mm256_storeu_ps(s + j, _mm256_mul_ps(r, vs));
    }
    for (; j < n; j++) {
        const float *kr = k + j * hd;
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < hv; d += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kr + d), a);
        float r = hsum8(a);
        for (int64_t d = hv; d < hd; d++)
            r += q[d] * kr[d];
        s[j] = r * scale;
    }
}

/* acc kept in registers 32 floats at a time while the keys stream past. */
static void accum_avx2(float *acc, const float *p, const float *v, int64_t n, int64_t hd) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
        for (int64_t j = 0; j < n; j++) {
            const __m256 pj = _mm256_set1_ps(p[j]);
            const float *vr = v + j * hd + d;
            a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr), a0);
            a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8), a1);
            a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 16), a2);
            a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 24), a3);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d + 16 <= hd; d += 16) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        for (int64_t j = 0; j < n; j++) {
            const __m256 pj = _mm256_set1_ps(p[j]);
            a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * hd + d), a0);
            a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * hd + d + 8), a1);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int64_t j = 0; j < n; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * hd + d), a);
        _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += p[j] * v[j * hd + d];
        acc[d] = a;
    }
}

const etch_attn_isa etch_attn_avx2 = {scores_avx2, accum_avx2};
