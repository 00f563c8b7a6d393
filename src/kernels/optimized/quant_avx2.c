/* AVX2 inner loops of the integer kernels (see quant.h): int4 weights dequantized in
 * registers (nibbles widened, converted, FMA against the deinterleaved activations; 8da4w:
 * nibbles as uint8 against int8 activations, vpmaddubsw + vpmaddwd, exact int32 per group:
 * quant_q4i8_x86.inc), 8w int8 weights widened and converted in registers, and the int8
 * GEMM microkernel (4 x 8): bytes widened to int16 and vpmaddwd, so no vpmaddubsw
 * saturation. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/quant.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sum_g scale_g * (8 + zero_g) * xs_g: the zero-point correction of a weight row over all
 * its groups (xs: per-group sums of the activations, as floats). */
static inline float q4_corr(const float *sc, const float *zr, const float *xs, int64_t ng) {
    __m256 c = _mm256_setzero_ps();
    const __m256 eight = _mm256_set1_ps(8.0f);
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        __m256 f = _mm256_loadu_ps(sc + g);
        f = _mm256_mul_ps(f, zr ? _mm256_add_ps(eight, _mm256_loadu_ps(zr + g)) : eight);
        c = _mm256_fmadd_ps(f, _mm256_loadu_ps(xs + g), c);
    }
    float r = hsum8(c);
    for (; g < ng; g++)
        r += sc[g] * (8.0f + (zr ? zr[g] : 0.0f)) * xs[g];
    return r;
}

static inline __attribute__((always_inline)) void q4f_block(const etch_q4_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    const __m256i m15 = _mm256_set1_epi32(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        __m256 acc[ETCH_Q4_MR];
        float accs[ETCH_Q4_MR];
        for (int i = 0; i < MM; i++) {
            acc[i] = _mm256_setzero_ps();
            accs[i] = 0.0f;
        }
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *b = row + g * G / 2;
            const float s = w->scales[n * ng + g];
            __m256 d[ETCH_Q4_MR];
            for (int i = 0; i < MM; i++)
                d[i] = _mm256_setzero_ps();
            for (int64_t c = 0; c < full; c += 32) {
                const __m128i v = _mm_loadu_si128((const __m128i *)(b + c / 2));
                const __m256i b0 = _mm256_cvtepu8_epi32(v);
                const __m256i b1 = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
                const __m256 h0 = _mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4));
                const __m256 h1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4));
                const __m256 l0 = _mm256_cvtepi32_ps(_mm256_and_si256(b0, m15));
                const __m256 l1 = _mm256_cvtepi32_ps(_mm256_and_si256(b1, m15));
                for (int i = 0; i < MM; i++) {
                    const float *x = j->xd + i * K + g * G + c;
                    d[i] = _mm256_fmadd_ps(h0, _mm256_loadu_ps(x), d[i]);
                    d[i] = _mm256_fmadd_ps(h1, _mm256_loadu_ps(x + 8), d[i]);
                    d[i] = _mm256_fmadd_ps(l0, _mm256_loadu_ps(x + 16), d[i]);
                    d[i] = _mm256_fmadd_ps(l1, _mm256_loadu_ps(x + 24), d[i]);
                }
            }
            const __m256 vs = _mm256_set1_ps(s);
            for (int i = 0; i < MM; i++)
                acc[i] = _mm256_fmadd_ps(d[i], vs, acc[i]);
            if (full < G)
                for (int i = 0; i < MM; i++) {
                    const float *x = j->xd + i * K + g * G;
                    float r = 0.0f;
                    for (int64_t e = full; e < G; e += 2)
                        r += (float)(b[e / 2] >> 4) * x[e] + (float)(b[e / 2] & 15) * x[e + 1];
                    accs[i] += s * r;
                }
        }
        const float *zr = w->zeros ? w->zeros + n * ng : NULL;
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n - n0)] =
                hsum8(acc[i]) + accs[i] - q4_corr(w->scales + n * ng, zr, j->xsum + i * ng, ng);
    }
}

static void q4_f32_avx2(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4f_block(j, n0, n1, 1); break;
    case 2: q4f_block(j, n0, n1, 2); break;
    case 3: q4f_block(j, n0, n1, 3); break;
    default: q4f_block(j, n0, n1, 4); break;
    }
}

/* 8w: MM activation rows x NN weight rows, 16 k per step: 8 bytes widened to int32 and
 * converted per FMA, two chains per (row, weight row); the K tail scalar. */
static inline __attribute__((always_inline)) void q8w_tile(const etch_q8w_job *j, int64_t n,
                                                           int64_t n0, const int MM,
                                                           const int NN) {
    const etch_q8w_weights *w = j->w;
    const int64_t K = w->K;
    __m256 a0[ETCH_Q4_MR][2], a1[ETCH_Q4_MR][2];
    for (int i = 0; i < MM; i++)
        for (int r = 0; r < NN; r++)
            a0[i][r] = a1[i][r] = _mm256_setzero_ps();
    const int8_t *b0 = w->data + n * w->ldw;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
        for (int r = 0; r < NN; r++) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(b0 + r * w->ldw + k));
            const __m256 v0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
            const __m256 v1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
            for (int i = 0; i < MM; i++) {
                const float *x = j->x + i * j->ldx + k;
                a0[i][r] = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x), a0[i][r]);
                a1[i][r] = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x + 8), a1[i][r]);
            }
        }
    for (int r = 0; r < NN; r++)
        for (int i = 0; i < MM; i++) {
            const int8_t *b = b0 + r * w->ldw;
            const float *x = j->x + i * j->ldx;
            float t = 0.0f;
            for (int64_t e = k; e < K; e++)
                t += x[e] * (float)b[e];
            j->out[i * j->ldo + (n + r - n0)] = hsum8(_mm256_add_ps(a0[i][r], a1[i][r])) + t;
        }
}

static inline __attribute__((always_inline)) void q8w_block(const etch_q8w_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const int NN = MM <= 2 ? 2 : 1;
    int64_t n = n0;
    for (; n + NN <= n1; n += NN)
        q8w_tile(j, n, n0, MM, NN);
    for (; n < n1; n++)
        q8w_tile(j, n, n0, MM, 1);
}

static void q8w_f32_avx2(const etch_q8w_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q8w_block(j, n0, n1, 1); break;
    case 2: q8w_block(j, n0, n1, 2); break;
    case 3: q8w_block(j, n0, n1, 3); break;
    default: q8w_block(j, n0, n1, 4); break;
    }
}

#include "kernels/optimized/quant_q4i8_x86.inc"
#define DOTB_MADD(acc, u, v)                                                                  \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (v)), _mm256_set1_epi16(1)))
Q4I8_TILE(q4b, , DOTB_MADD)

/* 4 rows x 8 columns: per block of 4 k, the panel's 32 bytes widened to two vectors of 16
 * int16 (columns 0-3 and 4-7, 4 k each), a row's 4 bytes widened and broadcast; vpmaddwd
 * sums pairs of k exactly into int32 lanes [c0 k01, c0 k23, c1 k01, ...]. */
static void q8_ukr_avx2(int mm, int64_t kb, const uint8_t *a, int64_t lda, const int8_t *panel,
                        int32_t *acc) {
    (void)mm;
    __m256i lo[4], hi[4];
    for (int i = 0; i < 4; i++)
        lo[i] = hi[i] = _mm256_setzero_si256();
    for (int64_t k = 0; k < kb; k++) {
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)panel));
        const __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(panel + 16)));
        panel += 32;
        for (int i = 0; i < 4; i++) {
            int32_t v;
            memcpy(&v, a + i * lda + 4 * k, 4);
            const __m256i av = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(v)));
            lo[i] = _mm256_add_epi32(lo[i], _mm256_madd_epi16(av, b0));
            hi[i] = _mm256_add_epi32(hi[i], _mm256_madd_epi16(av, b1));
        }
    }
    for (int i = 0; i < 4; i++) {
        /* hadd within 128-bit lanes: [c0 c1 c4 c5 | c2 c3 c6 c7] */
        const __m256i s = _mm256_hadd_epi32(lo[i], hi[i]);
        _mm256_storeu_si256((__m256i *)(acc + i * 8),
                            _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7)));
    }
}

void etch_quant_isa_avx2(etch_quant_isa *q) {
    q->q4_f32 = q4_f32_avx2;
    q->q8w_f32 = q8w_f32_avx2;
    q->q4_8da4w = q4b_rows;
    q->q4_act_i8 = true;
    q->q8_mr = 4;
    q->q8_nr = 8;
    q->q8_a_signed = false;
    q->q8_ukr = q8_ukr_avx2;
}
