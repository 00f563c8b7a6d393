/* Integer compute cores of the quantized kernels (internal API; quant.c drives them,
 * quant_<isa>.c hold the per-ISA inner loops, chosen at run time like the float kernels:
 * etch_isa_active(), ETCH_ISA).
 *
 * 1. int4 group-wise linear: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]), with
 *      W(n, k) = (q(n, k) - zero[n, k / G]) * scale[n, k / G],  q = nibble - 8 in [-8, 7],
 *    W stored as ExecuTorch's embedding_4bit packs it: [N, K / 2] bytes, row n at n * K / 2,
 *    element k in byte k / 2, even k in the HIGH nibble, odd k in the low one; scales and
 *    optional zero points [N, K / G] float (row-major, as embedding_4bit's 2-D scales). G is
 *    even and divides K (32, 64, 128, 256, or any other even divisor).
 *    - float activations: etch_q4_linear_f32 (M == 1 is the matrix-vector decode kernel; M > 1
 *      dequantizes each weight chunk once in registers for up to ETCH_Q4_MR rows of x).
 *    - 8da4w: activations int8 per token (scale, zero point per row of x, as
 *      quantized_decomposed::choose_qparams_per_token_asymmetric + quantize_per_token make
 *      them); per group the products (xq - xzp) * nibble are summed exactly in int32, then
 *      y = xs * sum_g scale_g * (D_g - (8 + zero_g) * sum_g(xq - xzp)). etch_q4_linear_8da4w
 *      takes quantized rows; etch_q4_linear_8da4w_f32 quantizes float rows first.
 *    Float results: the same value as the double-precision reference within rounding: with
 *    T = sum_k |x(m,k)| |scale| (16 + |zero|) the error is below (G + K / G + 16) FLT_EPSILON T
 *    (+ a few ulps of |bias|: tests/optimized_quant checks that bound); ISAs differ only in
 *    the float summation order (AVX-512's float kernel multiplies x by the dequantized
 *    weights themselves, rounded as embedding_4bit rounds them: a per-group table, vpermps).
 *
 * 2. int8 GEMM with fused requantization: acc[m, n] = sum_k (a[m, k] - za) * (b[n, k] - zb[n])
 *    (+ bias32[n]), a uint8 or int8 [M, K] (row stride lda), b int8 [N, K] packed once
 *    (etch_q8_gemm_pack: K-blocks of 4, NR-column panels, plus per-column sums for the zero
 *    point correction), then per output element
 *      float out:  y = (float)acc * mult[n] + fbias[n]
 *      int out:    q = clamp(nearbyintf((float)acc * mult[n]) + zo, qmin, qmax) as int8/uint8
 *    (mult per tensor: mult_per_channel == false reads mult[0]). The int32 sums are exact
 *    (no saturation: AVX2 widens to 16 bits and uses vpmaddwd, VNNI vpdpbusd, NEON sdot or
 *    smull + sadalp) and the requantization is the same float arithmetic everywhere, so every
 *    ISA gives bit-identical int32 and int8/uint8 results; float out is within one rounding.
 *
 * 3. Per-token dynamic quantization (ExecuTorch's formulas): etch_q8_choose_qparams_per_token
 *    (range [-128, 127], double intermediate, nudged integer zero point) and
 *    etch_q8_quantize_per_token (q = clamp(zp + nearbyint(x * (1.0f / scale)))).
 *
 * Threads: the method's pool through etch_kernel_parallel_for over output columns (ctx may be
 * NULL: one thread). None of these allocate: scratch comes from the caller (*_work_size). */
#ifndef ETCH_KERNELS_OPTIMIZED_QUANT_H
#define ETCH_KERNELS_OPTIMIZED_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/kernel.h"

/* ---- per-ISA features beyond the base ISA -------------------------------------------------- */

/* Sub-features the int8 kernels use when the CPU has them (detected at run time):
 * AVX-512 VNNI (vpdpbusd / vpdpwssd) within the avx512 ISA, the dot-product extension (sdot)
 * within neon. etch_quant_features_allow(mask) limits them (tests run both variants; ~0u:
 * all the CPU has); etch_quant_features() says what the kernels use now. */
enum { ETCH_QF_VNNI = 1u, ETCH_QF_DOTPROD = 2u };
unsigned etch_quant_features(void);
void etch_quant_features_allow(unsigned mask);
unsigned etch_quant_features_cpu(void);

/* ---- int4 group-wise weights ---------------------------------------------------------------- */

#define ETCH_Q4_MR 4 /* rows of x sharing one dequantized weight chunk */

typedef struct etch_q4_weights {
    int64_t N, K, G;
    const uint8_t *data;  /* [N, K / 2]: embedding_4bit packing (see above) */
    const float *scales;  /* [N, K / G] */
    const float *zeros;   /* [N, K / G] or NULL (symmetric: zero point 0) */
} etch_q4_weights;

/* ETCH_OK, or ETCH_ERR_INVALID_ARGUMENT naming what is wrong (sizes, group size, NULLs). */
etch_status etch_q4_check(const etch_q4_weights *w);

/* Bytes of the caller's scratch (aligned to 64) for M rows of x. */
size_t etch_q4_linear_f32_work_size(int64_t M, int64_t K, int64_t G);
size_t etch_q4_linear_8da4w_work_size(int64_t M, int64_t K, int64_t G);

/* y[M, N] (row stride ldy) = x[M, K] (row stride ldx) · dequant(W)ᵀ + bias (NULL: none).
 * w must pass etch_q4_check. */
void etch_q4_linear_f32(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                        const float *x, int64_t ldx, const float *bias, float *y, int64_t ldy,
                        void *work);
/* xq[M, K] int8 (row stride ldx) with per-row xscale[M], xzp[M] (in [-128, 127]). */
void etch_q4_linear_8da4w(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                          const int8_t *xq, int64_t ldx, const float *xscale,
                          const int32_t *xzp, const float *bias, float *y, int64_t ldy,
                          void *work);
/* The float rows quantized per token first (etch_q8_choose_qparams_per_token and
 * etch_q8_quantize_per_token), then etch_q4_linear_8da4w. */
size_t etch_q4_linear_8da4w_f32_work_size(int64_t M, int64_t K, int64_t G);
void etch_q4_linear_8da4w_f32(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                              const float *x, int64_t ldx, const float *bias, float *y,
                              int64_t ldy, void *work);

/* ---- int8 per-channel weights, float activations (8w) --------------------------------------- */

/* y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) with W(n, k) = (q(n, k) - zero[n]) * scale[n],
 * q int8 [N, K] (row stride ldw), scales and optional zero points [N] float (the weight-only
 * int8 scheme: dequantize_per_channel along axis 0). The inner loops sum x * q exactly as
 * converted floats (the bytes widened and converted in registers, never written), the driver
 * applies y = scale * (D - zero * sum_k x) + bias. With T = sum_k |x(m,k)| |scale| (|q| + |zero|)
 * the error against the exact value is below (K + 4) FLT_EPSILON T (+ a few ulps of |bias|). */
typedef struct etch_q8w_weights {
    int64_t N, K, ldw;
    const int8_t *data;  /* [N, K], row stride ldw >= K */
    const float *scales; /* [N] */
    const float *zeros;  /* [N] or NULL */
} etch_q8w_weights;

etch_status etch_q8w_check(const etch_q8w_weights *w);
/* Scratch bytes (64-aligned) for M rows of x. */
size_t etch_q8w_linear_f32_work_size(int64_t M);
void etch_q8w_linear_f32(etch_kernel_context *ctx, const etch_q8w_weights *w, int64_t M,
                         const float *x, int64_t ldx, const float *bias, float *y, int64_t ldy,
                         void *work);

/* ---- per-token dynamic quantization ------------------------------------------------------- */

void etch_q8_choose_qparams_per_token(const float *x, int64_t M, int64_t K, int64_t ldx,
                                      float *scale, int32_t *zp);
void etch_q8_quantize_per_token(const float *x, int64_t M, int64_t K, int64_t ldx,
                                const float *scale, const int32_t *zp, int8_t *q, int64_t ldq);

/* ---- int8 x int8 -> int32 GEMM with requantization ---------------------------------------- */

typedef struct etch_q8_packed {
    int isa;         /* etch_isa it was packed for (its panel width) */
    int nr;          /* panel width */
    int64_t N, K, kp; /* kp: K rounded up to 4 */
    const int8_t *panels;  /* [N / nr panels][kp / 4][nr][4], zero-padded */
    const int32_t *colsum; /* [N]: sum_k b[n, k] */
} etch_q8_packed;

/* Bytes etch_q8_gemm_pack writes for isa (an etch_isa; negative: the active one). */
size_t etch_q8_gemm_packed_size(int isa, int64_t N, int64_t K);
/* Pack b[N, K] (row stride ldb) into dst (etch_q8_gemm_packed_size bytes, 64-aligned). */
void etch_q8_gemm_pack(int isa, const int8_t *b, int64_t N, int64_t K, int64_t ldb, void *dst,
                       etch_q8_packed *out);

enum { ETCH_Q8_OUT_F32 = 0, ETCH_Q8_OUT_S8 = 1, ETCH_Q8_OUT_U8 = 2, ETCH_Q8_OUT_S32 = 3 };

typedef struct etch_q8_gemm_desc {
    int64_t M;
    const void *a;    /* [M, K] uint8 (a_signed false) or int8 */
    int64_t lda;
    bool a_signed;
    int32_t za;       /* activation zero point (in the type's range) */
    const etch_q8_packed *b;
    const int32_t *zb; /* [N] weight zero points, or NULL (0: symmetric) */
    const int32_t *bias32; /* [N] added to acc, or NULL */
    const float *mult;     /* [N] or [1] (see mult_per_channel) */
    bool mult_per_channel;
    int out_type;          /* ETCH_Q8_OUT_* (S32: acc itself, no requantization) */
    const float *fbias;    /* float out only: [N] or NULL */
    int32_t zo, qmin, qmax; /* int out: output zero point and clamp */
    void *c;
    int64_t ldc;           /* elements */
    void *work;            /* etch_q8_gemm_work_size(M, K) bytes, 64-aligned */
} etch_q8_gemm_desc;

size_t etch_q8_gemm_work_size(int64_t M, int64_t K);
/* The packed b must be for the active ISA and K <= ETCH_Q8_MAX_K (the int32 sums stay exact),
 * za in the activation type's range, mult given unless out is S32, qmin <= qmax for int out;
 * else ETCH_ERR_INVALID_ARGUMENT naming what is wrong, nothing written. */
#define ETCH_Q8_MAX_K 32768
etch_status etch_q8_gemm(etch_kernel_context *ctx, const etch_q8_gemm_desc *d);

/* ---- int8 convolution with requantization (qconv.c) ------------------------------------------
 * y[n, o, oh, ow] = requant(bias32[o] + sum_{c, kh, kw} (x[n, g*Cg + c, ih, iw] - zx) * w[o, c, kh, kw])
 * with ih = oh * sh - ph + kh * dh (iw likewise; taps outside the input add nothing: the
 * padding is the float 0, i.e. x = zx), x uint8 [N, C, H, W] contiguous, w int8
 * [OC, C / groups, KH, KW] (symmetric per output channel: no weight zero point), y uint8
 * [N, OC, OH, OW] contiguous, and requant(acc) = clamp(nearbyintf((float)acc * mult[o]) + zo,
 * qmin, qmax): the int8 GEMM's requantization, so a 1x1 convolution and the GEMM agree bit for
 * bit. A fused ReLU is qmin = zo (the float 0 quantizes to zo).
 *  - C / groups > 1: an int8 im2col of a block of output pixels ([pixels][Cg * KH * KW], the
 *    padding taps zx) through etch_q8_gemm (every ISA's microkernel, VNNI / sdot included),
 *    the block's [pixels][OC / groups] result transposed into y; blocks over the threads.
 *    `packed` (groups == 1) is w packed once for the active ISA (etch_q8_gemm_pack of w as
 *    [OC, C * KH * KW]); NULL, or groups > 1: each group packed into the scratch first.
 *  - C / groups == 1 (depthwise, any channel multiplier): direct, one int32 row of outputs at
 *    a time (the tap loops run over contiguous output columns), channels over the threads.
 * The int32 sums are exact (Cg * KH * KW <= ETCH_Q8_MAX_K), so every ISA and thread split
 * gives the same bytes. */
typedef struct etch_q8_conv_desc {
    int64_t N, C, H, W;
    int64_t OC, KH, KW, groups;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t OH, OW;
    const uint8_t *x;
    int32_t zx;
    const int8_t *w;
    const etch_q8_packed *packed; /* or NULL */
    const int32_t *bias32;        /* [OC] or NULL */
    const float *mult;            /* [OC] */
    int32_t zo, qmin, qmax;       /* within 0..255 */
    uint8_t *y;
} etch_q8_conv_desc;

/* ETCH_OK or ETCH_ERR_INVALID_ARGUMENT naming what is wrong (sizes, zero points, clamp). */
etch_status etch_q8_conv_check(const etch_q8_conv_desc *d);
/* Bytes of scratch (64-aligned) etch_q8_conv needs with `threads` threads. */
size_t etch_q8_conv_work_size(const etch_q8_conv_desc *d, int threads);
/* d must pass etch_q8_conv_check; work: etch_q8_conv_work_size(d, etch_kernel_num_threads(ctx))
 * bytes (ctx NULL: one thread). */
etch_status etch_q8_conv(etch_kernel_context *ctx, const etch_q8_conv_desc *d, void *work);

/* nearbyintf(f) as the int8 / uint8 requantization needs it, without a libm call (and
 * vectorizable): exact (round half to even, the default rounding mode) for |f| <= 2^22;
 * beyond that within 2 of f (so still of magnitude above 2^22 - 2, which any clamp to an 8-bit
 * range treats as f), infinities and NaN kept. */
static inline float etch_q8_round(float f) { return (f + 12582912.0f) - 12582912.0f; }

/* ---- the per-ISA inner loops (quant_<isa>.c) ----------------------------------------------- */

/* int4 f32: rows m in [0, mm) (mm <= ETCH_Q4_MR) of xd (deinterleaved activations, see
 * quant.c: per group, 32-k chunks as [16 even k | 16 odd k], the rest in natural order; row
 * stride K), weight rows [n0, n1): acc[i][n - n0] = sum_g scale * dot_g(nibble, x).
 * 8da4w: the same over int16 activations xa (xq - xzp), or over int8 xq with
 * D_g = sum xq * nibble - xzp * sum nibble (q4_act_i8), with per-row, per-group sums sa of
 * xq - xzp; out[i][n - n0] = sum_g scale * (D_g - (8 + zero) * sa_g) (float, before * xs). */
typedef struct etch_q4_job {
    const etch_q4_weights *w;
    int mm;
    const float *xd;       /* [mm][K] */
    const float *xsum;     /* [mm][K / G]: per-group sums of x (8da4w: sa as floats) */
    const int16_t *xa;     /* [mm][K]: xq - xzp, deinterleaved (q4_act_i8 false) */
    const int8_t *xq;      /* [mm][K]: xq itself, deinterleaved (q4_act_i8 true) */
    const int32_t *xzp;    /* [mm] */
    const int32_t *sa;     /* [mm][K / G] */
    float *out;            /* [mm][ldo] */
    int64_t ldo;
} etch_q4_job;
typedef void (*etch_q4_rows_fn)(const etch_q4_job *j, int64_t n0, int64_t n1);

/* 8w: rows m < mm (<= ETCH_Q4_MR) of x (row stride ldx) against weight rows [n0, n1):
 * out[i][n - n0] = sum_k x(i, k) * q(n, k) in float. */
typedef struct etch_q8w_job {
    const etch_q8w_weights *w;
    int mm;
    const float *x;
    int64_t ldx;
    float *out; /* [mm][ldo] */
    int64_t ldo;
} etch_q8w_job;
typedef void (*etch_q8w_rows_fn)(const etch_q8w_job *j, int64_t n0, int64_t n1);

/* int8 GEMM microkernel: acc[i][j] = sum_k a'(i, k) * b(k, j) over kb blocks of 4 k, i < mm
 * (<= mr), j < nr (the panel's [kb][nr][4] bytes): a' rows (stride lda, zero-padded to
 * 4 * kb) are the driver's copy of a (x86: uint8, signed inputs flipped by xor 0x80; arm:
 * int8, unsigned ones flipped); acc row stride nr. */
typedef void (*etch_q8_ukr_fn)(int mm, int64_t kb, const uint8_t *a, int64_t lda,
                               const int8_t *panel, int32_t *acc);

typedef struct etch_quant_isa {
    etch_q4_rows_fn q4_f32, q4_8da4w;
    etch_q8w_rows_fn q8w_f32;
    bool q4_act_i8; /* q4_8da4w reads xq (int8 dot products, the nibble sums for xzp) */
    int q8_mr, q8_nr;
    bool q8_a_signed; /* the microkernel wants int8 activations (arm) */
    etch_q8_ukr_fn q8_ukr;
} etch_quant_isa;

void etch_quant_isa_scalar(etch_quant_isa *q);
void etch_quant_isa_avx2(etch_quant_isa *q);
void etch_quant_isa_avx512(etch_quant_isa *q, unsigned features);
void etch_quant_isa_neon(etch_quant_isa *q, unsigned features);

#endif
