/* AVX-512 inner loops of the integer kernels (see quant.h): int4 float activations with a
 * 32-k chunk in one zmm per nibble half; 8da4w on 256-bit vectors (vpdpwssd with VNNI,
 * vpmaddwd + add without); the int8 GEMM microkernel 8 x 16: vpdpbusd with VNNI (uint8 x
 * int8, 4 k per lane, exact in int32), else bytes widened to int16 and vpmaddwd. VNNI is
 * detected at run time (etch_quant_features): Skylake-X (the emulated CPU of
 * tests/cross/run_avx512.sh) runs the widening variants. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/quant.h"

#define VNNI_FN __attribute__((target("avx512vnni")))

/* sum_g scale_g * (8 + zero_g) * sum_g(x): the zero-point correction of a weight row, over
 * the groups at once (per-group float sums xs). */
static inline float q4_corr(const float *sc, const float *zr, const float *xs, int64_t ng) {
    __m512 c = _mm512_setzero_ps();
    const __m512 eight = _mm512_set1_ps(8.0f);
    for (int64_t g = 0; g < ng; g += 16) {
        const __mmask16 k = ng - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ng - g)) - 1);
        __m512 f = _mm512_maskz_loadu_ps(k, sc + g);
        if (zr)
            f = _mm512_mul_ps(f, _mm512_add_ps(eight, _mm512_maskz_loadu_ps(k, zr + g)));
        else
            f = _mm512_mul_ps(f, eight);
        c = _mm512_fmadd_ps(f, _mm512_maskz_loadu_ps(k, xs + g), c);
    }
    return _mm512_reduce_add_ps(c);
}

static inline __attribute__((always_inline)) void q4f_block(const etch_q4_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    const __m512i m15 = _mm512_set1_epi32(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        const float *sc = w->scales + n * ng;
        __m512 acc[ETCH_Q4_MR];
        float accs[ETCH_Q4_MR];
        for (int i = 0; i < MM; i++) {
            acc[i] = _mm512_setzero_ps();
            accs[i] = 0.0f;
        }
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *b = row + g * G / 2;
            __m512 d[ETCH_Q4_MR];
            for (int i = 0; i < MM; i++)
                d[i] = _mm512_setzero_ps();
            for (int64_t c = 0; c < full; c += 32) {
                const __m512i v =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + c / 2)));
                const __m512 h = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
                const __m512 l = _mm512_cvtepi32_ps(_mm512_and_si512(v, m15));
                for (int i = 0; i < MM; i++) {
                    const float *x = j->xd + i * K + g * G + c;
                    d[i] = _mm512_fmadd_ps(h, _mm512_loadu_ps(x), d[i]);
                    d[i] = _mm512_fmadd_ps(l, _mm512_loadu_ps(x + 16), d[i]);
                }
            }
            const __m512 vs = _mm512_set1_ps(sc[g]);
            for (int i = 0; i < MM; i++)
                acc[i] = _mm512_fmadd_ps(d[i], vs, acc[i]);
            if (full < G)
                for (int i = 0; i < MM; i++) {
                    const float *x = j->xd + i * K + g * G;
                    float r = 0.0f;
                    for (int64_t e = full; e < G; e += 2)
                        r += (float)(b[e / 2] >> 4) * x[e] + (float)(b[e / 2] & 15) * x[e + 1];
                    accs[i] += sc[g] * r;
                }
        }
        const float *zr = w->zeros ? w->zeros + n * ng : NULL;
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n - n0)] = _mm512_reduce_add_ps(acc[i]) + accs[i] -
                                            q4_corr(sc, zr, j->xsum + i * ng, ng);
    }
}

static void q4_f32_avx512(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4f_block(j, n0, n1, 1); break;
    case 2: q4f_block(j, n0, n1, 2); break;
    case 3: q4f_block(j, n0, n1, 3); break;
    default: q4f_block(j, n0, n1, 4); break;
    }
}

/* 8da4w: DOT(d, weights, activations) adds the pairwise int16 products into int32 lanes. */
#define Q4I_BLOCK(name, ATTR, DOT)                                                            \
    static inline __attribute__((always_inline)) ATTR void name(                              \
        const etch_q4_job *j, int64_t n0, int64_t n1, const int MM) {                          \
        const etch_q4_weights *w = j->w;                                                      \
        const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;                     \
        const __m256i m15 = _mm256_set1_epi16(15);                                            \
        for (int64_t n = n0; n < n1; n++) {                                                   \
            const uint8_t *row = w->data + n * (K / 2);                                       \
            __m256 acc[ETCH_Q4_MR];                                                           \
            float accs[ETCH_Q4_MR];                                                           \
            for (int i = 0; i < MM; i++) {                                                    \
                acc[i] = _mm256_setzero_ps();                                                 \
                accs[i] = 0.0f;                                                               \
            }                                                                                 \
            for (int64_t g = 0; g < ng; g++) {                                                \
                const uint8_t *b = row + g * G / 2;                                           \
                const float s = w->scales[n * ng + g];                                        \
                __m256i d[ETCH_Q4_MR];                                                        \
                for (int i = 0; i < MM; i++)                                                  \
                    d[i] = _mm256_setzero_si256();                                            \
                for (int64_t c = 0; c < full; c += 32) {                                      \
                    const __m256i v = _mm256_cvtepu8_epi16(                                   \
                        _mm_loadu_si128((const __m128i *)(b + c / 2)));                       \
                    const __m256i h = _mm256_srli_epi16(v, 4), l = _mm256_and_si256(v, m15);  \
                    for (int i = 0; i < MM; i++) {                                            \
                        const int16_t *x = j->xa + i * K + g * G + c;                         \
                        d[i] = DOT(d[i], h, _mm256_loadu_si256((const __m256i *)x));          \
                        d[i] = DOT(d[i], l, _mm256_loadu_si256((const __m256i *)(x + 16)));   \
                    }                                                                         \
                }                                                                             \
                const __m256 vs = _mm256_set1_ps(s);                                          \
                for (int i = 0; i < MM; i++)                                                  \
                    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d[i]), vs, acc[i]);           \
                if (full < G)                                                                 \
                    for (int i = 0; i < MM; i++) {                                            \
                        const int16_t *x = j->xa + i * K + g * G;                             \
                        int32_t r = 0;                                                        \
                        for (int64_t e = full; e < G; e += 2)                                 \
                            r += (b[e / 2] >> 4) * x[e] + (b[e / 2] & 15) * x[e + 1];         \
                        accs[i] += s * (float)r;                                              \
                    }                                                                         \
            }                                                                                 \
            const float *zr = w->zeros ? w->zeros + n * ng : NULL;                            \
            for (int i = 0; i < MM; i++) {                                                    \
                __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc[i]),                         \
                                      _mm256_extractf128_ps(acc[i], 1));                      \
                t = _mm_add_ps(t, _mm_movehl_ps(t, t));                                       \
                t = _mm_add_ss(t, _mm_movehdup_ps(t));                                        \
                j->out[i * j->ldo + (n - n0)] = _mm_cvtss_f32(t) + accs[i] -                  \
                                                q4_corr(w->scales + n * ng, zr,               \
                                                        j->xsum + i * ng, ng);                \
            }                                                                                 \
        }                                                                                     \
    }

#define DOT_MADD(d, a, b) _mm256_add_epi32((d), _mm256_madd_epi16((a), (b)))
#define DOT_VNNI(d, a, b) _mm256_dpwssd_epi32((d), (a), (b))
Q4I_BLOCK(q4i_block, , DOT_MADD)
Q4I_BLOCK(q4i_block_vnni, VNNI_FN, DOT_VNNI)

static void q4_8da4w_avx512(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4i_block(j, n0, n1, 1); break;
    case 2: q4i_block(j, n0, n1, 2); break;
    case 3: q4i_block(j, n0, n1, 3); break;
    default: q4i_block(j, n0, n1, 4); break;
    }
}

VNNI_FN static void q4_8da4w_avx512_vnni(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4i_block_vnni(j, n0, n1, 1); break;
    case 2: q4i_block_vnni(j, n0, n1, 2); break;
    case 3: q4i_block_vnni(j, n0, n1, 3); break;
    default: q4i_block_vnni(j, n0, n1, 4); break;
    }
}

#define MR 8

/* VNNI: per block of 4 k one 64-byte panel vector (16 columns x 4 k), each row's 4 bytes
 * broadcast; vpdpbusd adds the 4 uint8 x int8 products of a lane into its int32. */
VNNI_FN static void q8_ukr_vnni(int mm, int64_t kb, const uint8_t *a, int64_t lda,
                                const int8_t *panel, int32_t *acc) {
    (void)mm;
    __m512i c[MR];
    for (int i = 0; i < MR; i++)
        c[i] = _mm512_setzero_si512();
    for (int64_t k = 0; k < kb; k++) {
        const __m512i b = _mm512_loadu_si512((const void *)panel);
        panel += 64;
        for (int i = 0; i < MR; i++) {
            int32_t v;
            memcpy(&v, a + i * lda + 4 * k, 4);
            c[i] = _mm512_dpbusd_epi32(c[i], _mm512_set1_epi32(v), b);
        }
    }
    for (int i = 0; i < MR; i++)
        _mm512_storeu_si512((void *)(acc + i * 16), c[i]);
}

/* Without VNNI: the panel's 64 bytes widened to two vectors of 32 int16 (columns 0-7 and
 * 8-15), the row's 4 bytes widened and broadcast, vpmaddwd (exact) into lanes
 * [c0 k01, c0 k23, c1 k01, ...]; the pairs are added at the end. */
static void q8_ukr_avx512(int mm, int64_t kb, const uint8_t *a, int64_t lda,
                          const int8_t *panel, int32_t *acc) {
    (void)mm;
    __m512i lo[MR], hi[MR];
    for (int i = 0; i < MR; i++)
        lo[i] = hi[i] = _mm512_setzero_si512();
    for (int64_t k = 0; k < kb; k++) {
        const __m512i b0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)panel));
        const __m512i b1 =
            _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(panel + 32)));
        panel += 64;
        for (int i = 0; i < MR; i++) {
            int32_t v;
            memcpy(&v, a + i * lda + 4 * k, 4);
            const __m512i av =
                _mm512_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(v)));
            lo[i] = _mm512_add_epi32(lo[i], _mm512_madd_epi16(av, b0));
            hi[i] = _mm512_add_epi32(hi[i], _mm512_madd_epi16(av, b1));
        }
    }
    for (int i = 0; i < MR; i++) {
        int32_t t[32];
        _mm512_storeu_si512((void *)t, lo[i]);
        _mm512_storeu_si512((void *)(t + 16), hi[i]);
        for (int jj = 0; jj < 16; jj++)
            acc[i * 16 + jj] = t[2 * jj] + t[2 * jj + 1];
    }
}

void etch_quant_isa_avx512(etch_quant_isa *q, unsigned features) {
    const bool vnni = (features & ETCH_QF_VNNI) != 0;
    q->q4_f32 = q4_f32_avx512;
    q->q4_8da4w = vnni ? q4_8da4w_avx512_vnni : q4_8da4w_avx512;
    q->q8_mr = MR;
    q->q8_nr = 16;
    q->q8_a_signed = false;
    q->q8_ukr = vnni ? q8_ukr_vnni : q8_ukr_avx512;
}
