/* AVX-512 inner loops of the integer kernels (see quant.h): int4 float activations looked up
 * in a per-group table of dequantized weights (vpermps), a 32-k chunk in one zmm per nibble
 * half; 8w: int8 weights widened and converted in registers; 8da4w on 256-bit vectors over
 * int8 activations (quant_q4i8_x86.inc: vpdpbusd with VNNI, vpmaddubsw + vpmaddwd without);
 * the int8 GEMM microkernel 8 x 16: vpdpbusd with VNNI (uint8 x
 * int8, 4 k per lane, exact in int32), else bytes widened to int16 and vpmaddwd. VNNI is
 * detected at run time (etch_quant_features): Skylake-X (the emulated CPU of
 * tests/cross/run_avx512.sh) runs the widening variants. */
#include <immintrin.h>
#include <string.h>

#include "kernels/optimized/quant.h"

#define VNNI_FN __attribute__((target("avx512vnni")))

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

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

/* A tile of MM activation rows x NN weight rows (n, n + 1, ...). Per group and weight row the
 * 16 possible weights ((nibble - 8) - zero) * scale, rounded as the portable embedding_4bit
 * rounds them, form a table in one zmm; vpermps looks each nibble up in it (it reads the low
 * 4 bits of each index lane: the low nibble straight from the widened byte, the high one
 * after a shift), so a 32-k chunk costs a widening, a shift, two lookups and two FMA per
 * activation row, and the products are those of the dequantized weights: no per-group
 * scale or zero-point epilogue. MM * NN * 2 independent accumulator chains (decode: NN = 4). */
static inline __attribute__((always_inline)) void q4f_tile(const etch_q4_job *j, int64_t n,
                                                           int64_t n0, const int MM,
                                                           const int NN) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    const __m512 iota = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512 ah[ETCH_Q4_MR][4], al[ETCH_Q4_MR][4];
    float accs[ETCH_Q4_MR][4];
    for (int i = 0; i < MM; i++)
        for (int r = 0; r < NN; r++) {
            ah[i][r] = al[i][r] = _mm512_setzero_ps();
            accs[i][r] = 0.0f;
        }
    for (int64_t g = 0; g < ng; g++) {
        __m512 tab[4];
        for (int r = 0; r < NN; r++) {
            const int64_t q = (n + r) * ng + g;
            const __m512 z = _mm512_set1_ps(w->zeros ? w->zeros[q] : 0.0f);
            tab[r] = _mm512_mul_ps(_mm512_sub_ps(iota, z), _mm512_set1_ps(w->scales[q]));
        }
        const uint8_t *b0 = w->data + n * (K / 2) + g * G / 2;
        const float *x0 = j->xd + g * G;
        for (int64_t c = 0; c < full; c += 32) {
            for (int r = 0; r < NN; r++) {
                const __m512i v = _mm512_cvtepu8_epi32(
                    _mm_loadu_si128((const __m128i *)(b0 + r * (K / 2) + c / 2)));
                const __m512 h = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab[r]);
                const __m512 l = _mm512_permutexvar_ps(v, tab[r]);
                for (int i = 0; i < MM; i++) {
                    const float *x = x0 + i * K + c;
                    ah[i][r] = _mm512_fmadd_ps(h, _mm512_loadu_ps(x), ah[i][r]);
                    al[i][r] = _mm512_fmadd_ps(l, _mm512_loadu_ps(x + 16), al[i][r]);
                }
            }
        }
        if (full < G)
            for (int r = 0; r < NN; r++) {
                const int64_t q = (n + r) * ng + g;
                const float s = w->scales[q], z = w->zeros ? w->zeros[q] : 0.0f;
                const uint8_t *b = b0 + r * (K / 2);
                for (int i = 0; i < MM; i++) {
                    const float *x = x0 + i * K;
                    float t = 0.0f;
                    for (int64_t e = full; e < G; e += 2)
                        t += (((float)((b[e / 2] >> 4) - 8) - z) * s) * x[e] +
                             (((float)((b[e / 2] & 15) - 8) - z) * s) * x[e + 1];
                    accs[i][r] += t;
                }
            }
    }
    for (int r = 0; r < NN; r++)
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n + r - n0)] =
                _mm512_reduce_add_ps(_mm512_add_ps(ah[i][r], al[i][r])) + accs[i][r];
}

static inline __attribute__((always_inline)) void q4f_block(const etch_q4_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const int NN = MM <= 2 ? 4 : 2;
    int64_t n = n0;
    for (; n + NN <= n1; n += NN)
        q4f_tile(j, n, n0, MM, NN);
    for (; n < n1; n++)
        q4f_tile(j, n, n0, MM, 1);
}

static void q4_f32_avx512(const etch_q4_job *j, int64_t n0, int64_t n1) {
    switch (j->mm) {
    case 1: q4f_block(j, n0, n1, 1); break;
    case 2: q4f_block(j, n0, n1, 2); break;
    case 3: q4f_block(j, n0, n1, 3); break;
    default: q4f_block(j, n0, n1, 4); break;
    }
}

/* 8w: MM activation rows x NN weight rows, 32 k per step: the int8 bytes widened to int32,
 * converted, FMA into two chains per (row, weight row); the K tail with masked loads. */
static inline __attribute__((always_inline)) void q8w_tile(const etch_q8w_job *j, int64_t n,
                                                           int64_t n0, const int MM,
                                                           const int NN) {
    const etch_q8w_weights *w = j->w;
    const int64_t K = w->K;
    __m512 a0[ETCH_Q4_MR][4], a1[ETCH_Q4_MR][4];
    for (int i = 0; i < MM; i++)
        for (int r = 0; r < NN; r++)
            a0[i][r] = a1[i][r] = _mm512_setzero_ps();
    const int8_t *b0 = w->data + n * w->ldw;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32)
        for (int r = 0; r < NN; r++) {
            const int8_t *b = b0 + r * w->ldw + k;
            const __m512 v0 =
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b)));
            const __m512 v1 = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 16))));
            for (int i = 0; i < MM; i++) {
                const float *x = j->x + i * j->ldx + k;
                a0[i][r] = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x), a0[i][r]);
                a1[i][r] = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x + 16), a1[i][r]);
            }
        }
    for (; k < K; k += 16) {
        const __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
        for (int r = 0; r < NN; r++) {
            const __m512 v = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, b0 + r * w->ldw + k)));
            for (int i = 0; i < MM; i++)
                a0[i][r] = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, j->x + i * j->ldx + k),
                                           a0[i][r]);
        }
    }
    for (int r = 0; r < NN; r++)
        for (int i = 0; i < MM; i++)
            j->out[i * j->ldo + (n + r - n0)] =
                _mm512_reduce_add_ps(_mm512_add_ps(a0[i][r], a1[i][r]));
}

static inline __attribute__((always_inline)) void q8w_block(const etch_q8w_job *j, int64_t n0,
                                                            int64_t n1, const int MM) {
    const int NN = MM <= 2 ? 4 : 2;
    int64_t n = n0;
    for (; n + NN <= n1; n += NN)
        q8w_tile(j, n, n0, MM, NN);
    for (; n < n1; n++)
        q8w_tile(j, n, n0, MM, 1);
}

static void q8w_f32_avx512(const etch_q8w_job *j, int64_t n0, int64_t n1) {
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
#define DOTB_VNNI(acc, u, v) _mm256_dpbusd_epi32((acc), (u), (v))
Q4I8_TILE(q4b, , DOTB_MADD)
Q4I8_TILE(q4b_vnni, VNNI_FN, DOTB_VNNI)

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
    q->q8w_f32 = q8w_f32_avx512;
    q->q4_8da4w = vnni ? q4b_vnni_rows : q4b_rows;
    q->q4_act_i8 = true;
    q->q8_mr = MR;
    q->q8_nr = 16;
    q->q8_a_signed = false;
    q->q8_ukr = vnni ? q8_ukr_vnni : q8_ukr_avx512;
}
