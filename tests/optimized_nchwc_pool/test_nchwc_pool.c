/*
 * Channel-blocked (NCHW8c) kernels against the portable ones on NCHW data, under every
 * instruction set this CPU supports (the others are named as not run), with 1..4 threads of a
 * test pool that runs the chunks in a shuffled order (three split policies) and the library's
 * pthreads pool with 3 threads ("5 threads" in messages):
 *
 *  - depthwise convolution through etch_opt_convolution_out with input and output blocked
 *    (ctx.blocked bits 0, 9, 10): mobilenet_v2's 3x3 stride 1 / 2 layers (112x112x32 ..
 *    7x7x960), 5x5 pad 2, 3x3 dilation 2, stride 3, padding 0, larger kernels (9x9, gathered
 *    weights), odd sizes 1..13, N = 2, with and without bias, every fused activation.
 *    Tolerance as tests/optimized_conv: |opt - ref| <= 1e-5 * (sum |w||x| + |b|) + 1e-6 per
 *    element, ref the activation (in double) of the portable result; the weight prepared as
 *    at load (etch_opt_convolution_prepare: [C/8][KH*KW][8]) gives the same bits;
 *  - max_pool2d_with_indices with self, out and indices blocked: values and indices equal to
 *    the portable kernel's exactly (inputs with ties, NaN, +-inf), any kernel / stride /
 *    padding / dilation / ceil_mode;
 *  - mean over dims {2, 3} (any spelling) and the 1x1 adaptive average pool of a blocked self:
 *    equal to the portable kernels bit for bit (same double sums in the same order);
 *  - every thread split gives the bits of the serial run; no kernel call allocates;
 *  - the layout functions' answers for accepted and refused calls, and that a blocked call
 *    whose arguments do not fit fails cleanly.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_wrap.h"
#include "etch/kernels.h"
#include "etch/status.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/nchwc.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static kt_rng rng = {0x2545f4914f6cdd1dull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static float frand(void) { return kt_rng_float(&rng); }
static int irand(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }

static etch_isa isas[KT_N_ISAS];
static int n_isas;
static long alloc_calls_seen, counted_calls;

#define BIT(k) ((uint64_t)1 << (k))

/* The library's pthreads pool with 3 threads (run as "threads" 5 below). */
static etch_threadpool *real_pool;
#define REAL_POOL 5

/* Call a kernel with a fresh context (blocked args, epilogue); threads 2..4: the shuffling
 * test pool with a split policy drawn per call; REAL_POOL: the library's pool. */
/* The prepared data run_kernel's calls get (what the runtime passes a call site; NULL: none). */
static const void *run_prepared;
static size_t run_prepared_size;

static etch_status run_kernel(etch_kernel_fn fn, etch_value **args, size_t nargs,
                              uint64_t blocked, const etch_epilogue *e, int threads) {
    kt_shuffle_pool pool;
    kt_shuffle_pool_init(&pool, threads, (kt_split)irand(0, 2), rnd);
    const etch_threadpool_iface *tp = threads > 1 ? &pool.iface : NULL;
    if (threads == REAL_POOL)
        tp = etch_threadpool_get_iface(real_pool);
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "op", NULL, 0, tp);
    ctx.epilogue = e && e->act != ETCH_ACT_NONE ? e : NULL;
    ctx.blocked = blocked;
    ctx.prepared = run_prepared;
    ctx.prepared_size = run_prepared_size;
    etch_alloc_arm();
    fn(&ctx, args, nargs);
    etch_alloc_disarm();
    alloc_calls_seen += etch_alloc_calls;
    counted_calls++;
    return ctx.status;
}

static const etch_epilogue epilogues[] = {
    {ETCH_ACT_NONE, 0, 0},  {ETCH_ACT_RELU, 0, 0},       {ETCH_ACT_CLAMP, 0, 6},
    {ETCH_ACT_CLAMP, -0.5, 0.25}, {ETCH_ACT_GELU, 0, 0}, {ETCH_ACT_GELU_TANH, 0, 0},
    {ETCH_ACT_SILU, 0, 0},  {ETCH_ACT_SIGMOID, 0, 0},
};
#define N_EPI ((int)(sizeof epilogues / sizeof epilogues[0]))

/* int64 [N, C, H, W] from blocked order */
static void from_blocked_i64(const int64_t *b, int64_t *o, int64_t N, int64_t C, int64_t H,
                             int64_t W) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++)
                o[((n * C + c) * H * W) + i] = b[((n * (C / 8) + c / 8) * H * W + i) * 8 + c % 8];
}

static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* ---- depthwise convolution ------------------------------------------------------------------ */

typedef struct dw_case {
    int N, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw;
    bool bias;
    int epi;
} dw_case;

static double dw_worst; /* max error / tolerance seen */
static int dw_runs;

static void dw_check(const dw_case *c) {
    const int64_t OH = out_size(c->H, c->KH, c->ph, c->sh, c->dh);
    const int64_t OW = out_size(c->W, c->KW, c->pw, c->sw, c->dw);
    const int64_t nx = (int64_t)c->N * c->C * c->H * c->W, nw = (int64_t)c->C * c->KH * c->KW;
    const int64_t no = (int64_t)c->N * c->C * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *ax = kt_xmalloc((size_t)nx * 4), *xb = kt_xmalloc((size_t)nx * 4);
    float *w = kt_xmalloc((size_t)nw * 4), *aw = kt_xmalloc((size_t)nw * 4);
    float *b = kt_xmalloc((size_t)c->C * 4), *ab = kt_xmalloc((size_t)c->C * 4);
    float *ref = kt_xmalloc((size_t)no * 4), *mag = kt_xmalloc((size_t)no * 4);
    float *ob = kt_xmalloc((size_t)no * 4), *o = kt_xmalloc((size_t)no * 4), *o1 = kt_xmalloc((size_t)no * 8);
    for (int64_t i = 0; i < nx; i++)
        ax[i] = fabsf(x[i] = frand());
    for (int64_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i] = frand());
    for (int i = 0; i < c->C; i++)
        ab[i] = fabsf(b[i] = frand());
    kt_to_blocked(x, xb, c->N, c->C, c->H, c->W);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->C, 1, c->KH, c->KW},
            os[4] = {c->N, c->C, OH, OW}, bs[1] = {c->C};
    etch_tensor tx, tax, txb, tw, taw, tb, tab, tref, tmag, tob;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&tax, ETCH_DTYPE_FLOAT, 4, xs, ax);
    etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
    etch_tensor_init(&taw, ETCH_DTYPE_FLOAT, 4, ws, aw);
    etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, bs, b);
    etch_tensor_init(&tab, ETCH_DTYPE_FLOAT, 1, bs, ab);
    etch_tensor_init(&tref, ETCH_DTYPE_FLOAT, 4, os, ref);
    etch_tensor_init(&tmag, ETCH_DTYPE_FLOAT, 4, os, mag);
    etch_tensor_init(&tob, ETCH_DTYPE_FLOAT, 4, os, ob);
    const int64_t st[2] = {c->sh, c->sw}, pd[2] = {c->ph, c->pw}, dl[2] = {c->dh, c->dw},
                  op[2] = {0, 0};
    kt_ilist ls, lp, ld, lo;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw),
               vb = c->bias ? kt_vtensor(&tb) : kt_vnone(), vref = kt_vtensor(&tref),
               tr = kt_vbool(false), g = kt_vint(c->C);
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, st, 2), kt_mklist(&lp, pd, 2),
                            kt_mklist(&ld, dl, 2), &tr, kt_mklist(&lo, op, 2), &g, &vref, &vref};
    char name[200];
    snprintf(name, sizeof name, "dw N%d C%d %dx%d k%dx%d s%d,%d p%d,%d d%d,%d%s act%d", c->N,
             c->C, c->H, c->W, c->KH, c->KW, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
             c->bias ? " bias" : "", c->epi);
    etch_status s0 = run_kernel(etch_portable_convolution_out, args, 11, 0, NULL, 1);
    CHECK_MSG(s0 == ETCH_OK, "%s: portable failed: %s", name, etch_last_error());
    etch_value vax = kt_vtensor(&tax), vaw = kt_vtensor(&taw),
               vab = c->bias ? kt_vtensor(&tab) : kt_vnone(), vmag = kt_vtensor(&tmag);
    etch_value *margs[11] = {&vax, &vaw, &vab, args[3], args[4], args[5], &tr, args[7], &g,
                             &vmag, &vmag};
    CHECK_OK(run_kernel(etch_portable_convolution_out, margs, 11, 0, NULL, 1));
    etch_value vxb = kt_vtensor(&txb), vob = kt_vtensor(&tob);
    etch_value *bargs[11] = {&vxb, &vw, &vb, args[3], args[4], args[5], &tr, args[7], &g,
                             &vob, &vob};
    const etch_epilogue *e = &epilogues[c->epi];
    /* the call site's prepared weight, as the runtime has it made at load: the weight a
     * static constant, input and output blocked; made for groups == C, C % 8 == 0 */
    tw.flags |= ETCH_TENSOR_CONSTANT;
    etch_kernel_context pctx;
    etch_kernel_context_init(&pctx, "op", NULL, 0, NULL);
    pctx.blocked = BIT(0) | BIT(9) | BIT(10);
    size_t prep_size = etch_opt_convolution_prepare(&pctx, bargs, 11, NULL, 0);
    CHECK_MSG(prep_size > 0, "%s: no prepared weight", name);
    void *prep = prep_size ? aligned_alloc(64, (prep_size + 63) / 64 * 64) : NULL;
    if (prep && etch_opt_convolution_prepare(&pctx, bargs, 11, prep, prep_size) != prep_size)
        prep_size = 0;
    CHECK_MSG(prep_size > 0, "%s: preparing the weight failed", name);
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int threads = 1; threads <= REAL_POOL; threads++) {
            memset(ob, 0xff, (size_t)no * 4); /* NaN: every element must be written */
            etch_status s = run_kernel(etch_opt_convolution_out, bargs, 11,
                                       BIT(0) | BIT(9) | BIT(10), e, threads);
            dw_runs++;
            if (s != ETCH_OK) {
                CHECK_MSG(s == ETCH_OK, "%s [%s, %d threads]: %s", name, etch_isa_name(isas[ii]),
                          threads, etch_last_error());
                continue;
            }
            kt_from_blocked(ob, o, c->N, c->C, OH, OW);
            int bad = 0;
            for (int64_t i = 0; i < no && bad < 3; i++) {
                const double r = kt_act_ref(e, ref[i]), tol = 1e-5 * (double)mag[i] + 1e-6;
                const double err = fabs((double)o[i] - r);
                if (err / tol > dw_worst)
                    dw_worst = err / tol;
                if (!(err <= tol)) {
                    bad++;
                    CHECK_MSG(err <= tol, "%s [%s, %d threads]: element %lld = %.9g, want %.9g",
                              name, etch_isa_name(isas[ii]), threads, (long long)i, o[i], r);
                }
            }
            if (!bad)
                CHECK(1);
            if (threads == 1)
                memcpy(o1, o, (size_t)no * 4);
            else
                CHECK_MSG(memcmp(o, o1, (size_t)no * 4) == 0, "%s [%s]: %d threads differ from 1",
                          name, etch_isa_name(isas[ii]), threads);
            /* the weight prepared at load ([C/8][KH*KW][8]) gives the same bits */
            if (prep_size) {
                memset(ob, 0xff, (size_t)no * 4);
                run_prepared = prep;
                run_prepared_size = prep_size;
                s = run_kernel(etch_opt_convolution_out, bargs, 11, BIT(0) | BIT(9) | BIT(10), e,
                               threads);
                run_prepared = NULL;
                run_prepared_size = 0;
                kt_from_blocked(ob, o1 + no, c->N, c->C, OH, OW);
                CHECK_MSG(s == ETCH_OK && memcmp(o1 + no, o, (size_t)no * 4) == 0,
                          "%s [%s, %d threads]: the prepared weight gives other bits", name,
                          etch_isa_name(isas[ii]), threads);
            }
        }
    }
    free(prep);
    free(x), free(ax), free(xb), free(w), free(aw), free(b), free(ab), free(ref), free(mag);
    free(ob), free(o), free(o1);
}

static void test_dw(void) {
    static const dw_case fixed[] = {
        /* mobilenet_v2's depthwise layers (3x3 pad 1), N = 1 */
        {1, 32, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {1, 96, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, true, 2},
        {1, 144, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {1, 144, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, true, 2},
        {1, 192, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {1, 192, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, true, 2},
        {1, 384, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {1, 576, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, true, 2},
        {1, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        /* N = 2, no bias, other activations */
        {2, 16, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, false, 1},
        {2, 24, 12, 17, 3, 3, 2, 2, 1, 1, 1, 1, false, 4},
        /* 5x5 pad 2, dilation 2, stride 3, padding 0, asymmetric and large kernels */
        {1, 16, 20, 23, 5, 5, 1, 1, 2, 2, 1, 1, true, 3},
        {2, 8, 15, 14, 5, 5, 2, 2, 2, 2, 1, 1, true, 1},
        {1, 16, 17, 19, 3, 3, 1, 1, 2, 2, 2, 2, true, 0},
        {1, 8, 16, 18, 3, 3, 3, 3, 1, 1, 1, 1, false, 2},
        {1, 8, 16, 18, 3, 3, 1, 1, 0, 0, 1, 1, true, 5},
        {1, 8, 16, 18, 3, 3, 2, 2, 0, 0, 1, 1, true, 6},
        {1, 8, 9, 12, 3, 5, 1, 2, 1, 0, 1, 2, true, 7},
        {1, 8, 12, 12, 9, 9, 1, 1, 4, 4, 1, 1, true, 1}, /* 81 taps: weights gathered per row */
        {1, 8, 7, 30, 1, 7, 1, 1, 0, 3, 1, 1, false, 0},
        {1, 8, 10, 10, 3, 3, 1, 1, 2, 2, 1, 1, true, 0}, /* padding wider than the kernel half */
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        dw_check(&fixed[i]);
    /* every activation on the 3x3 fast path */
    for (int e = 0; e < N_EPI; e++) {
        dw_case c = {1, 16, 6, 21, 3, 3, 1, 1, 1, 1, 1, 1, true, e};
        dw_check(&c);
        dw_case d = {1, 8, 7, 9, 5, 5, 2, 2, 2, 2, 1, 1, true, e};
        dw_check(&d);
    }
    /* odd sizes 1..13 around the blocks of 8, 4 and 1 pixels, stride 1 and 2 */
    for (int w = 1; w <= 13; w++)
        for (int st = 1; st <= 2; st++) {
            dw_case c = {w % 2 + 1, 8 * (1 + w % 2), 1 + (w * 5) % 13, w, 3, 3, st, st, 1, 1,
                         1, 1, w % 3 != 0, w % N_EPI};
            dw_check(&c);
        }
    /* random shapes */
    for (int it = 0; it < 30; it++) {
        static const int ks[] = {1, 2, 3, 3, 3, 5, 7};
        dw_case c;
        memset(&c, 0, sizeof c);
        c.N = irand(1, 2);
        c.C = 8 * irand(1, 3);
        const kt_window g = kt_rand_window(&rng, ks, 7, 3, 13, 13);
        c.H = g.H, c.W = g.W, c.KH = g.KH, c.KW = g.KW, c.sh = g.sh, c.sw = g.sw;
        c.ph = g.ph, c.pw = g.pw, c.dh = g.dh, c.dw = g.dw;
        c.bias = irand(0, 1);
        c.epi = irand(0, N_EPI - 1);
        dw_check(&c);
    }
}

/* A blocked depthwise call the blocked path cannot take fails cleanly (no crash, no write out
 * of bounds): channels not a multiple of 8. */
static void test_dw_refused(void) {
    float x[12 * 16], w[12 * 9], o[12 * 16];
    for (int i = 0; i < 12 * 16; i++)
        x[i] = frand();
    for (int i = 0; i < 12 * 9; i++)
        w[i] = frand();
    int64_t xs[4] = {1, 12, 4, 4}, ws[4] = {12, 1, 3, 3};
    etch_tensor tx, tw, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, xs, o);
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    kt_ilist ls, lp, ld, lo;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), vb = kt_vnone(), vo = kt_vtensor(&to),
               tr = kt_vbool(false), g = kt_vint(12);
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, one, 2), kt_mklist(&lp, one, 2),
                            kt_mklist(&ld, one, 2), &tr, kt_mklist(&lo, zero, 2), &g, &vo, &vo};
    etch_status s = run_kernel(etch_opt_convolution_out, args, 11, BIT(0) | BIT(9) | BIT(10),
                               NULL, 1);
    CHECK_MSG(s != ETCH_OK, "blocked depthwise with 12 channels: want a failure");
    CHECK(strstr(etch_last_error(), "channel-blocked") != NULL);
    /* 16 channels, but only the input marked blocked */
    float x16[16 * 16], w16[16 * 9], o16[16 * 16];
    for (int i = 0; i < 16 * 16; i++)
        x16[i] = frand();
    for (int i = 0; i < 16 * 9; i++)
        w16[i] = frand();
    xs[1] = ws[0] = 16;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x16);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w16);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, xs, o16);
    g = kt_vint(16);
    s = run_kernel(etch_opt_convolution_out, args, 11, BIT(0), NULL, 1);
    CHECK_MSG(s != ETCH_OK, "blocked depthwise, output not blocked: want a failure");
    CHECK(strstr(etch_last_error(), "channel-blocked") != NULL);
}

/* ---- max pooling ---------------------------------------------------------------------------- */

typedef struct mp_case {
    int N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil_mode;
} mp_case;

static int64_t pool_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int64_t o = num / s + 1;
    if (ceil && (o - 1) * s >= in + p)
        o--;
    return o;
}

static bool same_float(float a, float b) { return (a != a && b != b) || memcmp(&a, &b, 4) == 0; }

static void mp_check(const mp_case *c) {
    const int64_t OH = pool_size(c->H, c->kh, c->ph, c->sh, c->dh, c->ceil_mode);
    const int64_t OW = pool_size(c->W, c->kw, c->pw, c->sw, c->dw, c->ceil_mode);
    const int64_t nx = (int64_t)c->N * c->C * c->H * c->W, no = (int64_t)c->N * c->C * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *xb = kt_xmalloc((size_t)nx * 4);
    float *r = kt_xmalloc((size_t)no * 4), *ob = kt_xmalloc((size_t)no * 4), *o = kt_xmalloc((size_t)no * 4);
    float *o1 = kt_xmalloc((size_t)no * 4);
    int64_t *ri = kt_xmalloc((size_t)no * 8), *oib = kt_xmalloc((size_t)no * 8), *oi = kt_xmalloc((size_t)no * 8);
    int64_t *oi1 = kt_xmalloc((size_t)no * 8);
    for (int64_t i = 0; i < nx; i++) {
        int k = irand(0, 99);
        /* ties (few distinct values), NaN, +-inf */
        x[i] = k < 3 ? NAN : k < 5 ? INFINITY : k < 8 ? -INFINITY : (float)irand(-4, 4) * 0.5f;
        if (k >= 8 && k < 40)
            x[i] = frand();
    }
    kt_to_blocked(x, xb, c->N, c->C, c->H, c->W);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, os[4] = {c->N, c->C, OH, OW};
    etch_tensor tx, txb, tr, tri, tob, toib;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
    etch_tensor_init(&tr, ETCH_DTYPE_FLOAT, 4, os, r);
    etch_tensor_init(&tri, ETCH_DTYPE_LONG, 4, os, ri);
    etch_tensor_init(&tob, ETCH_DTYPE_FLOAT, 4, os, ob);
    etch_tensor_init(&toib, ETCH_DTYPE_LONG, 4, os, oib);
    const int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[2] = {c->ph, c->pw},
                  d[2] = {c->dh, c->dw};
    kt_ilist lk, ls, lp, ld;
    etch_value vx = kt_vtensor(&tx), vr = kt_vtensor(&tr), vri = kt_vtensor(&tri),
               cm = kt_vbool(c->ceil_mode), ret = kt_vnone();
    etch_value *args[9] = {&vx, kt_mklist(&lk, k, 2), kt_mklist(&ls, s, 2), kt_mklist(&lp, p, 2),
                           kt_mklist(&ld, d, 2), &cm, &vr, &vri, &ret};
    char name[160];
    snprintf(name, sizeof name, "maxpool N%d C%d %dx%d k%dx%d s%d,%d p%d,%d d%d,%d%s", c->N,
             c->C, c->H, c->W, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw,
             c->ceil_mode ? " ceil" : "");
    etch_status s0 = run_kernel(etch_portable_max_pool2d_with_indices_out, args, 9, 0, NULL, 1);
    CHECK_MSG(s0 == ETCH_OK, "%s: portable failed: %s", name, etch_last_error());
    etch_value vxb = kt_vtensor(&txb), vob = kt_vtensor(&tob), voib = kt_vtensor(&toib);
    etch_value *bargs[9] = {&vxb, args[1], args[2], args[3], args[4], &cm, &vob, &voib, &ret};
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int threads = 1; threads <= REAL_POOL; threads++) {
            memset(ob, 0xff, (size_t)no * 4);
            memset(oib, 0xff, (size_t)no * 8);
            etch_status st = run_kernel(etch_opt_max_pool2d_with_indices_out, bargs, 9,
                                        BIT(0) | BIT(6) | BIT(7), NULL, threads);
            if (st != ETCH_OK) {
                CHECK_MSG(st == ETCH_OK, "%s [%s, %d threads]: %s", name,
                          etch_isa_name(isas[ii]), threads, etch_last_error());
                continue;
            }
            kt_from_blocked(ob, o, c->N, c->C, OH, OW);
            from_blocked_i64(oib, oi, c->N, c->C, OH, OW);
            int bad = 0;
            for (int64_t i = 0; i < no && bad < 3; i++)
                if (!same_float(o[i], r[i]) || oi[i] != ri[i]) {
                    bad++;
                    CHECK_MSG(0, "%s [%s, %d threads]: element %lld = %g @%lld, want %g @%lld",
                              name, etch_isa_name(isas[ii]), threads, (long long)i, o[i],
                              (long long)oi[i], r[i], (long long)ri[i]);
                }
            if (!bad)
                CHECK(1);
            if (threads == 1) {
                memcpy(o1, o, (size_t)no * 4);
                memcpy(oi1, oi, (size_t)no * 8);
            } else {
                CHECK_MSG(memcmp(o, o1, (size_t)no * 4) == 0 && memcmp(oi, oi1, (size_t)no * 8) == 0,
                          "%s [%s]: %d threads differ from 1", name, etch_isa_name(isas[ii]),
                          threads);
            }
        }
    }
    free(x), free(xb), free(r), free(ob), free(o), free(o1), free(ri), free(oib), free(oi),
        free(oi1);
}

static void test_maxpool(void) {
    static const mp_case fixed[] = {
        {1, 64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, false}, /* resnet18's */
        {2, 16, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, true},
        {1, 8, 9, 9, 2, 2, 2, 2, 0, 0, 1, 1, false},
        {1, 8, 10, 7, 3, 3, 1, 1, 1, 1, 2, 2, false},
        {2, 8, 11, 12, 3, 2, 3, 1, 1, 1, 1, 3, true},
        {1, 24, 5, 5, 5, 5, 1, 1, 2, 2, 1, 1, false},
        {1, 8, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, false},
        {1, 8, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, true},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        mp_check(&fixed[i]);
    for (int it = 0; it < 30; it++) {
        mp_case c;
        c.N = irand(1, 2);
        c.C = 8 * irand(1, 2);
        c.kh = irand(1, 4);
        c.kw = irand(0, 1) ? c.kh : irand(1, 4);
        c.sh = irand(1, 3);
        c.sw = irand(1, 3);
        c.ph = irand(0, c.kh / 2);
        c.pw = irand(0, c.kw / 2);
        c.dh = irand(0, 2) ? 1 : 2;
        c.dw = irand(0, 2) ? 1 : 2;
        c.H = irand(1, 13);
        c.W = irand(1, 13);
        if (c.H + 2 * c.ph < c.dh * (c.kh - 1) + 1)
            c.H = c.dh * (c.kh - 1) + 1;
        if (c.W + 2 * c.pw < c.dw * (c.kw - 1) + 1)
            c.W = c.dw * (c.kw - 1) + 1;
        c.ceil_mode = irand(0, 1);
        mp_check(&c);
    }
}

/* ---- mean over H, W and the 1x1 adaptive average pool ------------------------------------- */

static void mean_check(int N, int C, int H, int W, const int64_t dims[2], bool keep,
                       bool adaptive) {
    const int64_t nx = (int64_t)N * C * H * W, no = (int64_t)N * C;
    float *x = kt_xmalloc((size_t)nx * 4), *xb = kt_xmalloc((size_t)nx * 4), *r = kt_xmalloc((size_t)no * 4);
    float *o = kt_xmalloc((size_t)no * 4), *o1 = kt_xmalloc((size_t)no * 4);
    for (int64_t i = 0; i < nx; i++)
        x[i] = frand() * (irand(0, 9) ? 1.0f : 1000.0f);
    kt_to_blocked(x, xb, N, C, H, W);
    int64_t xs[4] = {N, C, H, W}, os[4] = {N, C, 1, 1};
    const size_t od = adaptive || keep ? 4 : 2;
    etch_tensor tx, txb, tr, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
    etch_tensor_init(&tr, ETCH_DTYPE_FLOAT, od, os, r);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, od, os, o);
    kt_ilist ld;
    const int64_t one[2] = {1, 1};
    etch_value vx = kt_vtensor(&tx), vxb = kt_vtensor(&txb), vr = kt_vtensor(&tr),
               vo = kt_vtensor(&to), kd = kt_vbool(keep), none = kt_vnone();
    etch_value *list = kt_mklist(&ld, adaptive ? one : dims, 2);
    etch_value *args[6] = {&vx, list, &kd, &none, &vr, &vr};
    etch_value *bargs[6] = {&vxb, list, &kd, &none, &vo, &vo};
    etch_value *aargs[4] = {&vx, list, &vr, &vr}, *abargs[4] = {&vxb, list, &vo, &vo};
    etch_kernel_fn ref_fn = adaptive ? etch_portable_adaptive_avg_pool2d_out
                                     : etch_portable_mean_out;
    etch_kernel_fn opt_fn = adaptive ? etch_opt_adaptive_avg_pool2d_out : etch_opt_mean_out;
    const size_t nargs = adaptive ? 4 : 6;
    char name[160];
    snprintf(name, sizeof name, "%s N%d C%d %dx%d dims %lld,%lld%s",
             adaptive ? "adaptive_avg_pool 1x1" : "mean", N, C, H, W, (long long)dims[0],
             (long long)dims[1], keep ? " keepdim" : "");
    etch_status s0 = run_kernel(ref_fn, adaptive ? aargs : args, nargs, 0, NULL, 1);
    CHECK_MSG(s0 == ETCH_OK, "%s: portable failed: %s", name, etch_last_error());
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int threads = 1; threads <= REAL_POOL; threads++) {
            memset(o, 0xff, (size_t)no * 4);
            etch_status st = run_kernel(opt_fn, adaptive ? abargs : bargs, nargs, BIT(0), NULL,
                                        threads);
            if (st != ETCH_OK) {
                CHECK_MSG(st == ETCH_OK, "%s [%s, %d threads]: %s", name,
                          etch_isa_name(isas[ii]), threads, etch_last_error());
                continue;
            }
            CHECK_MSG(to.dim == od, "%s: out has %u dims", name, (unsigned)to.dim);
            int bad = 0;
            for (int64_t i = 0; i < no && bad < 3; i++)
                if (memcmp(&o[i], &r[i], 4) != 0) {
                    bad++;
                    CHECK_MSG(0, "%s [%s, %d threads]: element %lld = %.9g, want %.9g", name,
                              etch_isa_name(isas[ii]), threads, (long long)i, o[i], r[i]);
                }
            if (!bad)
                CHECK(1);
            if (threads == 1)
                memcpy(o1, o, (size_t)no * 4);
            else
                CHECK_MSG(memcmp(o, o1, (size_t)no * 4) == 0, "%s [%s]: %d threads differ", name,
                          etch_isa_name(isas[ii]), threads);
        }
    }
    free(x), free(xb), free(r), free(o), free(o1);
}

static void test_mean(void) {
    static const int64_t spell[4][2] = {{2, 3}, {3, 2}, {-1, -2}, {2, -1}};
    static const int shapes[][4] = {
        {1, 1280, 7, 7}, /* mobilenet_v2's */
        {1, 512, 7, 7},  /* resnet18's */
        {2, 16, 13, 11}, /* 143 pixels: two partial sums of the portable mean */
        {1, 8, 1, 1},   {2, 24, 16, 16}, {1, 8, 1, 300},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *d = shapes[s];
        for (int k = 0; k < 4; k++)
            mean_check(d[0], d[1], d[2], d[3], spell[k], k % 2 == 0, false);
        mean_check(d[0], d[1], d[2], d[3], spell[0], true, true);
    }
}

/* ---- layout functions ----------------------------------------------------------------------- */

static void test_layouts(void) {
    int64_t in_s[4] = {1, 16, 10, 10}, out_s[4] = {1, 16, 5, 5};
    etch_tensor tin, tout, tidx, tbad;
    etch_tensor_init(&tin, ETCH_DTYPE_FLOAT, 4, in_s, NULL);
    etch_tensor_init(&tout, ETCH_DTYPE_FLOAT, 4, out_s, NULL);
    etch_tensor_init(&tidx, ETCH_DTYPE_LONG, 4, out_s, NULL);
    const int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1}, d1[2] = {1, 1}, p2[2] = {2, 2};
    kt_ilist lk, ls, lp, ld;
    etch_value vin = kt_vtensor(&tin), vout = kt_vtensor(&tout), vidx = kt_vtensor(&tidx),
               cm = kt_vbool(false), ret = kt_vnone();
    ret.tag = ETCH_VALUE_TENSOR_LIST;
    etch_value *args[9] = {&vin, kt_mklist(&lk, k3, 2), kt_mklist(&ls, s2, 2),
                           kt_mklist(&lp, p1, 2), kt_mklist(&ld, d1, 2), &cm, &vout, &vidx, &ret};
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "layout", NULL, 0, NULL);
    uint64_t may = 99, tied = 99;
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == (BIT(0) | BIT(6) | BIT(7) | BIT(8)) && tied == (BIT(0) | BIT(6) | BIT(7)));
    etch_opt_max_pool2d_layout(&ctx, args, 8, &may, &tied); /* not the out variant's arity */
    CHECK(may == 0 && tied == 0);
    args[3] = kt_mklist(&lp, p2, 2); /* padding over half the kernel: the portable error */
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == 0 && tied == 0);
    args[3] = kt_mklist(&lp, p1, 2);
    in_s[1] = 12; /* channels not a multiple of 8 */
    out_s[1] = 12;
    etch_tensor_init(&tin, ETCH_DTYPE_FLOAT, 4, in_s, NULL);
    etch_tensor_init(&tout, ETCH_DTYPE_FLOAT, 4, out_s, NULL);
    etch_tensor_init(&tidx, ETCH_DTYPE_LONG, 4, out_s, NULL);
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == 0);
    in_s[1] = out_s[1] = 16;
    etch_tensor_init(&tin, ETCH_DTYPE_FLOAT, 4, in_s, NULL);
    etch_tensor_init(&tout, ETCH_DTYPE_FLOAT, 4, out_s, NULL);
    etch_tensor_init(&tidx, ETCH_DTYPE_FLOAT, 4, out_s, NULL); /* indices not Long */
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == 0);
    etch_tensor_init(&tidx, ETCH_DTYPE_LONG, 4, in_s, NULL); /* indices of the wrong shape */
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == 0);
    etch_tensor_init(&tidx, ETCH_DTYPE_LONG, 4, out_s, NULL);
    int64_t in3[3] = {16, 10, 10};
    etch_tensor_init(&tbad, ETCH_DTYPE_FLOAT, 3, in3, NULL); /* 3-D self */
    etch_value vbad = kt_vtensor(&tbad);
    args[0] = &vbad;
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == 0);
    args[0] = &vin;
    ret = kt_vnone(); /* no result list: the tensors still may be blocked */
    etch_opt_max_pool2d_layout(&ctx, args, 9, &may, &tied);
    CHECK(may == (BIT(0) | BIT(6) | BIT(7)) && tied == may);

    /* mean.out(self, dim, keepdim, dtype, out) + return slot */
    int64_t m_s[4] = {2, 16, 7, 7}, mo_s[4] = {2, 16, 1, 1};
    etch_tensor tm, tmo, tmo2;
    etch_tensor_init(&tm, ETCH_DTYPE_FLOAT, 4, m_s, NULL);
    etch_tensor_init(&tmo, ETCH_DTYPE_FLOAT, 4, mo_s, NULL);
    etch_tensor_init(&tmo2, ETCH_DTYPE_FLOAT, 2, mo_s, NULL);
    static const int64_t ok_dims[3][2] = {{2, 3}, {-1, -2}, {3, -2}};
    static const int64_t bad_dims[3][2] = {{1, 2}, {2, 2}, {3, 4}};
    kt_ilist lm;
    etch_value vm = kt_vtensor(&tm), vmo = kt_vtensor(&tmo), vmo2 = kt_vtensor(&tmo2),
               keep = kt_vbool(true), nokeep = kt_vbool(false), none = kt_vnone(),
               dt = kt_vint(ETCH_DTYPE_FLOAT);
    for (int i = 0; i < 3; i++) {
        etch_value *ma[6] = {&vm, kt_mklist(&lm, ok_dims[i], 2), &keep, &none, &vmo, &vmo};
        etch_opt_mean_layout(&ctx, ma, 6, &may, &tied);
        CHECK_MSG(may == BIT(0) && tied == 0, "mean dims %lld,%lld keepdim: may %llx",
                  (long long)ok_dims[i][0], (long long)ok_dims[i][1], (unsigned long long)may);
        etch_value *mb[6] = {&vm, kt_mklist(&lm, ok_dims[i], 2), &nokeep, &none, &vmo2, &vmo2};
        etch_opt_mean_layout(&ctx, mb, 6, &may, &tied);
        CHECK(may == BIT(0) && tied == 0);
        etch_value *mc[6] = {&vm, kt_mklist(&lm, bad_dims[i], 2), &keep, &none, &vmo, &vmo};
        etch_opt_mean_layout(&ctx, mc, 6, &may, &tied);
        CHECK(may == 0);
    }
    const int64_t one_dim[1] = {3};
    etch_value *md[6] = {&vm, kt_mklist(&lm, one_dim, 1), &keep, &none, &vmo, &vmo};
    etch_opt_mean_layout(&ctx, md, 6, &may, &tied);
    CHECK(may == 0);
    etch_value *me[6] = {&vm, kt_mklist(&lm, ok_dims[0], 2), &keep, &dt, &vmo, &vmo}; /* dtype */
    etch_opt_mean_layout(&ctx, me, 6, &may, &tied);
    CHECK(may == 0);
    etch_value *mf[6] = {&vm, kt_mklist(&lm, ok_dims[0], 2), &nokeep, &none, &vmo, &vmo};
    etch_opt_mean_layout(&ctx, mf, 6, &may, &tied); /* out shape does not match keepdim */
    CHECK(may == 0);
    etch_value *mg[6] = {&vm, &none, &keep, &none, &vmo, &vmo}; /* dim None: all dims */
    etch_opt_mean_layout(&ctx, mg, 6, &may, &tied);
    CHECK(may == 0);
    m_s[1] = 12;
    etch_tensor_init(&tm, ETCH_DTYPE_FLOAT, 4, m_s, NULL);
    etch_value *mh[6] = {&vm, kt_mklist(&lm, ok_dims[0], 2), &keep, &none, &vmo, &vmo};
    etch_opt_mean_layout(&ctx, mh, 6, &may, &tied);
    CHECK(may == 0);
    m_s[1] = 16;
    etch_tensor_init(&tm, ETCH_DTYPE_FLOAT, 4, m_s, NULL);

    /* _adaptive_avg_pool2d.out(self, output_size, out) + return slot */
    const int64_t os1[2] = {1, 1}, os2[2] = {2, 2};
    kt_ilist lo;
    etch_value *aa[4] = {&vm, kt_mklist(&lo, os1, 2), &vmo, &vmo};
    etch_opt_adaptive_avg_pool2d_layout(&ctx, aa, 4, &may, &tied);
    CHECK(may == BIT(0) && tied == 0);
    etch_value *ab[4] = {&vm, kt_mklist(&lo, os2, 2), &vmo, &vmo};
    etch_opt_adaptive_avg_pool2d_layout(&ctx, ab, 4, &may, &tied);
    CHECK(may == 0);
    etch_value *ac[4] = {&vm, kt_mklist(&lo, os1, 2), &vmo2, &vmo2}; /* out not [N, C, 1, 1] */
    etch_opt_adaptive_avg_pool2d_layout(&ctx, ac, 4, &may, &tied);
    CHECK(may == 0);
    CHECK(ctx.status == ETCH_OK);

    /* the registry gives these kernels these layout functions */
    CHECK(etch_kernels_layout_of(etch_opt_max_pool2d_with_indices_out) ==
          etch_opt_max_pool2d_layout);
    CHECK(etch_kernels_layout_of(etch_opt_adaptive_avg_pool2d_out) ==
          etch_opt_adaptive_avg_pool2d_layout);
    CHECK(etch_kernels_layout_of(etch_opt_mean_out) == etch_opt_mean_layout);
}

/* Blocked pooling / mean calls whose arguments no longer fit fail with a message. */
static void test_blocked_refused(void) {
    float x[12 * 16] = {0}, o[12 * 4] = {0};
    int64_t idx[12 * 4] = {0};
    int64_t xs[4] = {1, 12, 4, 4}, os[4] = {1, 12, 2, 2};
    etch_tensor tx, to, ti;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, os, o);
    etch_tensor_init(&ti, ETCH_DTYPE_LONG, 4, os, idx);
    const int64_t k[2] = {2, 2}, p[2] = {0, 0}, d[2] = {1, 1};
    kt_ilist lk, ls, lp, ld;
    etch_value vx = kt_vtensor(&tx), vo = kt_vtensor(&to), vi = kt_vtensor(&ti),
               cm = kt_vbool(false), ret = kt_vnone();
    etch_value *args[9] = {&vx, kt_mklist(&lk, k, 2), kt_mklist(&ls, k, 2), kt_mklist(&lp, p, 2),
                           kt_mklist(&ld, d, 2), &cm, &vo, &vi, &ret};
    CHECK(run_kernel(etch_opt_max_pool2d_with_indices_out, args, 9, BIT(0) | BIT(6) | BIT(7),
                     NULL, 1) != ETCH_OK);
    CHECK(strstr(etch_last_error(), "channel-blocked max pooling") != NULL);
    const int64_t hw[2] = {2, 3};
    kt_ilist lm;
    etch_value kd = kt_vbool(true), none = kt_vnone();
    etch_value *margs[6] = {&vx, kt_mklist(&lm, hw, 2), &kd, &none, &vo, &vo};
    CHECK(run_kernel(etch_opt_mean_out, margs, 6, BIT(0), NULL, 1) != ETCH_OK);
    CHECK(strstr(etch_last_error(), "channel-blocked mean") != NULL);
    const int64_t one[2] = {1, 1};
    etch_value *aargs[4] = {&vx, kt_mklist(&lm, one, 2), &vo, &vo};
    CHECK(run_kernel(etch_opt_adaptive_avg_pool2d_out, aargs, 4, BIT(0), NULL, 1) != ETCH_OK);
    CHECK(strstr(etch_last_error(), "channel-blocked adaptive") != NULL);
}

int main(void) {
    n_isas = kt_pick_isas(isas);
    CHECK_OK(etch_threadpool_create(3, &real_pool));
    CHECK_OK(etch_kernels_register_optimized());
    test_layouts();
    test_blocked_refused();
    test_dw_refused();
    test_mean();
    test_maxpool();
    test_dw();
    printf("depthwise: %d blocked runs, worst error / tolerance %.3g\n", dw_runs, dw_worst);
    CHECK_MSG(alloc_calls_seen == 0, "%ld allocations inside %ld kernel calls", alloc_calls_seen,
              counted_calls);
    etch_threadpool_destroy(real_pool);
    return etch_test_finish();
}
