/* Optimized element-wise / softmax / norm / copy kernels against the portable ones.
 *
 * Every case runs the portable kernel once (the reference: double math rounded once), then the
 * optimized kernel under every instruction set this CPU supports (the others are named as not
 * run) and every threading split (no pool; a test pool of 2, 3, 4 threads that runs the
 * chunks serially in a shuffled order, some finer than one per thread; etch_threadpool with
 * 2 and 4 threads). Results must be
 * within the stated tolerance of the reference, and bit-identical across threading splits of
 * one ISA. Shapes are generated with tails (1..67 and large), broadcasting patterns, other dim
 * orders (which take the portable path) and NaN / inf / signed zero / subnormal values. The
 * kernel calls are made with allocation counting armed: none may allocate.
 *
 * Tolerances (|opt - ref| <= rtol * (|ref| + scale) + atol; scale as noted):
 *   add/sub:            rtol 1.2e-7, scale |a| + |alpha b|  (one rounding vs. torch's two)
 *   mul/div, neg, relu, clamp, hardtanh, masked_fill: rtol 1.2e-7 (correctly rounded)
 *   rsqrt 3e-7; exp, sigmoid, silu 1e-6; tanh 2e-6; atol 1e-37 (silu 1e-35: x / (1 + exp(-x))
 *   in float is -0 below x = -88.7, as torch's);
 *   gelu (erf and tanh) 4e-6 + 1.5e-7 x^2 (+ 2.4e-8 |x|^3 for tanh): Phi's conditioning for
 *   negative x; atol 1e-14 where the double reference 0.5x(1 + erf) cancels to 0
 *   softmax 3e-6 + 1e-9; log_softmax 2e-6 * (|ref| + 1)
 *   layer norm out 1e-5 * (|ref| + 1), mean/rstd 1e-5; mean.dim 1e-6 * (|ref| + max|x|)
 *   copies, index_put_, embedding: bit-exact. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_wrap.h"
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_math.h"
#include "kernels/portable/portable_nn.h"
#include "kernels/portable/portable_shape.h"
#include "runtime/context.h"

typedef void (*kfn)(etch_kernel_context *, etch_value **, size_t);

/* ---- random data ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() % 1000003) / 1000003.0f; }

static const float edge_vals[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f,
                                  1e-30f, 88.0f, -88.0f, 100.0f, -100.0f, 20.0f, -20.0f,
                                  0.4999f, -0.5001f, 3.0f, -3.0f, 9.5f, -9.5f, -14.0f};
#define N_EDGE (sizeof edge_vals / sizeof edge_vals[0])

static void fill(float *p, int64_t n, float lo, float hi, bool edges) {
    for (int64_t i = 0; i < n; i++)
        p[i] = frand(lo, hi);
    if (edges)
        for (int64_t i = 0; i < n; i += 7)
            p[i] = edge_vals[rnd() % N_EDGE];
}

/* ---- tensors ------------------------------------------------------------------------------ */

#define MAXT 4096
static etch_tensor tpool[MAXT];
static void *dpool[MAXT];
static int ntp;

static void tfree_all(void) {
    for (int i = 0; i < ntp; i++)
        free(dpool[i]);
    ntp = 0;
}

/* A tensor of `dtype` with sizes (and dim order, NULL = contiguous), zeroed data. */
static etch_tensor *mk(int dtype, int dim, const int64_t *sizes, const uint8_t *order) {
    if (ntp == MAXT) {
        fprintf(stderr, "test tensor pool exhausted\n");
        exit(2);
    }
    etch_tensor *t = &tpool[ntp];
    int64_t n = 1;
    for (int i = 0; i < dim; i++)
        n *= sizes[i];
    size_t bytes = (size_t)(n > 0 ? n : 1) * etch_dtype_size(dtype);
    dpool[ntp] = calloc(1, bytes + 64);
    etch_tensor_init(t, (etch_dtype)dtype, (size_t)dim, sizes, dpool[ntp]);
    if (order) {
        memcpy(t->dim_order, order, (size_t)dim);
        etch_tensor_update_strides(t);
    }
    ntp++;
    return t;
}
static etch_tensor *mkf(int dim, const int64_t *sizes, float lo, float hi, bool edges) {
    etch_tensor *t = mk(ETCH_DTYPE_FLOAT, dim, sizes, NULL);
    fill((float *)t->data, etch_tensor_numel(t), lo, hi, edges);
    return t;
}

/* ---- running kernels ---------------------------------------------------------------------- */

static unsigned char temp_mem[1 << 20];

static etch_threadpool *real_pool[5]; /* etch_threadpool of 2 and 4 threads */

/* threads > 1: the shuffling test pool; threads < 0: the real pthreads pool of -threads. */
static etch_status call_k(kfn f, etch_value **args, size_t nargs, int threads,
                          const etch_epilogue *epi) {
    kt_shuffle_pool pool;
    kt_shuffle_pool_init(&pool, threads, KT_SPLIT_RANDOM_PARTS, rnd);
    const etch_threadpool_iface *iface = threads > 1 ? &pool.iface : NULL;
    if (threads < 0) {
        if (!real_pool[-threads])
            CHECK_OK(etch_threadpool_create(-threads, &real_pool[-threads]));
        iface = etch_threadpool_get_iface(real_pool[-threads]);
    }
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "test", temp_mem, sizeof temp_mem, iface);
    ctx.epilogue = epi;
    etch_alloc_arm();
    f(&ctx, args, nargs);
    etch_alloc_disarm();
    CHECK_MSG(etch_alloc_calls == 0, "%ld allocations in a kernel call", etch_alloc_calls);
    return ctx.status;
}

/* ISAs: the ones this CPU supports run, the others are reported once. */
/* The instruction sets run (the others are named as not run by kt_pick_isas). */
static etch_isa isas[KT_N_ISAS];
static int n_isas;
static const int thread_cfgs[] = {1, 2, 3, 4, -2, -4};
#define N_THR 6

/* ---- comparison --------------------------------------------------------------------------- */

typedef struct tol {
    double rtol, atol;
    const float *scale; /* per-element extra magnitude (NULL: none) */
    double scale_all;   /* constant extra magnitude */
    const float *x;     /* per-element input: rtol grows by x2k x^2 + x3k |x|^3 (gelu's */
    double x2k, x3k;    /* conditioning for negative x, where Phi is tiny) */
} tol;

static int case_failures;
static tol epi_tol(const etch_epilogue *ep, double rt, const float *x);

static bool close_f(float o, float r, double rt, double at, double sc) {
    if (isnan(r) || isnan(o))
        return isnan(r) && isnan(o);
    if (isinf(r) || isinf(o))
        return o == r;
    return fabs((double)o - (double)r) <= rt * (fabs((double)r) + sc) + at;
}

/* Compare n floats; report the first few mismatches with the case name. */
static void cmp_f(const char *what, const float *o, const float *r, int64_t n, tol t) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double sc = t.scale_all + (t.scale ? fabs((double)t.scale[i]) : 0.0);
        double rt = t.rtol;
        if (t.x && isfinite(t.x[i]))
            rt += (t.x2k + t.x3k * fabs((double)t.x[i])) * (double)t.x[i] * (double)t.x[i];
        if (!close_f(o[i], r[i], rt, t.atol, sc)) {
            if (bad < 3)
                fprintf(stderr, "  %s: [%lld] got %.9g want %.9g\n", what, (long long)i,
                        (double)o[i], (double)r[i]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld elements out of tolerance", what, (long long)bad,
              (long long)n);
    case_failures += bad != 0;
}

static void cmp_bytes(const char *what, const void *o, const void *r, size_t n) {
    bool ok = n == 0 || memcmp(o, r, n) == 0;
    CHECK_MSG(ok, "%s: results differ", what);
    case_failures += !ok;
}

/* ---- the driver: reference once, then every ISA x threading split ---------------------- */

/* A case builds its args over (inputs, out); `outs` are the written tensors to compare. */
typedef struct kcase {
    const char *name;
    kfn opt, ref;
    etch_value **args;
    size_t nargs;
    etch_tensor *outs[3];
    int nouts;
    tol t[3];     /* per out; rtol < 0: bit-exact */
    bool inplace; /* outs[0] is also an input: restore it before each run */
    const etch_epilogue *epi;
} kcase;

static void run_case(kcase *c) {
    void *saved[3] = {NULL, NULL, NULL}, *ref[3] = {NULL, NULL, NULL}, *first[3] = {0, 0, 0};
    float *pre[3] = {NULL, NULL, NULL}; /* reference before the fused activation */
    size_t bytes[3];
    etch_tensor refshape[3];
    for (int k = 0; k < c->nouts; k++) {
        bytes[k] = etch_tensor_nbytes(c->outs[k]);
        size_t cap = (size_t)(c->outs[k]->capacity > 0 ? c->outs[k]->capacity : 1) *
                     etch_dtype_size(c->outs[k]->dtype);
        if (cap > bytes[k])
            bytes[k] = cap;
        if (!c->outs[k]->data)
            bytes[k] = 0; /* an empty tensor without data */
        saved[k] = malloc(bytes[k] + 1);
        ref[k] = malloc(bytes[k] + 1);
        first[k] = malloc(bytes[k] + 1);
        if (bytes[k])
            memcpy(saved[k], c->outs[k]->data, bytes[k]);
    }
    etch_status rst = call_k(c->ref, c->args, c->nargs, 1, NULL);
    for (int k = 0; k < c->nouts; k++) {
        if (c->epi && rst == ETCH_OK && c->outs[k]->dtype == ETCH_DTYPE_FLOAT) {
            /* the activation applied to the reference in double */
            float *r = (float *)c->outs[k]->data;
            pre[k] = (float *)malloc(bytes[k] + 1);
            memcpy(pre[k], r, bytes[k]);
            for (int64_t i = 0; i < etch_tensor_numel(c->outs[k]); i++) {
                double x = r[i];
                switch (c->epi->act) {
                case ETCH_ACT_RELU: x = x > 0 ? x : (x != x ? x : 0.0); break;
                case ETCH_ACT_CLAMP: x = x != x ? x : x < c->epi->lo ? c->epi->lo : x > c->epi->hi ? c->epi->hi : x; break;
                case ETCH_ACT_GELU: x = 0.5 * x * erfc(-x / sqrt(2.0)); break;
                case ETCH_ACT_GELU_TANH: x = x / (1 + exp(-1.5957691216057308 * (x + 0.044715 * x * x * x))); break;
                case ETCH_ACT_SILU: x = x / (1 + exp(-x)); break;
                case ETCH_ACT_SIGMOID: x = 1 / (1 + exp(-x)); break;
                default: break;
                }
                r[i] = (float)x;
            }
        }
        if (bytes[k])
            memcpy(ref[k], c->outs[k]->data, bytes[k]);
        refshape[k] = *c->outs[k];
    }
    for (int ii = 0; ii < n_isas; ii++) {
        if (etch_isa_set(isas[ii]) != ETCH_OK)
            continue;
        for (int ti = 0; ti < N_THR; ti++) {
            for (int k = 0; k < c->nouts; k++) {
                if (!bytes[k])
                    continue;
                memcpy(c->outs[k]->data, saved[k], bytes[k]);
                if (!c->inplace)
                    memset(c->outs[k]->data, 0xA5, etch_tensor_nbytes(c->outs[k]));
            }
            etch_status st = call_k(c->opt, c->args, c->nargs, thread_cfgs[ti], c->epi);
            char what[200];
            snprintf(what, sizeof what, "%s [%s, %d threads%s]", c->name,
                     etch_isa_name(isas[ii]), abs(thread_cfgs[ti]),
                     thread_cfgs[ti] < 0 ? ", etch_threadpool" : "");
            CHECK_MSG(st == rst, "%s: status %s, portable %s", what, etch_status_str(st),
                      etch_status_str(rst));
            if (st != ETCH_OK || rst != ETCH_OK)
                continue;
            for (int k = 0; k < c->nouts; k++) {
                etch_tensor *o = c->outs[k];
                bool same_shape = o->dim == refshape[k].dim &&
                                  memcmp(o->sizes, refshape[k].sizes, o->dim * 8) == 0;
                CHECK_MSG(same_shape, "%s: out %d shape differs", what, k);
                if (!same_shape)
                    continue;
                size_t nb = etch_tensor_nbytes(o);
                if (nb == 0)
                    continue; /* empty: nothing to compare (data may be NULL) */
                tol tk = c->t[k];
                if (pre[k]) {
                    tk = epi_tol(c->epi, c->t[k].rtol, pre[k]);
                    tk.scale = c->t[k].scale;
                }
                if (c->t[k].rtol < 0)
                    cmp_bytes(what, o->data, ref[k], nb);
                else
                    cmp_f(what, (const float *)o->data, (const float *)ref[k],
                          etch_tensor_numel(o), tk);
                if (ti == 0)
                    memcpy(first[k], o->data, nb);
                else if (memcmp(first[k], o->data, nb) != 0) {
                    CHECK_MSG(0, "%s: differs from the 1-thread result", what);
                    case_failures++;
                }
            }
        }
    }
    etch_isa_set(etch_isa_best());
    for (int k = 0; k < c->nouts; k++) {
        if (bytes[k])
            memcpy(c->outs[k]->data, ref[k], bytes[k]);
        free(saved[k]);
        free(ref[k]);
        free(first[k]);
        free(pre[k]);
    }
}

static tol T_EXACT = {-1, 0, NULL, 0, NULL, 0, 0};

/* ---- binary ------------------------------------------------------------------------------- */

typedef struct binop {
    const char *name;
    kfn opt, ref;
    bool scalar, has_alpha, sub, add;
} binop;

static const binop binops[] = {
    {"add.out", etch_opt_add_out, etch_portable_add_out, false, true, false, true},
    {"sub.out", etch_opt_sub_out, etch_portable_sub_out, false, true, true, true},
    {"mul.out", etch_opt_mul_out, etch_portable_mul_out, false, false, false, false},
    {"div.out", etch_opt_div_out, etch_portable_div_out, false, false, false, false},
    {"add.Scalar_out", etch_opt_add_scalar_out, etch_portable_add_scalar_out, true, true, false, true},
    {"sub.Scalar_out", etch_opt_sub_scalar_out, etch_portable_sub_scalar_out, true, true, true, true},
    {"mul.Scalar_out", etch_opt_mul_scalar_out, etch_portable_mul_scalar_out, true, false, false, false},
    {"div.Scalar_out", etch_opt_div_scalar_out, etch_portable_div_scalar_out, true, false, false, false},
};

/* |a| + |alpha * b| per out element, for add/sub over broadcast operands (contiguous). */
static float *add_scale(const etch_tensor *a, const etch_tensor *b, float bval, double alpha,
                        const etch_tensor *out) {
    int64_t n = etch_tensor_numel(out);
    float *s = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        /* logical index -> element of a / b (right-aligned broadcast, contiguous) */
        int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
        for (int d = (int)out->dim - 1; d >= 0; d--) {
            int64_t idx = rem % out->sizes[d];
            rem /= out->sizes[d];
            int da = d - ((int)out->dim - (int)a->dim);
            if (da >= 0) {
                ia += (a->sizes[da] == 1 ? 0 : idx) * sa;
                sa *= a->sizes[da];
            }
            if (b) {
                int db = d - ((int)out->dim - (int)b->dim);
                if (db >= 0) {
                    ib += (b->sizes[db] == 1 ? 0 : idx) * sb;
                    sb *= b->sizes[db];
                }
            }
        }
        float av = ((const float *)a->data)[ia], bv = b ? ((const float *)b->data)[ib] : bval;
        s[i] = (float)(fabs((double)av) + fabs(alpha * (double)bv));
        if (!isfinite(s[i]))
            s[i] = 0.0f;
    }
    return s;
}

static void bin_case(const binop *op, int ad, const int64_t *as, int bd, const int64_t *bs,
                     int od, const int64_t *os, double alpha, bool edges, const uint8_t *order,
                     const etch_epilogue *epi) {
    etch_tensor *a = mk(ETCH_DTYPE_FLOAT, ad, as, order);
    fill((float *)a->data, etch_tensor_numel(a), -4, 4, edges);
    etch_tensor *b = NULL;
    etch_value va = kt_vtensor(a), vbv, valpha = kt_vdouble(alpha), vout;
    float bval = frand(-3, 3);
    if (op->scalar) {
        vbv = rnd() % 2 ? kt_vdouble(bval) : kt_vint((int64_t)(bval = (float)(int)bval));
    } else {
        b = mk(ETCH_DTYPE_FLOAT, bd, bs, order && bd == ad ? order : NULL);
        fill((float *)b->data, etch_tensor_numel(b), -4, 4, edges);
        if (!op->add) /* keep divisors away from 0 (and 0/0) most of the time */
            for (int64_t i = 0; i < etch_tensor_numel(b); i++)
                if (fabsf(((float *)b->data)[i]) < 0.1f && rnd() % 4)
                    ((float *)b->data)[i] = 0.5f;
        vbv = kt_vtensor(b);
    }
    etch_tensor *out = mk(ETCH_DTYPE_FLOAT, od, os, order && od == ad ? order : NULL);
    vout = kt_vtensor(out);
    etch_value *args[5];
    size_t nargs;
    args[0] = &va;
    args[1] = &vbv;
    if (op->has_alpha) {
        args[2] = &valpha;
        args[3] = args[4] = &vout;
        nargs = 5;
    } else {
        args[2] = args[3] = &vout;
        nargs = 4;
    }
    float *scale = NULL;
    tol t = {1.2e-7, 1e-37, NULL, 0, NULL, 0, 0};
    if (op->add && !order) {
        scale = add_scale(a, b, bval, op->has_alpha ? alpha : 1.0, out);
        t.scale = scale;
    }
    if (epi) {
        t.rtol = epi->act == ETCH_ACT_GELU || epi->act == ETCH_ACT_GELU_TANH ? 4e-6 : 2e-6;
        t.atol = 1e-30;
    }
    char name[160];
    snprintf(name, sizeof name, "%s a%dd b%dd alpha=%g%s%s", op->name, ad, op->scalar ? 0 : bd,
             alpha, order ? " channels-last" : "", epi ? " +epilogue" : "");
    kcase c = {name, op->opt, op->ref, args, nargs, {out}, 1, {t}, false, epi};
    run_case(&c);
    free(scale);
}

static void test_binary(void) {
    for (size_t k = 0; k < sizeof binops / sizeof binops[0]; k++) {
        const binop *op = &binops[k];
        const double alpha = op->has_alpha ? 2.5 : 1.0;
        for (int64_t n = 1; n <= 67; n += (n < 20 ? 1 : 7)) { /* same shape, tails */
            int64_t s[1] = {n};
            bin_case(op, 1, s, 1, s, 1, s, 1.0, n % 3 == 0, NULL, NULL);
        }
        int64_t big[1] = {100003};
        bin_case(op, 1, big, 1, big, 1, big, alpha, true, NULL, NULL);
        int64_t m2[2] = {37, 53}, row[1] = {53}, col[2] = {37, 1}, one[1] = {1};
        int64_t r1[2] = {1, 53};
        bin_case(op, 2, m2, 1, row, 2, m2, alpha, false, NULL, NULL);  /* row vector */
        bin_case(op, 2, m2, 2, col, 2, m2, alpha, true, NULL, NULL);   /* column */
        bin_case(op, 2, m2, 1, one, 2, m2, alpha, false, NULL, NULL);  /* one element */
        bin_case(op, 2, m2, 0, one, 2, m2, alpha, false, NULL, NULL);  /* 0-dim */
        bin_case(op, 2, col, 2, r1, 2, m2, alpha, false, NULL, NULL);  /* outer product */
        bin_case(op, 1, row, 2, m2, 2, m2, alpha, false, NULL, NULL);  /* a broadcasts */
        int64_t s4[4] = {2, 3, 5, 7}, b3[3] = {3, 1, 7}, bl[4] = {512, 4, 3, 33},
                bb[4] = {1, 4, 1, 33};
        bin_case(op, 4, s4, 3, b3, 4, s4, alpha, true, NULL, NULL);
        bin_case(op, 4, bl, 4, bb, 4, bl, alpha, false, NULL, NULL);   /* large, threads */
        /* channels-last, all operands the same layout: flat path */
        const uint8_t cl[4] = {0, 2, 3, 1};
        bin_case(op, 4, s4, 4, s4, 4, s4, alpha, true, cl, NULL);
        /* channels-last a, contiguous b broadcasting: portable path */
        int64_t b1[1] = {7};
        bin_case(op, 4, s4, 1, b1, 4, s4, alpha, false, cl, NULL);
    }
    /* fused activations: fast path and portable fallback */
    const etch_epilogue epis[] = {{ETCH_ACT_RELU, 0, 0},       {ETCH_ACT_CLAMP, -1.0, 2.0},
                                  {ETCH_ACT_GELU, 0, 0},       {ETCH_ACT_GELU_TANH, 0, 0},
                                  {ETCH_ACT_SILU, 0, 0},       {ETCH_ACT_SIGMOID, 0, 0}};
    for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++) {
        int64_t s[2] = {9, 37}, r[1] = {37}, s4[4] = {2, 3, 5, 7}, b1[1] = {7};
        const uint8_t cl[4] = {0, 2, 3, 1};
        bin_case(&binops[0], 2, s, 1, r, 2, s, 1.0, false, NULL, &epis[e]);
        bin_case(&binops[2], 4, s4, 1, b1, 4, s4, 1.0, false, cl, &epis[e]); /* fallback */
    }
    /* fallbacks that must match portable exactly: mixed dtypes, integers, errors */
    {
        int64_t s[2] = {5, 6}, bad[2] = {5, 4};
        etch_tensor *a = mkf(2, s, -2, 2, false), *bd = mk(ETCH_DTYPE_DOUBLE, 2, s, NULL);
        for (int i = 0; i < 30; i++)
            ((double *)bd->data)[i] = i * 0.25;
        etch_tensor *od = mk(ETCH_DTYPE_DOUBLE, 2, s, NULL);
        etch_value va = kt_vtensor(a), vbd = kt_vtensor(bd), vod = kt_vtensor(od), al = kt_vint(1);
        etch_value *args[5] = {&va, &vbd, &al, &vod, &vod};
        kcase c = {"add.out Float+Double (portable)", etch_opt_add_out, etch_portable_add_out,
                   args, 5, {od}, 1, {T_EXACT}, false, NULL};
        run_case(&c);
        etch_tensor *ib = mk(ETCH_DTYPE_LONG, 2, s, NULL), *io = mk(ETCH_DTYPE_LONG, 2, s, NULL);
        for (int i = 0; i < 30; i++)
            ((int64_t *)ib->data)[i] = i - 7;
        etch_value vib = kt_vtensor(ib), vio = kt_vtensor(io);
        etch_value *iargs[4] = {&vib, &vib, &vio, &vio};
        kcase ci = {"mul.out Long (portable)", etch_opt_mul_out, etch_portable_mul_out, iargs, 4,
                    {io}, 1, {T_EXACT}, false, NULL};
        run_case(&ci);
        etch_tensor *bb = mkf(2, bad, -1, 1, false), *o = mkf(2, s, 0, 0, false);
        etch_value vbb = kt_vtensor(bb), vo = kt_vtensor(o);
        etch_value *eargs[4] = {&va, &vbb, &vo, &vo};
        kcase ce = {"mul.out bad broadcast (error)", etch_opt_mul_out, etch_portable_mul_out,
                    eargs, 4, {o}, 1, {T_EXACT}, false, NULL};
        run_case(&ce);
        etch_value btrue = kt_vbool(true), vbf = kt_vtensor(a);
        etch_value *bargs[5] = {&va, &vbf, &btrue, &vo, &vo};
        kcase cb = {"add.out Bool alpha (error)", etch_opt_add_out, etch_portable_add_out, bargs,
                    5, {o}, 1, {T_EXACT}, false, NULL};
        run_case(&cb);
        etch_value huge = kt_vdouble(1e300);
        etch_value *hargs[4] = {&va, &huge, &vo, &vo};
        kcase ch = {"mul.Scalar_out 1e300 (error)", etch_opt_mul_scalar_out,
                    etch_portable_mul_scalar_out, hargs, 4, {o}, 1, {T_EXACT}, false, NULL};
        run_case(&ch);
    }
    tfree_all();
}

/* ---- unary --------------------------------------------------------------------------------- */

static bool etch_ew_same_layout_test(const etch_tensor *a, const etch_tensor *b) {
    return a->dim == b->dim && memcmp(a->dim_order, b->dim_order, a->dim) == 0;
}

typedef struct unop {
    const char *name;
    kfn opt, ref;
    double rtol, atol;
    int extra; /* 0 none, 1 gelu approximate string, 2 hardtanh bounds, 3 clamp bounds */
    const char *approx;
} unop;

static const unop unops[] = {
    {"relu", etch_opt_relu_out, etch_portable_relu_out, 0, 0, 0, NULL},
    {"neg", etch_opt_neg_out, etch_portable_neg_out, 0, 0, 0, NULL},
    {"exp", etch_opt_exp_out, etch_portable_exp_out, 1e-6, 1e-37, 0, NULL},
    {"rsqrt", etch_opt_rsqrt_out, etch_portable_rsqrt_out, 3e-7, 1e-37, 0, NULL},
    {"tanh", etch_opt_tanh_out, etch_portable_tanh_out, 2e-6, 1e-37, 0, NULL},
    {"sigmoid", etch_opt_sigmoid_out, etch_portable_sigmoid_out, 1e-6, 1e-37, 0, NULL},
    {"silu", etch_opt_silu_out, etch_portable_silu_out, 1e-6, 1e-35, 0, NULL},
    {"gelu", etch_opt_gelu_out, etch_portable_gelu_out, 4e-6, 1e-14, 1, "none"},
    {"gelu tanh", etch_opt_gelu_out, etch_portable_gelu_out, 4e-6, 1e-14, 1, "tanh"},
    {"hardtanh", etch_opt_hardtanh_out, etch_portable_hardtanh_out, 0, 0, 2, NULL},
    {"clamp", etch_opt_clamp_out, etch_portable_clamp_out, 0, 0, 3, NULL},
};

static void un_case(const unop *op, etch_tensor *in, etch_tensor *out, int variant) {
    etch_value vin = kt_vtensor(in), vout = kt_vtensor(out), s1 = kt_vstr(op->approx ? op->approx : "none"),
               lo = kt_vdouble(-1.5), hi = kt_vint(2), none = kt_vnone();
    etch_value *args[5];
    size_t nargs = 3;
    args[0] = &vin;
    if (op->extra == 0) {
        args[1] = args[2] = &vout;
    } else if (op->extra == 1) {
        args[1] = &s1;
        args[2] = args[3] = &vout;
        nargs = 4;
    } else {
        args[1] = op->extra == 3 && variant == 1 ? &none : &lo;
        args[2] = op->extra == 3 && variant == 2 ? &none : &hi;
        args[3] = args[4] = &vout;
        nargs = 5;
    }
    tol t = {op->rtol > 0 ? op->rtol : 1.2e-7, op->atol, NULL, 0, NULL, 0, 0};
    int64_t n = etch_tensor_numel(in);
    float *xcopy = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    /* logical order of the out (same layout as in, or contiguous for mixed layouts: then
     * only the flat path's relative bound is used) */
    memcpy(xcopy, in->data, (size_t)n * sizeof(float));
    if (op->extra == 1 && etch_ew_same_layout_test(in, out)) {
        etch_epilogue ep = {strcmp(op->approx, "tanh") == 0 ? ETCH_ACT_GELU_TANH : ETCH_ACT_GELU,
                            0, 0};
        t = epi_tol(&ep, op->rtol, xcopy);
        /* the portable reference computes 0.5x(1 + erf or tanh) in double: 0 (cancellation)
         * where the value is below ~1e-16 |x| */
        t.atol = op->atol;
    }
    char name[160];
    snprintf(name, sizeof name, "%s.out n=%lld v%d%s", op->name,
             (long long)etch_tensor_numel(in), variant,
             etch_tensor_is_contiguous(in) ? "" : " channels-last");
    kcase c = {name, op->opt, op->ref, args, nargs, {out}, 1, {t}, in == out, NULL};
    run_case(&c);
    free(xcopy);
}

static void test_unary(void) {
    for (size_t k = 0; k < sizeof unops / sizeof unops[0]; k++) {
        const unop *op = &unops[k];
        const int variants = op->extra == 3 ? 3 : 1;
        for (int v = 0; v < variants; v++) {
            for (int64_t n = 1; n <= 67; n += (n < 20 ? 1 : 5)) {
                int64_t s[1] = {n};
                un_case(op, mkf(1, s, -6, 6, true), mk(ETCH_DTYPE_FLOAT, 1, s, NULL), v);
            }
            int64_t big[2] = {301, 333};
            un_case(op, mkf(2, big, -12, 12, true), mk(ETCH_DTYPE_FLOAT, 2, big, NULL), v);
            /* every value class in one row */
            int64_t e[1] = {(int64_t)N_EDGE};
            etch_tensor *ed = mk(ETCH_DTYPE_FLOAT, 1, e, NULL);
            memcpy(ed->data, edge_vals, sizeof edge_vals);
            un_case(op, ed, mk(ETCH_DTYPE_FLOAT, 1, e, NULL), v);
            /* a sweep through the approximation ranges */
            int64_t sw[1] = {4001};
            etch_tensor *swt = mk(ETCH_DTYPE_FLOAT, 1, sw, NULL);
            for (int i = 0; i < 4001; i++)
                ((float *)swt->data)[i] = -100.0f + 0.05f * (float)i;
            un_case(op, swt, mk(ETCH_DTYPE_FLOAT, 1, sw, NULL), v);
            /* in place */
            int64_t ip[1] = {45};
            etch_tensor *t = mkf(1, ip, -3, 3, true);
            un_case(op, t, t, v);
            /* channels-last in and out: same layout, flat path; mixed layouts: portable */
            const uint8_t cl[4] = {0, 2, 3, 1};
            int64_t s4[4] = {2, 3, 5, 7};
            etch_tensor *x = mk(ETCH_DTYPE_FLOAT, 4, s4, cl);
            fill((float *)x->data, 210, -5, 5, true);
            un_case(op, x, mk(ETCH_DTYPE_FLOAT, 4, s4, cl), v);
            un_case(op, x, mk(ETCH_DTYPE_FLOAT, 4, s4, NULL), v);
            tfree_all();
        }
    }
    /* Double input: portable */
    int64_t s[1] = {33};
    etch_tensor *d = mk(ETCH_DTYPE_DOUBLE, 1, s, NULL), *o = mk(ETCH_DTYPE_DOUBLE, 1, s, NULL);
    for (int i = 0; i < 33; i++)
        ((double *)d->data)[i] = i * 0.3 - 5;
    etch_value vdd = kt_vtensor(d), vo = kt_vtensor(o);
    etch_value *args[3] = {&vdd, &vo, &vo};
    kcase c = {"sigmoid.out Double (portable)", etch_opt_sigmoid_out, etch_portable_sigmoid_out,
               args, 3, {o}, 1, {T_EXACT}, false, NULL};
    run_case(&c);
    tfree_all();
}

/* pow with a scalar exponent: the special forms are exact (the same float operations as the
 * portable kernel's rounding), others go to the portable kernel */
static void test_pow(void) {
    const double exps[] = {1, 2, 3, 0.5, -0.5, -1, -2, 2.5, 0};
    for (size_t k = 0; k < sizeof exps / sizeof exps[0]; k++) {
        for (int64_t n = 1; n <= 67; n += 11) {
            for (int in_place = 0; in_place < 2; in_place++) {
                int64_t s[2] = {3, n};
                etch_tensor *x = mkf(2, s, -3, 5, true);
                etch_tensor *o = in_place ? x : mk(ETCH_DTYPE_FLOAT, 2, s, NULL);
                etch_value vx = kt_vtensor(x), ve = exps[k] == (int)exps[k] && k % 2 ? kt_vint((int)exps[k])
                                                                           : kt_vdouble(exps[k]),
                           vo = kt_vtensor(o);
                etch_value *args[4] = {&vx, &ve, &vo, &vo};
                char name[80];
                snprintf(name, sizeof name, "pow.Tensor_Scalar_out exponent %g n=%lld%s",
                         exps[k], (long long)n, in_place ? " in place" : "");
                tol t = {exps[k] == 2.5 ? -1 : 3e-7, 0, NULL, 0, NULL, 0, 0};
                kcase c = {name, etch_opt_pow_tensor_scalar_out,
                           etch_portable_pow_tensor_scalar_out, args, 4, {o}, 1, {t},
                           in_place != 0, NULL};
                run_case(&c);
            }
        }
        tfree_all();
    }
}

/* ---- masked_fill ---------------------------------------------------------------------------- */

static void mf_case(int sd, const int64_t *ss, int md, const int64_t *ms, double value) {
    etch_tensor *self = mkf(sd, ss, -3, 3, true), *mask = mk(ETCH_DTYPE_BOOL, md, ms, NULL);
    etch_tensor *out = mk(ETCH_DTYPE_FLOAT, sd, ss, NULL);
    uint8_t *m = (uint8_t *)mask->data;
    for (int64_t i = 0; i < etch_tensor_numel(mask); i++)
        m[i] = (uint8_t)(rnd() % 2);
    etch_value vs = kt_vtensor(self), vm = kt_vtensor(mask), vv = kt_vdouble(value), vo = kt_vtensor(out);
    etch_value *args[5] = {&vs, &vm, &vv, &vo, &vo};
    char name[120];
    snprintf(name, sizeof name, "masked_fill %dd mask %dd value %g", sd, md, value);
    kcase c = {name, etch_opt_masked_fill_scalar_out, etch_portable_masked_fill_scalar_out,
               args, 5, {out}, 1, {T_EXACT}, false, NULL};
    run_case(&c);
}

static void test_masked_fill(void) {
    int64_t s4[4] = {1, 4, 7, 67}, m2[2] = {7, 67}, m4[4] = {1, 1, 7, 67}, m1[1] = {67},
            one[1] = {1}, col[2] = {7, 1}, big[4] = {2, 8, 64, 512}, bm[2] = {64, 512};
    mf_case(4, s4, 4, s4, -INFINITY);
    mf_case(4, s4, 2, m2, -INFINITY);
    mf_case(4, s4, 4, m4, 0.0);
    mf_case(4, s4, 1, m1, 3.5);
    mf_case(4, s4, 1, one, 3.5);
    mf_case(4, s4, 2, col, 1.0);
    mf_case(4, big, 2, bm, -INFINITY);
    for (int64_t n = 1; n <= 40; n++) {
        int64_t s[1] = {n};
        mf_case(1, s, 1, s, NAN);
    }
    tfree_all();
}

/* ---- softmax --------------------------------------------------------------------------------- */

static void sm_case(bool log_, int d, const int64_t *s, int64_t dim, int special) {
    etch_tensor *in = mkf(d, s, -8, 8, false), *out = mk(ETCH_DTYPE_FLOAT, d, s, NULL);
    float *x = (float *)in->data;
    int64_t n = etch_tensor_numel(in);
    if (special == 1 && n > 3) { /* a NaN, an all -inf row (first row), an inf */
        int64_t len = s[d - 1];
        for (int64_t i = 0; i < len; i++)
            x[i] = -INFINITY;
        x[n - 1] = NAN;
        x[n / 2] = INFINITY;
        x[n / 3] = -INFINITY;
    }
    if (special == 2)
        for (int64_t i = 0; i < n; i++)
            x[i] *= 1000.0f; /* large spread: most terms underflow */
    etch_value vin = kt_vtensor(in), vdim = kt_vint(dim), h = kt_vbool(false), vo = kt_vtensor(out);
    etch_value *args[5] = {&vin, &vdim, &h, &vo, &vo};
    tol t = log_ ? (tol){2e-6, 2e-6, NULL, 0, NULL, 0, 0} : (tol){3e-6, 1e-9, NULL, 0, NULL, 0, 0};
    char name[120];
    snprintf(name, sizeof name, "%s %dd [.., %lld] dim %lld special %d",
             log_ ? "log_softmax" : "softmax", d, (long long)s[d - 1], (long long)dim, special);
    kcase c = {name, log_ ? etch_opt_log_softmax_out : etch_opt_softmax_out,
               log_ ? etch_portable_log_softmax_out : etch_portable_softmax_out,
               args, 5, {out}, 1, {t}, false, NULL};
    run_case(&c);
}

static void test_softmax(void) {
    for (int l = 0; l < 2; l++) {
        for (int64_t n = 1; n <= 67; n += (n < 20 ? 1 : 6)) {
            int64_t s[2] = {5, n};
            sm_case(l, 2, s, -1, n % 4 == 0 ? 1 : 0);
        }
        int64_t big[4] = {1, 8, 64, 512};
        sm_case(l, 4, big, 3, 0);
        sm_case(l, 4, big, -1, 1);
        sm_case(l, 4, big, 3, 2);
        int64_t s3[3] = {4, 9, 13};
        sm_case(l, 3, s3, 1, 0); /* middle dim: column path */
        sm_case(l, 3, s3, 0, 0);
        sm_case(l, 3, s3, 1, 1);
        int64_t one[3] = {3, 17, 1};
        sm_case(l, 3, one, 1, 0); /* inner of size 1 */
        int64_t v[1] = {1000};
        sm_case(l, 1, v, 0, 0);
        tfree_all();
    }
    /* channels-last: portable */
    const uint8_t cl[4] = {0, 2, 3, 1};
    int64_t s4[4] = {2, 3, 5, 7};
    etch_tensor *in = mk(ETCH_DTYPE_FLOAT, 4, s4, cl), *out = mk(ETCH_DTYPE_FLOAT, 4, s4, cl);
    fill((float *)in->data, 210, -3, 3, false);
    etch_value vin = kt_vtensor(in), vdim = kt_vint(1), h = kt_vbool(false), vo = kt_vtensor(out);
    etch_value *args[5] = {&vin, &vdim, &h, &vo, &vo};
    kcase c = {"softmax channels-last (portable)", etch_opt_softmax_out,
               etch_portable_softmax_out, args, 5, {out}, 1, {T_EXACT}, false, NULL};
    run_case(&c);
    etch_value vbad = kt_vint(4);
    args[1] = &vbad;
    kcase ce = {"softmax dim 4 (error)", etch_opt_softmax_out, etch_portable_softmax_out, args,
                5, {out}, 1, {T_EXACT}, false, NULL};
    run_case(&ce);
    tfree_all();
}

/* ---- layer norm, mean ------------------------------------------------------------------------- */

static void ln_case(int d, const int64_t *s, int nlen, bool w, bool b) {
    etch_tensor *in = mkf(d, s, -3, 5, false), *out = mk(ETCH_DTYPE_FLOAT, d, s, NULL);
    int64_t ss[ETCH_MAX_DIMS];
    for (int i = 0; i < d; i++)
        ss[i] = i < d - nlen ? s[i] : 1;
    etch_tensor *mean = mk(ETCH_DTYPE_FLOAT, d, ss, NULL), *rstd = mk(ETCH_DTYPE_FLOAT, d, ss, NULL);
    etch_tensor *wt = mkf(nlen, s + d - nlen, 0.5, 1.5, false);
    etch_tensor *bt = mkf(nlen, s + d - nlen, -1, 1, false);
    kt_ilist l;
    etch_value vin = kt_vtensor(in), vw = w ? kt_vtensor(wt) : kt_vnone(), vbias = b ? kt_vtensor(bt) : kt_vnone(),
               eps = kt_vdouble(1e-5), vo = kt_vtensor(out), vm = kt_vtensor(mean), vr = kt_vtensor(rstd);
    etch_value *args[9] = {&vin, kt_mklist(&l, s + d - nlen, (size_t)nlen), &vw, &vbias, &eps,
                           &vo, &vm, &vr, &vo};
    char name[120];
    snprintf(name, sizeof name, "layer_norm %dd last %lld over %d dims w%d b%d", d,
             (long long)s[d - 1], nlen, w, b);
    tol t = {1e-5, 1e-5, NULL, 0, NULL, 0, 0}, ts = {1e-5, 1e-6, NULL, 0, NULL, 0, 0};
    kcase c = {name, etch_opt_native_layer_norm_out, etch_portable_native_layer_norm_out, args,
               9, {out, mean, rstd}, 3, {t, ts, ts}, false, NULL};
    run_case(&c);
}

static void mean_case(int d, const int64_t *s, const int64_t *dims, int nd, bool keep) {
    etch_tensor *in = mkf(d, s, -2, 6, false);
    int64_t os[ETCH_MAX_DIMS];
    int od = 0;
    for (int i = 0; i < d; i++) {
        bool red = false;
        for (int k = 0; k < nd; k++)
            red |= (dims[k] + d) % d == i;
        if (!red)
            os[od++] = s[i];
        else if (keep)
            os[od++] = 1;
    }
    etch_tensor *out = mk(ETCH_DTYPE_FLOAT, od, os, NULL);
    kt_ilist l;
    etch_value vin = kt_vtensor(in), vk = kt_vbool(keep), vnd = kt_vnone(), vo = kt_vtensor(out);
    etch_value *args[6] = {&vin, kt_mklist(&l, dims, (size_t)nd), &vk, &vnd, &vo, &vo};
    char name[120];
    snprintf(name, sizeof name, "mean.out %dd last %lld dims %d keep %d", d, (long long)s[d - 1],
             nd, keep);
    tol t = {1e-6, 0, NULL, 6.0, NULL, 0, 0};
    kcase c = {name, etch_opt_mean_out, etch_portable_mean_out, args, 6, {out}, 1, {t}, false,
               NULL};
    run_case(&c);
}

static void test_norm(void) {
    for (int64_t n = 1; n <= 67; n += (n < 20 ? 1 : 6)) {
        int64_t s[2] = {6, n};
        ln_case(2, s, 1, n % 2, n % 3 != 0);
        int64_t dims[1] = {-1};
        mean_case(2, s, dims, 1, n % 2);
    }
    int64_t enc[3] = {1, 64, 256}, big[2] = {300, 1000}, s3[3] = {4, 6, 10};
    ln_case(3, enc, 1, true, true);
    ln_case(2, big, 1, true, false);
    ln_case(3, s3, 2, true, true);
    ln_case(3, s3, 2, false, false);
    int64_t d1[1] = {2}, d2[2] = {2, 1}, d3[2] = {-1, -2}, d0[1] = {0}, rms[3] = {1, 64, 288};
    mean_case(3, enc, d1, 1, true);
    mean_case(3, rms, d1, 1, true);
    mean_case(3, s3, d2, 2, false);
    mean_case(3, s3, d3, 2, true);
    mean_case(3, s3, d0, 1, true); /* not a suffix: portable */
    tfree_all();
}

/* ---- copies ----------------------------------------------------------------------------------- */

static etch_tensor *mk_any(int dtype, int d, const int64_t *s) {
    etch_tensor *t = mk(dtype, d, s, NULL);
    uint8_t *p = (uint8_t *)t->data;
    for (size_t i = 0; i < etch_tensor_nbytes(t); i++)
        p[i] = (uint8_t)rnd();
    if (dtype == ETCH_DTYPE_FLOAT) /* keep floats free of NaN payload noise */
        fill((float *)t->data, etch_tensor_numel(t), -9, 9, false);
    if (dtype == ETCH_DTYPE_BOOL)
        for (size_t i = 0; i < etch_tensor_nbytes(t); i++)
            p[i] &= 1;
    return t;
}

static void perm_case(int dtype, int d, const int64_t *s, const int64_t *perm) {
    etch_tensor *in = mk_any(dtype, d, s);
    int64_t os[ETCH_MAX_DIMS];
    for (int i = 0; i < d; i++)
        os[i] = s[(perm[i] + d) % d];
    etch_tensor *out = mk(dtype, d, os, NULL);
    kt_ilist l;
    etch_value vin = kt_vtensor(in), vo = kt_vtensor(out);
    etch_value *args[4] = {&vin, kt_mklist(&l, perm, (size_t)d), &vo, &vo};
    char name[120];
    snprintf(name, sizeof name, "permute_copy %s %dd", etch_dtype_name(dtype), d);
    kcase c = {name, etch_opt_permute_copy_out, etch_portable_permute_copy_out, args, 4, {out},
               1, {T_EXACT}, false, NULL};
    run_case(&c);
}

static void test_copies(void) {
    const int dts[] = {ETCH_DTYPE_FLOAT, ETCH_DTYPE_LONG, ETCH_DTYPE_BYTE, ETCH_DTYPE_HALF};
    for (int k = 0; k < 4; k++) {
        int64_t s2[2] = {37, 45}, p2[2] = {1, 0};
        perm_case(dts[k], 2, s2, p2);
        int64_t s3[3] = {5, 7, 9}, p3a[3] = {1, 2, 0}, p3b[3] = {0, 2, 1}, p3c[3] = {1, 0, 2},
                p3d[3] = {0, 1, 2}, p3e[3] = {-1, 0, 1};
        perm_case(dts[k], 3, s3, p3a);
        perm_case(dts[k], 3, s3, p3b);
        perm_case(dts[k], 3, s3, p3c);
        perm_case(dts[k], 3, s3, p3d);
        perm_case(dts[k], 3, s3, p3e);
        int64_t s4[4] = {1, 64, 4, 32}, p4[4] = {0, 2, 1, 3}, p4b[4] = {2, 3, 0, 1},
                s5[5] = {2, 1, 3, 4, 5}, p5[5] = {4, 2, 0, 3, 1};
        perm_case(dts[k], 4, s4, p4);
        perm_case(dts[k], 4, s4, p4b);
        perm_case(dts[k], 5, s5, p5);
        tfree_all();
    }
    int64_t bigs[3] = {64, 128, 96}, bp[3] = {2, 0, 1}, bq[3] = {1, 0, 2};
    perm_case(ETCH_DTYPE_FLOAT, 3, bigs, bp); /* tiled transposes, split over threads */
    perm_case(ETCH_DTYPE_FLOAT, 3, bigs, bq); /* contiguous runs, split over threads */
    int64_t bad[3] = {0, 0, 1};
    int64_t s3[3] = {5, 7, 9};
    {
        etch_tensor *in = mk_any(ETCH_DTYPE_FLOAT, 3, s3), *out = mk(ETCH_DTYPE_FLOAT, 3, s3, NULL);
        kt_ilist l;
        etch_value vin = kt_vtensor(in), vo = kt_vtensor(out);
        etch_value *args[4] = {&vin, kt_mklist(&l, bad, 3), &vo, &vo};
        kcase c = {"permute_copy repeated dim (error)", etch_opt_permute_copy_out,
                   etch_portable_permute_copy_out, args, 4, {out}, 1, {T_EXACT}, false, NULL};
        run_case(&c);
    }
    /* clone */
    for (int k = 0; k < 4; k++) {
        etch_tensor *in = mk_any(dts[k], 3, s3), *out = mk(dts[k], 3, s3, NULL);
        etch_value vin = kt_vtensor(in), mf = kt_vnone(), vo = kt_vtensor(out);
        etch_value *args[4] = {&vin, &mf, &vo, &vo};
        kcase c = {"clone", etch_opt_clone_out, etch_portable_clone_out, args, 4, {out}, 1,
                   {T_EXACT}, false, NULL};
        run_case(&c);
    }
    /* select_copy: every dim, negative index */
    for (int d = -3; d < 3; d++)
        for (int idx = -2; idx < 2; idx++) {
            etch_tensor *in = mk_any(ETCH_DTYPE_FLOAT, 3, s3);
            int64_t os[2];
            int dd = (d + 3) % 3;
            for (int i = 0, k = 0; i < 3; i++)
                if (i != dd)
                    os[k++] = s3[i];
            etch_tensor *out = mk(ETCH_DTYPE_FLOAT, 2, os, NULL);
            etch_value vin = kt_vtensor(in), vdim = kt_vint(d), vidx = kt_vint(idx), vo = kt_vtensor(out);
            etch_value *args[5] = {&vin, &vdim, &vidx, &vo, &vo};
            kcase c = {"select_copy", etch_opt_select_copy_int_out,
                       etch_portable_select_copy_int_out, args, 5, {out}, 1, {T_EXACT}, false,
                       NULL};
            run_case(&c);
        }
    {
        etch_tensor *in = mk_any(ETCH_DTYPE_FLOAT, 3, s3);
        int64_t os[2] = {7, 9};
        etch_tensor *out = mk(ETCH_DTYPE_FLOAT, 2, os, NULL);
        etch_value vin = kt_vtensor(in), vdim = kt_vint(0), vidx = kt_vint(5), vo = kt_vtensor(out);
        etch_value *args[5] = {&vin, &vdim, &vidx, &vo, &vo};
        kcase c = {"select_copy index 5 of 5 (error)", etch_opt_select_copy_int_out,
                   etch_portable_select_copy_int_out, args, 5, {out}, 1, {T_EXACT}, false, NULL};
        run_case(&c);
    }
    tfree_all();
    /* slice_copy: dims, steps, negative / None / clamped bounds */
    const int64_t starts[] = {0, 1, -4, 100, -100};
    const int64_t ends[] = {3, -1, 100, 0, INT64_MAX};
    for (int d = 0; d < 3; d++)
        for (int si = 0; si < 5; si++)
            for (int ei = 0; ei < 5; ei++)
                for (int64_t step = 1; step <= 3; step++) {
                    etch_tensor *in = mk_any(ETCH_DTYPE_FLOAT, 3, s3);
                    int64_t size = s3[d], st = starts[si], en = ends[ei];
                    int64_t a = st < 0 ? st + size : st, b = en < 0 ? en + size : en;
                    a = a < 0 ? 0 : a > size ? size : a;
                    b = b < a ? a : b > size ? size : b;
                    int64_t os[3] = {5, 7, 9};
                    os[d] = b == a ? 0 : 1 + (b - a - 1) / step;
                    etch_tensor *out = mk(ETCH_DTYPE_FLOAT, 3, os, NULL);
                    etch_value vin = kt_vtensor(in), vdim = kt_vint(d), vs = si == 0 && d == 1 ? kt_vnone() : kt_vint(st),
                               ve = en == INT64_MAX ? kt_vnone() : kt_vint(en), vstep = kt_vint(step),
                               vo = kt_vtensor(out);
                    etch_value *args[7] = {&vin, &vdim, &vs, &ve, &vstep, &vo, &vo};
                    kcase c = {"slice_copy", etch_opt_slice_copy_tensor_out,
                               etch_portable_slice_copy_tensor_out, args, 7, {out}, 1,
                               {T_EXACT}, false, NULL};
                    run_case(&c);
                    tfree_all();
                }
    /* cat / stack */
    for (int dim = -3; dim < 4; dim++) {
        for (int stack = 0; stack < 2; stack++) {
            if (!stack && dim == 3)
                continue;
            etch_tensor *ts[3];
            etch_value tv[3], *items[3];
            int64_t sizes[3][3] = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
            if (!stack) {
                int dd = (dim + 3) % 3;
                sizes[1][dd] = 5;
                sizes[2][dd] = 1;
            }
            int64_t os[4];
            int rank = stack ? 4 : 3;
            int dd = (dim + rank) % rank;
            for (int i = 0; i < 3; i++) {
                ts[i] = mk_any(ETCH_DTYPE_FLOAT, 3, sizes[i]);
                tv[i] = kt_vtensor(ts[i]);
                items[i] = &tv[i];
            }
            if (stack) {
                for (int i = 0, k = 0; i < 4; i++)
                    os[i] = i == dd ? 3 : sizes[0][k++];
            } else {
                for (int i = 0; i < 3; i++)
                    os[i] = sizes[0][i];
                os[dd] = sizes[0][dd] + sizes[1][dd] + sizes[2][dd];
            }
            etch_tensor *out = mk(ETCH_DTYPE_FLOAT, rank, os, NULL);
            etch_value list, vdim = kt_vint(dim), vo = kt_vtensor(out);
            memset(&list, 0, sizeof list);
            list.tag = ETCH_VALUE_TENSOR_LIST;
            list.u.list.items = items;
            list.u.list.len = 3;
            etch_value *args[4] = {&list, &vdim, &vo, &vo};
            char name[64];
            snprintf(name, sizeof name, "%s dim %d", stack ? "stack" : "cat", dim);
            kcase c = {name, stack ? etch_opt_stack_out : etch_opt_cat_out,
                       stack ? etch_portable_stack_out : etch_portable_cat_out, args, 4, {out}, 1,
                       {T_EXACT}, false, NULL};
            run_case(&c);
            tfree_all();
        }
    }
    /* stack of two at the last dim (rotary embedding): the interleaving path */
    for (int dt = 0; dt < 2; dt++) {
        int64_t s2[3] = {5, 8, 16}, os[4] = {5, 8, 16, 2};
        int dtype = dt ? ETCH_DTYPE_LONG : ETCH_DTYPE_FLOAT;
        etch_tensor *a = mk_any(dtype, 3, s2), *b = mk_any(dtype, 3, s2),
                    *out = mk(dtype, 4, os, NULL);
        etch_value va = kt_vtensor(a), vbb = kt_vtensor(b), *items[2] = {&va, &vbb}, list, vdim = kt_vint(-1),
                   vo = kt_vtensor(out);
        memset(&list, 0, sizeof list);
        list.tag = ETCH_VALUE_TENSOR_LIST;
        list.u.list.items = items;
        list.u.list.len = 2;
        etch_value *args[4] = {&list, &vdim, &vo, &vo};
        kcase c = {"stack 2 at dim -1", etch_opt_stack_out, etch_portable_stack_out, args, 4,
                   {out}, 1, {T_EXACT}, false, NULL};
        run_case(&c);
        tfree_all();
    }
    /* index_put_: the KV-cache writes (k: [KV, hd, S] at [None, None, pos]; v: [KV, S, hd] at
     * [None, pos]), negative positions, a position out of range (error) */
    for (int which = 0; which < 5; which++) {
        /* case 4: a prefill of 300 positions into a 512-slot cache */
        const int64_t KV = 2, hd = 8, S = which == 4 ? 512 : 32,
                      T = which == 2 ? 1 : which == 4 ? 300 : 3;
        int64_t ks[3] = {KV, hd, S}, vs3[3] = {KV, S, hd};
        int64_t cs[3], vals[3], nidx;
        if (which == 1) {
            memcpy(cs, vs3, sizeof cs);
            vals[0] = KV; vals[1] = T; vals[2] = hd;
            nidx = 2;
        } else {
            memcpy(cs, ks, sizeof cs);
            vals[0] = KV; vals[1] = hd; vals[2] = T;
            nidx = 3;
        }
        etch_tensor *cache = mk_any(ETCH_DTYPE_FLOAT, 3, cs), *val = mk_any(ETCH_DTYPE_FLOAT, 3, vals);
        int64_t ts1[1] = {T};
        etch_tensor *pos = mk(which == 2 ? ETCH_DTYPE_INT : ETCH_DTYPE_LONG, 1, ts1, NULL);
        for (int64_t t = 0; t < T; t++) {
            int64_t p = which == 3 && t == 1 ? 40 : (t * 5 + 3) % S - (t == 2 ? S : 0);
            if (which == 4)
                p = t + 100;
            if (pos->dtype == ETCH_DTYPE_INT)
                ((int32_t *)pos->data)[t] = (int32_t)p;
            else
                ((int64_t *)pos->data)[t] = p;
        }
        etch_value none = kt_vnone(), vp = kt_vtensor(pos), vval = kt_vtensor(val), vc = kt_vtensor(cache), acc = kt_vbool(false);
        etch_value *items[3] = {&none, nidx == 2 ? &vp : &none, &vp};
        etch_value list;
        memset(&list, 0, sizeof list);
        list.tag = ETCH_VALUE_OPTIONAL_TENSOR_LIST;
        list.u.list.items = items;
        list.u.list.len = (size_t)nidx;
        etch_value *args[5] = {&vc, &list, &vval, &acc, &vc};
        char name[64];
        snprintf(name, sizeof name, "index_put_ case %d", which);
        kcase c = {name, etch_opt_index_put_, etch_portable_index_put_, args, 5, {cache}, 1,
                   {T_EXACT}, true, NULL};
        run_case(&c);
        tfree_all();
    }
    /* embedding */
    for (int which = 0; which < 3; which++) {
        int64_t ws[2] = {50, 24}, is[2] = {3, 7};
        etch_tensor *w = mk_any(ETCH_DTYPE_FLOAT, 2, ws);
        etch_tensor *idx = mk(which == 1 ? ETCH_DTYPE_INT : ETCH_DTYPE_LONG, 2, is, NULL);
        for (int i = 0; i < 21; i++) {
            int64_t v = (int64_t)(rnd() % 50);
            if (which == 2 && i == 5)
                v = 50; /* out of range: error */
            if (idx->dtype == ETCH_DTYPE_INT)
                ((int32_t *)idx->data)[i] = (int32_t)v;
            else
                ((int64_t *)idx->data)[i] = v;
        }
        int64_t os[3] = {3, 7, 24};
        etch_tensor *out = mk(ETCH_DTYPE_FLOAT, 3, os, NULL);
        etch_value vw = kt_vtensor(w), vidx = kt_vtensor(idx), pad = kt_vint(-1), f1 = kt_vbool(false), f2 = kt_vbool(false),
                   vo = kt_vtensor(out);
        etch_value *args[7] = {&vw, &vidx, &pad, &f1, &f2, &vo, &vo};
        kcase c = {"embedding", etch_opt_embedding_out, etch_portable_embedding_out, args, 7,
                   {out}, 1, {T_EXACT}, false, NULL};
        run_case(&c);
        tfree_all();
    }
}

/* Activation tolerance: gelu's relative error grows with x^2 (erf) or |x|^3 (tanh form) for
 * negative x, the conditioning of Phi there (any float implementation has it). */
static tol epi_tol(const etch_epilogue *ep, double rt, const float *x) {
    tol t = {rt > 0 ? rt : 1.2e-7, rt > 0 ? 1e-37 : 0, NULL, 0, NULL, 0, 0};
    if (ep->act == ETCH_ACT_GELU) {
        t.x = x;
        t.x2k = 1.5e-7;
    } else if (ep->act == ETCH_ACT_GELU_TANH) {
        t.x = x;
        t.x2k = 1e-7;
        t.x3k = 2.4e-8;
    }
    return t;
}

/* ---- empty tensors (no data pointer) ------------------------------------------------------- */

static void test_empty(void) {
    int64_t z[2] = {0, 5}, z2[3] = {2, 0, 4}, s3[3] = {2, 3, 4};
    etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 2, z, NULL), *b = mk(ETCH_DTYPE_FLOAT, 2, z, NULL),
                *o = mk(ETCH_DTYPE_FLOAT, 2, z, NULL);
    a->data = b->data = o->data = NULL;
    etch_value va = kt_vtensor(a), vbb = kt_vtensor(b), vo = kt_vtensor(o), al = kt_vint(1);
    etch_value *args[5] = {&va, &vbb, &al, &vo, &vo};
    kcase c = {"add.out empty", etch_opt_add_out, etch_portable_add_out, args, 5, {o}, 1,
               {T_EXACT}, false, NULL};
    run_case(&c);
    etch_value dim = kt_vint(-1), h = kt_vbool(false);
    etch_value *sargs[5] = {&va, &dim, &h, &vo, &vo};
    kcase cs = {"softmax empty", etch_opt_softmax_out, etch_portable_softmax_out, sargs, 5, {o},
                1, {T_EXACT}, false, NULL};
    run_case(&cs);
    /* cat with an empty piece */
    etch_tensor *p0 = mk_any(ETCH_DTYPE_FLOAT, 3, s3), *p1 = mk(ETCH_DTYPE_FLOAT, 3, z2, NULL),
                *p2 = mk_any(ETCH_DTYPE_FLOAT, 3, s3);
    p1->data = NULL;
    int64_t os[3] = {2, 6, 4};
    etch_tensor *out = mk(ETCH_DTYPE_FLOAT, 3, os, NULL);
    etch_value v0 = kt_vtensor(p0), v1 = kt_vtensor(p1), v2 = kt_vtensor(p2), *items[3] = {&v0, &v1, &v2}, list,
               d1 = kt_vint(1), vout = kt_vtensor(out);
    memset(&list, 0, sizeof list);
    list.tag = ETCH_VALUE_TENSOR_LIST;
    list.u.list.items = items;
    list.u.list.len = 3;
    etch_value *cargs[4] = {&list, &d1, &vout, &vout};
    kcase cc = {"cat with an empty piece", etch_opt_cat_out, etch_portable_cat_out, cargs, 4,
                {out}, 1, {T_EXACT}, false, NULL};
    run_case(&cc);
    /* index_put_ with no positions */
    int64_t cs3[3] = {2, 8, 16}, vs[3] = {2, 8, 0}, t0[1] = {0};
    etch_tensor *cache = mk_any(ETCH_DTYPE_FLOAT, 3, cs3), *val = mk(ETCH_DTYPE_FLOAT, 3, vs, NULL),
                *pos = mk(ETCH_DTYPE_LONG, 1, t0, NULL);
    val->data = pos->data = NULL;
    etch_value none = kt_vnone(), vp = kt_vtensor(pos), vv = kt_vtensor(val), vc = kt_vtensor(cache), acc = kt_vbool(false),
               *pitems[3] = {&none, &none, &vp}, plist;
    memset(&plist, 0, sizeof plist);
    plist.tag = ETCH_VALUE_OPTIONAL_TENSOR_LIST;
    plist.u.list.items = pitems;
    plist.u.list.len = 3;
    etch_value *pargs[5] = {&vc, &plist, &vv, &acc, &vc};
    kcase cp = {"index_put_ no positions", etch_opt_index_put_, etch_portable_index_put_, pargs,
                5, {cache}, 1, {T_EXACT}, true, NULL};
    run_case(&cp);
    tfree_all();
}

/* ---- epilogue ---------------------------------------------------------------------------------- */

static void test_epilogue(void) {
    const etch_epilogue epis[] = {{ETCH_ACT_RELU, 0, 0},       {ETCH_ACT_CLAMP, -1.0, 2.0},
                                  {ETCH_ACT_CLAMP, -INFINITY, 6.0},
                                  {ETCH_ACT_GELU, 0, 0},       {ETCH_ACT_GELU_TANH, 0, 0},
                                  {ETCH_ACT_SILU, 0, 0},       {ETCH_ACT_SIGMOID, 0, 0}};
    const double rt[] = {0, 0, 0, 4e-6, 4e-6, 1e-6, 1e-6};
    enum { N = 4001 };
    static float x[N], y[N], r[N];
    for (int i = 0; i < N; i++)
        x[i] = -50.0f + 0.025f * (float)i;
    memcpy(x, edge_vals, sizeof edge_vals);
    for (size_t e = 0; e < sizeof epis / sizeof epis[0]; e++) {
        const etch_epilogue *ep = &epis[e];
        for (int i = 0; i < N; i++) {
            double v = x[i];
            switch (ep->act) {
            case ETCH_ACT_RELU: v = v > 0 ? v : (v != v ? v : 0.0); break;
            case ETCH_ACT_CLAMP: v = v != v ? v : v < ep->lo ? ep->lo : v > ep->hi ? ep->hi : v; break;
            case ETCH_ACT_GELU: v = 0.5 * v * erfc(-v / sqrt(2.0)); break;
            case ETCH_ACT_GELU_TANH: v = v / (1 + exp(-1.5957691216057308 * (v + 0.044715 * v * v * v))); break;
            case ETCH_ACT_SILU: v = v / (1 + exp(-v)); break;
            case ETCH_ACT_SIGMOID: v = 1 / (1 + exp(-v)); break;
            default: break;
            }
            r[i] = (float)v;
        }
        for (int ii = 0; ii < n_isas; ii++) {
            if (etch_isa_set(isas[ii]) != ETCH_OK)
                continue;
            for (int n = 0; n <= 40; n++) { /* tails */
                memcpy(y, x, sizeof y);
                etch_opt_apply_epilogue(ep, y, n);
                char what[80];
                snprintf(what, sizeof what, "epilogue act %d n=%d [%s]", (int)ep->act, n,
                         etch_isa_name(isas[ii]));
                cmp_f(what, y, r, n, epi_tol(ep, rt[e], x));
                CHECK(memcmp(y + n, x + n, sizeof(float) * (size_t)(N - n)) == 0);
            }
            memcpy(y, x, sizeof y);
            etch_opt_apply_epilogue(ep, y, N);
            char what[80];
            snprintf(what, sizeof what, "epilogue act %d [%s]", (int)ep->act,
                     etch_isa_name(isas[ii]));
            cmp_f(what, y, r, N, epi_tol(ep, rt[e], x));
        }
    }
    etch_opt_apply_epilogue(NULL, y, N); /* no-op */
    etch_isa_set(etch_isa_best());
}

/* ---- the registry serves these kernels -------------------------------------------------------- */

static void test_registered(void) {
    CHECK_OK(etch_kernels_register_optimized());
    const char *names[] = {"aten::add.out", "aten::mul.out", "aten::_softmax.out",
                           "aten::native_layer_norm.out", "aten::permute_copy.out",
                           "aten::index_put_", "aten::masked_fill.Scalar_out"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const etch_kernel *k = etch_kernels_find(names[i], strlen(names[i]));
        CHECK_MSG(k && strcmp(etch_kernels_impl_of(k), "optimized") == 0, "%s not optimized",
                  names[i]);
    }
    const etch_kernel *add = etch_kernels_find("aten::add.out", 13);
    CHECK(add && (etch_kernels_flags_of(add) & ETCH_KERNEL_FUSES_ACTIVATION));
}

int main(void) {
    n_isas = kt_pick_isas(isas);
    test_registered();
    test_epilogue();
    test_binary();
    test_unary();
    test_pow();
    test_masked_fill();
    test_softmax();
    test_norm();
    test_copies();
    test_empty();
    tfree_all();
    etch_threadpool_destroy(real_pool[2]);
    etch_threadpool_destroy(real_pool[4]);
    return etch_test_finish();
}
