/* etch::sdpa_kv.out against PyTorch's masked-softmax attention (gen_cases.py): the portable
 * kernel and the optimized one under every instruction set this CPU supports, serial, on the
 * shuffled test pool with 2..4 threads (three split policies) and on the real 2- and 4-thread
 * pools. Checks, per case:
 *   - every result within 1e-5 + 1e-5 |expected| (the reference is float64 math rounded once);
 *   - the optimized result is bit-identical for every thread count and split of one ISA;
 *   - cache rows after start_pos + T - 1 are NaN in the test's copy and the output stays
 *     finite (they are never read: ASan also sees the caches allocated to their exact size);
 *   - no allocation inside a kernel call, and no kernel temp memory (the context has none).
 * Then the errors: start_pos < 0, start_pos + T > S, a bad start_pos tensor, shapes that do
 * not fit, each failing with INVALID_ARGUMENT (a static out of the wrong shape: the runtime's
 * NOT_SUPPORTED) and a message naming the problem, out untouched.
 *
 * Then etch::sdpa_kv_q8.out, the int8-cache variant, on the cases of gen_cases_q8.py (see
 * its section below) and its errors (NaN / negative scales in the positions read, dtypes and
 * shapes of the scales and zero points).
 *
 * Then ExecuTorch's llama::custom_sdpa.out and llama::sdpa_with_kv_cache.out (portable and
 * optimized) on the float cases with ExecuTorch's [1, S, KV, hd] caches, and their errors.
 *
 * Usage: test_sdpa_kv CASES_FILE Q8_CASES_FILE */
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
#include "kernels/optimized/opt_attention.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

typedef void (*kfn)(etch_kernel_context *, etch_value **, size_t);

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static etch_threadpool *real_pool[5];

/* threads 0/1: serial; 2..4: the shuffled pool with `split`; -2/-4: the pthreads pool. */
static etch_status call_k(kfn f, etch_value **args, size_t nargs, int threads, kt_split split) {
    kt_shuffle_pool pool;
    kt_shuffle_pool_init(&pool, threads > 1 ? threads : 2, split, rnd);
    const etch_threadpool_iface *iface = threads > 1 ? &pool.iface : NULL;
    if (threads < 0) {
        if (!real_pool[-threads])
            CHECK_OK(etch_threadpool_create(-threads, &real_pool[-threads]));
        iface = etch_threadpool_get_iface(real_pool[-threads]);
    }
    etch_kernel_context ctx;
    /* no temp arena: neither kernel needs scratch memory */
    etch_kernel_context_init(&ctx, "etch::sdpa_kv.out", NULL, 0, iface);
    etch_alloc_arm();
    f(&ctx, args, nargs);
    etch_alloc_disarm();
    CHECK_MSG(etch_alloc_calls == 0, "%ld allocations in a kernel call", etch_alloc_calls);
    return ctx.status;
}

typedef struct sdpa_case {
    int64_t T, H, KV, hd, S, sp;
    double scale;
    float *q, *k, *v, *want;
} sdpa_case;

/* The call's values over caller buffers; out is bounded-dynamic with room for S rows. */
typedef struct sdpa_call {
    etch_tensor q, k, v, sp, out;
    int64_t pos;
    etch_value vals[7];
    etch_value *args[7];
} sdpa_call;

static void call_init(sdpa_call *c, const sdpa_case *cs, float *q, float *k, float *v,
                      int64_t pos, float *out, int64_t out_rows) {
    const int64_t qs[3] = {cs->T, cs->H, cs->hd}, ks[3] = {cs->KV, cs->S, cs->hd};
    const int64_t one = 1, os[2] = {out_rows, cs->H * cs->hd};
    c->pos = pos;
    CHECK_OK(etch_tensor_init(&c->q, ETCH_DTYPE_FLOAT, 3, qs, q));
    CHECK_OK(etch_tensor_init(&c->k, ETCH_DTYPE_FLOAT, 3, ks, k));
    CHECK_OK(etch_tensor_init(&c->v, ETCH_DTYPE_FLOAT, 3, ks, v));
    CHECK_OK(etch_tensor_init(&c->sp, ETCH_DTYPE_LONG, 1, &one, &c->pos));
    CHECK_OK(etch_tensor_init(&c->out, ETCH_DTYPE_FLOAT, 2, os, out));
    c->out.dynamism = ETCH_SHAPE_DYNAMIC_BOUND;
    c->vals[0] = kt_vtensor(&c->q);
    c->vals[1] = kt_vtensor(&c->k);
    c->vals[2] = kt_vtensor(&c->v);
    c->vals[3] = kt_vtensor(&c->sp);
    c->vals[4] = kt_vdouble(cs->scale);
    c->vals[5] = kt_vtensor(&c->out);
    c->vals[6] = kt_vtensor(&c->out);
    for (int i = 0; i < 7; i++)
        c->args[i] = &c->vals[i];
}

static float *xmalloc(size_t n) {
    float *p = (float *)malloc(n ? n * sizeof(float) : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static int read_cases(const char *path, sdpa_case **out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char magic[4];
    uint32_t n = 0;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "SDPA", 4) != 0 || fread(&n, 4, 1, f) != 1 ||
        n > 10000) {
        fclose(f);
        fprintf(stderr, "%s: not a cases file\n", path);
        return -1;
    }
    sdpa_case *cs = (sdpa_case *)calloc(n, sizeof *cs);
    for (uint32_t i = 0; cs && i < n; i++) {
        sdpa_case *c = &cs[i];
        int64_t h[6];
        if (fread(h, 8, 6, f) != 6 || fread(&c->scale, 8, 1, f) != 1)
            goto bad;
        c->T = h[0], c->H = h[1], c->KV = h[2], c->hd = h[3], c->S = h[4], c->sp = h[5];
        for (int j = 0; j < 6; j++)
            if (h[j] < 0 || h[j] > 4096)
                goto bad;
        const size_t nq = (size_t)(c->T * c->H * c->hd), nk = (size_t)(c->KV * c->S * c->hd);
        c->q = xmalloc(nq), c->k = xmalloc(nk), c->v = xmalloc(nk), c->want = xmalloc(nq);
        if (fread(c->q, 4, nq, f) != nq || fread(c->k, 4, nk, f) != nk ||
            fread(c->v, 4, nk, f) != nk || fread(c->want, 4, nq, f) != nq)
            goto bad;
    }
    fclose(f);
    *out = cs;
    return (int)n;
bad:
    fclose(f);
    fprintf(stderr, "%s: truncated or corrupt\n", path);
    return -1;
}

/* Compare against the reference; returns the largest error. */
static double check_close_to(const sdpa_case *cs, const float *want, const float *got,
                             const char *what) {
    const int64_t n = cs->T * cs->H * cs->hd;
    double worst = 0.0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        const double e = want[i], d = fabs((double)got[i] - e);
        if (!(d <= 1e-5 + 1e-5 * fabs(e))) {
            if (bad < 0)
                bad = i;
        }
        if (d > worst || isnan(d))
            worst = isnan(d) ? INFINITY : d;
    }
    CHECK_MSG(bad < 0,
              "%s T%lld H%lld KV%lld hd%lld S%lld at %lld: element %lld is %.9g, want %.9g",
              what, (long long)cs->T, (long long)cs->H, (long long)cs->KV, (long long)cs->hd,
              (long long)cs->S, (long long)cs->sp, (long long)(bad < 0 ? 0 : bad),
              bad < 0 ? 0.0 : (double)got[bad], bad < 0 ? 0.0 : (double)want[bad]);
    return worst;
}

static double check_close(const sdpa_case *cs, const float *got, const char *what) {
    return check_close_to(cs, cs->want, got, what);
}

static const int thread_cfgs[] = {1, 2, 3, 4, -2, -4};
#define N_THR (sizeof thread_cfgs / sizeof thread_cfgs[0])
static const kt_split splits[] = {KT_SPLIT_TWO_PER_THREAD, KT_SPLIT_RANDOM_PARTS, KT_SPLIT_EVEN};

static void run_case(const sdpa_case *cs, const etch_isa *isas, int n_isas, double *worst_p,
                     double *worst_o) {
    const int64_t nk = cs->KV * cs->S * cs->hd, nq = cs->T * cs->H * cs->hd;
    /* exact-size copies of the caches with every row after the last new position NaN */
    float *k = xmalloc((size_t)nk), *v = xmalloc((size_t)nk);
    memcpy(k, cs->k, (size_t)nk * sizeof(float));
    memcpy(v, cs->v, (size_t)nk * sizeof(float));
    for (int64_t h = 0; h < cs->KV; h++)
        for (int64_t j = cs->sp + cs->T; j < cs->S; j++)
            for (int64_t d = 0; d < cs->hd; d++) {
                k[(h * cs->S + j) * cs->hd + d] = NAN;
                v[(h * cs->S + j) * cs->hd + d] = NAN;
            }
    const int64_t cap = cs->S * cs->H * cs->hd;
    float *out = xmalloc((size_t)cap), *first = xmalloc((size_t)nq);
    sdpa_call c;

    call_init(&c, cs, cs->q, k, v, cs->sp, out, cs->S);
    CHECK_OK(call_k(etch_portable_sdpa_kv_out, c.args, 7, 1, KT_SPLIT_EVEN));
    CHECK(c.out.dim == 2 && c.out.sizes[0] == cs->T && c.out.sizes[1] == cs->H * cs->hd);
    double w = check_close(cs, out, "portable");
    if (w > *worst_p)
        *worst_p = w;

    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (size_t ti = 0; ti < N_THR; ti++) {
            for (size_t si = 0; si < (thread_cfgs[ti] > 1 ? 3u : 1u); si++) {
                for (int64_t i = 0; i < cap; i++)
                    out[i] = -7.0f;
                call_init(&c, cs, cs->q, k, v, cs->sp, out, cs->S);
                CHECK_OK(call_k(etch_opt_sdpa_kv_out, c.args, 7, thread_cfgs[ti], splits[si]));
                CHECK(c.out.sizes[0] == cs->T && c.out.sizes[1] == cs->H * cs->hd);
                char what[64];
                snprintf(what, sizeof what, "optimized %s threads %d split %d",
                         etch_isa_name(isas[ii]), thread_cfgs[ti], (int)si);
                w = check_close(cs, out, what);
                if (w > worst_o[ii])
                    worst_o[ii] = w;
                if (ti == 0)
                    memcpy(first, out, (size_t)nq * sizeof(float));
                else
                    CHECK_MSG(memcmp(first, out, (size_t)nq * sizeof(float)) == 0,
                              "%s: differs from the serial result", what);
            }
        }
    }
    free(k), free(v), free(out), free(first);
}

/* Errors: every kernel (portable, optimized per ISA) fails with `want`, names the problem
 * and leaves out as it was. */
static void expect_fail_fns(kfn portable, kfn optimized, etch_value **args, size_t nargs,
                            etch_tensor *out, const etch_isa *isas, int n_isas, etch_status want,
                            const char *needle, const char *what) {
    kfn fns[2] = {portable, optimized};
    for (int fi = 0; fi < 2; fi++) {
        for (int ii = 0; ii < (fi ? n_isas : 1); ii++) {
            if (fi)
                CHECK_OK(etch_isa_set(isas[ii]));
            float *o = (float *)out->data;
            const int64_t n = etch_tensor_numel(out);
            for (int64_t i = 0; i < n; i++)
                o[i] = 3.0f;
            const int64_t rows = out->sizes[0];
            etch_status st = call_k(fns[fi], args, nargs, fi ? 2 : 1, KT_SPLIT_RANDOM_PARTS);
            CHECK_MSG(st == want, "%s (%s): got %s", what,
                      fi ? etch_isa_name(isas[ii]) : "portable", etch_status_str(st));
            CHECK_MSG(strstr(etch_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'",
                      what, etch_last_error(), needle);
            CHECK(out->sizes[0] == rows);
            int same = 1;
            for (int64_t i = 0; i < n; i++)
                same &= o[i] == 3.0f;
            CHECK_MSG(same, "%s: out was written", what);
        }
    }
}

static void expect_fail_st(sdpa_call *c, const etch_isa *isas, int n_isas, etch_status want,
                           const char *needle, const char *what) {
    expect_fail_fns(etch_portable_sdpa_kv_out, etch_opt_sdpa_kv_out, c->args, 7, &c->out, isas,
                    n_isas, want, needle, what);
}

static void expect_fail(sdpa_call *c, const etch_isa *isas, int n_isas, const char *needle,
                        const char *what) {
    expect_fail_st(c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, needle, what);
}

static void test_errors(const etch_isa *isas, int n_isas) {
    /* T = 3 new positions, H 4, KV 2, hd 8, S 6 */
    sdpa_case cs = {3, 4, 2, 8, 6, 0, 0.35, NULL, NULL, NULL, NULL};
    float q[3 * 4 * 8], k[2 * 6 * 8], v[2 * 6 * 8], out[6 * 4 * 8];
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        k[i] = v[i] = (float)(i % 5) * 0.2f;
    sdpa_call c;
    const int64_t bad_pos[] = {-1, 4, 5, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof bad_pos / sizeof bad_pos[0]; i++) {
        call_init(&c, &cs, q, k, v, bad_pos[i], out, 3);
        char what[64];
        snprintf(what, sizeof what, "start_pos %lld", (long long)bad_pos[i]);
        expect_fail(&c, isas, n_isas, "start_pos", what);
    }
    /* the last position that fits: start_pos 3 with T 3 in S 6 */
    call_init(&c, &cs, q, k, v, 3, out, 3);
    CHECK_OK(call_k(etch_portable_sdpa_kv_out, c.args, 7, 1, KT_SPLIT_EVEN));
    CHECK_OK(call_k(etch_opt_sdpa_kv_out, c.args, 7, 2, KT_SPLIT_EVEN));

    /* start_pos of two elements, or Float */
    call_init(&c, &cs, q, k, v, 0, out, 3);
    int64_t two[2] = {0, 0};
    const int64_t s2 = 2;
    CHECK_OK(etch_tensor_init(&c.sp, ETCH_DTYPE_LONG, 1, &s2, two));
    expect_fail(&c, isas, n_isas, "start_pos", "start_pos of two elements");
    float fpos = 0.0f;
    const int64_t s1 = 1;
    CHECK_OK(etch_tensor_init(&c.sp, ETCH_DTYPE_FLOAT, 1, &s1, &fpos));
    expect_fail(&c, isas, n_isas, "start_pos", "Float start_pos");

    /* H not a multiple of KV: q [3, 3, 8] */
    call_init(&c, &cs, q, k, v, 0, out, 3);
    c.q.sizes[1] = 3;
    etch_tensor_update_strides(&c.q);
    expect_fail(&c, isas, n_isas, "multiple", "H 3 over KV 2");
    /* head dims that differ: caches with hd 4 */
    call_init(&c, &cs, q, k, v, 0, out, 3);
    c.k.sizes[2] = 4, c.v.sizes[2] = 4;
    etch_tensor_update_strides(&c.k);
    etch_tensor_update_strides(&c.v);
    expect_fail(&c, isas, n_isas, "hd", "head dims differ");
    /* v_cache shorter than k_cache */
    call_init(&c, &cs, q, k, v, 0, out, 3);
    c.v.sizes[1] = 5;
    etch_tensor_update_strides(&c.v);
    expect_fail(&c, isas, n_isas, "KV, S, hd", "caches differ");
    /* out too small for [T, H*hd] (static [2, 32]) */
    call_init(&c, &cs, q, k, v, 0, out, 2);
    c.out.dynamism = ETCH_SHAPE_STATIC;
    expect_fail_st(&c, isas, n_isas, ETCH_ERR_NOT_SUPPORTED, "out", "static out of the wrong shape");
}

/* ---- etch::sdpa_kv_q8.out ------------------------------------------------------------------
 * The int8-cache variant (gen_cases_q8.py): the portable kernel against PyTorch's reference
 * (dequantize in float32, masked softmax in float64) within 1e-5 + 1e-5 |expected|; the
 * optimized one under every ISA and thread split against the portable within the same bound
 * and bit-identical across thread counts; the scales and zero points after the last new
 * position are NaN / junk (never read). */

typedef struct q8_case {
    sdpa_case b; /* T .. scale, q, want (k, v unused) */
    int8_t *k, *kz, *v, *vz;
    float *ks, *vs;
} q8_case;

typedef struct q8_call {
    etch_tensor q, k, ks, kz, v, vs, vz, sp, out;
    int64_t pos;
    etch_value vals[11];
    etch_value *args[11];
} q8_call;

static void q8_call_init(q8_call *c, const q8_case *cs, int8_t *k, float *ks, int8_t *kz,
                         int8_t *v, float *vs, int8_t *vz, int64_t pos, float *out,
                         int64_t out_rows) {
    const sdpa_case *b = &cs->b;
    const int64_t qs[3] = {b->T, b->H, b->hd}, cz[3] = {b->KV, b->S, b->hd};
    const int64_t pz[3] = {b->KV, b->S, 1}, one = 1, os[2] = {out_rows, b->H * b->hd};
    c->pos = pos;
    CHECK_OK(etch_tensor_init(&c->q, ETCH_DTYPE_FLOAT, 3, qs, b->q));
    CHECK_OK(etch_tensor_init(&c->k, ETCH_DTYPE_CHAR, 3, cz, k));
    CHECK_OK(etch_tensor_init(&c->ks, ETCH_DTYPE_FLOAT, 3, pz, ks));
    CHECK_OK(etch_tensor_init(&c->kz, ETCH_DTYPE_CHAR, 3, pz, kz));
    CHECK_OK(etch_tensor_init(&c->v, ETCH_DTYPE_CHAR, 3, cz, v));
    CHECK_OK(etch_tensor_init(&c->vs, ETCH_DTYPE_FLOAT, 3, pz, vs));
    CHECK_OK(etch_tensor_init(&c->vz, ETCH_DTYPE_CHAR, 3, pz, vz));
    CHECK_OK(etch_tensor_init(&c->sp, ETCH_DTYPE_LONG, 1, &one, &c->pos));
    CHECK_OK(etch_tensor_init(&c->out, ETCH_DTYPE_FLOAT, 2, os, out));
    c->out.dynamism = ETCH_SHAPE_DYNAMIC_BOUND;
    etch_tensor *ts[8] = {&c->q, &c->k, &c->ks, &c->kz, &c->v, &c->vs, &c->vz, &c->sp};
    for (int i = 0; i < 8; i++)
        c->vals[i] = kt_vtensor(ts[i]);
    c->vals[8] = kt_vdouble(b->scale);
    c->vals[9] = kt_vtensor(&c->out);
    c->vals[10] = kt_vtensor(&c->out);
    for (int i = 0; i < 11; i++)
        c->args[i] = &c->vals[i];
}

static void *xread(FILE *f, size_t n, size_t esz, bool *ok) {
    void *p = malloc(n ? n * esz : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    if (*ok && fread(p, esz, n, f) != n)
        *ok = false;
    return p;
}

static int read_q8_cases(const char *path, q8_case **out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char magic[4];
    uint32_t n = 0;
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "SDQ8", 4) != 0 || fread(&n, 4, 1, f) != 1 ||
        n > 10000) {
        fclose(f);
        fprintf(stderr, "%s: not a q8 cases file\n", path);
        return -1;
    }
    q8_case *cs = (q8_case *)calloc(n, sizeof *cs);
    bool ok = cs != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        sdpa_case *b = &cs[i].b;
        int64_t h[6];
        if (fread(h, 8, 6, f) != 6 || fread(&b->scale, 8, 1, f) != 1) {
            ok = false;
            break;
        }
        for (int j = 0; j < 6; j++)
            ok &= h[j] >= 0 && h[j] <= 4096;
        if (!ok)
            break;
        b->T = h[0], b->H = h[1], b->KV = h[2], b->hd = h[3], b->S = h[4], b->sp = h[5];
        const size_t nq = (size_t)(b->T * b->H * b->hd), nk = (size_t)(b->KV * b->S * b->hd);
        const size_t np = (size_t)(b->KV * b->S);
        b->q = (float *)xread(f, nq, 4, &ok);
        cs[i].k = (int8_t *)xread(f, nk, 1, &ok);
        cs[i].ks = (float *)xread(f, np, 4, &ok);
        cs[i].kz = (int8_t *)xread(f, np, 1, &ok);
        cs[i].v = (int8_t *)xread(f, nk, 1, &ok);
        cs[i].vs = (float *)xread(f, np, 4, &ok);
        cs[i].vz = (int8_t *)xread(f, np, 1, &ok);
        b->want = (float *)xread(f, nq, 4, &ok);
    }
    fclose(f);
    if (!ok) {
        fprintf(stderr, "%s: truncated or corrupt\n", path);
        return -1;
    }
    *out = cs;
    return (int)n;
}

static void run_q8_case(const q8_case *cs, const etch_isa *isas, int n_isas, double *worst_p,
                        double *worst_o) {
    const sdpa_case *b = &cs->b;
    const int64_t nk = b->KV * b->S * b->hd, np = b->KV * b->S, nq = b->T * b->H * b->hd;
    int8_t *k = (int8_t *)malloc((size_t)nk), *v = (int8_t *)malloc((size_t)nk);
    int8_t *kz = (int8_t *)malloc((size_t)np), *vz = (int8_t *)malloc((size_t)np);
    float *ks = xmalloc((size_t)np), *vs = xmalloc((size_t)np);
    CHECK(k && v && kz && vz);
    memcpy(k, cs->k, (size_t)nk), memcpy(v, cs->v, (size_t)nk);
    memcpy(kz, cs->kz, (size_t)np), memcpy(vz, cs->vz, (size_t)np);
    memcpy(ks, cs->ks, (size_t)np * sizeof(float)), memcpy(vs, cs->vs, (size_t)np * sizeof(float));
    /* positions after the last new one: NaN scales, junk values (never read) */
    for (int64_t h = 0; h < b->KV; h++)
        for (int64_t j = b->sp + b->T; j < b->S; j++) {
            ks[h * b->S + j] = vs[h * b->S + j] = NAN;
            kz[h * b->S + j] = vz[h * b->S + j] = 99;
            for (int64_t d = 0; d < b->hd; d++)
                k[(h * b->S + j) * b->hd + d] = v[(h * b->S + j) * b->hd + d] = -128;
        }
    const int64_t cap = b->S * b->H * b->hd;
    float *out = xmalloc((size_t)cap), *port = xmalloc((size_t)nq), *first = xmalloc((size_t)nq);
    q8_call c;
    q8_call_init(&c, cs, k, ks, kz, v, vs, vz, b->sp, out, b->S);
    CHECK_OK(call_k(etch_portable_sdpa_kv_q8_out, c.args, 11, 1, KT_SPLIT_EVEN));
    CHECK(c.out.dim == 2 && c.out.sizes[0] == b->T && c.out.sizes[1] == b->H * b->hd);
    double w = check_close(b, out, "q8 portable");
    if (w > *worst_p)
        *worst_p = w;
    memcpy(port, out, (size_t)nq * sizeof(float));
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (size_t ti = 0; ti < N_THR; ti++) {
            for (size_t si = 0; si < (thread_cfgs[ti] > 1 ? 3u : 1u); si++) {
                for (int64_t i = 0; i < cap; i++)
                    out[i] = -7.0f;
                q8_call_init(&c, cs, k, ks, kz, v, vs, vz, b->sp, out, b->S);
                CHECK_OK(call_k(etch_opt_sdpa_kv_q8_out, c.args, 11, thread_cfgs[ti],
                                splits[si]));
                CHECK(c.out.sizes[0] == b->T && c.out.sizes[1] == b->H * b->hd);
                char what[80];
                snprintf(what, sizeof what, "q8 optimized %s threads %d split %d",
                         etch_isa_name(isas[ii]), thread_cfgs[ti], (int)si);
                w = check_close_to(b, port, out, what);
                if (w > worst_o[ii])
                    worst_o[ii] = w;
                check_close(b, out, what);
                if (ti == 0)
                    memcpy(first, out, (size_t)nq * sizeof(float));
                else
                    CHECK_MSG(memcmp(first, out, (size_t)nq * sizeof(float)) == 0,
                              "%s: differs from the serial result", what);
            }
        }
    }
    free(k), free(v), free(kz), free(vz), free(ks), free(vs), free(out), free(port), free(first);
}

static void q8_expect_fail(q8_call *c, const etch_isa *isas, int n_isas, etch_status want,
                           const char *needle, const char *what) {
    expect_fail_fns(etch_portable_sdpa_kv_q8_out, etch_opt_sdpa_kv_q8_out, c->args, 11, &c->out,
                    isas, n_isas, want, needle, what);
}

static void test_q8_errors(const etch_isa *isas, int n_isas) {
    /* T = 3 new positions, H 4, KV 2, hd 8, S 6 */
    float q[3 * 4 * 8], out[6 * 4 * 8], ks[12], vs[12];
    int8_t k[2 * 6 * 8], v[2 * 6 * 8], kz[12], vz[12];
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < sizeof k; i++)
        k[i] = v[i] = (int8_t)(i * 37);
    for (int i = 0; i < 12; i++)
        ks[i] = vs[i] = 0.01f * (float)(i + 1), kz[i] = vz[i] = (int8_t)(i - 6);
    q8_case cs = {{3, 4, 2, 8, 6, 0, 0.35, q, NULL, NULL, NULL}, NULL, NULL, NULL, NULL, NULL,
                  NULL};
    q8_call c;
    const int64_t bad_pos[] = {-1, 4, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof bad_pos / sizeof bad_pos[0]; i++) {
        q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, bad_pos[i], out, 3);
        q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "start_pos", "q8 start_pos");
    }
    /* start_pos 0, T 3: positions 0..2 are read; a NaN scale at 3 is fine, at 2 it is not */
    ks[3] = NAN;
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    CHECK_OK(call_k(etch_portable_sdpa_kv_q8_out, c.args, 11, 1, KT_SPLIT_EVEN));
    CHECK_OK(call_k(etch_opt_sdpa_kv_q8_out, c.args, 11, 2, KT_SPLIT_EVEN));
    ks[3] = 0.04f;
    ks[6 + 2] = NAN; /* kv head 1, position 2 */
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "k_scales[1, 2]", "NaN k scale");
    ks[6 + 2] = 0.09f;
    vs[1] = -0.5f;
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "v_scales[0, 1]",
                   "negative v scale");
    vs[1] = 0.02f;
    /* zero points of another dtype, scales of another shape, a float cache */
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    c.vz.dtype = ETCH_DTYPE_BYTE;
    q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_TYPE, "Char", "Byte zero points");
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    c.ks.dim = 2;
    etch_tensor_update_strides(&c.ks);
    q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "[KV, S, 1]", "2-d scales");
    q8_call_init(&c, &cs, k, ks, kz, v, vs, vz, 0, out, 3);
    c.k.sizes[2] = 2, c.k.dtype = ETCH_DTYPE_FLOAT; /* 2 floats a row: the same bytes */
    etch_tensor_update_strides(&c.k);
    q8_expect_fail(&c, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "hd", "a Float k cache");
}

/* ---- ExecuTorch's llama::custom_sdpa.out and llama::sdpa_with_kv_cache.out ----------------
 * The same cases with the query as [1, T, H, hd] (the same memory) and the caches transposed
 * into ExecuTorch's [1, S, KV, hd] (rows past start_pos + T - 1 NaN: never read), causal,
 * no mask: portable and optimized (every ISA, thread count and split; bit-identical across
 * them per ISA) against PyTorch; sdpa_with_kv_cache writes the new rows into caches that held
 * zeros there and attends the same. Then errors through both kernels. */

typedef struct llama_call {
    etch_tensor q, k, v, nk, nv, out;
    etch_value vals[13];
    etch_value *args[13];
} llama_call;

/* custom_sdpa.out: q, k, v, start_pos, attn_mask, drpout_p, is_causal, scale, out, out */
static void llama_init(llama_call *c, const sdpa_case *cs, float *q, float *k, float *v,
                       int64_t pos, float *out, bool causal) {
    const int64_t qs[4] = {1, cs->T, cs->H, cs->hd}, ks[4] = {1, cs->S, cs->KV, cs->hd};
    CHECK_OK(etch_tensor_init(&c->q, ETCH_DTYPE_FLOAT, 4, qs, q));
    CHECK_OK(etch_tensor_init(&c->k, ETCH_DTYPE_FLOAT, 4, ks, k));
    CHECK_OK(etch_tensor_init(&c->v, ETCH_DTYPE_FLOAT, 4, ks, v));
    CHECK_OK(etch_tensor_init(&c->out, ETCH_DTYPE_FLOAT, 4, qs, out));
    c->vals[0] = kt_vtensor(&c->q);
    c->vals[1] = kt_vtensor(&c->k);
    c->vals[2] = kt_vtensor(&c->v);
    c->vals[3] = kt_vint(pos);
    c->vals[4] = kt_vnone();
    c->vals[5] = kt_vdouble(0.0);
    c->vals[6] = kt_vbool(causal);
    c->vals[7] = kt_vdouble(cs->scale);
    c->vals[8] = kt_vtensor(&c->out);
    c->vals[9] = kt_vtensor(&c->out);
    for (int i = 0; i < 10; i++)
        c->args[i] = &c->vals[i];
}

/* sdpa_with_kv_cache.out: q, key, value, key_cache, value_cache, start_pos, seq_len,
 * attn_mask, drpout_p, is_causal, scale, out, out */
static void llama_kv_init(llama_call *c, const sdpa_case *cs, float *k, float *v, float *nk,
                          float *nv, float *out) {
    const int64_t qs[4] = {1, cs->T, cs->H, cs->hd}, ks[4] = {1, cs->S, cs->KV, cs->hd};
    const int64_t ns[4] = {1, cs->T, cs->KV, cs->hd};
    CHECK_OK(etch_tensor_init(&c->q, ETCH_DTYPE_FLOAT, 4, qs, cs->q));
    CHECK_OK(etch_tensor_init(&c->k, ETCH_DTYPE_FLOAT, 4, ks, k));
    CHECK_OK(etch_tensor_init(&c->v, ETCH_DTYPE_FLOAT, 4, ks, v));
    CHECK_OK(etch_tensor_init(&c->nk, ETCH_DTYPE_FLOAT, 4, ns, nk));
    CHECK_OK(etch_tensor_init(&c->nv, ETCH_DTYPE_FLOAT, 4, ns, nv));
    CHECK_OK(etch_tensor_init(&c->out, ETCH_DTYPE_FLOAT, 4, qs, out));
    etch_tensor *t[6] = {&c->q, &c->nk, &c->nv, &c->k, &c->v, &c->out};
    for (int i = 0; i < 5; i++)
        c->vals[i] = kt_vtensor(t[i]);
    c->vals[5] = kt_vint(cs->sp);
    c->vals[6] = kt_vint(cs->T);
    c->vals[7] = kt_vnone();
    c->vals[8] = kt_vdouble(0.0);
    c->vals[9] = kt_vbool(true);
    c->vals[10] = kt_vnone(); /* scale: 1/sqrt(hd) */
    c->vals[11] = kt_vtensor(&c->out);
    c->vals[12] = kt_vtensor(&c->out);
    for (int i = 0; i < 13; i++)
        c->args[i] = &c->vals[i];
}

/* [KV, S, hd] -> [S, KV, hd]; rows from `nan_from` on NaN */
static float *to_seq_major(const float *src, const sdpa_case *cs, int64_t nan_from) {
    float *d = xmalloc((size_t)(cs->KV * cs->S * cs->hd));
    for (int64_t h = 0; h < cs->KV; h++)
        for (int64_t j = 0; j < cs->S; j++)
            for (int64_t e = 0; e < cs->hd; e++)
                d[(j * cs->KV + h) * cs->hd + e] =
                    j >= nan_from ? NAN : src[(h * cs->S + j) * cs->hd + e];
    return d;
}

static void run_llama_case(const sdpa_case *cs, const etch_isa *isas, int n_isas, double *worst_p,
                           double *worst_o) {
    const int64_t nq = cs->T * cs->H * cs->hd, nk = cs->KV * cs->S * cs->hd;
    const int64_t end = cs->sp + cs->T, row = cs->KV * cs->hd;
    float *k = to_seq_major(cs->k, cs, end), *v = to_seq_major(cs->v, cs, end);
    float *out = xmalloc((size_t)nq), *first = xmalloc((size_t)nq);
    llama_call c;
    llama_init(&c, cs, cs->q, k, v, cs->sp, out, true);
    CHECK_OK(call_k(etch_portable_llama_custom_sdpa_out, c.args, 10, 1, KT_SPLIT_EVEN));
    double w = check_close(cs, out, "llama portable");
    if (w > *worst_p)
        *worst_p = w;
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        for (size_t ti = 0; ti < N_THR; ti++) {
            for (size_t si = 0; si < (thread_cfgs[ti] > 1 ? 3u : 1u); si++) {
                for (int64_t i = 0; i < nq; i++)
                    out[i] = -7.0f;
                llama_init(&c, cs, cs->q, k, v, cs->sp, out, true);
                CHECK_OK(call_k(etch_opt_llama_custom_sdpa_out, c.args, 10, thread_cfgs[ti],
                                splits[si]));
                char what[80];
                snprintf(what, sizeof what, "llama optimized %s threads %d split %d",
                         etch_isa_name(isas[ii]), thread_cfgs[ti], (int)si);
                w = check_close(cs, out, what);
                if (w > worst_o[ii])
                    worst_o[ii] = w;
                if (ti == 0)
                    memcpy(first, out, (size_t)nq * sizeof(float));
                else
                    CHECK_MSG(memcmp(first, out, (size_t)nq * sizeof(float)) == 0,
                              "%s: differs from the serial result", what);
            }
        }
        /* sdpa_with_kv_cache: the new rows start as zeros in the caches */
        float *kc = xmalloc((size_t)nk), *vc = xmalloc((size_t)nk);
        memcpy(kc, k, (size_t)nk * sizeof(float));
        memcpy(vc, v, (size_t)nk * sizeof(float));
        for (int64_t i = cs->sp * row; i < end * row; i++)
            kc[i] = 0.0f, vc[i] = 0.0f;
        for (int64_t i = 0; i < nq; i++)
            out[i] = -7.0f;
        if (fabs(cs->scale - 1.0 / sqrt((double)cs->hd)) < 1e-12) {
            llama_kv_init(&c, cs, kc, vc, k + cs->sp * row, v + cs->sp * row, out);
            CHECK_OK(call_k(etch_opt_llama_sdpa_with_kv_cache_out, c.args, 13, 2,
                            KT_SPLIT_RANDOM_PARTS));
            check_close(cs, out, "llama sdpa_with_kv_cache optimized");
            CHECK(memcmp(kc, k, (size_t)(end * row) * sizeof(float)) == 0 &&
                  memcmp(vc, v, (size_t)(end * row) * sizeof(float)) == 0);
        }
        free(kc), free(vc);
    }
    free(k), free(v), free(out), free(first);
}

static void test_llama_errors(const etch_isa *isas, int n_isas) {
    float q[2 * 4 * 8] = {0}, k[6 * 2 * 8] = {0}, out[2 * 4 * 8];
    sdpa_case cs = {2, 4, 2, 8, 6, 0, 0.5, q, k, k, NULL};
    llama_call c;
    static const int64_t bad_pos[2] = {-1, 5};
    for (int i = 0; i < 2; i++) {
        llama_init(&c, &cs, q, k, k, bad_pos[i], out, true);
        expect_fail_fns(etch_portable_llama_custom_sdpa_out, etch_opt_llama_custom_sdpa_out,
                        c.args, 10, &c.out, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "start_pos",
                        "llama start_pos outside the cache");
    }
    float mask[2 * 6] = {0};
    etch_tensor m;
    const int64_t ms[2] = {2, 6};
    CHECK_OK(etch_tensor_init(&m, ETCH_DTYPE_FLOAT, 2, ms, mask));
    llama_init(&c, &cs, q, k, k, 0, out, true);
    c.vals[4] = kt_vtensor(&m);
    expect_fail_fns(etch_portable_llama_custom_sdpa_out, etch_opt_llama_custom_sdpa_out, c.args,
                    10, &c.out, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "is_causal",
                    "llama mask and is_causal");
    llama_init(&c, &cs, q, k, k, 0, out, true);
    c.vals[5] = kt_vdouble(0.25);
    expect_fail_fns(etch_portable_llama_custom_sdpa_out, etch_opt_llama_custom_sdpa_out, c.args,
                    10, &c.out, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "dropout",
                    "llama dropout");
    sdpa_case c3 = {2, 3, 2, 8, 6, 0, 0.5, q, k, k, NULL}; /* 3 heads over 2 kv heads */
    llama_init(&c, &c3, q, k, k, 0, out, true);
    expect_fail_fns(etch_portable_llama_custom_sdpa_out, etch_opt_llama_custom_sdpa_out, c.args,
                    10, &c.out, isas, n_isas, ETCH_ERR_INVALID_ARGUMENT, "multiple",
                    "llama heads not a multiple");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASES_FILE Q8_CASES_FILE\n", argv[0]);
        return 2;
    }
    CHECK_OK(etch_kernels_register_optimized());
    const etch_kernel *kp = etch_kernels_find("etch::sdpa_kv.out", 17);
    CHECK_MSG(kp && strcmp(etch_kernels_impl_of(kp), "optimized") == 0,
              "etch::sdpa_kv.out is not the optimized kernel");
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    sdpa_case *cases = NULL;
    const int n = read_cases(argv[1], &cases);
    CHECK(n > 0);
    double worst_p = 0.0, worst_o[KT_N_ISAS] = {0};
    for (int i = 0; i < n; i++)
        run_case(&cases[i], isas, n_isas, &worst_p, worst_o);
    printf("%d cases; largest |error| vs PyTorch: portable %.3g", n, worst_p);
    for (int i = 0; i < n_isas; i++)
        printf(", %s %.3g", etch_isa_name(isas[i]), worst_o[i]);
    printf("\n");
    test_errors(isas, n_isas);

    q8_case *q8 = NULL;
    const int n8 = read_q8_cases(argv[2], &q8);
    CHECK(n8 > 0);
    double w8_p = 0.0, w8_o[KT_N_ISAS] = {0};
    for (int i = 0; i < n8; i++)
        run_q8_case(&q8[i], isas, n_isas, &w8_p, w8_o);
    printf("%d int8-cache cases; largest |error|: portable vs PyTorch %.3g", n8, w8_p);
    for (int i = 0; i < n_isas; i++)
        printf(", %s vs portable %.3g", etch_isa_name(isas[i]), w8_o[i]);
    printf("\n");
    test_q8_errors(isas, n_isas);

    double wl_p = 0.0, wl_o[KT_N_ISAS] = {0};
    for (int i = 0; i < n; i++)
        run_llama_case(&cases[i], isas, n_isas, &wl_p, wl_o);
    printf("%d llama::custom_sdpa cases; largest |error| vs PyTorch: portable %.3g", n, wl_p);
    for (int i = 0; i < n_isas; i++)
        printf(", %s %.3g", etch_isa_name(isas[i]), wl_o[i]);
    printf("\n");
    test_llama_errors(isas, n_isas);
    for (int i = 0; i < n8; i++)
        free(q8[i].b.q), free(q8[i].b.want), free(q8[i].k), free(q8[i].ks), free(q8[i].kz),
            free(q8[i].v), free(q8[i].vs), free(q8[i].vz);
    free(q8);
    for (int i = 0; i < n; i++)
        free(cases[i].q), free(cases[i].k), free(cases[i].v), free(cases[i].want);
    free(cases);
    etch_threadpool_destroy(real_pool[2]);
    etch_threadpool_destroy(real_pool[4]);
    return etch_test_finish();
}
