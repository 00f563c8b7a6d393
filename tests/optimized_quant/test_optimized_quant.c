/* The integer compute cores (src/kernels/optimized/quant.h) against scalar references that
 * read the operands in their plain layouts, under every instruction set this CPU supports
 * (and, within one, with and without AVX-512 VNNI / the arm dot-product extension), with
 * 1..4 threads (the harness's shuffling test pool with its three split policies, the real
 * pthread pool, and no pool).
 *
 * References:
 *  - int4: W(n, k) = ((nibble - 8) - zero) * scale read from ExecuTorch's embedding_4bit
 *    packing (even k in the high nibble), y = x · Wᵀ + bias in double. 8da4w: x' = (xq - zp)
 *    * xs (what dequantize_per_token gives), the same double product.
 *  - int8 GEMM: sum_k (a - za)(b - zb) in int64 over the unpacked operands, + bias32, then
 *    quant.h's requantization; compared bit for bit (int32, int8, uint8 and float out);
 *    packed weights of another ISA and bad descriptions refused by name.
 *  - per-token qparams: ExecuTorch's own test values (kernels/quantized/test/
 *    op_choose_qparams_test.cpp) and the range ends; quantize: the round trip within
 *    half a step.
 *
 * Tolerance of the float results (int4): with T = sum_k |x_k| |scale| (16 + |zero|) (the
 * magnitude the kernels' terms reach: nibble products and the zero-point correction),
 *     |got - ref| <= (G + K / G + 16) * FLT_EPSILON * T + 8 * FLT_EPSILON * |bias|
 * (float sums of at most G terms per group and K / G groups, in an ISA-dependent order). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/quant.h"
#include "runtime/context.h"

static kt_rng rng = {0x2545f4914f6cdd1dull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static int rndi(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }

static const char *isa_now = "";

/* ---- contexts ------------------------------------------------------------------------------ */

static kt_shuffle_pool spools[3][5];
static etch_threadpool *real_pools[5];

/* variant: 0 no context, 1 one thread, 2..4 shuffled pool (split drawn), 5 real pool (2). */
static etch_kernel_context *ctx_pick(etch_kernel_context *ctx, int variant) {
    if (variant == 0)
        return NULL;
    const etch_threadpool_iface *tp = NULL;
    if (variant >= 2 && variant <= 4)
        tp = &spools[rndi(0, 2)][variant].iface;
    else if (variant == 5)
        tp = etch_threadpool_get_iface(real_pools[2]);
    etch_kernel_context_init(ctx, "test", NULL, 0, tp);
    return ctx;
}

static void *xalloc64(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memset(p, 0xa5, (n + 63) / 64 * 64 + 64); /* kernels must not read scratch they did not write */
    return p;
}

/* ---- int4 ------------------------------------------------------------------------------------ */

static int nib(const uint8_t *data, int64_t K, int64_t n, int64_t k) {
    const uint8_t b = data[n * (K / 2) + k / 2];
    return (k & 1) ? (b & 15) : (b >> 4);
}

static double wref(const etch_q4_weights *w, int64_t n, int64_t k) {
    const int64_t g = n * (w->K / w->G) + k / w->G;
    const double z = w->zeros ? w->zeros[g] : 0.0;
    return ((double)(nib(w->data, w->K, n, k) - 8) - z) * w->scales[g];
}

typedef struct q4_case {
    int64_t M, N, K, G;
    int zeros;   /* 0 none, 1 random, 2 integral at the range ends (-8 / 7) */
    int bias;
    int ctxv;
    int nib_mode; /* 0 random, 1 all 0, 2 all 15 */
} q4_case;

static int q4_cases_run;

static void q4_run_case(const q4_case *c) {
    const int64_t M = c->M, N = c->N, K = c->K, G = c->G, ng = K / G;
    const int64_t ldx = K + 3, ldy = N + 1;
    uint8_t *data = xalloc64((size_t)(N * K / 2));
    float *scales = xalloc64((size_t)(N * ng) * 4), *zeros = xalloc64((size_t)(N * ng) * 4);
    float *x = xalloc64((size_t)(M * ldx) * 4), *bias = xalloc64((size_t)N * 4);
    int8_t *xq = xalloc64((size_t)(M * ldx));
    float *xs = xalloc64((size_t)M * 4);
    int32_t *xz = xalloc64((size_t)M * 4);
    float *y = xalloc64((size_t)(M * ldy) * 4);
    for (int64_t i = 0; i < N * K / 2; i++)
        data[i] = c->nib_mode == 1 ? 0 : c->nib_mode == 2 ? 0xff : (uint8_t)rnd();
    for (int64_t i = 0; i < N * ng; i++) {
        scales[i] = kt_rng_float(&rng) * 0.1f;
        zeros[i] = c->zeros == 2 ? (rnd() & 1 ? -8.0f : 7.0f) : kt_rng_float(&rng) * 4.0f;
    }
    for (int64_t i = 0; i < M * ldx; i++) {
        x[i] = kt_rng_float(&rng);
        xq[i] = (int8_t)rnd();
    }
    for (int64_t m = 0; m < M; m++) {
        xs[m] = 0.001f + (float)(rnd() % 1000) * 1e-5f;
        const int e = rndi(0, 3);
        xz[m] = e == 0 ? -128 : e == 1 ? 127 : rndi(-128, 127);
    }
    for (int64_t n = 0; n < N; n++)
        bias[n] = kt_rng_float(&rng);
    etch_q4_weights w = {N, K, G, data, scales, c->zeros ? zeros : NULL};
    CHECK_OK(etch_q4_check(&w));
    etch_kernel_context cb;
    for (int variant = 0; variant < 2; variant++) { /* 0: float activations, 1: 8da4w */
        const size_t ws = variant ? etch_q4_linear_8da4w_work_size(M, K, G)
                                  : etch_q4_linear_f32_work_size(M, K, G);
        void *work = xalloc64(ws);
        for (int64_t i = 0; i < M * ldy; i++)
            y[i] = NAN;
        const float *bp = c->bias ? bias : NULL;
        if (variant)
            etch_q4_linear_8da4w(ctx_pick(&cb, c->ctxv), &w, M, xq, ldx, xs, xz, bp, y, ldy, work);
        else
            etch_q4_linear_f32(ctx_pick(&cb, c->ctxv), &w, M, x, ldx, bp, y, ldy, work);
        int bad = 0;
        double worst = 0;
        for (int64_t m = 0; m < M && bad < 1; m++)
            for (int64_t n = 0; n < N; n++) {
                double ref = bp ? bp[n] : 0.0, T = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    const int64_t g = n * ng + k / G;
                    const double xv = variant ? ((double)xq[m * ldx + k] - xz[m]) * xs[m]
                                              : x[m * ldx + k];
                    ref += xv * wref(&w, n, k);
                    T += fabs(xv) * fabs(scales[g]) * (16.0 + (w.zeros ? fabs(zeros[g]) : 0.0));
                }
                const double tol = (double)(G + ng + 16) * FLT_EPSILON * T +
                                   8.0 * FLT_EPSILON * (bp ? fabs(bp[n]) : 0.0) + 1e-30;
                const double got = y[m * ldy + n], err = fabs(got - ref);
                if (err / tol > worst)
                    worst = err / tol;
                if (!(err <= tol)) {
                    if (!bad)
                        fprintf(stderr,
                                "  %s int4 %s M=%lld N=%lld K=%lld G=%lld zeros=%d ctx=%d: "
                                "y[%lld,%lld] = %.9g, ref %.9g (tol %.3g)\n",
                                isa_now, variant ? "8da4w" : "f32", (long long)M, (long long)N,
                                (long long)K, (long long)G, c->zeros, c->ctxv, (long long)m,
                                (long long)n, got, ref, tol);
                    bad++;
                    break;
                }
            }
        /* the padding column of y is left alone */
        for (int64_t m = 0; m < M; m++)
            if (!isnan(y[m * ldy + N]))
                bad++;
        CHECK_MSG(bad == 0, "%s int4 %s case M=%lld N=%lld K=%lld G=%lld", isa_now,
                  variant ? "8da4w" : "f32", (long long)M, (long long)N, (long long)K,
                  (long long)G);
        q4_cases_run++;
        free(work);
    }
    free(data);
    free(scales);
    free(zeros);
    free(x);
    free(bias);
    free(xq);
    free(xs);
    free(xz);
    free(y);
}

static void q4_tests(void) {
    static const int64_t groups[] = {2, 6, 30, 32, 34, 64, 96, 128, 256};
    for (int r = 0; r < 60; r++) {
        q4_case c;
        c.G = groups[rndi(0, 8)];
        c.K = c.G * rndi(1, c.G >= 128 ? 3 : 6);
        c.N = rndi(1, 40);
        c.M = rndi(1, 10);
        c.zeros = rndi(0, 2);
        c.bias = rndi(0, 1);
        c.ctxv = rndi(0, 5);
        c.nib_mode = r % 10 == 9 ? 1 + rndi(0, 1) : 0;
        q4_run_case(&c);
    }
    /* decode and prefill shapes of a small llama layer, every thread variant */
    for (int v = 0; v <= 5; v++) {
        const q4_case d = {1, 67, 2048, 128, v & 1, 1, v, 0};
        q4_run_case(&d);
    }
    const q4_case p = {13, 48, 1024, 32, 1, 0, 4, 0};
    q4_run_case(&p);
}

/* ---- 8w: int8 per-channel weights, float activations ------------------------------------- */

static int q8w_cases_run;

/* W(n, k) = (q - zero[n]) * scale[n] (the portable dequantize_per_channel, rounded to float),
 * y = x · Wᵀ + bias in double; |got - ref| <= (K + 4) eps T + 8 eps |bias| with
 * T = sum_k |x| |scale| (|q| + |zero|) (quant.h's bound). zmode: 0 none, 1 random, 2 range
 * ends; qmode: 0 random bytes, 1 all -128, 2 all 127 (saturated). */
static void q8w_run_case(int64_t M, int64_t N, int64_t K, int zmode, int qmode, bool has_bias,
                         int ctxv) {
    const int64_t ldw = K + (rnd() & 1) * 5, ldx = K + 3, ldy = N + 1;
    int8_t *q = xalloc64((size_t)(N * ldw));
    float *scales = xalloc64((size_t)N * 4), *zeros = xalloc64((size_t)N * 4);
    float *x = xalloc64((size_t)(M * ldx) * 4), *bias = xalloc64((size_t)N * 4);
    float *y = xalloc64((size_t)(M * ldy) * 4);
    for (int64_t i = 0; i < N * ldw; i++)
        q[i] = qmode == 1 ? -128 : qmode == 2 ? 127 : (int8_t)rnd();
    for (int64_t n = 0; n < N; n++) {
        scales[n] = fabsf(kt_rng_float(&rng)) * 0.05f;
        zeros[n] = zmode == 2 ? (rnd() & 1 ? -128.0f : 127.0f) : (float)rndi(-128, 127);
        bias[n] = kt_rng_float(&rng);
    }
    for (int64_t i = 0; i < M * ldx; i++)
        x[i] = kt_rng_float(&rng);
    for (int64_t i = 0; i < M * ldy; i++)
        y[i] = NAN;
    etch_q8w_weights w = {N, K, ldw, q, scales, zmode ? zeros : NULL};
    CHECK_OK(etch_q8w_check(&w));
    void *work = xalloc64(etch_q8w_linear_f32_work_size(M) + 64);
    etch_kernel_context cb;
    const float *bp = has_bias ? bias : NULL;
    etch_q8w_linear_f32(ctx_pick(&cb, ctxv), &w, M, x, ldx, bp, y, ldy, work);
    int bad = 0;
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t n = 0; n < N && !bad; n++) {
            const double z = zmode ? zeros[n] : 0.0;
            double ref = bp ? bp[n] : 0.0, T = 0.0;
            for (int64_t k = 0; k < K; k++) {
                const float wv = (float)((int)q[n * ldw + k] - (int)z) * scales[n];
                ref += (double)x[m * ldx + k] * wv;
                T += fabs(x[m * ldx + k]) * scales[n] * (fabs((double)q[n * ldw + k]) + fabs(z));
            }
            const double tol = (double)(K + 4) * FLT_EPSILON * T +
                               8.0 * FLT_EPSILON * (bp ? fabs(bp[n]) : 0.0) + 1e-30;
            const double got = y[m * ldy + n];
            if (!(fabs(got - ref) <= tol)) {
                fprintf(stderr,
                        "  %s 8w M=%lld N=%lld K=%lld zmode=%d ctx=%d: y[%lld,%lld] = %.9g, "
                        "ref %.9g (tol %.3g)\n",
                        isa_now, (long long)M, (long long)N, (long long)K, zmode, ctxv,
                        (long long)m, (long long)n, got, ref, tol);
                bad++;
            }
        }
    for (int64_t m = 0; m < M; m++) /* the padding column of y is left alone */
        if (!isnan(y[m * ldy + N]))
            bad++;
    CHECK_MSG(bad == 0, "%s 8w case M=%lld N=%lld K=%lld", isa_now, (long long)M, (long long)N,
              (long long)K);
    q8w_cases_run++;
    free(q);
    free(scales);
    free(zeros);
    free(x);
    free(bias);
    free(y);
    free(work);
}

static void q8w_tests(void) {
    for (int r = 0; r < 40; r++) /* tails of K (not multiples of 8, 16, 32), few and many rows */
        q8w_run_case(rndi(1, 9), rndi(1, 40), rndi(1, 300), rndi(0, 2), r % 8 == 7 ? rndi(1, 2) : 0,
                     rndi(0, 1), rndi(0, 5));
    for (int v = 0; v <= 5; v++) /* a decode shape under every thread variant */
        q8w_run_case(1, 70, 768, v % 3, 0, true, v);
    q8w_run_case(17, 33, 512, 1, 0, true, 4);
    /* bad descriptions */
    int8_t b[4] = {0};
    float s[2] = {1, 1};
    etch_q8w_weights w = {2, 2, 1, b, s, NULL};
    CHECK_STATUS(etch_q8w_check(&w), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "row stride") != NULL);
    w.ldw = 2;
    w.scales = NULL;
    CHECK_STATUS(etch_q8w_check(&w), ETCH_ERR_INVALID_ARGUMENT);
}

/* The wrapper that quantizes float rows first: against quantizing with the per-token
 * functions and then the int8 path (same kernel inputs: results equal to the bit). */
static void q4_f32_quantizing_tests(void) {
    const int64_t M = 5, N = 19, K = 192, G = 64, ng = K / G;
    uint8_t *data = xalloc64((size_t)(N * K / 2));
    float *scales = xalloc64((size_t)(N * ng) * 4), *x = xalloc64((size_t)(M * K) * 4);
    for (int64_t i = 0; i < N * K / 2; i++)
        data[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < N * ng; i++)
        scales[i] = kt_rng_float(&rng);
    for (int64_t i = 0; i < M * K; i++)
        x[i] = kt_rng_float(&rng) * (float)(1 + i % 7);
    etch_q4_weights w = {N, K, G, data, scales, NULL};
    float *y1 = xalloc64((size_t)(M * N) * 4), *y2 = xalloc64((size_t)(M * N) * 4);
    void *work = xalloc64(etch_q4_linear_8da4w_f32_work_size(M, K, G));
    etch_q4_linear_8da4w_f32(NULL, &w, M, x, K, NULL, y1, N, work);
    float sc[5];
    int32_t zp[5];
    int8_t *q = xalloc64((size_t)(M * K));
    etch_q8_choose_qparams_per_token(x, M, K, K, sc, zp);
    etch_q8_quantize_per_token(x, M, K, K, sc, zp, q, K);
    etch_q4_linear_8da4w(NULL, &w, M, q, K, sc, zp, NULL, y2, N, work);
    CHECK(memcmp(y1, y2, (size_t)(M * N) * 4) == 0);
    free(data);
    free(scales);
    free(x);
    free(y1);
    free(y2);
    free(work);
    free(q);
}

static void q4_check_tests(void) {
    uint8_t d[8] = {0};
    float s[8] = {0};
    etch_q4_weights w = {2, 8, 4, d, s, NULL};
    CHECK_OK(etch_q4_check(&w));
    w.G = 3;
    CHECK_STATUS(etch_q4_check(&w), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "group size 3") != NULL);
    w.G = 6;
    CHECK_STATUS(etch_q4_check(&w), ETCH_ERR_INVALID_ARGUMENT);
    w.G = 4;
    w.K = 7;
    CHECK_STATUS(etch_q4_check(&w), ETCH_ERR_INVALID_ARGUMENT);
    w.K = 8;
    w.scales = NULL;
    CHECK_STATUS(etch_q4_check(&w), ETCH_ERR_INVALID_ARGUMENT);
}

/* ---- per-token quantization -------------------------------------------------------------- */

static void per_token_tests(void) {
    /* ExecuTorch's op_choose_qparams_test (per-token asymmetric, Float) */
    const float in[6] = {-0.5f, 0.3f, 1.2f, 0.1f, -0.8f, 2.1f};
    float sc[4];
    int32_t zp[4];
    etch_q8_choose_qparams_per_token(in, 2, 3, 3, sc, zp);
    CHECK_NEAR(sc[0], 0.00666667, 1e-7);
    CHECK_NEAR(sc[1], 0.0113725485, 1e-8);
    CHECK(zp[0] == -53 && zp[1] == -58);
    /* all positive: zero point at the low end; all negative: the high end; all zero: the
     * scale falls back to 0.1 (ExecuTorch: zero point from the max side, 127) */
    const float ends[12] = {0.5f, 1.0f, 2.0f, -0.5f, -1.0f, -2.0f, 0, 0, 0, 1e-9f, 0, 2e-9f};
    etch_q8_choose_qparams_per_token(ends, 4, 3, 3, sc, zp);
    CHECK(zp[0] == -128 && zp[1] == 127);
    CHECK_NEAR(sc[0], 2.0 / 255, 1e-9);
    CHECK(sc[2] == 0.1f);
    CHECK(zp[2] == 127);
    CHECK(sc[3] == 6.1e-5f); /* tiny range: the small-scale threshold */
    CHECK(zp[3] == -128);
    /* quantize: the round trip is within half a step, the range ends are reached */
    const int64_t M = 7, K = 301;
    float *x = xalloc64((size_t)(M * K) * 4);
    int8_t *q = xalloc64((size_t)(M * K));
    float s7[7];
    int32_t z7[7];
    for (int64_t i = 0; i < M * K; i++)
        x[i] = kt_rng_float(&rng) * (float)(i / K + 1) + (i / K == 3 ? 5.0f : 0.0f);
    etch_q8_choose_qparams_per_token(x, M, K, K, s7, z7);
    etch_q8_quantize_per_token(x, M, K, K, s7, z7, q, K);
    int bad = 0, far = 0, hi = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            const double back = ((double)q[m * K + k] - z7[m]) * s7[m];
            /* half a step, or one where the nudged zero point clamps the range's end */
            if (fabs(back - x[m * K + k]) > s7[m] * (1 + 1e-5))
                bad++;
            if (fabs(back - x[m * K + k]) > 0.5 * s7[m] * (1 + 1e-5))
                far++;
            hi += m == 3 && q[m * K + k] == 127;
        }
    CHECK(bad == 0);
    CHECK(far <= 2 * M); /* only at the ends */
    CHECK(hi >= 1);      /* the all-positive row reaches the top */
    /* out-of-range values clamp */
    const float big[3] = {1e6f, -1e6f, 0.25f};
    const float s1 = 0.01f;
    const int32_t z1 = 3;
    int8_t q3[3];
    etch_q8_quantize_per_token(big, 1, 3, 3, &s1, &z1, q3, 3);
    CHECK(q3[0] == 127 && q3[1] == -128 && q3[2] == 28);
    free(x);
    free(q);
}

/* ---- int8 GEMM ----------------------------------------------------------------------------- */

typedef struct q8_case {
    int64_t M, N, K;
    bool a_signed;
    int za_mode;     /* 0 random, 1 low end, 2 high end */
    int zb;          /* 0 none, 1 per channel (ends included) */
    int fill;        /* 0 random, 1 saturating (a at its max, b at -128), 2 a max, b 127 */
    int bias32;
    bool per_channel;
    int out_type;
    int fbias;
    int ctxv;
} q8_case;

static int q8_cases_run;

static void q8_run_case(const q8_case *c, int isa) {
    const int64_t M = c->M, N = c->N, K = c->K, lda = K + 5, ldb = K + 2, ldc = N + 3;
    uint8_t *a = xalloc64((size_t)(M * lda));
    int8_t *b = xalloc64((size_t)(N * ldb));
    int32_t *zb = xalloc64((size_t)N * 4), *b32 = xalloc64((size_t)N * 4);
    float *mult = xalloc64((size_t)N * 4), *fb = xalloc64((size_t)N * 4);
    for (int64_t i = 0; i < M * lda; i++)
        a[i] = c->fill ? (c->a_signed ? 127 : 255) : (uint8_t)rnd();
    if (c->fill && c->a_signed)
        for (int64_t i = 0; i < M * lda; i += 3)
            a[i] = 0x80; /* -128 too */
    for (int64_t i = 0; i < N * ldb; i++)
        b[i] = c->fill == 1 ? -128 : c->fill == 2 ? 127 : (int8_t)rnd();
    for (int64_t n = 0; n < N; n++) {
        const int e = rndi(0, 3);
        zb[n] = e == 0 ? -128 : e == 1 ? 127 : rndi(-128, 127);
        b32[n] = rndi(-100000, 100000);
        mult[n] = (float)(rnd() % 1000 + 1) * 1e-6f;
        fb[n] = kt_rng_float(&rng);
    }
    const int32_t amin = c->a_signed ? -128 : 0, amax = c->a_signed ? 127 : 255;
    const int32_t za = c->za_mode == 1 ? amin : c->za_mode == 2 ? amax : rndi(amin, amax);
    etch_q8_packed pk;
    void *pd = xalloc64(etch_q8_gemm_packed_size(isa, N, K));
    etch_q8_gemm_pack(isa, b, N, K, ldb, pd, &pk);
    const size_t esz = c->out_type == ETCH_Q8_OUT_S8 || c->out_type == ETCH_Q8_OUT_U8 ? 1 : 4;
    uint8_t *out = xalloc64((size_t)(M * ldc) * esz);
    memset(out, 0x5a, (size_t)(M * ldc) * esz);
    void *work = xalloc64(etch_q8_gemm_work_size(M, K));
    etch_q8_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M;
    d.a = a;
    d.lda = lda;
    d.a_signed = c->a_signed;
    d.za = za;
    d.b = &pk;
    d.zb = c->zb ? zb : NULL;
    d.bias32 = c->bias32 ? b32 : NULL;
    d.mult = mult;
    d.mult_per_channel = c->per_channel;
    d.out_type = c->out_type;
    d.fbias = c->fbias ? fb : NULL;
    if (c->out_type == ETCH_Q8_OUT_S8) {
        d.zo = rndi(-20, 20);
        d.qmin = rnd() & 1 ? -128 : d.zo; /* a fused relu clamps at the zero point */
        d.qmax = 127;
    } else {
        d.zo = rndi(100, 150);
        d.qmin = 0;
        d.qmax = rnd() & 1 ? 255 : 200;
    }
    d.c = out;
    d.ldc = ldc;
    d.work = work;
    etch_kernel_context cb;
    CHECK_OK(etch_q8_gemm(ctx_pick(&cb, c->ctxv), &d));
    int bad = 0, clamped = 0;
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t s = 0;
            for (int64_t k = 0; k < K; k++) {
                const int32_t av = c->a_signed ? (int32_t)(int8_t)a[m * lda + k] : a[m * lda + k];
                s += (int64_t)(av - za) * (b[n * ldb + k] - (c->zb ? zb[n] : 0));
            }
            if (c->bias32)
                s += b32[n];
            const int32_t acc = (int32_t)s;
            const float mu = mult[c->per_channel ? n : 0];
            const size_t at = (size_t)(m * ldc + n);
            bool ok;
            if (c->out_type == ETCH_Q8_OUT_S32) {
                int32_t g;
                memcpy(&g, out + at * 4, 4);
                ok = g == acc;
            } else if (c->out_type == ETCH_Q8_OUT_F32) {
                const float ref = (float)acc * mu + (c->fbias ? fb[n] : 0.0f);
                float g;
                memcpy(&g, out + at * 4, 4);
                ok = memcmp(&g, &ref, 4) == 0;
            } else {
                double t = nearbyint((double)((float)acc * mu)) + d.zo;
                if (t < d.qmin || t > d.qmax)
                    clamped++;
                t = t < d.qmin ? d.qmin : t > d.qmax ? d.qmax : t;
                const int g = c->out_type == ETCH_Q8_OUT_S8 ? (int)(int8_t)out[at] : (int)out[at];
                ok = g == (int)t;
            }
            if (!ok) {
                fprintf(stderr,
                        "  %s q8 M=%lld N=%lld K=%lld signed=%d za=%d zb=%d fill=%d out=%d "
                        "ctx=%d: mismatch at [%lld,%lld] (acc %d)\n",
                        isa_now, (long long)M, (long long)N, (long long)K, c->a_signed, za,
                        c->zb, c->fill, c->out_type, c->ctxv, (long long)m, (long long)n, acc);
                bad++;
                break;
            }
        }
    /* the row padding of c is untouched */
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = N; n < ldc; n++)
            for (size_t e = 0; e < esz; e++)
                bad += out[(size_t)(m * ldc + n) * esz + e] != 0x5a;
    CHECK_MSG(bad == 0, "%s q8 case M=%lld N=%lld K=%lld", isa_now, (long long)M,
              (long long)N, (long long)K);
    q8_cases_run++;
    (void)clamped;
    free(a);
    free(b);
    free(zb);
    free(b32);
    free(mult);
    free(fb);
    free(pd);
    free(out);
    free(work);
}

static void q8_tests(int isa) {
    for (int r = 0; r < 80; r++) {
        q8_case c;
        c.M = rndi(1, 20);
        c.N = rndi(1, 70);
        c.K = rndi(1, 300);
        c.a_signed = rnd() & 1;
        c.za_mode = rndi(0, 2);
        c.zb = rndi(0, 1);
        c.fill = r % 8 == 7 ? rndi(1, 2) : 0;
        c.bias32 = rndi(0, 1);
        c.per_channel = rnd() & 1;
        c.out_type = rndi(0, 3);
        c.fbias = rndi(0, 1);
        c.ctxv = rndi(0, 5);
        q8_run_case(&c, isa);
    }
    /* saturation: sums that vpmaddubsw would clip (255 * -128 twice per pair), long K */
    for (int s = 0; s < 2; s++)
        for (int v = 0; v <= 5; v++) {
            const q8_case c = {17, 35, 2051, s == 1, 1 + s, 0, 1 + s, 0, true,
                               ETCH_Q8_OUT_S32, 0, v};
            q8_run_case(&c, isa);
        }
    const q8_case big = {64, 200, 768, false, 0, 1, 0, 1, true, ETCH_Q8_OUT_U8, 0, 4};
    q8_run_case(&big, isa);
}

static void q8_mismatch_tests(void) {
    /* weights packed for another instruction set are refused */
    const etch_isa active = etch_isa_active();
    const int other = active == ETCH_ISA_SCALAR ? (int)etch_isa_best() : ETCH_ISA_SCALAR;
    if (other == (int)active)
        return;
    int8_t b[16] = {0};
    uint8_t a[8] = {0};
    etch_q8_packed pk;
    void *pd = xalloc64(etch_q8_gemm_packed_size(other, 2, 8));
    etch_q8_gemm_pack(other, b, 2, 8, 8, pd, &pk);
    int32_t out[2];
    const float mult = 1.0f;
    etch_q8_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = 1;
    d.a = a;
    d.lda = 8;
    d.b = &pk;
    d.mult = &mult;
    d.out_type = ETCH_Q8_OUT_S32;
    d.c = out;
    d.ldc = 2;
    void *work = xalloc64(etch_q8_gemm_work_size(1, 8));
    d.work = work;
    CHECK_STATUS(etch_q8_gemm(NULL, &d), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "packed for") != NULL);
    /* bad descriptions, with weights packed for the active ISA */
    etch_q8_gemm_pack(-1, b, 2, 8, 8, pd, &pk);
    CHECK_OK(etch_q8_gemm(NULL, &d));
    d.za = 256;
    CHECK_STATUS(etch_q8_gemm(NULL, &d), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "zero point 256") != NULL);
    d.za = 0;
    d.out_type = ETCH_Q8_OUT_S8;
    d.mult = NULL;
    CHECK_STATUS(etch_q8_gemm(NULL, &d), ETCH_ERR_INVALID_ARGUMENT);
    d.mult = &mult;
    d.qmin = 10;
    d.qmax = 5;
    CHECK_STATUS(etch_q8_gemm(NULL, &d), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "clamp") != NULL);
    d.qmin = -128;
    d.qmax = 127;
    d.out_type = ETCH_Q8_OUT_U8;
    CHECK_STATUS(etch_q8_gemm(NULL, &d), ETCH_ERR_INVALID_ARGUMENT);
    free(pd);
    free(work);
}

int main(void) {
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            kt_shuffle_pool_init(&spools[s][t], t, (kt_split)s, rnd);
    CHECK_OK(etch_threadpool_create(2, &real_pools[2]));
    q4_check_tests();
    per_token_tests();
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    const unsigned cpu = etch_quant_features_cpu();
    int run = 0;
    for (int i = 0; i < n_isas; i++) {
        CHECK_OK(etch_isa_set(isas[i]));
        /* with the sub-feature (when the CPU has it) and without */
        const unsigned feat = isas[i] == ETCH_ISA_AVX512 ? (cpu & ETCH_QF_VNNI)
                              : isas[i] == ETCH_ISA_NEON ? (cpu & ETCH_QF_DOTPROD)
                                                         : 0u;
        for (int f = feat ? 0 : 1; f < 2; f++) {
            etch_quant_features_allow(f == 0 ? ~0u : 0u);
            char name[64];
            snprintf(name, sizeof name, "%s%s", etch_isa_name(isas[i]),
                     f == 0 ? (feat == ETCH_QF_VNNI ? "+vnni" : "+dotprod") : "");
            isa_now = name;
            const int before = etch_test_failed_, c4 = q4_cases_run, c8 = q8_cases_run,
                      c8w = q8w_cases_run;
            q4_tests();
            q8w_tests();
            q4_f32_quantizing_tests();
            q8_tests((int)isas[i]);
            q8_mismatch_tests();
            printf("isa %-14s run: %d int4 cases, %d 8w cases, %d int8 GEMM cases, "
                   "%d failures\n",
                   name, q4_cases_run - c4, q8w_cases_run - c8w, q8_cases_run - c8,
                   etch_test_failed_ - before);
            run++;
        }
        etch_quant_features_allow(~0u);
    }
    CHECK(run >= 1);
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            CHECK(spools[s][t].calls > 0);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_threadpool_destroy(real_pools[2]);
    return etch_test_finish();
}
