/*
 * The channel-blocked (NCHW8c) convolution, groups == 1 (etch_opt_conv_nchwc, reached through
 * etch_opt_convolution_out with a kernel context whose `blocked` bits say which arguments are
 * stored blocked: bit 0 the input, bits 9|10 the output), against the portable convolution on
 * the same data in NCHW order.
 *
 * Each case runs under every instruction set this CPU supports (the others are named as not
 * run), with 1..4 threads (a test pool that runs the chunks in a shuffled order with varying
 * splits, and the library's pthreads pool with 2 threads), four scratch sizes (enough for the
 * whole packed weight and a padded copy of the input; one 16-channel tile of packed weight and
 * the padded copy, so the tiles are packed in groups; one tile only, so padding clips the
 * windows instead; none, the scalar loop on the unpacked weight), and with and without the weight
 * prepared at load (etch_opt_convolution_prepare called with the blocked bits, as the runtime
 * does).
 *
 * A prepared 3x3 stride-1 call with at least 16 output tiles gets the Winograd pack, and then
 * runs Winograd F(4x4, 3x3) wherever scratch holds one tile's transforms (the direct path
 * otherwise); its tolerance is 3e-5 instead of 1e-5, and its runs give the same bits as each
 * other (not as the direct ones).
 *
 * Tolerance: |opt - ref| <= 1e-5 * (sum |w||x| + |b|) + 1e-6 per element, where ref is the
 * activation applied (in double) to the portable kernel's result and the sum of magnitudes
 * comes from the portable kernel run on |x|, |w|, |b|. Under one ISA, every run with scratch
 * (any thread count, split, scratch size, prepared or not) must give the same bits, and every
 * run without scratch the same bits as each other; no kernel call may allocate. (A padded
 * copy adds products 0 * w where the clipped windows skip them: the same bits but for the
 * sign of an exact zero sum, or a non-finite weight; the random data has neither.)
 *
 * `test_optimized_nchwc --bench [REPS [FILTER [THREADS]]]` instead times the kernel on
 * resnet18's and mobilenet_v2's convolution shapes (the active ISA, prepared weights; 1 thread:
 * thread CPU time, else wall time on the library's pool) and prints GFLOP/s; it checks nothing.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/status.h"
#include "etch/threadpool.h"
#include "alloc_wrap.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/portable/portable.h"
#include "runtime/context.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static kt_rng rng = {0x2545f4914f6cdd1dull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static float frand(void) { return kt_rng_float(&rng); }
static int irand(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }

static etch_isa isas[KT_N_ISAS];
static int n_isas;

enum { E_NONE, E_RELU, E_HARDTANH, E_RELU6, E_GELU, E_SILU, E_SIGMOID, N_EPI };
static const etch_epilogue epilogues[N_EPI] = {
    {ETCH_ACT_NONE, 0, 0},  {ETCH_ACT_RELU, 0, 0}, {ETCH_ACT_CLAMP, -1, 1},
    {ETCH_ACT_CLAMP, 0, 6}, {ETCH_ACT_GELU, 0, 0}, {ETCH_ACT_SILU, 0, 0},
    {ETCH_ACT_SIGMOID, 0, 0},
};

typedef struct nchwc_case {
    int N, Cin, Cout, H, W, KH, KW, sh, sw, ph, pw, dh, dw;
    bool bias;
    int epi;
    bool in_blk, out_blk;
} nchwc_case;

static int64_t conv_out(int in, int k, int p, int s, int d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Winograd F(4x4, 3x3) runs: |opt - ref| <= WINO_TOL * (sum |w||x| + |b|) + 1e-6 (its
 * transforms scale values by up to 8^2 and 1/24^2 before rounding) */
#define WINO_TOL 3e-5
static double worst_ratio, worst_wino;
static long wino_cases, wino_runs;
static long runs, alloc_calls_seen, counted_calls;
static etch_threadpool *real_pool2;

typedef struct run_cfg {
    int threads; /* > 1: the shuffling test pool; -2: the library's pool */
    kt_split split;
    void *temp;
    size_t temp_size;
    const void *prep;
    size_t prep_size;
    uint64_t blocked;
    const etch_epilogue *epi;
} run_cfg;

static etch_status run_conv(etch_value **args, const run_cfg *r) {
    kt_shuffle_pool pool;
    kt_shuffle_pool_init(&pool, r->threads > 1 ? r->threads : 1, r->split, rnd);
    const etch_threadpool_iface *tp = r->threads > 1 ? &pool.iface : NULL;
    if (r->threads < 0)
        tp = etch_threadpool_get_iface(real_pool2);
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "aten::convolution.out", r->temp, r->temp_size, tp);
    ctx.epilogue = r->epi && r->epi->act != ETCH_ACT_NONE ? r->epi : NULL;
    ctx.prepared = r->prep;
    ctx.prepared_size = r->prep_size;
    ctx.blocked = r->blocked;
    etch_alloc_arm();
    etch_opt_convolution_out(&ctx, args, 11);
    etch_alloc_disarm();
    alloc_calls_seen += etch_alloc_calls;
    counted_calls++;
    return ctx.status;
}

static uint8_t *big_temp;
#define BIG_TEMP (16u << 20)

static void nchwc_check(const nchwc_case *c) {
    const int64_t OH = conv_out(c->H, c->KH, c->ph, c->sh, c->dh);
    const int64_t OW = conv_out(c->W, c->KW, c->pw, c->sw, c->dw);
    const int64_t nx = (int64_t)c->N * c->Cin * c->H * c->W;
    const int64_t nw = (int64_t)c->Cout * c->Cin * c->KH * c->KW;
    const int64_t no = (int64_t)c->N * c->Cout * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *w = kt_xmalloc((size_t)nw * 4);
    float *b = kt_xmalloc((size_t)c->Cout * 4), *ax = kt_xmalloc((size_t)nx * 4);
    float *aw = kt_xmalloc((size_t)nw * 4), *ab = kt_xmalloc((size_t)c->Cout * 4);
    float *ref = kt_xmalloc((size_t)no * 4), *mag = kt_xmalloc((size_t)no * 4);
    float *xb = kt_xmalloc((size_t)nx * 4), *o = kt_xmalloc((size_t)no * 4);
    float *on = kt_xmalloc((size_t)no * 4), *first = kt_xmalloc((size_t)no * 4);
    float *first_direct = kt_xmalloc((size_t)no * 4), *first_wino = kt_xmalloc((size_t)no * 4);
    /* a prepared weight of a call etch_wino_eligible takes is the Winograd pack: the runs
     * with it and scratch for one tile's transforms take that path */
    const bool wino = c->in_blk && c->out_blk &&
                      etch_wino_eligible(c->Cin, c->Cout, c->KH, c->KW, OH, OW, c->sh, c->sw,
                                         c->dh, c->dw);
    const size_t wino_tile_bytes = (size_t)WINO_POINTS * (size_t)(c->Cin + c->Cout) * 4 + 64;
    wino_cases += wino;
    for (int64_t i = 0; i < nx; i++)
        ax[i] = fabsf(x[i] = frand());
    for (int64_t i = 0; i < nw; i++)
        aw[i] = fabsf(w[i] = frand());
    for (int i = 0; i < c->Cout; i++)
        ab[i] = fabsf(b[i] = frand());
    if (c->in_blk)
        kt_to_blocked(x, xb, c->N, c->Cin, c->H, c->W);
    else
        memcpy(xb, x, (size_t)nx * 4);
    int64_t xs[4] = {c->N, c->Cin, c->H, c->W}, ws[4] = {c->Cout, c->Cin, c->KH, c->KW};
    int64_t os[4] = {c->N, c->Cout, OH, OW}, bs[1] = {c->Cout};
    etch_tensor tx, tw, tb, tax, taw, tab, tref, tmag, txb, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
    etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, bs, b);
    etch_tensor_init(&tax, ETCH_DTYPE_FLOAT, 4, xs, ax);
    etch_tensor_init(&taw, ETCH_DTYPE_FLOAT, 4, ws, aw);
    etch_tensor_init(&tab, ETCH_DTYPE_FLOAT, 1, bs, ab);
    etch_tensor_init(&tref, ETCH_DTYPE_FLOAT, 4, os, ref);
    etch_tensor_init(&tmag, ETCH_DTYPE_FLOAT, 4, os, mag);
    etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, os, o);
    tw.flags |= ETCH_TENSOR_CONSTANT; /* so that the prepare function packs it */
    int64_t st[2] = {c->sh, c->sw}, pd[2] = {c->ph, c->pw}, dl[2] = {c->dh, c->dw};
    int64_t op[2] = {0, 0};
    kt_ilist ls, lp, ld, lo;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw);
    etch_value vb = c->bias ? kt_vtensor(&tb) : kt_vnone(), vref = kt_vtensor(&tref);
    etch_value tr = kt_vbool(false), g = kt_vint(1);
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, st, 2), kt_mklist(&lp, pd, 2),
                            kt_mklist(&ld, dl, 2), &tr, kt_mklist(&lo, op, 2), &g, &vref, &vref};
    char name[200];
    snprintf(name, sizeof name,
             "N%d Cin%d%s Cout%d%s %dx%d k%dx%d s%d,%d p%d,%d d%d,%d%s epi%d", c->N, c->Cin,
             c->in_blk ? "(blk)" : "", c->Cout, c->out_blk ? "(blk)" : "", c->H, c->W, c->KH,
             c->KW, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->bias ? " bias" : "", c->epi);
    /* the reference and the magnitudes */
    etch_kernel_context pctx;
    etch_kernel_context_init(&pctx, "op", NULL, 0, NULL);
    etch_portable_convolution_out(&pctx, args, 11);
    CHECK_MSG(pctx.status == ETCH_OK, "%s: portable failed: %s", name, etch_last_error());
    etch_value vax = kt_vtensor(&tax), vaw = kt_vtensor(&taw);
    etch_value vab = c->bias ? kt_vtensor(&tab) : kt_vnone(), vmag = kt_vtensor(&tmag);
    etch_value *margs[11] = {&vax, &vaw, &vab, args[3], args[4], args[5], &tr, args[7], &g,
                             &vmag, &vmag};
    etch_kernel_context_init(&pctx, "op", NULL, 0, NULL);
    etch_portable_convolution_out(&pctx, margs, 11);
    CHECK(pctx.status == ETCH_OK);

    /* the optimized kernel's arguments: the input as stored, the output tensor */
    etch_value vxb = kt_vtensor(&txb), vo = kt_vtensor(&to);
    args[0] = &vxb;
    args[9] = args[10] = &vo;
    const uint64_t blocked = (c->in_blk ? 1u : 0u) | (c->out_blk ? (1u << 9) | (1u << 10) : 0u);

    /* the prepared weight: asked for with the blocked bits, as at load; the size measured
     * (nothing bound, no blocked bits) covers it */
    etch_kernel_context lctx;
    etch_kernel_context_init(&lctx, "op", NULL, 0, NULL);
    lctx.blocked = blocked;
    size_t want = etch_opt_convolution_prepare(&lctx, args, 11, NULL, 0);
    CHECK_MSG(want > 0, "%s: nothing to prepare", name);
    etch_tensor tw_unbound = tw, tx_unbound = txb, to_unbound = to;
    tw_unbound.data = NULL;
    tx_unbound.data = NULL;
    to_unbound.data = NULL;
    etch_value vwu = kt_vtensor(&tw_unbound), vxu = kt_vtensor(&tx_unbound);
    etch_value vou = kt_vtensor(&to_unbound), none = kt_vnone();
    etch_value *uargs[11] = {&vxu, &vwu, c->bias ? &vb : &none, &none, &none, &none, &tr,
                             &none, &g, &vou, &vou};
    etch_kernel_context mctx;
    etch_kernel_context_init(&mctx, "op", NULL, 0, NULL);
    size_t measured = etch_opt_convolution_prepare(&mctx, uargs, 11, NULL, 0);
    CHECK_MSG(measured >= want, "%s: measured %zu < %zu asked for at load", name, measured, want);
    void *prep = aligned_alloc(64, (want + 63) / 64 * 64);
    size_t got = prep ? etch_opt_convolution_prepare(&lctx, args, 11, prep, want) : 0;
    CHECK_MSG(got == want, "%s: prepare gave %zu of %zu", name, got, want);

    /* scratch sizes: all; one 16-channel tile of packed weight and the padded copy of one
     * image (plus alignment); one tile only; none */
    const size_t tile_bytes = (size_t)16 * c->Cin * c->KH * c->KW * 4 + 128;
    const size_t pad_bytes = (size_t)((c->Cin + 7) / 8 * 8) * (size_t)(c->H + 2 * c->ph) *
                             (size_t)(c->W + 2 * c->pw) * 4 + 128;
    const size_t temps[4] = {BIG_TEMP, tile_bytes + pad_bytes, tile_bytes, 0};
    const int threads[6] = {1, 2, 3, 4, -2, 4};
    const etch_epilogue *e = &epilogues[c->epi];
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        bool have_first = false, have_direct = false, have_wino = false;
        for (int ti = 0; ti < 4; ti++)
            for (int pi = 0; pi < 2; pi++)
                for (int th = 0; th < 6; th++) {
                    if (threads[th] < 0 && ti != 0)
                        continue;
                    run_cfg r = {threads[th], (kt_split)(th == 5 ? KT_SPLIT_EVEN : th % 2),
                                 temps[ti] ? big_temp : NULL, temps[ti],
                                 pi ? prep : NULL, pi ? got : 0, blocked, e};
                    memset(o, 0xff, (size_t)no * 4); /* NaN: every element must be written */
                    etch_status s = run_conv(args, &r);
                    runs++;
                    const char *isa = etch_isa_name(isas[ii]);
                    if (s != ETCH_OK) {
                        CHECK_MSG(s == ETCH_OK, "%s [%s, %d threads, temp %zu, prep %d]: %s",
                                  name, isa, threads[th], temps[ti], pi, etch_last_error());
                        continue;
                    }
                    if (c->out_blk)
                        kt_from_blocked(o, on, c->N, c->Cout, OH, OW);
                    else
                        memcpy(on, o, (size_t)no * 4);
                    const bool wino_ran = wino && pi && temps[ti] >= wino_tile_bytes;
                    wino_runs += wino_ran;
                    int bad = 0;
                    for (int64_t i = 0; i < no; i++) {
                        double rv = kt_act_ref(e, ref[i]), m = (double)mag[i];
                        double err = fabs((double)on[i] - rv);
                        double tol = (wino_ran ? WINO_TOL : 1e-5) * m + 1e-6;
                        double *worst = wino_ran ? &worst_wino : &worst_ratio;
                        if (err / tol > *worst)
                            *worst = err / tol;
                        if (!(err <= tol) && bad++ < 3)
                            CHECK_MSG(err <= tol,
                                      "%s [%s, %d threads, temp %zu, prep %d]: element %lld = "
                                      "%.9g, want %.9g (tol %.3g)",
                                      name, isa, threads[th], temps[ti], pi, (long long)i,
                                      on[i], rv, tol);
                    }
                    if (!bad)
                        CHECK(1);
                    /* the same bits whatever the split, the scratch (but none) and prep */
                    /* (a prepared Winograd pack without scratch: the unpacked loop) */
                    bool direct = temps[ti] == 0 && (pi == 0 || wino);
                    float *keep = wino_ran ? first_wino : direct ? first_direct : first;
                    bool *have = wino_ran ? &have_wino : direct ? &have_direct : &have_first;
                    if (!*have) {
                        memcpy(keep, on, (size_t)no * 4);
                        *have = true;
                    } else {
                        CHECK_MSG(memcmp(keep, on, (size_t)no * 4) == 0,
                                  "%s [%s, %d threads, temp %zu, prep %d]: bits differ from "
                                  "the first run",
                                  name, isa, threads[th], temps[ti], pi);
                    }
                }
    }
    free(prep);
    free(x), free(w), free(b), free(ax), free(aw), free(ab), free(ref), free(mag), free(xb),
        free(o), free(on), free(first), free(first_direct), free(first_wino);
}

/* ---- cases ---------------------------------------------------------------------------------- */

static void test_fixed(void) {
    static const nchwc_case fixed[] = {
        /* N Cin Cout H W KH KW sh sw ph pw dh dw bias epi in_blk out_blk */
        /* first layers: an NCHW image of 3 channels */
        {1, 3, 16, 23, 29, 7, 7, 2, 2, 3, 3, 1, 1, true, E_RELU, false, true},  /* resnet stem */
        {2, 3, 24, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, false, E_RELU6, false, true}, /* mobilenet */
        /* 3x3 padding 1, stride 1 and 2, both blocked */
        {1, 16, 32, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, true, E_RELU, true, true},
        {2, 24, 24, 9, 13, 3, 3, 2, 2, 1, 1, 1, 1, true, E_NONE, true, true},
        {1, 64, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, false, E_HARDTANH, true, true},
        /* 1x1 stride 1 (the flat path, pixel tails) and stride 2 (downsample) */
        {1, 64, 40, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, true, E_NONE, true, true},
        {2, 8, 16, 11, 13, 1, 1, 1, 1, 0, 0, 1, 1, true, E_GELU, true, true},
        {1, 8, 16, 13, 12, 1, 1, 2, 2, 0, 0, 1, 1, false, E_RELU, true, true},
        {1, 32, 24, 17, 10, 1, 1, 1, 1, 0, 0, 1, 1, true, E_SILU, true, true},
        /* enough input channels that the blocks are summed in several passes (1x1, 3x3) */
        {1, 528, 24, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, true, E_RELU, true, true},
        {2, 96, 16, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, true, E_GELU, true, true},
        /* 5x5 dilation 2 */
        {1, 8, 8, 12, 13, 5, 5, 1, 1, 4, 4, 2, 2, true, E_NONE, true, true},
        {1, 16, 8, 9, 14, 5, 5, 1, 2, 2, 3, 2, 1, true, E_RELU, true, true},
        /* blocked input, NCHW output (any C_out) */
        {1, 16, 10, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, true, E_NONE, true, false},
        {2, 8, 5, 6, 5, 1, 1, 1, 1, 0, 0, 1, 1, true, E_SIGMOID, true, false},
        {1, 24, 19, 5, 11, 3, 3, 2, 1, 1, 1, 1, 1, false, E_GELU, true, false},
        {1, 8, 32, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, true, E_RELU, true, false},
        /* NCHW input of other channel counts (a short last block), blocked output */
        {1, 5, 8, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, true, E_NONE, false, true},
        {2, 11, 40, 7, 8, 3, 3, 1, 2, 0, 1, 1, 1, true, E_HARDTANH, false, true},
        {1, 1, 16, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, false, E_NONE, false, true},
        {1, 16, 16, 6, 6, 1, 1, 1, 1, 0, 0, 1, 1, true, E_NONE, false, true},
        /* padding as large as the window: rows and columns that miss the image */
        {1, 8, 16, 2, 3, 3, 3, 2, 2, 3, 3, 1, 1, true, E_RELU, true, true},
        {1, 8, 8, 1, 1, 3, 3, 1, 1, 2, 2, 1, 1, true, E_NONE, true, true},
        /* a window wider than the image */
        {1, 8, 16, 3, 2, 3, 5, 1, 1, 1, 2, 1, 1, false, E_NONE, true, true},
        /* runs of equal tiles (output pixel p at input pixel p * sw): 1x1 to an NCHW output
         * (tiles of 6 and 5 pixels, a 5-channel last tile), 1x1 with padding (on the padded
         * copy; the clipped rows without it), a 3x1 window, a 1-pixel run */
        {1, 16, 21, 13, 17, 1, 1, 1, 1, 0, 0, 1, 1, true, E_RELU6, true, false},
        {2, 24, 16, 2, 5, 1, 1, 1, 1, 0, 0, 1, 1, false, E_NONE, true, false},
        {1, 16, 24, 5, 6, 1, 1, 1, 1, 1, 1, 1, 1, true, E_RELU, true, true},
        {1, 8, 16, 9, 7, 3, 1, 1, 1, 0, 0, 1, 1, true, E_NONE, true, true},
        {1, 8, 8, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, true, E_HARDTANH, true, false},
        /* Winograd F(4x4, 3x3) (3x3 stride 1, both blocked, at least 16 output tiles): whole
         * tiles, partial tiles at the right and bottom, no padding and padding 2, several
         * 16-channel output tiles and an 8-wide last one, input channels in several passes
         * (528 > 512), two images, activations in registers and after */
        {1, 16, 32, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, true, E_RELU, true, true},
        {2, 8, 24, 15, 18, 3, 3, 1, 1, 1, 1, 1, 1, false, E_HARDTANH, true, true},
        {1, 24, 8, 19, 21, 3, 3, 1, 1, 0, 0, 1, 1, true, E_GELU, true, true},
        {1, 8, 16, 13, 14, 3, 3, 1, 1, 2, 2, 1, 1, true, E_NONE, true, true},
        {1, 64, 40, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, true, E_RELU6, true, true},
        {1, 528, 16, 13, 13, 3, 3, 1, 1, 1, 1, 1, 1, true, E_SILU, true, true},
        {1, 16, 16, 14, 30, 3, 3, 1, 1, 1, 0, 1, 1, true, E_RELU, true, true},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        nchwc_check(&fixed[i]);
}

/* Odd heights and widths 1..13 (pixel tails of every length), 3x3 padding 1; blocked and NCHW
 * outputs. */
static void test_sizes(void) {
    for (int s = 1; s <= 13; s++) {
        nchwc_case c = {1, 8, 24, 1 + (s * 5) % 13, s, 3, 3, 1 + s % 2, 1, 1, 1, 1, 1,
                        s % 2 == 0, s % 3 ? E_RELU : E_NONE, true, true};
        nchwc_check(&c);
        /* the same widths to an NCHW output (its transposed stores for every tile width) */
        c.out_blk = false;
        c.Cout = 8 + s;
        nchwc_check(&c);
    }
}

static void test_random(int count) {
    static const int ks[] = {1, 1, 2, 3, 3, 5, 7};
    static const int couts[] = {8, 16, 24, 40, 48};
    for (int it = 0; it < count; it++) {
        nchwc_case c;
        memset(&c, 0, sizeof c);
        c.N = irand(1, 2);
        int kind = irand(0, 2); /* 0 both blocked, 1 NCHW input, 2 NCHW output */
        c.in_blk = kind != 1;
        c.out_blk = kind != 2;
        c.Cin = c.in_blk ? 8 * irand(1, 8) : irand(1, 20);
        c.Cout = c.out_blk ? couts[irand(0, 4)] : irand(1, 40);
        const kt_window g = kt_rand_window(&rng, ks, 7, 4, 14, 20);
        c.H = g.H, c.W = g.W, c.KH = g.KH, c.KW = g.KW, c.sh = g.sh, c.sw = g.sw;
        c.ph = g.ph, c.pw = g.pw, c.dh = g.dh, c.dw = g.dw;
        c.bias = irand(0, 1);
        c.epi = irand(0, N_EPI - 1);
        nchwc_check(&c);
    }
}

/* A call the blocked path does not take is refused with a message, not run. */
static void test_refused(void) {
    float in[8] = {0}, w[8] = {0}, out[8] = {0};
    conv_shape s;
    memset(&s, 0, sizeof s);
    s.N = s.C_in = s.C_out = s.cin_g = s.cout_g = s.groups = 1;
    s.IH = s.IW = s.OH = s.OW = s.KH = s.KW = s.sh = s.sw = s.dh = s.dw = 1;
    s.in = in;
    s.w = w;
    s.out = out;
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "op", NULL, 0, NULL);
    etch_opt_conv_nchwc(&ctx, &s, false, false); /* neither blocked */
    CHECK(ctx.status == ETCH_ERR_NOT_SUPPORTED);
    etch_kernel_context_init(&ctx, "op", NULL, 0, NULL);
    etch_opt_conv_nchwc(&ctx, &s, false, true); /* C_out 1 cannot be blocked */
    CHECK(ctx.status == ETCH_ERR_NOT_SUPPORTED);
}

/* ---- timing (--bench) ------------------------------------------------------------------------ */

static etch_threadpool *bench_pool; /* --bench with THREADS > 1 */

static double now_s(void) {
    struct timespec ts;
    /* 1 thread: CPU time, not wall; with a pool, wall time */
    clock_gettime(bench_pool ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double bench_one(const char *label, const nchwc_case *c, int reps, double *flops_out) {
    const int64_t OH = conv_out(c->H, c->KH, c->ph, c->sh, c->dh);
    const int64_t OW = conv_out(c->W, c->KW, c->pw, c->sw, c->dw);
    const int64_t nx = (int64_t)c->N * c->Cin * c->H * c->W;
    const int64_t nw = (int64_t)c->Cout * c->Cin * c->KH * c->KW;
    const int64_t no = (int64_t)c->N * c->Cout * OH * OW;
    float *x = kt_xmalloc((size_t)nx * 4), *w = kt_xmalloc((size_t)nw * 4);
    float *b = kt_xmalloc((size_t)c->Cout * 4), *o = kt_xmalloc((size_t)no * 4);
    for (int64_t i = 0; i < nx; i++)
        x[i] = frand();
    for (int64_t i = 0; i < nw; i++)
        w[i] = frand();
    int64_t xs[4] = {c->N, c->Cin, c->H, c->W}, ws[4] = {c->Cout, c->Cin, c->KH, c->KW};
    int64_t os[4] = {c->N, c->Cout, OH, OW}, bs[1] = {c->Cout};
    etch_tensor tx, tw, tb, to;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
    etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, bs, b);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, os, o);
    tw.flags |= ETCH_TENSOR_CONSTANT;
    int64_t st[2] = {c->sh, c->sw}, pd[2] = {c->ph, c->pw}, dl[2] = {c->dh, c->dw};
    int64_t op[2] = {0, 0};
    kt_ilist ls, lp, ld, lo;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), vb = kt_vtensor(&tb);
    etch_value vo = kt_vtensor(&to), tr = kt_vbool(false), g = kt_vint(1);
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, st, 2), kt_mklist(&lp, pd, 2),
                            kt_mklist(&ld, dl, 2), &tr, kt_mklist(&lo, op, 2), &g, &vo, &vo};
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "op", NULL, 0, NULL);
    ctx.blocked = (c->in_blk ? 1u : 0u) | (c->out_blk ? (1u << 9) | (1u << 10) : 0u);
    size_t want = etch_opt_convolution_prepare(&ctx, args, 11, NULL, 0);
    void *prep = aligned_alloc(64, (want + 63) / 64 * 64);
    size_t got = etch_opt_convolution_prepare(&ctx, args, 11, prep, want);
    const uint64_t blocked = ctx.blocked;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        etch_kernel_context_init(&ctx, "op", big_temp, BIG_TEMP,
                                 etch_threadpool_get_iface(bench_pool));
        ctx.blocked = blocked;
        ctx.prepared = prep;
        ctx.prepared_size = got;
        ctx.epilogue = c->epi == E_NONE ? NULL : &epilogues[c->epi];
        double t0 = now_s();
        etch_opt_convolution_out(&ctx, args, 11);
        double t = now_s() - t0;
        if (ctx.status != ETCH_OK) {
            printf("%s: failed: %s\n", label, etch_last_error());
            break;
        }
        if (t < best)
            best = t;
    }
    double flops = 2.0 * (double)no * c->Cin * c->KH * c->KW;
    printf("%-34s %8.3f ms  %6.1f GFLOP/s\n", label, best * 1e3, flops / best * 1e-9);
    free(prep), free(x), free(w), free(b), free(o);
    *flops_out = flops;
    return best;
}

static void bench(int reps, const char *filter) {
    if (bench_pool)
        printf("ISA %s, %d threads, prepared weights, best of %d (wall time)\n",
               etch_isa_name(etch_isa_active()), etch_threadpool_num_threads(bench_pool), reps);
    else
        printf("ISA %s, 1 thread, prepared weights, best of %d (thread CPU time)\n",
               etch_isa_name(etch_isa_active()), reps);
    /* every groups == 1 convolution of the two networks, with how often it occurs */
    static const struct {
        const char *label;
        int count;
        nchwc_case c;
    } cases[] = {
#define R(l, n, ci, co, hw, k, st, p, e, ib)                                                       \
    {l, n, {1, ci, co, hw, hw, k, k, st, st, p, p, 1, 1, true, e, ib, true}}
        R("resnet18 conv1 7x7 s2 3->64 224", 1, 3, 64, 224, 7, 2, 3, E_RELU, false),
        R("resnet18 3x3 64->64 56", 4, 64, 64, 56, 3, 1, 1, E_RELU, true),
        R("resnet18 3x3 s2 64->128 56", 1, 64, 128, 56, 3, 2, 1, E_RELU, true),
        R("resnet18 3x3 128->128 28", 3, 128, 128, 28, 3, 1, 1, E_RELU, true),
        R("resnet18 1x1 s2 64->128 56", 1, 64, 128, 56, 1, 2, 0, E_NONE, true),
        R("resnet18 3x3 s2 128->256 28", 1, 128, 256, 28, 3, 2, 1, E_RELU, true),
        R("resnet18 3x3 256->256 14", 3, 256, 256, 14, 3, 1, 1, E_RELU, true),
        R("resnet18 1x1 s2 128->256 28", 1, 128, 256, 28, 1, 2, 0, E_NONE, true),
        R("resnet18 3x3 s2 256->512 14", 1, 256, 512, 14, 3, 2, 1, E_RELU, true),
        R("resnet18 3x3 512->512 7", 3, 512, 512, 7, 3, 1, 1, E_RELU, true),
        R("resnet18 1x1 s2 256->512 14", 1, 256, 512, 14, 1, 2, 0, E_NONE, true),
        R("mbv2 conv1 3x3 s2 3->32 224", 1, 3, 32, 224, 3, 2, 1, E_RELU6, false),
        R("mbv2 1x1 32->16 112", 1, 32, 16, 112, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 16->96 112", 1, 16, 96, 112, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 96->24 56", 1, 96, 24, 56, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 24->144 56", 2, 24, 144, 56, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 144->24 56", 1, 144, 24, 56, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 144->32 28", 1, 144, 32, 28, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 32->192 28", 3, 32, 192, 28, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 192->32 28", 2, 192, 32, 28, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 192->64 14", 1, 192, 64, 14, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 64->384 14", 4, 64, 384, 14, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 384->64 14", 3, 384, 64, 14, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 384->96 14", 1, 384, 96, 14, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 96->576 14", 3, 96, 576, 14, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 576->96 14", 2, 576, 96, 14, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 576->160 7", 1, 576, 160, 7, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 160->960 7", 3, 160, 960, 7, 1, 1, 0, E_RELU6, true),
        R("mbv2 1x1 960->160 7", 2, 960, 160, 7, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 960->320 7", 1, 960, 320, 7, 1, 1, 0, E_NONE, true),
        R("mbv2 1x1 320->1280 7", 1, 320, 1280, 7, 1, 1, 0, E_RELU6, true),
        /* blocked input, NCHW output (what the runtime chooses in some blocks); count 0: not
         * in the totals */
#define RN(l, ci, co, hw)                                                                          \
    {l, 0, {1, ci, co, hw, hw, 1, 1, 1, 1, 0, 0, 1, 1, true, E_RELU6, true, false}}
        RN("mbv2 1x1 16->96 112 to NCHW", 16, 96, 112),
        RN("mbv2 1x1 24->144 56 to NCHW", 24, 144, 56),
        RN("mbv2 1x1 32->192 28 to NCHW", 32, 192, 28),
#undef RN
#undef R
    };
    double tot[2] = {0, 0}, flops[2] = {0, 0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (filter && !strstr(cases[i].label, filter))
            continue;
        double f = 0;
        double t = bench_one(cases[i].label, &cases[i].c, reps, &f);
        int net = strncmp(cases[i].label, "mbv2", 4) == 0;
        tot[net] += t * cases[i].count;
        flops[net] += f * cases[i].count;
    }
    for (int net = 0; net < 2; net++)
        if (tot[net] > 0)
            printf("%s: all groups == 1 convolutions (each as often as it occurs): %.2f ms, "
                   "%.1f GFLOP/s\n",
                   net ? "mobilenet_v2" : "resnet18", tot[net] * 1e3, flops[net] / tot[net] * 1e-9);
}

int main(int argc, char **argv) {
    big_temp = (uint8_t *)kt_xmalloc(BIG_TEMP);
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        CHECK_OK(etch_opt_select_isa_from_env());
        int reps = argc > 2 ? atoi(argv[2]) : 20;
        int threads = argc > 4 ? atoi(argv[4]) : 1;
        if (threads > 1)
            CHECK_OK(etch_threadpool_create(threads, &bench_pool));
        bench(reps > 0 ? reps : 20, argc > 3 ? argv[3] : NULL);
        etch_threadpool_destroy(bench_pool);
        free(big_temp);
        return 0;
    }
    n_isas = kt_pick_isas(isas);
    CHECK_OK(etch_threadpool_create(2, &real_pool2));
    test_refused();
    test_fixed();
    test_sizes();
    test_random(40);
    CHECK_MSG(alloc_calls_seen == 0, "%ld allocations inside %ld kernel calls", alloc_calls_seen,
              counted_calls);
    printf("%ld blocked convolution runs (worst error = %.3g of the tolerance); %ld of them "
           "Winograd, in %ld cases (worst error = %.3g of its tolerance)\n",
           runs, worst_ratio, wino_runs, wino_cases, worst_wino);
    CHECK_MSG(wino_runs > 0, "no Winograd run");
    etch_threadpool_destroy(real_pool2);
    free(big_temp);
    return etch_test_finish();
}
