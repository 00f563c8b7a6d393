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
                        int64_t rs, float scale) {
    const int64_t hv = hd & ~(int64_t)7;
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *kr = k + j * rs;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t d = 0; d < hv; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + d), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + rs + d), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 2 * rs + d), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 3 * rs + d), a3);
            a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 4 * rs + d), a4);
            a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 5 * rs + d), a5);
            a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 6 * rs + d), a6);
            a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + 7 * rs + d), a7);
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
                    t[i] += q[d] * kr[i * rs + d];
            r = _mm256_loadu_ps(t);
        }
        _mm256_storeu_ps(s + j, _mm256_mul_ps(r, vs));
    }
    for (; j < n; j++) {
        const float *kr = k + j * rs;
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
static void accum_avx2(float *acc, const float *p, const float *v, int64_t n, int64_t hd,
                       int64_t rs) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
        for (int64_t j = 0; j < n; j++) {
            const __m256 pj = _mm256_set1_ps(p[j]);
            const float *vr = v + j * rs + d;
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
            a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * rs + d), a0);
            a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * rs + d + 8), a1);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int64_t j = 0; j < n; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * rs + d), a);
        _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += p[j] * v[j * rs + d];
        acc[d] = a;
    }
}

/* Two query rows over four keys at a time: each key load feeds both rows; the eight sums
 * (row 0's four keys, row 1's four) are reduced as in scores_avx2. */
static void scores2_avx2(float *s0, float *s1, const float *q0, const float *q1,
                         const float *k, int64_t n, int64_t hd, int64_t rs, float scale) {
    const int64_t hv = hd & ~(int64_t)7;
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *kr = k + j * rs;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0,
               b3 = a0;
        for (int64_t d = 0; d < hv; d += 8) {
            const __m256 x = _mm256_loadu_ps(q0 + d), y = _mm256_loadu_ps(q1 + d);
            __m256 kv = _mm256_loadu_ps(kr + d);
            a0 = _mm256_fmadd_ps(x, kv, a0);
            b0 = _mm256_fmadd_ps(y, kv, b0);
            kv = _mm256_loadu_ps(kr + rs + d);
            a1 = _mm256_fmadd_ps(x, kv, a1);
            b1 = _mm256_fmadd_ps(y, kv, b1);
            kv = _mm256_loadu_ps(kr + 2 * rs + d);
            a2 = _mm256_fmadd_ps(x, kv, a2);
            b2 = _mm256_fmadd_ps(y, kv, b2);
            kv = _mm256_loadu_ps(kr + 3 * rs + d);
            a3 = _mm256_fmadd_ps(x, kv, a3);
            b3 = _mm256_fmadd_ps(y, kv, b3);
        }
        const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
        float t[8]; /* row 0's keys j .. j+3, then row 1's */
        _mm256_storeu_ps(t, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                          _mm256_permute2f128_ps(u0, u1, 0x31)));
        for (int i = 0; i < 4; i++) {
            for (int64_t d = hv; d < hd; d++) {
                t[i] += q0[d] * kr[i * rs + d];
                t[4 + i] += q1[d] * kr[i * rs + d];
            }
        }
        const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(t), vs);
        _mm_storeu_ps(s0 + j, _mm256_castps256_ps128(r));
        _mm_storeu_ps(s1 + j, _mm256_extractf128_ps(r, 1));
    }
    if (j < n) {
        scores_avx2(s0 + j, q0, k + j * rs, n - j, hd, rs, scale);
        scores_avx2(s1 + j, q1, k + j * rs, n - j, hd, rs, scale);
    }
}

/* Two rows of accumulators, 32 columns at a time in registers: each value load feeds both. */
static void accum2_avx2(float *acc0, float *acc1, const float *p0, const float *p1,
                        const float *v, int64_t n, int64_t hd, int64_t rs) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc0 + d), a1 = _mm256_loadu_ps(acc0 + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc0 + d + 16), a3 = _mm256_loadu_ps(acc0 + d + 24);
        __m256 b0 = _mm256_loadu_ps(acc1 + d), b1 = _mm256_loadu_ps(acc1 + d + 8);
        __m256 b2 = _mm256_loadu_ps(acc1 + d + 16), b3 = _mm256_loadu_ps(acc1 + d + 24);
        for (int64_t j = 0; j < n; j++) {
            const __m256 x = _mm256_set1_ps(p0[j]), y = _mm256_set1_ps(p1[j]);
            const float *vr = v + j * rs + d;
            __m256 w = _mm256_loadu_ps(vr);
            a0 = _mm256_fmadd_ps(x, w, a0);
            b0 = _mm256_fmadd_ps(y, w, b0);
            w = _mm256_loadu_ps(vr + 8);
            a1 = _mm256_fmadd_ps(x, w, a1);
            b1 = _mm256_fmadd_ps(y, w, b1);
            w = _mm256_loadu_ps(vr + 16);
            a2 = _mm256_fmadd_ps(x, w, a2);
            b2 = _mm256_fmadd_ps(y, w, b2);
            w = _mm256_loadu_ps(vr + 24);
            a3 = _mm256_fmadd_ps(x, w, a3);
            b3 = _mm256_fmadd_ps(y, w, b3);
        }
        _mm256_storeu_ps(acc0 + d, a0);
        _mm256_storeu_ps(acc0 + d + 8, a1);
        _mm256_storeu_ps(acc0 + d + 16, a2);
        _mm256_storeu_ps(acc0 + d + 24, a3);
        _mm256_storeu_ps(acc1 + d, b0);
        _mm256_storeu_ps(acc1 + d + 8, b1);
        _mm256_storeu_ps(acc1 + d + 16, b2);
        _mm256_storeu_ps(acc1 + d + 24, b3);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 a = _mm256_loadu_ps(acc0 + d), b = _mm256_loadu_ps(acc1 + d);
        for (int64_t j = 0; j < n; j++) {
            const __m256 w = _mm256_loadu_ps(v + j * rs + d);
            a = _mm256_fmadd_ps(_mm256_set1_ps(p0[j]), w, a);
            b = _mm256_fmadd_ps(_mm256_set1_ps(p1[j]), w, b);
        }
        _mm256_storeu_ps(acc0 + d, a);
        _mm256_storeu_ps(acc1 + d, b);
    }
    for (; d < hd; d++) {
        float a = acc0[d], b = acc1[d];
        for (int64_t j = 0; j < n; j++) {
            a += p0[j] * v[j * rs + d];
            b += p1[j] * v[j * rs + d];
        }
        acc0[d] = a;
        acc1[d] = b;
    }
}

/* Eight int8 values minus a zero point, as floats (the difference exact in int32). */
static inline __m256 q8_load8(const int8_t *p, __m256i z) {
    const __m256i w = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(w, z));
}

/* Four keys at a time share each load of q; their sums are reduced together; the tail of
 * hd % 8 is scalar. */
static void scores_q8_avx2(float *s, const float *q, const int8_t *k, const float *ks,
                           const int8_t *kz, int64_t n, int64_t hd, float scale) {
    const int64_t hv = hd & ~(int64_t)7;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int8_t *kr = k + j * hd;
        const __m256i z0 = _mm256_set1_epi32(kz[j]), z1 = _mm256_set1_epi32(kz[j + 1]);
        const __m256i z2 = _mm256_set1_epi32(kz[j + 2]), z3 = _mm256_set1_epi32(kz[j + 3]);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t d = 0; d < hv; d += 8) {
            const __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, q8_load8(kr + d, z0), a0);
            a1 = _mm256_fmadd_ps(qv, q8_load8(kr + hd + d, z1), a1);
            a2 = _mm256_fmadd_ps(qv, q8_load8(kr + 2 * hd + d, z2), a2);
            a3 = _mm256_fmadd_ps(qv, q8_load8(kr + 3 * hd + d, z3), a3);
        }
        const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        float t[4];
        _mm_storeu_ps(t, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
        for (int i = 0; i < 4; i++) {
            const int32_t z = kz[j + i];
            for (int64_t d = hv; d < hd; d++)
                t[i] += q[d] * (float)((int32_t)kr[i * hd + d] - z);
            s[j + i] = t[i] * (ks[j + i] * scale);
        }
    }
    for (; j < n; j++) {
        const int8_t *kr = k + j * hd;
        const __m256i z = _mm256_set1_epi32(kz[j]);
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < hv; d += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), q8_load8(kr + d, z), a);
        float r = hsum8(a);
        for (int64_t d = hv; d < hd; d++)
            r += q[d] * (float)((int32_t)kr[d] - (int32_t)kz[j]);
        s[j] = r * (ks[j] * scale);
    }
}

/* acc kept in registers 32 floats at a time while the values stream past, each row scaled
 * by p[j] * vs[j]. */
static void accum_q8_avx2(float *acc, const float *p, const int8_t *v, const float *vs,
                          const int8_t *vz, int64_t n, int64_t hd) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
        for (int64_t j = 0; j < n; j++) {
            const __m256 w = _mm256_set1_ps(p[j] * vs[j]);
            const __m256i z = _mm256_set1_epi32(vz[j]);
            const int8_t *vr = v + j * hd + d;
            a0 = _mm256_fmadd_ps(w, q8_load8(vr, z), a0);
            a1 = _mm256_fmadd_ps(w, q8_load8(vr + 8, z), a1);
            a2 = _mm256_fmadd_ps(w, q8_load8(vr + 16, z), a2);
            a3 = _mm256_fmadd_ps(w, q8_load8(vr + 24, z), a3);
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int64_t j = 0; j < n; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(p[j] * vs[j]),
                                q8_load8(v + j * hd + d, _mm256_set1_epi32(vz[j])), a);
        _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; d++) {
        float a = acc[d];
        for (int64_t j = 0; j < n; j++)
            a += (p[j] * vs[j]) * (float)((int32_t)v[j * hd + d] - (int32_t)vz[j]);
        acc[d] = a;
    }
}

const etch_attn_isa etch_attn_avx2 = {scores_avx2,    accum_avx2,   scores2_avx2,
                                      accum2_avx2,    scores_q8_avx2, accum_q8_avx2};
