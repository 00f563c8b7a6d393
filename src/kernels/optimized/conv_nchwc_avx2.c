/* AVX2 + FMA register tile of the channel-blocked convolution (conv_nchwc.h): up to 6 output
 * pixels x 16 output channels in 12 accumulators (2 ymm of weights, 1 broadcast), or x 8
 * channels in 6. Specialised on the pixel count, the tile width and the input layout (blocked:
 * lane stride 1, 8 lanes; NCHW: lane stride H*W, a short last block), so that the accumulators
 * stay in registers; each pixel has its own input pointer. The walk over blocks, taps and
 * lanes is conv_nchwc_taps.inc, shared with the AVX-512 tile, which hands its 8-wide tiles and
 * NCHW outputs to this one. */
#include <immintrin.h>

#include "kernels/optimized/conv_nchwc.h"

#define AI static inline __attribute__((always_inline))

enum { IN_NCHW = 0, IN_BLK = 1, IN_RUN = 2 }; /* lanes: stride ls; 8 at stride 1; cb at stride 1 */

/* The accumulators are named variables (pixel j: cj0, and cj1 when the tile is 16 wide), so
 * that they stay in registers across the loops. */
#define PIX(j, x)                                                                              \
    do {                                                                                       \
        if (np > (j)) {                                                                        \
            const __m256 x_ = (x);                                                             \
            c##j##0 = _mm256_fmadd_ps(x_, w0, c##j##0);                                        \
            if (two)                                                                           \
                c##j##1 = _mm256_fmadd_ps(x_, w1, c##j##1);                                    \
        }                                                                                      \
    } while (0)

/* One lane step: the weights of lane l against input lane l of each pixel. */
#define LANE_C(l, lstride)                                                                     \
    do {                                                                                       \
        const __m256 w0 = _mm256_loadu_ps(wp + (l) * oct);                                     \
        const __m256 w1 = two ? _mm256_loadu_ps(wp + (l) * oct + 8) : w0;                      \
        const int64_t o_ = off + (l) * (lstride);                                              \
        PIX(0, _mm256_broadcast_ss(p0 + o_));                                                  \
        PIX(1, _mm256_broadcast_ss(p1 + o_));                                                  \
        PIX(2, _mm256_broadcast_ss(p2 + o_));                                                  \
        PIX(3, _mm256_broadcast_ss(p3 + o_));                                                  \
        PIX(4, _mm256_broadcast_ss(p4 + o_));                                                  \
        PIX(5, _mm256_broadcast_ss(p5 + o_));                                                  \
    } while (0)

/* The full 6 x 16 lane step in inline assembly. GCC 12 keeps at most 11 of the 12
 * accumulators of the intrinsic form in registers (it loads the next steps' weights and inputs
 * early), the last one on the stack: a store-to-load chain through every FMA of it, which ran
 * the 1x1 loop at about half speed. Here the 12 accumulators are register operands of the
 * asm, the two weight vectors two more, the broadcast ymm15. Each FMA is the one the intrinsic
 * form computes (x * w + c, one rounding), in the same order, so the bits are those of every
 * other pixel count. */
typedef struct __attribute__((may_alias)) f8 {
    float v[8];
} f8;
/* pixels 0..2 of lane l: loads the weights into wv0_, wv1_ (kept for pixels 3..5) */
#define LANE3A_ASM(l, ls_)                                                                     \
    __asm__("vmovups %[w0], %[wv0_]\n\t"                                                       \
            "vmovups %[w1], %[wv1_]\n\t"                                                       \
            "vbroadcastss %[x0], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[a0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[a1]\n\t"                                          \
            "vbroadcastss %[x1], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[b0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[b1]\n\t"                                          \
            "vbroadcastss %[x2], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[c0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[c1]"                                              \
            : [wv0_] "=&x"(wv0_), [wv1_] "=&x"(wv1_), [a0] "+x"(c00), [a1] "+x"(c01),          \
              [b0] "+x"(c10), [b1] "+x"(c11), [c0] "+x"(c20), [c1] "+x"(c21)                   \
            : [w0] "m"(*(const f8 *)(wp + (l) * 16)),                                          \
              [w1] "m"(*(const f8 *)(wp + (l) * 16 + 8)), [x0] "m"(p0[off + (l) * (ls_)]),     \
              [x1] "m"(p1[off + (l) * (ls_)]), [x2] "m"(p2[off + (l) * (ls_)])                 \
            : "xmm15")
/* pixels 3..5 of lane l with the weights in wv0_, wv1_ */
#define LANE3B_ASM(l, ls_)                                                                     \
    __asm__("vbroadcastss %[x0], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[a0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[a1]\n\t"                                          \
            "vbroadcastss %[x1], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[b0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[b1]\n\t"                                          \
            "vbroadcastss %[x2], %%ymm15\n\t"                                                  \
            "vfmadd231ps %[wv0_], %%ymm15, %[c0]\n\t"                                          \
            "vfmadd231ps %[wv1_], %%ymm15, %[c1]"                                              \
            : [a0] "+x"(c30), [a1] "+x"(c31), [b0] "+x"(c40), [b1] "+x"(c41),                  \
              [c0] "+x"(c50), [c1] "+x"(c51)                                                   \
            : [wv0_] "x"(wv0_), [wv1_] "x"(wv1_), [x0] "m"(p3[off + (l) * (ls_)]),             \
              [x1] "m"(p4[off + (l) * (ls_)]), [x2] "m"(p5[off + (l) * (ls_)])                 \
            : "xmm15")
/* (two statements: one for all six pixels would need more than the 30 operands an asm may
 * have) */
#define LANE6_ASM(l, ls_)                                                                      \
    do {                                                                                       \
        __m256 wv0_, wv1_;                                                                     \
        LANE3A_ASM(l, ls_);                                                                    \
        LANE3B_ASM(l, ls_);                                                                    \
    } while (0)

/* A lane step: the assembly form for the full 6 x 16 tile, else the intrinsics. */
#define LANE(l, lstride)                                                                       \
    do {                                                                                       \
        if (np == 6 && two)                                                                    \
            LANE6_ASM(l, lstride);                                                             \
        else                                                                                   \
            LANE_C(l, lstride);                                                                \
    } while (0)

/* Pixels 0..np-1 (np <= 6) of 8 channels held as one vector per pixel (r0..r5; those past np
 * are zero) to an NCHW output: an 8 x 8 transpose (pixels 6 and 7 zero), then channel c's np
 * values stored at out + c * cs, for the first nc channels. Nothing past pixel np is
 * written. */
AI void store_nchw8(float *out, int64_t cs, int np, int nc, __m256 r0, __m256 r1, __m256 r2,
                    __m256 r3, __m256 r4, __m256 r5) {
    const __m256 z = _mm256_setzero_ps();
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s4 = _mm256_shuffle_ps(t4, z, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s5 = _mm256_shuffle_ps(t4, z, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s6 = _mm256_shuffle_ps(t5, z, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s7 = _mm256_shuffle_ps(t5, z, _MM_SHUFFLE(3, 2, 3, 2));
    /* channel c: pixels 0-3 in the low half of row c, 4-5 in its high half */
    const __m256 row[8] = {
        _mm256_permute2f128_ps(s0, s4, 0x20), _mm256_permute2f128_ps(s1, s5, 0x20),
        _mm256_permute2f128_ps(s2, s6, 0x20), _mm256_permute2f128_ps(s3, s7, 0x20),
        _mm256_permute2f128_ps(s0, s4, 0x31), _mm256_permute2f128_ps(s1, s5, 0x31),
        _mm256_permute2f128_ps(s2, s6, 0x31), _mm256_permute2f128_ps(s3, s7, 0x31)};
    for (int c = 0; c < nc; c++) {
        float *o = out + c * cs;
        const __m128 lo = _mm256_castps256_ps128(row[c]), hi = _mm256_extractf128_ps(row[c], 1);
        switch (np) {
        case 1:
            _mm_store_ss(o, lo);
            break;
        case 2:
            _mm_storel_pi((__m64 *)o, lo);
            break;
        case 3:
            _mm_storel_pi((__m64 *)o, lo);
            _mm_store_ss(o + 2, _mm_movehl_ps(lo, lo));
            break;
        case 4:
            _mm_storeu_ps(o, lo);
            break;
        case 5:
            _mm_storeu_ps(o, lo);
            _mm_store_ss(o + 4, hi);
            break;
        default:
            _mm_storeu_ps(o, lo);
            _mm_storel_pi((__m64 *)(o + 4), hi);
            break;
        }
    }
}

AI void tile_impl(const nchwc_tile *t, const int np, const int two, const int mode) {
    const int64_t oct = two ? 16 : 8;
    const __m256 b0 = _mm256_loadu_ps(t->bias), b1 = two ? _mm256_loadu_ps(t->bias + 8) : b0;
    /* pixels past np point at pixel 0 (never read) */
    const float *p0 = t->px[0], *p1 = np > 1 ? t->px[1] : p0, *p2 = np > 2 ? t->px[2] : p0;
    const float *p3 = np > 3 ? t->px[3] : p0, *p4 = np > 4 ? t->px[4] : p0;
    const float *p5 = np > 5 ? t->px[5] : p0;
    float *out = t->out;
    const int64_t pstep = t->pstep, ostep = t->out_nchw ? np : np * 8;
    const char *pf = (const char *)t->pf, *const pf_end = (const char *)t->pf_end;
    const int64_t pf_n = t->pf_n;
#define PREFETCH()                                                                             \
        for (int64_t q_ = 0; q_ < pf_n && pf < pf_end; q_++, pf += 64)                          \
            _mm_prefetch(pf, _MM_HINT_T1)
    for (int64_t rep = 0; rep < t->reps || rep == 0; rep++, out += ostep) {
        if (rep > 0) {
            p0 += pstep, p1 += pstep, p2 += pstep, p3 += pstep, p4 += pstep, p5 += pstep;
        }
        __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
        __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
        if (t->accumulate) { /* blocked output: the partial sums of the blocks before b0 */
            const float *o = out;
#define LOADC(j)                                                                               \
        if (np > (j)) {                                                                        \
            c##j##0 = _mm256_loadu_ps(o + (j) * 8);                                            \
            if (two)                                                                           \
                c##j##1 = _mm256_loadu_ps(o + t->obs + (j) * 8);                               \
        }
            LOADC(0)
            LOADC(1)
            LOADC(2)
            LOADC(3)
            LOADC(4)
            LOADC(5)
#undef LOADC
        }
#include "kernels/optimized/conv_nchwc_taps.inc"
        if (t->act) {
            const __m256 lo = _mm256_set1_ps(t->lo), hi = _mm256_set1_ps(t->hi);
            /* max/min return their second operand when either is NaN: NaN passes through */
#define CLAMP(j)                                                                               \
        if (np > (j)) {                                                                        \
            c##j##0 = _mm256_min_ps(hi, _mm256_max_ps(lo, c##j##0));                           \
            if (two)                                                                           \
                c##j##1 = _mm256_min_ps(hi, _mm256_max_ps(lo, c##j##1));                       \
        }
            CLAMP(0)
            CLAMP(1)
            CLAMP(2)
            CLAMP(3)
            CLAMP(4)
            CLAMP(5)
#undef CLAMP
        }
        if (!t->out_nchw) {
            float *o = out;
#define STORE(j)                                                                               \
        if (np > (j)) {                                                                        \
            _mm256_storeu_ps(o + (j) * 8, c##j##0);                                            \
            if (two)                                                                           \
                _mm256_storeu_ps(o + t->obs + (j) * 8, c##j##1);                               \
        }
            STORE(0)
            STORE(1)
            STORE(2)
            STORE(3)
            STORE(4)
            STORE(5)
#undef STORE
        } else { /* NCHW output: each 8 channels transposed to rows of np pixels */
            const __m256 z = _mm256_setzero_ps();
            store_nchw8(out, t->obs, np, t->oc_valid < 8 ? t->oc_valid : 8, c00,
                        np > 1 ? c10 : z, np > 2 ? c20 : z, np > 3 ? c30 : z, np > 4 ? c40 : z,
                        np > 5 ? c50 : z);
            if (two && t->oc_valid > 8)
                store_nchw8(out + 8 * t->obs, t->obs, np, t->oc_valid - 8, c01,
                            np > 1 ? c11 : z, np > 2 ? c21 : z, np > 3 ? c31 : z,
                            np > 4 ? c41 : z, np > 5 ? c51 : z);
        }
    }
}
#undef PREFETCH
#undef LANE6_ASM
#undef LANE3A_ASM
#undef LANE3B_ASM
#undef LANE
#undef LANE_C
#undef PIX

#define INST(np, two, mode)                                                                    \
    static void tile_##np##_##two##_##mode(const nchwc_tile *t) { tile_impl(t, np, two, mode); }
#define INST_NP(two, mode)                                                                     \
    INST(1, two, mode) INST(2, two, mode) INST(3, two, mode) INST(4, two, mode)                \
    INST(5, two, mode) INST(6, two, mode)
INST_NP(0, 0)
INST_NP(0, 1)
INST_NP(0, 2)
INST_NP(1, 0)
INST_NP(1, 1)
INST_NP(1, 2)

#define ROW(two, mode)                                                                         \
    {tile_1_##two##_##mode, tile_2_##two##_##mode, tile_3_##two##_##mode,                      \
     tile_4_##two##_##mode, tile_5_##two##_##mode, tile_6_##two##_##mode}
static const nchwc_tile_fn tiles[2][3][NCHWC_MR] = {
    {ROW(0, 0), ROW(0, 1), ROW(0, 2)},
    {ROW(1, 0), ROW(1, 1), ROW(1, 2)},
};

void etch_nchwc_tile_avx2(const nchwc_tile *t) {
    const int mode = t->ls != 1 ? IN_NCHW : (t->cb_last == 8 ? IN_BLK : IN_RUN);
    tiles[t->oct == 16][mode][t->np - 1](t);
}
