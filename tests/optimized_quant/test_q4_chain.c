/*
 * 4w linears run as one int4 kernel and 8w linears as one int8-weight kernel
 * (src/kernels/optimized/quant_linear.c): the programs gen_q4_chain.py exports with
 * etch.quantize(..., "4w" | "8w") (with and without bias, padded K, group sizes 32 to 256,
 * float16 and float32 scales, zero points; 8w: odd widths, decode, prefill; 8da4w and
 * int8-dynamic: the per-token activation chain in front, chains of 6 or 7 calls taken at
 * choose_qparams_per_token_asymmetric) loaded with the optimized
 * kernels, under every instruction set this CPU runs (kt_pick_isas, ETCH_TEST_ISAS):
 *   - the runs the runtime formed (etch_method_instruction_info: chain 3 or 4 on each
 *     embedding_4bit call, 3 on each dequantize_per_channel call, the calls after it
 *     chained) are the ones gen_q4_chain.py lists;
 *   - outputs match the same program on the portable kernels (etch_kernels_register_portable,
 *     the reference) and the optimized kernels with the chain function unregistered (the calls
 *     one by one: the dequantized weight written and read back), and PyTorch's output of the
 *     quantized model, within 1e-4 * max(|y|, 1), at 1 to 4 threads and with the test pool's
 *     shuffled chunks;
 *   - without kernel scratch the chained kernel runs the calls one by one: bitwise the
 *     unchained run without scratch;
 *   - with etch_method_options.no_fusion or no_prepack nothing is chained and the outputs are
 *     still right;
 *   - execute allocates nothing;
 *   - the prepare function refuses the call sites the chain must not take (indices that are
 *     not arange(N) get data for the gather alone: the token embedding's path), a range
 *     other than -8..7, a non-finite scale or zero point, a group size
 *     that is odd or does not divide K, a weight or indices that are no constants), so those
 *     run on the portable kernel as before; the 8w prepare likewise (axis 1, negative or NaN
 *     scales, zero points outside int8, non-constants, uint8 weights, out_dtype Double, a
 *     range past int8, wrong shapes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_wrap.h"
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/opt_quant.h"
#include "q4_chain_cases.h"
#include "test_file.h"
#include "test_method.h"

#define TEMP_SIZE (16u << 20)

static const char *g_dir;

typedef enum kset { K_PORTABLE, K_UNCHAINED, K_CHAINED } kset;

typedef struct run_out {
    float *out;
    int chains[Q4_MAX_RUNS + 1];
    int nchains;
    bool ok;
} run_out;

static float *read_floats(const char *name, const char *ext, int64_t numel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", g_dir, name, ext);
    size_t size = 0;
    float *p = (float *)etch_test_read_file(path, 0, &size);
    CHECK_MSG(p && size == (size_t)numel * sizeof(float), "%s: %zu bytes, expected %lld", path,
              size, (long long)numel * 4);
    return p;
}

static uint32_t g_rnd = 4242u;
static uint32_t rnd(void) {
    g_rnd = g_rnd * 1664525u + 1013904223u;
    return g_rnd >> 8;
}

static void register_set(kset k) {
    etch_kernels_reset();
    if (k == K_PORTABLE) {
        CHECK_OK(etch_kernels_register_portable());
        return;
    }
    CHECK_OK(etch_kernels_register_optimized());
    if (k == K_UNCHAINED) {
        static const char *names[] = {"quantized_decomposed::embedding_4bit.out",
                                      "quantized_decomposed::embedding_4bit.dtype_out",
                                      "quantized_decomposed::dequantize_per_channel.out",
                                      "quantized_decomposed::"
                                      "choose_qparams_per_token_asymmetric.out"};
        for (int i = 0; i < 4; i++) {
            const etch_kernel *e = etch_kernels_find(names[i], strlen(names[i]));
            CHECK(e != NULL);
            if (e)
                CHECK_OK(etch_kernels_register_chain(e->fn, NULL));
        }
    }
}

/* Load c with kernel set k, run it once, keep its output and the runs formed. threads < 0:
 * the test pool of -threads (shuffled chunks, random thread indices). */
static void run_case(const q4_case *c, kset k, int threads, size_t temp_size,
                     const etch_method_options *base, run_out *r) {
    memset(r, 0, sizeof *r);
    register_set(k);
    etch_threadpool *pool = NULL;
    kt_shuffle_pool spool;
    etch_method_options mo;
    if (base)
        mo = *base;
    else
        memset(&mo, 0, sizeof mo);
    if (threads < 0) {
        kt_shuffle_pool_init(&spool, -threads, KT_SPLIT_EVEN, rnd);
        mo.threadpool = &spool.iface;
    } else if (threads > 1) {
        CHECK_OK(etch_threadpool_create(threads, &pool));
        mo.threadpool = etch_threadpool_get_iface(pool);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", g_dir, c->name);
    etch_test_method L;
    if (etch_test_method_load(&L, path, NULL, &mo, temp_size) != 0) {
        CHECK_MSG(false, "%s: load failed", c->name);
        etch_test_method_unload(&L);
        etch_threadpool_destroy(pool);
        return;
    }
    for (size_t ch = 0; ch < etch_method_num_chains(L.m); ch++) {
        uint32_t left = 0;
        for (size_t pc = 0; pc < etch_method_chain_length(L.m, ch); pc++) {
            etch_instruction_info info;
            CHECK_OK(etch_method_instruction_info(L.m, ch, pc, &info));
            if (info.chain > 1) {
                CHECK_MSG(left == 0, "%s: a run starts inside another at pc %zu", c->name, pc);
                if (r->nchains < Q4_MAX_RUNS + 1)
                    r->chains[r->nchains++] = (int)info.chain;
                left = info.chain - 1;
                CHECK(!info.skipped && info.op_name && strcmp(info.op_name, c->first_op) == 0);
            } else if (info.chain == 0) {
                CHECK_MSG(left > 0 && info.skipped, "%s: pc %zu chained outside a run",
                          c->name, pc);
                left--;
            }
        }
        CHECK_MSG(left == 0, "%s: a run ends past its chain", c->name);
    }
    etch_value *v = etch_method_input(L.m, 0);
    const bool vt =
        v && v->tag == ETCH_VALUE_TENSOR && etch_tensor_numel(v->u.tensor) == c->in_numel;
    const size_t isz = vt ? etch_dtype_size(v->u.tensor->dtype) : 4; /* float32 or int64 ids */
    char ipath[1024];
    snprintf(ipath, sizeof ipath, "%s/%s.in.bin", g_dir, c->name);
    size_t got = 0;
    void *in = etch_test_read_file(ipath, 0, &got);
    CHECK_MSG(in && vt && got == (size_t)c->in_numel * isz, "%s: input %zu bytes", c->name, got);
    if (in && vt && got == (size_t)c->in_numel * isz) {
        memcpy(v->u.tensor->data, in, got);
        CHECK_OK(etch_method_set_input(L.m, 0, v));
    }
    free(in);
    etch_alloc_arm();
    etch_status st = etch_method_execute(L.m);
    etch_alloc_disarm();
    CHECK_MSG(st == ETCH_OK, "%s: execute: %s", c->name, etch_last_error());
    CHECK_MSG(etch_alloc_calls == 0, "%s: execute allocated %ld times", c->name,
              etch_alloc_calls);
    const etch_value *o = etch_method_num_outputs(L.m) == 1 ? etch_method_output(L.m, 0) : NULL;
    CHECK(o && o->tag == ETCH_VALUE_TENSOR && etch_tensor_numel(o->u.tensor) == c->out_numel);
    if (st == ETCH_OK && o && o->tag == ETCH_VALUE_TENSOR &&
        etch_tensor_numel(o->u.tensor) == c->out_numel) {
        r->out = malloc((size_t)c->out_numel * sizeof(float));
        memcpy(r->out, o->u.tensor->data, (size_t)c->out_numel * sizeof(float));
        r->ok = true;
    }
    etch_test_method_unload(&L);
    etch_threadpool_destroy(pool);
}

static bool same_runs(const q4_case *c, const run_out *r) {
    if (r->nchains != c->nchains)
        return false;
    for (int i = 0; i < c->nchains; i++)
        if (r->chains[i] != c->chains[i])
            return false;
    return true;
}

/* max |a[k] - b[k]| (b NULL: max |a[k]|); NaN counts as infinitely far. */
static double max_abs(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t k = 0; k < n; k++) {
        const double d = fabs((double)a[k] - (b ? (double)b[k] : 0.0));
        if (d > m || d != d)
            m = d != d ? INFINITY : d;
    }
    return m;
}

static void check_case(const q4_case *c, const etch_isa *isas, int n_isas) {
    float *ref = read_floats(c->name, "out.bin", c->out_numel);
    if (!ref)
        return;
    const double tol = 1e-4 * fmax(max_abs(ref, NULL, c->out_numel), 1.0);
    run_out port;
    run_case(c, K_PORTABLE, 1, TEMP_SIZE, NULL, &port);
    CHECK_MSG(port.ok && port.nchains == 0, "%s: portable run", c->name);
    if (!port.ok) {
        free(ref);
        return;
    }
    const double d_port = max_abs(port.out, ref, c->out_numel);
    CHECK_MSG(d_port <= tol, "%s: portable max |etch - torch| = %g > %g", c->name, d_port, tol);
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        const char *isa = etch_isa_name(isas[ii]);
        run_out un[2], r;
        run_case(c, K_UNCHAINED, 1, TEMP_SIZE, NULL, &un[0]);
        run_case(c, K_UNCHAINED, 1, 0, NULL, &un[1]);
        CHECK_MSG(un[0].ok && un[1].ok && un[0].nchains == 0 && un[1].nchains == 0,
                  "%s (%s): unchained runs", c->name, isa);
        double worst = 0;
        const struct {
            int threads;
            size_t temp;
        } cfg[] = {{1, TEMP_SIZE}, {2, TEMP_SIZE}, {3, TEMP_SIZE}, {4, TEMP_SIZE},
                   {-2, TEMP_SIZE}, {-3, TEMP_SIZE}, {1, 0}, {3, 0}};
        for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
            run_case(c, K_CHAINED, cfg[k].threads, cfg[k].temp, NULL, &r);
            CHECK_MSG(same_runs(c, &r), "%s (%s, %d threads): %d runs formed, expected %d",
                      c->name, isa, cfg[k].threads, r.nchains, c->nchains);
            if (!r.ok || !un[0].ok || !un[1].ok) {
                CHECK_MSG(false, "%s (%s, %d threads): run failed", c->name, isa,
                          cfg[k].threads);
                free(r.out);
                continue;
            }
            if (cfg[k].temp == 0) { /* no scratch: the calls one by one */
                CHECK_MSG(memcmp(un[1].out, r.out, (size_t)c->out_numel * sizeof(float)) == 0,
                          "%s (%s, %d threads, no scratch): not bitwise the unchained run",
                          c->name, isa, cfg[k].threads);
            } else {
                const double d[3] = {max_abs(r.out, port.out, c->out_numel),
                                     max_abs(r.out, un[0].out, c->out_numel),
                                     max_abs(r.out, ref, c->out_numel)};
                CHECK_MSG(d[0] <= tol && d[1] <= tol && d[2] <= tol,
                          "%s (%s, %d threads): chained max diff %g vs portable, %g vs "
                          "unchained, %g vs torch (tolerance %g)",
                          c->name, isa, cfg[k].threads, d[0], d[1], d[2], tol);
                worst = fmax(worst, fmax(d[0], d[1]));
            }
            free(r.out);
        }
        /* no fusion, no prepared data: nothing chained, the calls one by one */
        etch_method_options mo;
        memset(&mo, 0, sizeof mo);
        for (int opt = 0; opt < 2; opt++) {
            mo.no_fusion = opt == 0;
            mo.no_prepack = opt == 1;
            run_case(c, K_CHAINED, 2, TEMP_SIZE, &mo, &r);
            CHECK_MSG(r.nchains == 0, "%s (%s): chained with %s", c->name, isa,
                      opt ? "no_prepack" : "no_fusion");
            CHECK_MSG(r.ok && max_abs(r.out, port.out, c->out_numel) <= tol,
                      "%s (%s, %s): output differs", c->name, isa,
                      opt ? "no_prepack" : "no_fusion");
            free(r.out);
        }
        printf("  %-14s %-6s runs [", c->name, isa);
        for (int i = 0; i < c->nchains; i++)
            printf(i ? " %d" : "%d", c->chains[i]);
        printf("], max |chained - portable/unchained| %.3g, |portable - torch| %.3g\n", worst,
               d_port);
        free(un[0].out);
        free(un[1].out);
    }
    free(port.out);
    free(ref);
}

/* ---- the prepare function's refusals, on call arguments built here ---------------------- */

#define PN 4
#define PKP 8

typedef struct prep_args {
    uint8_t w[PN * PKP / 2];
    float s[PN * PKP], z[PN * PKP];
    int64_t ix[PN];
    float out[PN * PKP];
    etch_tensor tw, ts, tz, tix, tout;
    etch_value v[9];
    etch_value *args[9];
} prep_args;

/* embedding_4bit.dtype_out(w uint8 [4, 4], scales [4, ng], zp (none or [4, ng]), -8, 7,
 * arange(4), Float, out [4, 8], out) with constants flagged as at load. */
static void prep_init(prep_args *a, int64_t ng, bool zp) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < PN * PKP / 2; i++)
        a->w[i] = (uint8_t)(i * 37);
    for (int i = 0; i < PN * PKP; i++) {
        a->s[i] = 0.01f * (float)(i + 1);
        a->z[i] = (float)(i % 5) - 2.0f;
    }
    for (int i = 0; i < PN; i++)
        a->ix[i] = i;
    const int64_t wsz[2] = {PN, PKP / 2}, ssz[2] = {PN, ng}, isz[1] = {PN}, osz[2] = {PN, PKP};
    CHECK_OK(etch_tensor_init(&a->tw, ETCH_DTYPE_BYTE, 2, wsz, a->w));
    CHECK_OK(etch_tensor_init(&a->ts, ETCH_DTYPE_FLOAT, 2, ssz, a->s));
    CHECK_OK(etch_tensor_init(&a->tz, ETCH_DTYPE_FLOAT, 2, ssz, a->z));
    CHECK_OK(etch_tensor_init(&a->tix, ETCH_DTYPE_LONG, 1, isz, a->ix));
    CHECK_OK(etch_tensor_init(&a->tout, ETCH_DTYPE_FLOAT, 2, osz, a->out));
    a->tw.flags = a->ts.flags = a->tz.flags = a->tix.flags = ETCH_TENSOR_CONSTANT;
    etch_tensor *t[9] = {&a->tw, &a->ts, zp ? &a->tz : NULL, NULL, NULL, &a->tix, NULL,
                         &a->tout, &a->tout};
    for (int k = 0; k < 9; k++) {
        a->v[k].tag = t[k] ? ETCH_VALUE_TENSOR : ETCH_VALUE_NONE;
        a->v[k].u.tensor = t[k];
        a->args[k] = &a->v[k];
    }
    a->v[3].tag = a->v[4].tag = a->v[6].tag = ETCH_VALUE_INT;
    a->v[3].u.i = -8;
    a->v[4].u.i = 7;
    a->v[6].u.i = ETCH_DTYPE_FLOAT;
}

static _Alignas(64) unsigned char prep_buf[4096];

static size_t prep_run(prep_args *a) {
    const size_t want = etch_opt_embedding_4bit_dtype_prepare(NULL, a->args, 9, NULL, 0);
    if (!want || want > sizeof prep_buf)
        return 0;
    return etch_opt_embedding_4bit_dtype_prepare(NULL, a->args, 9, prep_buf, sizeof prep_buf);
}

/* Prepared for the linear chain (indices a constant arange(N)), not the gather alone? */
static bool prep_linear(prep_args *a) {
    const size_t n = prep_run(a);
    return n > 0 && etch_opt_embedding_4bit_prepared_linear(prep_buf, n);
}

static void check_prepare(void) {
    prep_args a;
    for (int zp = 0; zp < 2; zp++)
        for (int64_t ng = 1; ng <= 4; ng *= 2) { /* groups of 8, 4, 2 */
            prep_init(&a, ng, zp);
            CHECK_MSG(prep_linear(&a), "prepare refused a valid call (ng %lld, zp %d)",
                      (long long)ng, zp);
        }
    const char *what[] = {"indices 0 1 3 2", "indices 1 1 2 3", "quant_max 6", "quant_min -7",
                          "a NaN scale", "an infinite zero point", "groups of 1 (odd)",
                          "3 groups of a row of 8", "a weight that is no constant",
                          "indices that are no constant", "dtype Double", "indices [3]"};
    for (int c = 0; c < (int)(sizeof what / sizeof what[0]); c++) {
        prep_init(&a, c == 6 ? 8 : c == 7 ? 3 : 2, c == 5);
        switch (c) {
        case 0: a.ix[2] = 3; a.ix[3] = 2; break;
        case 1: a.ix[0] = 1; break;
        case 2: a.v[4].u.i = 6; break;
        case 3: a.v[3].u.i = -7; break;
        case 4: a.s[5] = NAN; break;
        case 5: a.z[3] = INFINITY; break;
        case 8: a.tw.flags = 0; break;
        case 9: a.tix.flags = 0; break;
        case 10: a.v[6].u.i = ETCH_DTYPE_DOUBLE; break;
        case 11: a.tix.sizes[0] = 3; break;
        default: break;
        }
        if (c == 0 || c == 1 || c == 9 || c == 11) /* the scales serve the gather alone */
            CHECK_MSG(prep_run(&a) > 0 && !prep_linear(&a),
                      "prepare: %s must give gather-only data", what[c]);
        else
            CHECK_MSG(prep_run(&a) == 0, "prepare accepted %s", what[c]);
    }
}

/* dequantize_per_channel.out(w int8 [4, 8], scales [4], zp (none or int64 [4]), axis 0,
 * -127, 127, Char, None, out [4, 8], out) with constants flagged as at load. */
typedef struct prep8_args {
    int8_t w[PN * PKP];
    float s[PN];
    int64_t z[PN];
    float out[PN * PKP];
    etch_tensor tw, ts, tz, tout;
    etch_value v[10];
    etch_value *args[10];
} prep8_args;

static void prep8_init(prep8_args *a, bool zp) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < PN * PKP; i++)
        a->w[i] = (int8_t)(i * 37);
    for (int i = 0; i < PN; i++) {
        a->s[i] = 0.01f * (float)(i + 1);
        a->z[i] = i - 2;
    }
    const int64_t wsz[2] = {PN, PKP}, ssz[1] = {PN};
    CHECK_OK(etch_tensor_init(&a->tw, ETCH_DTYPE_CHAR, 2, wsz, a->w));
    CHECK_OK(etch_tensor_init(&a->ts, ETCH_DTYPE_FLOAT, 1, ssz, a->s));
    CHECK_OK(etch_tensor_init(&a->tz, ETCH_DTYPE_LONG, 1, ssz, a->z));
    CHECK_OK(etch_tensor_init(&a->tout, ETCH_DTYPE_FLOAT, 2, wsz, a->out));
    a->tw.flags = a->ts.flags = a->tz.flags = ETCH_TENSOR_CONSTANT;
    etch_tensor *t[10] = {&a->tw, &a->ts, zp ? &a->tz : NULL, NULL, NULL, NULL, NULL, NULL,
                          &a->tout, &a->tout};
    for (int k = 0; k < 10; k++) {
        a->v[k].tag = t[k] ? ETCH_VALUE_TENSOR : ETCH_VALUE_NONE;
        a->v[k].u.tensor = t[k];
        a->args[k] = &a->v[k];
    }
    a->v[3].tag = a->v[4].tag = a->v[5].tag = a->v[6].tag = ETCH_VALUE_INT;
    a->v[3].u.i = 0;
    a->v[4].u.i = -127;
    a->v[5].u.i = 127;
    a->v[6].u.i = ETCH_DTYPE_CHAR;
}

static size_t prep8_run(prep8_args *a) {
    static _Alignas(64) unsigned char buf[4096];
    const size_t want = etch_opt_dequantize_per_channel_prepare(NULL, a->args, 10, NULL, 0);
    if (!want || want > sizeof buf)
        return 0;
    return etch_opt_dequantize_per_channel_prepare(NULL, a->args, 10, buf, sizeof buf);
}

static void check_prepare8(void) {
    prep8_args a;
    for (int zp = 0; zp < 2; zp++) {
        prep8_init(&a, zp);
        CHECK_MSG(prep8_run(&a) > 0, "8w prepare refused a valid call (zp %d)", zp);
    }
    prep8_init(&a, false);
    a.v[7].tag = ETCH_VALUE_INT; /* out_dtype Float given */
    a.v[7].u.i = ETCH_DTYPE_FLOAT;
    CHECK_MSG(prep8_run(&a) > 0, "8w prepare refused out_dtype Float");
    const char *what[] = {"axis 1", "a negative scale", "a NaN scale", "a zero point of 128",
                          "a weight that is no constant", "scales that are no constant",
                          "dtype Byte", "a uint8 weight", "out_dtype Double", "quant_max 128",
                          "scales [3]", "a 1-D weight"};
    for (int c = 0; c < (int)(sizeof what / sizeof what[0]); c++) {
        prep8_init(&a, c == 3);
        switch (c) {
        case 0: a.v[3].u.i = 1; break;
        case 1: a.s[2] = -0.5f; break;
        case 2: a.s[1] = NAN; break;
        case 3: a.z[0] = 128; break;
        case 4: a.tw.flags = 0; break;
        case 5: a.ts.flags = 0; break;
        case 6: a.v[6].u.i = ETCH_DTYPE_BYTE; break;
        case 7: a.tw.dtype = ETCH_DTYPE_BYTE; a.v[6].u.i = ETCH_DTYPE_BYTE; break;
        case 8: a.v[7].tag = ETCH_VALUE_INT; a.v[7].u.i = ETCH_DTYPE_DOUBLE; break;
        case 9: a.v[5].u.i = 128; break;
        case 10: a.ts.sizes[0] = 3; break;
        case 11: a.tw.dim = 1; a.tw.sizes[0] = PN * PKP; break;
        default: break;
        }
        CHECK_MSG(prep8_run(&a) == 0, "8w prepare accepted %s", what[c]);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GENERATED_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    check_prepare();
    check_prepare8();
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        check_case(&CASES[i], isas, n_isas);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_kernels_reset();
    return etch_test_finish();
}
