/* The int8 convolution core (src/kernels/optimized/quant.h, "int8 convolution"; qconv.c)
 * against a scalar reference that reads x and w in their plain layouts: the int32 sum
 * bias32 + sum (x - zx) * w over the taps inside the input, in int64, then quant.h's
 * requantization clamp(nearbyintf((float)acc * mult) + zo, qmin, qmax). Compared byte for
 * byte under every instruction set this CPU supports (with and without AVX-512 VNNI / the arm
 * dot product), with 1..4 threads (the harness's shuffling pools with their three split
 * policies, etch's pthread pool, no context), over odd channel counts and spatial sizes,
 * strides 1 and 2, padding, dilation, groups and depthwise (channel multiplier 1 and 2),
 * zero points 0 and 255, saturating clamps and the fused-ReLU clamp (qmin = zo); packed
 * weights given and packed by the core itself; and bad descriptions refused by name.
 * Also the optimized quantize_per_tensor / dequantize_per_tensor (qdq.c) against the
 * portable kernels, bit for bit: uint8 and int8, zero points at the ends, values that
 * saturate, NaN and infinities, tiny and huge scales, odd lengths, every thread split. */
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
#include "kernels/optimized/opt_quant.h"
#include "kernels/optimized/quant.h"
#include "kernels/portable/portable_quant.h"
#include "runtime/context.h"

static kt_rng rng = {0x9e3779b97f4a7c15ull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static int rndi(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }

static kt_shuffle_pool spools[3][5];
static etch_threadpool *real_pool;
static const char *isa_now = "";
static int cases_run;

static etch_kernel_context *ctx_pick(etch_kernel_context *ctx, int variant) {
    if (variant == 0)
        return NULL;
    const etch_threadpool_iface *tp = NULL;
    if (variant >= 2 && variant <= 4)
        tp = &spools[rndi(0, 2)][variant].iface;
    else if (variant == 5)
        tp = etch_threadpool_get_iface(real_pool);
    etch_kernel_context_init(ctx, "test", NULL, 0, tp);
    return ctx;
}

static void *xalloc64(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memset(p, 0xa5, (n + 63) / 64 * 64 + 64);
    return p;
}

typedef struct qc_case {
    int64_t N, C, H, W, OC, KH, KW, groups, s, p, dil;
    int zx, zo, relu;
    float mult_scale; /* mult ~ mult_scale / (Cg * KH * KW * 64): larger saturates */
} qc_case;

static uint8_t ref_requant(int64_t acc, float mult, int32_t zo, int32_t qmin, int32_t qmax) {
    const float t = nearbyintf((float)(int32_t)acc * mult) + (float)zo;
    return (uint8_t)(!(t > (float)qmin) ? qmin : t >= (float)qmax ? qmax : (int32_t)t);
}

static void run_case(const qc_case *c, int variant, bool prepack) {
    etch_q8_conv_desc d;
    memset(&d, 0, sizeof d);
    d.N = c->N;
    d.C = c->C;
    d.H = c->H;
    d.W = c->W;
    d.OC = c->OC;
    d.KH = c->KH;
    d.KW = c->KW;
    d.groups = c->groups;
    d.sh = d.sw = c->s;
    d.ph = d.pw = c->p;
    d.dh = d.dw = c->dil;
    d.OH = (c->H + 2 * c->p - c->dil * (c->KH - 1) - 1) / c->s + 1;
    d.OW = (c->W + 2 * c->p - c->dil * (c->KW - 1) - 1) / c->s + 1;
    const int64_t Cg = c->C / c->groups, K = Cg * c->KH * c->KW;
    const int64_t nx = c->N * c->C * c->H * c->W, nw = c->OC * K;
    const int64_t ny = c->N * c->OC * d.OH * d.OW;
    uint8_t *x = xalloc64((size_t)nx), *y = xalloc64((size_t)ny), *yr = xalloc64((size_t)ny);
    int8_t *w = xalloc64((size_t)nw);
    int32_t *b32 = xalloc64((size_t)c->OC * 4);
    float *mult = xalloc64((size_t)c->OC * 4);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (uint8_t)rndi(0, 255);
    for (int64_t i = 0; i < nw; i++)
        w[i] = (int8_t)rndi(-127, 127);
    for (int64_t o = 0; o < c->OC; o++) {
        b32[o] = rndi(-20000, 20000);
        mult[o] = c->mult_scale * (0.5f + (float)rndi(0, 1000) / 1000.0f) / (float)(K * 64);
    }
    d.x = x;
    d.zx = c->zx;
    d.w = w;
    d.bias32 = (rnd() & 3) ? b32 : NULL;
    d.mult = mult;
    d.zo = c->zo;
    d.qmin = c->relu ? c->zo : 0;
    d.qmax = 255;
    d.y = y;
    void *pk_buf = NULL;
    etch_q8_packed pk;
    if (prepack && c->groups == 1 && Cg > 1) {
        pk_buf = xalloc64(etch_q8_gemm_packed_size(-1, c->OC, K));
        etch_q8_gemm_pack(-1, w, c->OC, K, K, pk_buf, &pk);
        d.packed = &pk;
    }
    CHECK_OK(etch_q8_conv_check(&d));
    /* the reference */
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->OC; o++) {
            const int64_t g = o / (c->OC / c->groups);
            for (int64_t oh = 0; oh < d.OH; oh++)
                for (int64_t ow = 0; ow < d.OW; ow++) {
                    int64_t acc = d.bias32 ? d.bias32[o] : 0;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                const int64_t ih = oh * c->s - c->p + kh * c->dil;
                                const int64_t iw = ow * c->s - c->p + kw * c->dil;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                                    continue;
                                const int64_t xv =
                                    x[((n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw];
                                acc += (xv - c->zx) * w[(o * Cg + ci) * c->KH * c->KW +
                                                        kh * c->KW + kw];
                            }
                    yr[((n * c->OC + o) * d.OH + oh) * d.OW + ow] =
                        ref_requant(acc, mult[o], d.zo, d.qmin, d.qmax);
                }
        }
    etch_kernel_context kc;
    etch_kernel_context *ctx = ctx_pick(&kc, variant);
    const int threads = ctx ? etch_kernel_num_threads(ctx) : 1;
    void *work = xalloc64(etch_q8_conv_work_size(&d, threads));
    CHECK_OK(etch_q8_conv(ctx, &d, work));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < ny; i++)
        if (y[i] != yr[i] && bad++ == 0)
            first = i;
    if (bad) {
        CHECK(bad == 0);
        fprintf(stderr,
                "  %s: N%lld C%lld %lldx%lld OC%lld k%lldx%lld g%lld s%lld p%lld d%lld zx%d zo%d "
                "relu%d variant %d prepack %d: %lld bytes differ, first at %lld (%d vs %d)\n",
                isa_now, (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W,
                (long long)c->OC, (long long)c->KH, (long long)c->KW, (long long)c->groups,
                (long long)c->s, (long long)c->p, (long long)c->dil, c->zx, c->zo, c->relu,
                variant, (int)prepack, (long long)bad, (long long)first, y[first], yr[first]);
    }
    cases_run++;
    free(x);
    free(y);
    free(yr);
    free(w);
    free(b32);
    free(mult);
    free(work);
    free(pk_buf);
}

static const qc_case CASES[] = {
    /* N  C  H   W  OC KH KW  g  s  p  d  zx   zo relu mult */
    {1, 3, 9, 11, 8, 3, 3, 1, 2, 1, 1, 123, 110, 0, 1.0f},   /* a stem, odd sizes */
    {2, 5, 7, 6, 7, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1.0f},        /* zero points 0, relu */
    {1, 17, 5, 5, 19, 1, 1, 1, 1, 0, 1, 255, 255, 0, 1.0f},  /* 1x1, zero points 255 */
    {1, 16, 8, 9, 33, 1, 1, 1, 2, 0, 1, 128, 7, 0, 1.0f},    /* 1x1 stride 2 */
    {1, 8, 13, 13, 8, 3, 3, 8, 1, 1, 1, 90, 140, 1, 1.0f},   /* depthwise, relu */
    {1, 9, 10, 7, 9, 3, 3, 9, 2, 1, 1, 255, 0, 0, 1.0f},     /* depthwise, stride 2 */
    {2, 6, 6, 11, 12, 5, 5, 6, 1, 2, 1, 3, 200, 0, 1.0f},    /* depthwise x2, 5x5 */
    {1, 4, 9, 9, 4, 3, 3, 4, 1, 2, 2, 50, 60, 0, 1.0f},      /* depthwise, dilation 2 */
    {1, 12, 7, 5, 10, 3, 3, 2, 1, 1, 1, 77, 33, 1, 1.0f},    /* groups 2 */
    {1, 6, 11, 4, 9, 3, 1, 3, 2, 0, 1, 0, 255, 0, 1.0f},     /* groups 3, 3x1, stride 2 */
    {1, 7, 6, 6, 5, 3, 3, 1, 1, 1, 1, 128, 128, 0, 400.0f},  /* saturation at both ends */
    {1, 32, 15, 15, 24, 3, 3, 1, 1, 1, 1, 60, 100, 1, 1.0f}, /* several pixel blocks */
    {0, 3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 0, 0, 0, 1.0f},        /* empty batch */
};

static void case_tests(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        for (int v = 0; v <= 5; v++)
            run_case(&CASES[i], v, v & 1);
    /* random shapes */
    for (int r = 0; r < 24; r++) {
        qc_case c;
        const int dw = rndi(0, 2) == 0;
        c.N = rndi(1, 2);
        c.groups = dw ? rndi(1, 12) : rndi(1, 3);
        c.C = c.groups * (dw ? 1 : rndi(1, 9));
        c.OC = c.groups * rndi(1, dw ? 2 : 11);
        c.KH = rndi(1, 5);
        c.KW = rndi(1, 5);
        c.s = rndi(1, 2);
        c.dil = rndi(1, 2);
        c.p = rndi(0, 2);
        c.H = rndi(1, 12) + c.dil * (c.KH - 1);
        c.W = rndi(1, 12) + c.dil * (c.KW - 1);
        c.zx = rndi(0, 255);
        c.zo = rndi(0, 255);
        c.relu = rndi(0, 1);
        c.mult_scale = rndi(0, 4) == 0 ? 50.0f : 1.0f;
        run_case(&c, rndi(0, 5), rndi(0, 1));
    }
}

static void check_tests(void) {
    etch_q8_conv_desc d;
    memset(&d, 0, sizeof d);
    uint8_t x[64] = {0}, y[64];
    int8_t w[64] = {0};
    float mult[4] = {0.01f, 0.01f, 0.01f, 0.01f};
    d = (etch_q8_conv_desc){.N = 1, .C = 2, .H = 4, .W = 4, .OC = 2, .KH = 3, .KW = 3,
                            .groups = 1, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1,
                            .OH = 4, .OW = 4, .x = x, .w = w, .mult = mult, .qmax = 255, .y = y};
    CHECK_OK(etch_q8_conv_check(&d));
    etch_q8_conv_desc e = d;
    e.OH = 5;
    CHECK_STATUS(etch_q8_conv_check(&e), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "output") != NULL);
    e = d;
    e.zx = 256;
    CHECK_STATUS(etch_q8_conv_check(&e), ETCH_ERR_INVALID_ARGUMENT);
    e = d;
    e.qmin = 10;
    e.qmax = 9;
    CHECK_STATUS(etch_q8_conv_check(&e), ETCH_ERR_INVALID_ARGUMENT);
    e = d;
    e.groups = 3;
    CHECK_STATUS(etch_q8_conv_check(&e), ETCH_ERR_INVALID_ARGUMENT);
    e = d;
    e.C = 4096;
    e.KH = e.KW = 3;
    CHECK_STATUS(etch_q8_conv_check(&e), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "reduction") != NULL);
}

/* ---- quantize / dequantize per tensor ---------------------------------------------------- */

static int qdq_cases_run;

static void qdq_case(int64_t n, int dtype, double scale, int64_t zp, int64_t qmin, int64_t qmax,
                     int variant) {
    float *f = xalloc64((size_t)n * 4), *fo = xalloc64((size_t)n * 4),
          *fr = xalloc64((size_t)n * 4);
    uint8_t *q = xalloc64((size_t)n), *qo = xalloc64((size_t)n), *qr = xalloc64((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        const uint32_t r = rnd();
        f[i] = (r & 15) == 0 ? (float)((int)(r >> 4) % 300 - 150) * (float)scale * 0.5f
                             : (float)((double)(int32_t)r / 2147483648.0 * 300.0 * scale);
        q[i] = (uint8_t)(r >> 8);
    }
    if (n > 3) {
        f[0] = NAN;
        f[1] = INFINITY;
        f[2] = -INFINITY;
        f[3] = 1e30f;
    }
    const int64_t sz[1] = {n};
    etch_tensor tf, tfo, tfr, tq, tqo, tqr;
    CHECK_OK(etch_tensor_init(&tf, ETCH_DTYPE_FLOAT, 1, sz, f));
    CHECK_OK(etch_tensor_init(&tfo, ETCH_DTYPE_FLOAT, 1, sz, fo));
    CHECK_OK(etch_tensor_init(&tfr, ETCH_DTYPE_FLOAT, 1, sz, fr));
    CHECK_OK(etch_tensor_init(&tq, dtype, 1, sz, q));
    CHECK_OK(etch_tensor_init(&tqo, dtype, 1, sz, qo));
    CHECK_OK(etch_tensor_init(&tqr, dtype, 1, sz, qr));
    etch_kernel_context kc, pc;
    etch_kernel_context *ctx = ctx_pick(&kc, variant < 1 ? 1 : variant);
    etch_kernel_context_init(&pc, "portable", NULL, 0, NULL);
    /* quantize_per_tensor.out(input, scale, zp, qmin, qmax, dtype, out, ret) */
    etch_value qv[2][8];
    etch_value *qa[2][8];
    etch_tensor *qouts[2] = {&tqo, &tqr};
    for (int k = 0; k < 2; k++) {
        qv[k][0] = kt_vtensor(&tf);
        qv[k][1] = kt_vdouble(scale);
        qv[k][2] = kt_vint(zp);
        qv[k][3] = kt_vint(qmin);
        qv[k][4] = kt_vint(qmax);
        qv[k][5] = kt_vint(dtype);
        qv[k][6] = qv[k][7] = kt_vtensor(qouts[k]);
        for (int a = 0; a < 8; a++)
            qa[k][a] = &qv[k][a];
    }
    etch_opt_quantize_per_tensor_out(ctx, qa[0], 8);
    etch_portable_quantize_per_tensor_out(&pc, qa[1], 8);
    CHECK(etch_kernel_failed(ctx) == etch_kernel_failed(&pc));
    CHECK_MSG(memcmp(qo, qr, (size_t)n) == 0, "quantize n %lld dtype %d scale %g zp %lld: differs",
              (long long)n, dtype, scale, (long long)zp);
    /* dequantize_per_tensor.out(input, scale, zp, qmin, qmax, dtype, out_dtype, out, ret) */
    etch_kernel_context_init(&pc, "portable", NULL, 0, NULL);
    ctx = ctx_pick(&kc, variant < 1 ? 1 : variant);
    etch_value dv[2][9];
    etch_value *da[2][9];
    etch_tensor *douts[2] = {&tfo, &tfr};
    for (int k = 0; k < 2; k++) {
        dv[k][0] = kt_vtensor(&tq);
        dv[k][1] = kt_vdouble(scale);
        dv[k][2] = kt_vint(zp);
        dv[k][3] = kt_vint(qmin);
        dv[k][4] = kt_vint(qmax);
        dv[k][5] = kt_vint(dtype);
        dv[k][6] = (variant & 1) ? kt_vint(ETCH_DTYPE_FLOAT) : kt_vnone();
        dv[k][7] = dv[k][8] = kt_vtensor(douts[k]);
        for (int a = 0; a < 9; a++)
            da[k][a] = &dv[k][a];
    }
    etch_opt_dequantize_per_tensor_out(ctx, da[0], 9);
    etch_portable_dequantize_per_tensor_out(&pc, da[1], 9);
    CHECK(etch_kernel_failed(ctx) == etch_kernel_failed(&pc));
    CHECK_MSG(memcmp(fo, fr, (size_t)n * 4) == 0, "dequantize n %lld dtype %d scale %g: differs",
              (long long)n, dtype, scale);
    qdq_cases_run++;
    free(f);
    free(fo);
    free(fr);
    free(q);
    free(qo);
    free(qr);
}

static void qdq_tests(void) {
    const double scales[] = {0.0078125, 0.013062581419944763, 1e-6, 3.5, 1e-30};
    for (int v = 1; v <= 5; v++)
        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
            qdq_case(rndi(1, 70000), ETCH_DTYPE_BYTE, scales[s], rndi(0, 255), 0, 255, v);
            qdq_case(rndi(1, 999), ETCH_DTYPE_BYTE, scales[s], 0, 0, 255, v);
            qdq_case(rndi(1, 999), ETCH_DTYPE_BYTE, scales[s], 255, 3, 250, v);
            qdq_case(rndi(1, 40000), ETCH_DTYPE_CHAR, scales[s], rndi(-128, 127), -128, 127, v);
            qdq_case(rndi(1, 999), ETCH_DTYPE_CHAR, scales[s], -128, -127, 127, v);
        }
    /* arguments the portable kernel refuses: both fail */
    qdq_case(17, ETCH_DTYPE_BYTE, 0.1, 300, 0, 255, 1);
    qdq_case(17, ETCH_DTYPE_BYTE, 0.1, 3, 10, 5, 1);
    qdq_case(17, ETCH_DTYPE_BYTE, NAN, 3, 0, 255, 1);
    qdq_case(17, ETCH_DTYPE_CHAR, 0.0, 0, -128, 127, 1);
}

int main(void) {
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            kt_shuffle_pool_init(&spools[s][t], t, (kt_split)s, rnd);
    CHECK_OK(etch_threadpool_create(2, &real_pool));
    check_tests();
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    const unsigned cpu = etch_quant_features_cpu();
    int run = 0;
    for (int i = 0; i < n_isas; i++) {
        CHECK_OK(etch_isa_set(isas[i]));
        const unsigned feat = isas[i] == ETCH_ISA_AVX512 ? (cpu & ETCH_QF_VNNI)
                              : isas[i] == ETCH_ISA_NEON ? (cpu & ETCH_QF_DOTPROD)
                                                         : 0u;
        for (int f = feat ? 0 : 1; f < 2; f++) {
            etch_quant_features_allow(f == 0 ? ~0u : 0u);
            char name[64];
            snprintf(name, sizeof name, "%s%s", etch_isa_name(isas[i]),
                     f == 0 ? (feat == ETCH_QF_VNNI ? "+vnni" : "+dotprod") : "");
            isa_now = name;
            const int before = etch_test_failed_, c0 = cases_run, d0 = qdq_cases_run;
            case_tests();
            qdq_tests();
            printf("isa %-14s run: %d int8 conv cases, %d quantize/dequantize cases, %d "
                   "failures\n", name, cases_run - c0, qdq_cases_run - d0, etch_test_failed_ - before);
            run++;
        }
        etch_quant_features_allow(~0u);
    }
    CHECK(run >= 1);
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            CHECK(spools[s][t].calls > 0);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_threadpool_destroy(real_pool);
    return etch_test_finish();
}
