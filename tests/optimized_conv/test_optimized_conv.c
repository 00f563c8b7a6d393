/*
 * Optimized convolution and pooling kernels against the portable ones, under every
 * instruction set this CPU supports (the others are named as not run), on generated shapes:
 * odd sizes and SIMD tails, kernels 1x1..7x7, strides 1..3, padding, dilation, groups (1, 2,
 * depthwise, depthwise with a multiplier), batch 1..3, 1-D convolutions, with and without
 * bias, every fused activation, 1..4 threads (a test pool that runs the chunks in a shuffled
 * order, and the library's pthreads pool with 2 and 4 threads) and three scratch sizes (none,
 * small, large).
 *
 * Convolution tolerance: |opt - ref| <= 1e-5 * (sum |w||x| + |b|) + 1e-6 per element, where
 * ref is the activation applied (in double) to the portable kernel's double-accumulated result
 * and the sum of magnitudes comes from the portable kernel run on |x|, |w|, |b|. Every thread
 * split must give the same bits as the serial run, and no kernel call may allocate. (Messages name the library's pools as -2 and
 * -4 threads.) Pooling must equal the portable kernels
 * bit for bit (values and indices), NaN and -inf included.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/kernels.h"
#include "etch/status.h"
#include "etch/threadpool.h"
#include "alloc_wrap.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static kt_rng rng = {0x9e3779b97f4a7c15ull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static float frand(void) { return kt_rng_float(&rng); }
static int irand(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }

/* The instruction sets run (the others are named as not run by kt_pick_isas). */
static etch_isa isas[KT_N_ISAS];
static int n_isas;

static const etch_epilogue epilogues[] = {
    {ETCH_ACT_NONE, 0, 0},    {ETCH_ACT_RELU, 0, 0},          {ETCH_ACT_CLAMP, 0, 6},
    {ETCH_ACT_CLAMP, -0.5, 0.25}, {ETCH_ACT_GELU, 0, 0},      {ETCH_ACT_GELU_TANH, 0, 0},
    {ETCH_ACT_SILU, 0, 0},    {ETCH_ACT_SIGMOID, 0, 0},
};
#define N_EPI (sizeof epilogues / sizeof epilogues[0])

/* ---- convolution ------------------------------------------------------------------------------ */

typedef struct conv_case {
    int N, Cin, Cout, groups, H, W; /* H = 0: a 1-D convolution over W */
    int KH, KW, sh, sw, ph, pw, dh, dw;
    bool bias;
    int epi;
} conv_case;

static double worst_ratio; /* max |opt - ref| / tolerance seen */
static int conv_runs;

static int64_t conv_out(int in, int k, int p, int s, int d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static long alloc_calls_seen, counted_calls; /* allocations inside kernel calls */

/* The library's thread pools (2 and 4 threads), used where `threads` is -2 or -4. */
static etch_threadpool *real_pool[5];
static const int thread_runs[6] = {1, 2, 3, 4, -2, -4};

/* Call a kernel with a fresh context; returns the status. threads > 1: the shuffling test
 * pool; -2 / -4: the real thread pool of that size. */
static etch_status run_kernel(etch_kernel_fn fn, etch_value **args, size_t nargs,
                              const etch_epilogue *e, int threads, void *temp, size_t temp_size) {
    kt_shuffle_pool pool;
    kt_shuffle_pool_init(&pool, threads, KT_SPLIT_TWO_PER_THREAD, rnd);
    const etch_threadpool_iface *tp = threads > 1 ? &pool.iface : NULL;
    if (threads < 0)
        tp = etch_threadpool_get_iface(real_pool[-threads]);
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "op", temp, temp_size, tp);
    ctx.epilogue = e && e->act != ETCH_ACT_NONE ? e : NULL;
    /* kernels never allocate (counted on the serial and the library-pool runs) */
    bool count = threads == 1 || threads < 0;
    if (count)
        etch_alloc_arm();
    fn(&ctx, args, nargs);
    if (count) {
        etch_alloc_disarm();
        alloc_calls_seen += etch_alloc_calls;
        counted_calls++;
    }
    return ctx.status;
}

static uint8_t *big_temp;
#define BIG_TEMP (8u << 20)

static void conv_check(const conv_case *c) {
    bool two = c->H > 0;
    int dim = two ? 4 : 3;
    int64_t IH = two ? c->H : 1, KH = two ? c->KH : 1;
    int64_t OH = two ? conv_out(c->H, c->KH, c->ph, c->sh, c->dh) : 1;
    int64_t OW = conv_out(c->W, c->KW, c->pw, c->sw, c->dw);
    int64_t cin_g = c->Cin / c->groups;
    int64_t nx = (int64_t)c->N * c->Cin * IH * c->W, nw = (int64_t)c->Cout * cin_g * KH * c->KW;
    int64_t no = (int64_t)c->N * c->Cout * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *w = kt_xmalloc((size_t)nw * 4), *b = kt_xmalloc((size_t)c->Cout * 4);
    float *ax = kt_xmalloc((size_t)nx * 4), *aw = kt_xmalloc((size_t)nw * 4), *ab = kt_xmalloc((size_t)c->Cout * 4);
    float *ref = kt_xmalloc((size_t)no * 4), *mag = kt_xmalloc((size_t)no * 4);
    float *o = kt_xmalloc((size_t)no * 4), *o1 = kt_xmalloc((size_t)no * 4);
    for (int64_t i = 0; i < nx; i++)
        ax[i] = fabsf(x[i] = frand());
    for (int64_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i] = frand());
    for (int i = 0; i < c->Cout; i++)
        ab[i] = fabsf(b[i] = frand());
    int64_t xs[4] = {c->N, c->Cin, IH, c->W}, ws[4] = {c->Cout, cin_g, KH, c->KW},
            os[4] = {c->N, c->Cout, OH, OW}, bs[1] = {c->Cout};
    if (!two) {
        xs[2] = c->W;
        ws[2] = c->KW;
        os[2] = OW;
    }
    etch_tensor tx, tw, tb, tax, taw, tab, tref, tmag, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, (size_t)dim, xs, x);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, (size_t)dim, ws, w);
    etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, bs, b);
    etch_tensor_init(&tax, ETCH_DTYPE_FLOAT, (size_t)dim, xs, ax);
    etch_tensor_init(&taw, ETCH_DTYPE_FLOAT, (size_t)dim, ws, aw);
    etch_tensor_init(&tab, ETCH_DTYPE_FLOAT, 1, bs, ab);
    etch_tensor_init(&tref, ETCH_DTYPE_FLOAT, (size_t)dim, os, ref);
    etch_tensor_init(&tmag, ETCH_DTYPE_FLOAT, (size_t)dim, os, mag);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, (size_t)dim, os, o);
    size_t sp = two ? 2 : 1;
    int64_t st[2] = {two ? c->sh : c->sw, c->sw}, pd[2] = {two ? c->ph : c->pw, c->pw},
            dl[2] = {two ? c->dh : c->dw, c->dw}, op[2] = {0, 0};
    kt_ilist ls, lp, ld, lo;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), vb = c->bias ? kt_vtensor(&tb) : kt_vnone(),
               vo = kt_vtensor(&tref), tr = kt_vbool(false), g = kt_vint(c->groups);
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, st, sp), kt_mklist(&lp, pd, sp),
                            kt_mklist(&ld, dl, sp), &tr, kt_mklist(&lo, op, sp), &g, &vo, &vo};
    char name[200];
    snprintf(name, sizeof name,
             "conv N%d Cin%d Cout%d g%d %s%dx%d k%dx%d s%d,%d p%d,%d d%d,%d%s act%d", c->N,
             c->Cin, c->Cout, c->groups, two ? "" : "1-D ", c->H, c->W, c->KH, c->KW, c->sh,
             c->sw, c->ph, c->pw, c->dh, c->dw, c->bias ? " bias" : "", c->epi);
    etch_status st0 = run_kernel(etch_portable_convolution_out, args, 11, NULL, 1, NULL, 0);
    CHECK_MSG(st0 == ETCH_OK, "%s: portable failed: %s", name, etch_last_error());
    etch_value vax = kt_vtensor(&tax), vaw = kt_vtensor(&taw), vab = c->bias ? kt_vtensor(&tab) : kt_vnone(),
               vmag = kt_vtensor(&tmag);
    etch_value *margs[11] = {&vax, &vaw, &vab, args[3], args[4], args[5], &tr, args[7], &g,
                             &vmag, &vmag};
    CHECK_OK(run_kernel(etch_portable_convolution_out, margs, 11, NULL, 1, NULL, 0));
    const etch_epilogue *e = &epilogues[c->epi];
    args[9] = args[10] = &(etch_value){0};
    *args[9] = kt_vtensor(&to);
    static const size_t temps[3] = {BIG_TEMP, 3000, 0};
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int ti = 0; ti < 3; ti++) {
            for (int tr_i = 0; tr_i < 6; tr_i++) {
                int threads = thread_runs[tr_i];
                if (threads < 0 && ti != 0)
                    continue; /* the real pools: with the large scratch only */
                memset(o, 0xff, (size_t)no * 4); /* NaN: every element must be written */
                etch_status s = run_kernel(etch_opt_convolution_out, args, 11, e, threads,
                                           temps[ti] ? big_temp : NULL, temps[ti]);
                conv_runs++;
                if (s != ETCH_OK) {
                    CHECK_MSG(s == ETCH_OK, "%s [%s, %d threads, temp %zu]: %s", name,
                              etch_isa_name(isas[ii]), threads, temps[ti], etch_last_error());
                    continue;
                }
                int bad = 0;
                double worst = 0;
                for (int64_t i = 0; i < no && bad < 3; i++) {
                    double r = kt_act_ref(e, ref[i]), m = (double)mag[i];
                    double err = fabs((double)o[i] - r), tol = 1e-5 * m + 1e-6;
                    if (err / tol > worst)
                        worst = err / tol;
                    if (!(err <= tol)) {
                        bad++;
                        CHECK_MSG(err <= tol,
                                  "%s [%s, %d threads, temp %zu]: element %lld = %.9g, want "
                                  "%.9g (tol %.3g)",
                                  name, etch_isa_name(isas[ii]), threads, temps[ti],
                                  (long long)i, o[i], r, tol);
                    }
                }
                if (!bad)
                    CHECK(1);
                if (worst > worst_ratio)
                    worst_ratio = worst;
                if (threads == 1) {
                    memcpy(o1, o, (size_t)no * 4);
                } else {
                    CHECK_MSG(memcmp(o, o1, (size_t)no * 4) == 0,
                              "%s [%s, temp %zu]: %d threads differ from 1 thread", name,
                              etch_isa_name(isas[ii]), temps[ti], threads);
                }
            }
        }
    }
    free(x), free(w), free(b), free(ax), free(aw), free(ab), free(ref), free(mag), free(o),
        free(o1);
}

static void test_conv_generated(void) {
    /* the shapes the fast paths target, then random ones */
    static const conv_case fixed[] = {
        /* depthwise 3x3, stride 1 and 2, widths around the 4/8/16 blocks */
        {1, 8, 8, 8, 9, 37, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {2, 5, 5, 5, 12, 33, 3, 3, 2, 2, 1, 1, 1, 1, true, 1},
        {1, 3, 3, 3, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, false, 0},
        {1, 3, 3, 3, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, true, 0},
        {1, 4, 4, 4, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, true, 2},
        {3, 2, 2, 2, 5, 70, 3, 3, 2, 2, 1, 1, 1, 1, false, 6},
        {1, 2, 2, 2, 17, 19, 3, 3, 1, 1, 1, 1, 1, 1, true, 7},
        /* 1x1 stride 1 (GEMM on the input), with groups */
        {2, 16, 24, 1, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1, true, 2},
        {1, 12, 8, 2, 5, 5, 1, 1, 1, 1, 0, 0, 1, 1, false, 1},
        /* strided 1x1 (resnet downsample), 3x3, 5x5, 7x7 (resnet stem) */
        {1, 8, 16, 1, 15, 15, 1, 1, 2, 2, 0, 0, 1, 1, true, 0},
        {1, 8, 12, 1, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, true, 1},
        {2, 6, 10, 1, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, false, 0},
        {1, 4, 6, 1, 11, 14, 5, 5, 3, 3, 2, 2, 1, 1, true, 4},
        {1, 3, 8, 1, 29, 31, 7, 7, 2, 2, 3, 3, 1, 1, true, 1},
        {1, 4, 4, 2, 12, 12, 3, 3, 1, 2, 2, 1, 2, 1, true, 3},
        /* 1-D (audio-style) convolutions */
        {1, 8, 16, 1, 0, 101, 1, 5, 1, 1, 0, 2, 1, 1, true, 6},
        {2, 4, 8, 1, 0, 64, 1, 3, 1, 2, 0, 1, 1, 2, true, 4},
        {1, 6, 6, 6, 0, 50, 1, 7, 1, 1, 0, 3, 1, 1, true, 1},
        {1, 8, 8, 1, 0, 40, 1, 1, 1, 1, 0, 0, 1, 1, false, 0},
        {1, 1, 16, 1, 0, 500, 1, 80, 1, 16, 0, 0, 1, 1, true, 1}, /* waveform front end */
        /* depthwise with a multiplier, other depthwise shapes (direct loop) */
        {1, 3, 6, 3, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, true, 0},
        {1, 4, 4, 4, 10, 10, 5, 5, 2, 2, 2, 2, 1, 1, true, 2},
        {1, 4, 4, 4, 10, 10, 3, 3, 1, 1, 2, 2, 2, 2, true, 0},
        /* im2col tiles: a K large enough that the small scratch holds only a few columns */
        {1, 32, 8, 1, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, true, 5},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        conv_check(&fixed[i]);
    /* depthwise 3x3 at every width 1..40, then some up to 150 (SIMD blocks of 4..32 columns,
     * several at once, overlapping last blocks, borders) */
    for (int w = 1; w <= 150; w += w < 40 ? 1 : 7)
        for (int st = 1; st <= 2; st++) {
            conv_case c = {1, 2, 2, 2, 3 + w % 3, w, 3, 3, st, st, 1, 1, 1, 1, w % 2 == 0, w % 3};
            conv_check(&c);
        }
    for (int it = 0; it < 40; it++) {
        conv_case c;
        memset(&c, 0, sizeof c);
        int kind = irand(0, 3); /* 0 plain, 1 grouped, 2 depthwise, 3 1-D */
        c.N = irand(1, 3);
        c.groups = kind == 1 ? irand(2, 3) : 1;
        c.Cin = c.groups * irand(1, 6);
        c.Cout = c.groups * irand(1, 6);
        if (kind == 2) {
            c.Cin = irand(1, 9);
            c.groups = c.Cin;
            c.Cout = c.Cin * irand(1, 2);
        }
        static const int ks[] = {1, 2, 3, 3, 5, 7};
        c.KW = ks[irand(0, 5)];
        c.KH = kind == 3 ? 1 : (irand(0, 3) ? c.KW : ks[irand(0, 5)]);
        c.sw = irand(1, 3);
        c.sh = kind == 3 ? 1 : irand(1, 3);
        c.dw = irand(0, 3) ? 1 : 2;
        c.dh = kind == 3 ? 1 : (irand(0, 3) ? 1 : 2);
        c.pw = irand(0, c.KW / 2 + 1);
        c.ph = kind == 3 ? 0 : irand(0, c.KH / 2 + 1);
        c.W = irand(1, 40);
        c.H = kind == 3 ? 0 : irand(1, 20);
        if (c.W + 2 * c.pw < c.dw * (c.KW - 1) + 1)
            c.W = c.dw * (c.KW - 1) + 1;
        if (kind != 3 && c.H + 2 * c.ph < c.dh * (c.KH - 1) + 1)
            c.H = c.dh * (c.KH - 1) + 1;
        c.bias = irand(0, 1);
        c.epi = irand(0, (int)N_EPI - 1);
        conv_check(&c);
    }
}

/* Every epilogue on the depthwise, 1x1 and im2col paths. */
static void test_conv_epilogues(void) {
    for (int e = 0; e < (int)N_EPI; e++) {
        conv_case dw = {1, 4, 4, 4, 6, 21, 3, 3, 1, 1, 1, 1, 1, 1, true, e};
        conv_case pw = {1, 5, 7, 1, 4, 9, 1, 1, 1, 1, 0, 0, 1, 1, true, e};
        conv_case ic = {1, 3, 5, 1, 8, 8, 3, 3, 2, 1, 1, 0, 1, 1, true, e};
        conv_check(&dw);
        conv_check(&pw);
        conv_check(&ic);
    }
}

/* What the fast paths do not cover goes to the portable kernel, followed by the activation:
 * the result equals portable + epilogue exactly; errors are the portable kernel's. */
static void test_conv_fallbacks(void) {
    const etch_epilogue relu6 = {ETCH_ACT_CLAMP, 0, 6};
    float x[2 * 4 * 5 * 6], w[4 * 2 * 3 * 3], o1[2 * 8 * 12 * 12], o2[2 * 8 * 12 * 12];
    double xd[2 * 4 * 5 * 6], wd[4 * 2 * 3 * 3], od1[2 * 4 * 5 * 6], od2[2 * 4 * 5 * 6];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        xd[i] = x[i] = frand() * 8;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        wd[i] = w[i] = frand() * 4;
    int64_t one[1] = {1}, zero[1] = {0}, two[1] = {2};
    kt_ilist ls, lp, ld, lo;
    etch_value tr = kt_vbool(true), g = kt_vint(2), none = kt_vnone();
    /* transposed: input [2, 4, 5, 6], weight [4, 2, 3, 3], groups 2 -> out [2, 4, 10, 12] */
    {
        int64_t xs[4] = {2, 4, 5, 6}, ws[4] = {4, 2, 3, 3}, os[4] = {2, 4, 10, 12};
        etch_tensor tx, tw, t1, t2;
        etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
        etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
        etch_tensor_init(&t1, ETCH_DTYPE_FLOAT, 4, os, o1);
        etch_tensor_init(&t2, ETCH_DTYPE_FLOAT, 4, os, o2);
        etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), v1 = kt_vtensor(&t1), v2 = kt_vtensor(&t2);
        etch_value *args[11] = {&vx, &vw, &none, kt_mklist(&ls, two, 1), kt_mklist(&lp, one, 1),
                                kt_mklist(&ld, one, 1), &tr, kt_mklist(&lo, one, 1), &g, &v1, &v1};
        CHECK_OK(run_kernel(etch_portable_convolution_out, args, 11, NULL, 1, NULL, 0));
        etch_opt_apply_epilogue(&relu6, o1, 2 * 4 * 10 * 12);
        args[9] = args[10] = &v2;
        CHECK_OK(run_kernel(etch_opt_convolution_out, args, 11, &relu6, 3, NULL, 0));
        CHECK(memcmp(o1, o2, sizeof(float) * 2 * 4 * 10 * 12) == 0);
    }
    /* double: no fast path, no epilogue applied to a non-float output */
    {
        int64_t xs[4] = {2, 4, 5, 6}, ws[4] = {4, 2, 3, 3}, os[4] = {2, 4, 5, 6};
        etch_tensor tx, tw, t1, t2;
        etch_tensor_init(&tx, ETCH_DTYPE_DOUBLE, 4, xs, xd);
        etch_tensor_init(&tw, ETCH_DTYPE_DOUBLE, 4, ws, wd);
        etch_tensor_init(&t1, ETCH_DTYPE_DOUBLE, 4, os, od1);
        etch_tensor_init(&t2, ETCH_DTYPE_DOUBLE, 4, os, od2);
        etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), v1 = kt_vtensor(&t1), v2 = kt_vtensor(&t2),
                   fl = kt_vbool(false);
        etch_value *args[11] = {&vx, &vw, &none, kt_mklist(&ls, one, 1), kt_mklist(&lp, one, 1),
                                kt_mklist(&ld, one, 1), &fl, kt_mklist(&lo, zero, 1), &g, &v1, &v1};
        CHECK_OK(run_kernel(etch_portable_convolution_out, args, 11, NULL, 1, NULL, 0));
        args[9] = args[10] = &v2;
        CHECK_OK(run_kernel(etch_opt_convolution_out, args, 11, NULL, 2, NULL, 0));
        CHECK(memcmp(od1, od2, sizeof(double) * 2 * 4 * 5 * 6) == 0);
    }
    /* channels-last input and output (dim order 0, 2, 3, 1) */
    {
        int64_t xs[4] = {2, 4, 5, 6}, ws[4] = {4, 2, 3, 3}, os[4] = {2, 4, 5, 6};
        etch_tensor tx, tw, t1, t2;
        etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
        etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
        etch_tensor_init(&t1, ETCH_DTYPE_FLOAT, 4, os, o1);
        etch_tensor_init(&t2, ETCH_DTYPE_FLOAT, 4, os, o2);
        const uint8_t cl[4] = {0, 2, 3, 1};
        etch_tensor *ts[3] = {&tx, &t1, &t2};
        for (int i = 0; i < 3; i++) {
            memcpy(ts[i]->dim_order, cl, 4);
            etch_tensor_update_strides(ts[i]);
        }
        etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), v1 = kt_vtensor(&t1), v2 = kt_vtensor(&t2),
                   fl = kt_vbool(false);
        etch_value *args[11] = {&vx, &vw, &none, kt_mklist(&ls, one, 1), kt_mklist(&lp, one, 1),
                                kt_mklist(&ld, one, 1), &fl, kt_mklist(&lo, zero, 1), &g, &v1, &v1};
        CHECK_OK(run_kernel(etch_portable_convolution_out, args, 11, NULL, 1, NULL, 0));
        etch_opt_apply_epilogue(&relu6, o1, 2 * 4 * 5 * 6);
        args[9] = args[10] = &v2;
        CHECK_OK(run_kernel(etch_opt_convolution_out, args, 11, &relu6, 4, NULL, 0));
        CHECK(memcmp(o1, o2, sizeof(float) * 2 * 4 * 5 * 6) == 0);
        /* errors: as the portable kernel's */
        etch_value g3 = kt_vint(3);
        args[8] = &g3;
        CHECK_STATUS(run_kernel(etch_opt_convolution_out, args, 11, NULL, 1, NULL, 0),
                     ETCH_ERR_INVALID_ARGUMENT);
        args[8] = &g;
        int64_t neg[1] = {-1};
        args[4] = kt_mklist(&lp, neg, 1);
        CHECK_STATUS(run_kernel(etch_opt_convolution_out, args, 11, NULL, 1, NULL, 0),
                     ETCH_ERR_INVALID_ARGUMENT);
        args[4] = kt_mklist(&lp, one, 1);
        args[0] = &none;
        CHECK(run_kernel(etch_opt_convolution_out, args, 11, NULL, 1, NULL, 0) != ETCH_OK);
        CHECK(run_kernel(etch_opt_convolution_out, args, 5, NULL, 1, NULL, 0) != ETCH_OK);
    }
}

/* ---- pooling ---------------------------------------------------------------------------------- */

typedef struct pool_case {
    int N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil_mode, batched, empty_stride;
} pool_case;

static int pool_runs;

static int64_t pool_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

static void fill_pool_input(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = rnd() % 64;
        x[i] = r == 0 ? NAN : r == 1 ? -INFINITY : r < 6 ? 0.5f : frand(); /* ties too */
    }
}

static void max_pool_check(const pool_case *c) {
    int64_t OH = pool_out(c->H, c->kh, c->ph, c->sh, c->dh, c->ceil_mode);
    int64_t OW = pool_out(c->W, c->kw, c->pw, c->sw, c->dw, c->ceil_mode);
    if (OH < 1 || OW < 1)
        return;
    int64_t nx = (int64_t)c->N * c->C * c->H * c->W, no = (int64_t)c->N * c->C * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *r = kt_xmalloc((size_t)no * 4), *o = kt_xmalloc((size_t)no * 4);
    int64_t *ri = kt_xmalloc((size_t)no * 8), *oi = kt_xmalloc((size_t)no * 8);
    fill_pool_input(x, nx);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, os[4] = {c->N, c->C, OH, OW};
    int off = c->batched ? 0 : 1;
    size_t dim = c->batched ? 4 : 3;
    etch_tensor tx, tr, tri, to, toi;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, dim, xs + off, x);
    etch_tensor_init(&tr, ETCH_DTYPE_FLOAT, dim, os + off, r);
    etch_tensor_init(&tri, ETCH_DTYPE_LONG, dim, os + off, ri);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, dim, os + off, o);
    etch_tensor_init(&toi, ETCH_DTYPE_LONG, dim, os + off, oi);
    int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[2] = {c->ph, c->pw},
            d[2] = {c->dh, c->dw};
    kt_ilist lk, ls, lp, ld;
    etch_value vx = kt_vtensor(&tx), vr = kt_vtensor(&tr), vri = kt_vtensor(&tri), vo = kt_vtensor(&to),
               voi = kt_vtensor(&toi), cm = kt_vbool(c->ceil_mode);
    etch_value *args[9] = {&vx, kt_mklist(&lk, k, 2), kt_mklist(&ls, s, c->empty_stride ? 0 : 2),
                           kt_mklist(&lp, p, 2), kt_mklist(&ld, d, 2), &cm, &vr, &vri, &vr};
    CHECK_OK(run_kernel(etch_portable_max_pool2d_with_indices_out, args, 8, NULL, 1, NULL, 0));
    args[6] = args[8] = &vo;
    args[7] = &voi;
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int tr_i = 0; tr_i < 6; tr_i++) {
            int threads = thread_runs[tr_i];
            memset(o, 0x7f, (size_t)no * 4);
            memset(oi, 0x7f, (size_t)no * 8);
            CHECK_OK(run_kernel(etch_opt_max_pool2d_with_indices_out, args, 8, NULL, threads,
                                NULL, 0));
            pool_runs++;
            CHECK_MSG(memcmp(o, r, (size_t)no * 4) == 0 && memcmp(oi, ri, (size_t)no * 8) == 0,
                      "max_pool N%d C%d %dx%d k%dx%d s%d,%d p%d,%d d%d,%d ceil%d [%s, %d "
                      "threads] differs from portable",
                      c->N, c->C, c->H, c->W, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh,
                      c->dw, c->ceil_mode, etch_isa_name(isas[ii]), threads);
        }
    }
    free(x), free(r), free(o), free(ri), free(oi);
}

static void avg_pool_check(const pool_case *c, bool include_pad, int64_t divisor) {
    int64_t OH = pool_out(c->H, c->kh, c->ph, c->sh, 1, c->ceil_mode);
    int64_t OW = pool_out(c->W, c->kw, c->pw, c->sw, 1, c->ceil_mode);
    if (OH < 1 || OW < 1)
        return;
    int64_t nx = (int64_t)c->N * c->C * c->H * c->W, no = (int64_t)c->N * c->C * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *r = kt_xmalloc((size_t)no * 4), *o = kt_xmalloc((size_t)no * 4);
    fill_pool_input(x, nx);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, os[4] = {c->N, c->C, OH, OW};
    int off = c->batched ? 0 : 1;
    size_t dim = c->batched ? 4 : 3;
    etch_tensor tx, tr, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, dim, xs + off, x);
    etch_tensor_init(&tr, ETCH_DTYPE_FLOAT, dim, os + off, r);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, dim, os + off, o);
    int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[2] = {c->ph, c->pw};
    kt_ilist lk, ls, lp;
    etch_value vx = kt_vtensor(&tx), vr = kt_vtensor(&tr), vo = kt_vtensor(&to), cm = kt_vbool(c->ceil_mode),
               ip = kt_vbool(include_pad), dv = divisor ? kt_vint(divisor) : kt_vnone();
    etch_value *args[9] = {&vx, kt_mklist(&lk, k, 2), kt_mklist(&ls, s, c->empty_stride ? 0 : 2),
                           kt_mklist(&lp, p, 2), &cm, &ip, &dv, &vr, &vr};
    CHECK_OK(run_kernel(etch_portable_avg_pool2d_out, args, 8, NULL, 1, NULL, 0));
    args[7] = args[8] = &vo;
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (int tr_i = 0; tr_i < 6; tr_i++) {
            int threads = thread_runs[tr_i];
            memset(o, 0x7f, (size_t)no * 4);
            CHECK_OK(run_kernel(etch_opt_avg_pool2d_out, args, 8, NULL, threads, NULL, 0));
            pool_runs++;
            CHECK_MSG(memcmp(o, r, (size_t)no * 4) == 0,
                      "avg_pool N%d C%d %dx%d k%dx%d s%d,%d p%d,%d ceil%d pad%d div%lld [%s, %d "
                      "threads] differs from portable",
                      c->N, c->C, c->H, c->W, c->kh, c->kw, c->sh, c->sw, c->ph, c->pw,
                      c->ceil_mode, include_pad, (long long)divisor, etch_isa_name(isas[ii]),
                      threads);
        }
    }
    free(x), free(r), free(o);
}

static void adaptive_check(int N, int C, int H, int W, int OH, int OW, bool batched) {
    int64_t nx = (int64_t)N * C * H * W, no = (int64_t)N * C * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *r = kt_xmalloc((size_t)no * 4), *o = kt_xmalloc((size_t)no * 4);
    fill_pool_input(x, nx);
    for (int64_t i = 0; i < nx; i++) /* NaN and inf would make every sum alike */
        if (!isfinite(x[i]))
            x[i] = frand();
    int64_t xs[4] = {N, C, H, W}, os[4] = {N, C, OH, OW}, sz[2] = {OH, OW};
    int off = batched ? 0 : 1;
    size_t dim = batched ? 4 : 3;
    etch_tensor tx, tr, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, dim, xs + off, x);
    etch_tensor_init(&tr, ETCH_DTYPE_FLOAT, dim, os + off, r);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, dim, os + off, o);
    kt_ilist l;
    etch_value vx = kt_vtensor(&tx), vr = kt_vtensor(&tr), vo = kt_vtensor(&to);
    etch_value *args[4] = {&vx, kt_mklist(&l, sz, 2), &vr, &vr};
    CHECK_OK(run_kernel(etch_portable_adaptive_avg_pool2d_out, args, 3, NULL, 1, NULL, 0));
    args[2] = args[3] = &vo;
    for (int tr_i = 0; tr_i < 6; tr_i++) {
        int threads = thread_runs[tr_i];
        memset(o, 0x7f, (size_t)no * 4);
        CHECK_OK(run_kernel(etch_opt_adaptive_avg_pool2d_out, args, 3, NULL, threads, NULL, 0));
        pool_runs++;
        CHECK_MSG(memcmp(o, r, (size_t)no * 4) == 0,
                  "adaptive_avg_pool N%d C%d %dx%d -> %dx%d [%d threads] differs from portable",
                  N, C, H, W, OH, OW, threads);
    }
    free(x), free(r), free(o);
}

static void test_pools(void) {
    static const pool_case fixed[] = {
        {1, 8, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, false, true, false}, /* resnet's stem pool */
        {2, 3, 17, 41, 3, 3, 1, 1, 1, 1, 1, 1, false, true, false},
        {1, 3, 16, 35, 2, 2, 2, 2, 0, 0, 1, 1, true, false, true},
        {1, 2, 9, 40, 4, 3, 2, 2, 2, 1, 1, 1, true, true, false},
        {1, 2, 9, 9, 3, 3, 1, 2, 1, 1, 2, 2, false, true, false},
        {3, 2, 5, 5, 5, 5, 3, 3, 2, 2, 1, 1, true, true, false},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        max_pool_check(&fixed[i]);
        if (fixed[i].dh == 1) {
            avg_pool_check(&fixed[i], true, 0);
            avg_pool_check(&fixed[i], false, 0);
            avg_pool_check(&fixed[i], true, 3);
        }
    }
    for (int it = 0; it < 60; it++) {
        pool_case c;
        c.N = irand(1, 3);
        c.C = irand(1, 5);
        c.kh = irand(1, 4);
        c.kw = irand(1, 4);
        c.sh = irand(1, 3);
        c.sw = irand(1, 3);
        c.ph = irand(0, c.kh / 2);
        c.pw = irand(0, c.kw / 2);
        c.dh = irand(0, 3) ? 1 : 2;
        c.dw = irand(0, 3) ? 1 : 2;
        c.H = irand(c.kh * c.dh, 24);
        c.W = irand(c.kw * c.dw, 45);
        c.ceil_mode = irand(0, 1);
        c.batched = irand(0, 3) != 0;
        if (!c.batched)
            c.N = 1;
        c.empty_stride = irand(0, 5) == 0;
        if (c.empty_stride) {
            c.sh = c.kh;
            c.sw = c.kw;
        }
        max_pool_check(&c);
        c.dh = c.dw = 1;
        avg_pool_check(&c, irand(0, 1), irand(0, 3) ? 0 : irand(-3, 7));
    }
    adaptive_check(1, 16, 7, 7, 1, 1, true); /* the global average pool */
    adaptive_check(2, 5, 13, 11, 1, 1, true);
    adaptive_check(1, 3, 13, 11, 5, 4, false);
    adaptive_check(2, 3, 4, 6, 7, 9, true);
    adaptive_check(1, 2, 9, 9, 3, 3, true);
}

int main(void) {
    n_isas = kt_pick_isas(isas);
    big_temp = (uint8_t *)kt_xmalloc(BIG_TEMP);
    CHECK_OK(etch_threadpool_create(2, &real_pool[2]));
    CHECK_OK(etch_threadpool_create(4, &real_pool[4]));
    test_conv_generated();
    test_conv_epilogues();
    test_conv_fallbacks();
    test_pools();
    CHECK_MSG(alloc_calls_seen == 0, "%ld allocations inside %ld kernel calls", alloc_calls_seen,
              counted_calls);
    CHECK(counted_calls > 1000);
    /* the counter sees an allocation (called through a pointer the compiler cannot see
     * through, so the call stays inside the window) */
    void *(*volatile alloc_fn)(size_t) = malloc;
    etch_alloc_arm();
    void *probe = alloc_fn(16);
    etch_alloc_disarm();
    CHECK(etch_alloc_calls == 1);
    free(probe);
    printf("%d convolution runs (worst error = %.3g of the tolerance), %d pooling runs\n",
           conv_runs, worst_ratio, pool_runs);
    free(big_temp);
    etch_threadpool_destroy(real_pool[2]);
    etch_threadpool_destroy(real_pool[4]);
    return etch_test_finish();
}
