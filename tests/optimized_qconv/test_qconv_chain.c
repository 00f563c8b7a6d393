/* Static int8 programs (etch.quantize(..., "int8"), exported by gen_qconv.py) with their
 * dequantize -> conv | linear | relu | hardtanh -> quantize runs chained into integer kernels
 * (src/kernels/optimized/qconv_chain.c), under every instruction set this CPU supports and
 * 1..4 threads (etch's pool and the harness's shuffling pool):
 *   - runs form at the dequantizations (etch_method_instruction_info): in every program at
 *     least one conv or linear run (4 or 5 calls), in the CNNs also activation tables (3);
 *   - the output against the calls one by one (the optimized kernels with the chain function
 *     unregistered; and etch_method_options.no_fusion), the portable kernels and PyTorch's
 *     output of the quantized model: a program with one quantized conv / linear within one
 *     step of its output quantization (the chain's bound: qconv_chain.c); the deeper ones,
 *     where a step of difference in one layer moves the next, within 3 steps, and most
 *     outputs equal;
 *   - without kernel scratch the chained kernel runs the calls one by one: bitwise the
 *     unchained run; execute allocates nothing;
 *   - with no_fusion nothing is chained; with no_prepack no conv / linear run forms (the
 *     weight's prepared data is what it runs from);
 *   - the weight dequantization's prepare function refuses what the chain must not take
 *     (a weight that is no constant, scales that are not finite, negative or of another
 *     length than the output channels, zero points that are not 0, another axis or dtype);
 *   - the chain function, on calls built here, takes dq(x) -> dq(W) -> conv -> q and refuses
 *     the run when the shapes do not fit (input channels, bias length), the conv reads the
 *     intermediates at the wrong arguments or one twice, the prepared data is another
 *     weight's, the convolution is transposed or the result is not uint8. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "alloc_wrap.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/opt_quant.h"
#include "qconv_cases.h"
#include "test_file.h"
#include "test_method.h"

#define TEMP_SIZE (16u << 20)

static const char *g_dir;

typedef enum kset { K_PORTABLE, K_UNCHAINED, K_CHAINED } kset;

typedef struct run_out {
    float *out;
    int compute_runs, table_runs;
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

static uint32_t g_rnd = 1717u;
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
        static const char *names[] = {"quantized_decomposed::dequantize_per_tensor.out",
                                      "quantized_decomposed::dequantize_per_channel.out"};
        for (int i = 0; i < 2; i++) {
            const etch_kernel *e = etch_kernels_find(names[i], strlen(names[i]));
            CHECK(e != NULL);
            if (e)
                CHECK_OK(etch_kernels_register_chain(e->fn, NULL));
        }
    }
}

/* Load p with kernel set k, run it once, keep its output and count the runs formed.
 * threads < 0: the test pool of -threads. */
static void run_prog(const qc_prog *p, kset k, int threads, size_t temp_size,
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
        kt_shuffle_pool_init(&spool, -threads, KT_SPLIT_RANDOM_PARTS, rnd);
        mo.threadpool = &spool.iface;
    } else if (threads > 1) {
        CHECK_OK(etch_threadpool_create(threads, &pool));
        mo.threadpool = etch_threadpool_get_iface(pool);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", g_dir, p->name);
    etch_test_method L;
    if (etch_test_method_load(&L, path, NULL, &mo, temp_size) != 0) {
        CHECK_MSG(false, "%s: load failed", p->name);
        etch_test_method_unload(&L);
        etch_threadpool_destroy(pool);
        return;
    }
    for (size_t ch = 0; ch < etch_method_num_chains(L.m); ch++)
        for (size_t pc = 0; pc < etch_method_chain_length(L.m, ch); pc++) {
            etch_instruction_info info;
            CHECK_OK(etch_method_instruction_info(L.m, ch, pc, &info));
            if (info.chain > 1 && info.op_name &&
                strncmp(info.op_name, "quantized_decomposed::dequantize_per_", 37) == 0) {
                if (info.chain == 3)
                    r->table_runs++;
                else
                    r->compute_runs++;
            }
        }
    float *in = read_floats(p->name, "in.bin", p->in_numel);
    etch_value *v = etch_method_input(L.m, 0);
    CHECK(in && v && v->tag == ETCH_VALUE_TENSOR && etch_tensor_numel(v->u.tensor) == p->in_numel);
    if (in && v && v->tag == ETCH_VALUE_TENSOR && etch_tensor_numel(v->u.tensor) == p->in_numel) {
        memcpy(v->u.tensor->data, in, (size_t)p->in_numel * sizeof(float));
        CHECK_OK(etch_method_set_input(L.m, 0, v));
    }
    free(in);
    etch_alloc_arm();
    etch_status st = etch_method_execute(L.m);
    etch_alloc_disarm();
    CHECK_MSG(st == ETCH_OK, "%s: execute: %s", p->name, etch_last_error());
    CHECK_MSG(etch_alloc_calls == 0, "%s: execute allocated %ld times", p->name,
              etch_alloc_calls);
    const etch_value *o = etch_method_num_outputs(L.m) == 1 ? etch_method_output(L.m, 0) : NULL;
    CHECK(o && o->tag == ETCH_VALUE_TENSOR && etch_tensor_numel(o->u.tensor) == p->out_numel);
    if (st == ETCH_OK && o && o->tag == ETCH_VALUE_TENSOR &&
        etch_tensor_numel(o->u.tensor) == p->out_numel) {
        r->out = malloc((size_t)p->out_numel * sizeof(float));
        memcpy(r->out, o->u.tensor->data, (size_t)p->out_numel * sizeof(float));
        r->ok = true;
    }
    etch_test_method_unload(&L);
    etch_threadpool_destroy(pool);
}

/* max |a - b| in steps of `step` (NaN: infinitely far), and the elements that differ. */
static double max_steps(const float *a, const float *b, int64_t n, double step, int64_t *ndiff) {
    double m = 0;
    int64_t nd = 0;
    for (int64_t k = 0; k < n; k++) {
        const double d = fabs((double)a[k] - (double)b[k]) / step;
        nd += d > 1e-3;
        if (d > m || d != d)
            m = d != d ? INFINITY : d;
    }
    if (ndiff)
        *ndiff = nd;
    return m;
}

static void check_prog(const qc_prog *p, const etch_isa *isas, int n_isas) {
    float *ref = read_floats(p->name, "out.bin", p->out_numel);
    if (!ref)
        return;
    /* one step, plus the float rounding of the dequantized output */
    const double bound = p->single ? 1.0 + 1e-3 : 3.0 + 1e-3, step = p->out_scale;
    run_out port;
    run_prog(p, K_PORTABLE, 1, TEMP_SIZE, NULL, &port);
    CHECK_MSG(port.ok && port.compute_runs + port.table_runs == 0, "%s: portable run", p->name);
    if (!port.ok) {
        free(ref);
        return;
    }
    const double d_port = max_steps(port.out, ref, p->out_numel, step, NULL);
    CHECK_MSG(d_port <= bound, "%s: portable vs torch %g steps > %g", p->name, d_port, bound);
    for (int ii = 0; ii < n_isas; ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        const char *isa = etch_isa_name(isas[ii]);
        run_out un[2], r;
        run_prog(p, K_UNCHAINED, 1, TEMP_SIZE, NULL, &un[0]);
        run_prog(p, K_UNCHAINED, 1, 0, NULL, &un[1]);
        CHECK_MSG(un[0].ok && un[1].ok && un[0].compute_runs + un[0].table_runs == 0,
                  "%s (%s): unchained runs", p->name, isa);
        double worst = 0;
        int64_t worst_n = 0;
        int cr = -1, tr = -1;
        const struct {
            int threads;
            size_t temp;
        } cfg[] = {{1, TEMP_SIZE}, {2, TEMP_SIZE}, {4, TEMP_SIZE}, {-3, TEMP_SIZE}, {1, 0},
                   {3, 0}};
        for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
            run_prog(p, K_CHAINED, cfg[k].threads, cfg[k].temp, NULL, &r);
            CHECK_MSG(r.compute_runs >= 1 && (p->single || r.table_runs >= 1),
                      "%s (%s): %d conv/linear runs, %d activation tables", p->name, isa,
                      r.compute_runs, r.table_runs);
            CHECK_MSG(cr < 0 || (cr == r.compute_runs && tr == r.table_runs),
                      "%s (%s): the runs depend on the threads", p->name, isa);
            cr = r.compute_runs;
            tr = r.table_runs;
            if (!r.ok || !un[0].ok || !un[1].ok) {
                CHECK_MSG(false, "%s (%s, %d threads): run failed", p->name, isa,
                          cfg[k].threads);
                free(r.out);
                continue;
            }
            if (cfg[k].temp == 0) {
                CHECK_MSG(memcmp(un[1].out, r.out, (size_t)p->out_numel * sizeof(float)) == 0,
                          "%s (%s, %d threads, no scratch): not bitwise the unchained run",
                          p->name, isa, cfg[k].threads);
                free(r.out);
                continue;
            }
            int64_t nd[3];
            const double d[3] = {max_steps(r.out, un[0].out, p->out_numel, step, &nd[0]),
                                 max_steps(r.out, port.out, p->out_numel, step, &nd[1]),
                                 max_steps(r.out, ref, p->out_numel, step, &nd[2])};
            CHECK_MSG(d[0] <= bound && d[1] <= bound && d[2] <= bound,
                      "%s (%s, %d threads): chained %g steps from the unchained run, %g from "
                      "portable, %g from torch (bound %g)",
                      p->name, isa, cfg[k].threads, d[0], d[1], d[2], bound);
            /* most elements equal: the differences are roundings at .5, not a drift */
            CHECK_MSG(nd[0] * 4 <= p->out_numel, "%s (%s): %lld of %lld elements differ",
                      p->name, isa, (long long)nd[0], (long long)p->out_numel);
            if (d[0] > worst)
                worst = d[0];
            if (nd[0] > worst_n)
                worst_n = nd[0];
            free(r.out);
        }
        etch_method_options mo;
        memset(&mo, 0, sizeof mo);
        for (int opt = 0; opt < 2; opt++) {
            mo.no_fusion = opt == 0;
            mo.no_prepack = opt == 1;
            run_prog(p, K_CHAINED, 2, TEMP_SIZE, &mo, &r);
            CHECK_MSG(r.compute_runs == 0 && (opt == 1 || r.table_runs == 0),
                      "%s (%s): chained with %s", p->name, isa,
                      opt ? "no_prepack" : "no_fusion");
            CHECK_MSG(r.ok && max_steps(r.out, port.out, p->out_numel, step, NULL) <= bound,
                      "%s (%s, %s): output differs", p->name, isa,
                      opt ? "no_prepack" : "no_fusion");
            free(r.out);
        }
        printf("  %-11s %-6s runs: %d conv/linear, %d tables; chained vs unchained: max %.3g "
               "steps, %lld of %lld differ; portable vs torch %.3g steps\n",
               p->name, isa, cr, tr, worst, (long long)worst_n, (long long)p->out_numel, d_port);
        free(un[0].out);
        free(un[1].out);
    }
    free(port.out);
    free(ref);
}

/* ---- the weight dequantization's prepare function, on call arguments built here ---------- */

typedef struct prep_args {
    int8_t w[4 * 2 * 3 * 3];
    float s[4];
    int64_t z[4];
    float out[4 * 2 * 3 * 3];
    etch_tensor tw, ts, tz, tout;
    etch_value v[10];
    etch_value *args[10];
} prep_args;

/* dequantize_per_channel.out(w int8 [4, 2, 3, 3], scales [4], zero_points zeros [4], 0,
 * -127, 127, Char, None, out, out) with constants flagged as at load. */
static void prep_init(prep_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < 72; i++)
        a->w[i] = (int8_t)(i * 37 - 100);
    for (int i = 0; i < 4; i++)
        a->s[i] = 0.01f * (float)(i + 1);
    const int64_t wsz[4] = {4, 2, 3, 3}, ssz[1] = {4};
    CHECK_OK(etch_tensor_init(&a->tw, ETCH_DTYPE_CHAR, 4, wsz, a->w));
    CHECK_OK(etch_tensor_init(&a->ts, ETCH_DTYPE_FLOAT, 1, ssz, a->s));
    CHECK_OK(etch_tensor_init(&a->tz, ETCH_DTYPE_LONG, 1, ssz, a->z));
    CHECK_OK(etch_tensor_init(&a->tout, ETCH_DTYPE_FLOAT, 4, wsz, a->out));
    a->tw.flags = a->ts.flags = a->tz.flags = ETCH_TENSOR_CONSTANT;
    etch_tensor *t[10] = {&a->tw, &a->ts, &a->tz, NULL, NULL, NULL, NULL, NULL, &a->tout,
                          &a->tout};
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

static size_t prep_run(prep_args *a) {
    static _Alignas(64) unsigned char buf[1 << 14];
    const size_t want = etch_opt_dequantize_per_channel_prepare(NULL, a->args, 10, NULL, 0);
    if (!want || want > sizeof buf)
        return 0;
    return etch_opt_dequantize_per_channel_prepare(NULL, a->args, 10, buf, sizeof buf);
}

static void check_prepare(void) {
    prep_args a;
    prep_init(&a);
    CHECK_MSG(prep_run(&a) > 0, "prepare refused a valid call");
    prep_init(&a);
    a.v[2].tag = ETCH_VALUE_NONE; /* no zero points: symmetric */
    CHECK_MSG(prep_run(&a) > 0, "prepare refused a call without zero points");
    const char *what[] = {"a weight that is no constant", "scales that are no constant",
                          "a NaN scale", "an infinite scale", "a negative scale",
                          "scales [3] for 4 channels (a lie)", "a zero point of 1",
                          "axis 1", "dtype Byte", "a uint8 weight", "out_dtype Double",
                          "a 3-D weight"};
    for (int c = 0; c < (int)(sizeof what / sizeof what[0]); c++) {
        prep_init(&a);
        switch (c) {
        case 0: a.tw.flags = 0; break;
        case 1: a.ts.flags = 0; break;
        case 2: a.s[1] = NAN; break;
        case 3: a.s[2] = INFINITY; break;
        case 4: a.s[3] = -0.5f; break;
        case 5: a.ts.sizes[0] = 3; break;
        case 6: a.z[2] = 1; break;
        case 7: a.v[3].u.i = 1; break;
        case 8: a.v[6].u.i = ETCH_DTYPE_BYTE; break;
        case 9: a.tw.dtype = ETCH_DTYPE_BYTE; break;
        case 10: a.v[7].tag = ETCH_VALUE_INT; a.v[7].u.i = ETCH_DTYPE_DOUBLE; break;
        case 11: a.tw.dim = 3; a.tw.sizes[2] = 9; break;
        default: break;
        }
        CHECK_MSG(prep_run(&a) == 0, "prepare accepted %s", what[c]);
    }
}

/* ---- the chain function on calls built here: dq(x) -> dq(W) -> conv -> q ------------------ */

typedef struct chain_args {
    prep_args w;                  /* the weight dequantization (out: wd) */
    uint8_t xq[1 * 4 * 5 * 5], yq[4 * 5 * 5];
    float xd[4 * 5 * 5], y[4 * 5 * 5], bias[4];
    etch_tensor txq, txd, tb, ty, tyq;
    etch_value vx[9], vc[11], vq[8];
    etch_value *ax[9], *ac[11], *aq[8];
    kt_ilist st, pd, dl, op;
    _Alignas(64) unsigned char prep[1 << 14];
    etch_kernel_call calls[4];
} chain_args;

static const etch_kernel *kfind(const char *name) {
    const etch_kernel *k = etch_kernels_find(name, strlen(name));
    CHECK(k != NULL);
    return k;
}

/* x uint8 [1, 4, 5, 5], W int8 [4, 2, 3, 3] (groups 2), stride 1, padding 1, bias [4], out
 * uint8 [1, 4, 5, 5]. */
static void chain_init(chain_args *a) {
    memset(a, 0, sizeof *a);
    prep_init(&a->w);
    const int64_t xs[4] = {1, 4, 5, 5}, bs[1] = {4};
    CHECK_OK(etch_tensor_init(&a->txq, ETCH_DTYPE_BYTE, 4, xs, a->xq));
    CHECK_OK(etch_tensor_init(&a->txd, ETCH_DTYPE_FLOAT, 4, xs, a->xd));
    CHECK_OK(etch_tensor_init(&a->tb, ETCH_DTYPE_FLOAT, 1, bs, a->bias));
    CHECK_OK(etch_tensor_init(&a->ty, ETCH_DTYPE_FLOAT, 4, xs, a->y));
    CHECK_OK(etch_tensor_init(&a->tyq, ETCH_DTYPE_BYTE, 4, xs, a->yq));
    /* dequantize_per_tensor.out(xq, 0.02, 3, 0, 255, Byte, None, xd, xd) */
    const etch_value vx[9] = {kt_vtensor(&a->txq), kt_vdouble(0.02), kt_vint(3), kt_vint(0),
                              kt_vint(255), kt_vint(ETCH_DTYPE_BYTE), kt_vnone(),
                              kt_vtensor(&a->txd), kt_vtensor(&a->txd)};
    memcpy(a->vx, vx, sizeof vx);
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    /* convolution.out(xd, wd, bias, [1, 1], [1, 1], [1, 1], false, [0, 0], 2, y, y) */
    a->vc[0] = kt_vtensor(&a->txd);
    a->vc[1] = kt_vtensor(&a->w.tout);
    a->vc[2] = kt_vtensor(&a->tb);
    a->vc[3] = *kt_mklist(&a->st, one, 2);
    a->vc[4] = *kt_mklist(&a->pd, one, 2);
    a->vc[5] = *kt_mklist(&a->dl, one, 2);
    a->vc[6] = kt_vbool(false);
    a->vc[7] = *kt_mklist(&a->op, zero, 2);
    a->vc[8] = kt_vint(2);
    a->vc[9] = a->vc[10] = kt_vtensor(&a->ty);
    /* quantize_per_tensor.out(y, 0.05, 128, 0, 255, Byte, yq, yq) */
    const etch_value vq[8] = {kt_vtensor(&a->ty), kt_vdouble(0.05), kt_vint(128), kt_vint(0),
                              kt_vint(255), kt_vint(ETCH_DTYPE_BYTE), kt_vtensor(&a->tyq),
                              kt_vtensor(&a->tyq)};
    memcpy(a->vq, vq, sizeof vq);
    for (int k = 0; k < 9; k++)
        a->ax[k] = &a->vx[k];
    for (int k = 0; k < 11; k++)
        a->ac[k] = &a->vc[k];
    for (int k = 0; k < 8; k++)
        a->aq[k] = &a->vq[k];
    /* the weight dequantization's out is one value (the conv reads it by tensor) */
    const size_t want = etch_opt_dequantize_per_channel_prepare(NULL, a->w.args, 10, NULL, 0);
    CHECK(want > 0 && want <= sizeof a->prep);
    const size_t got =
        etch_opt_dequantize_per_channel_prepare(NULL, a->w.args, 10, a->prep, sizeof a->prep);
    CHECK(got > 0);
    a->calls[0] = (etch_kernel_call){kfind("quantized_decomposed::dequantize_per_tensor.out"),
                                     a->ax, 9, NULL, 0, NULL, 0};
    a->calls[1] = (etch_kernel_call){kfind("quantized_decomposed::dequantize_per_channel.out"),
                                     a->w.args, 10, a->prep, got, NULL, 0};
    a->calls[2] = (etch_kernel_call){kfind("aten::convolution.out"), a->ac, 11, NULL, 0, NULL, 0};
    a->calls[3] = (etch_kernel_call){kfind("quantized_decomposed::quantize_per_tensor.out"),
                                     a->aq, 8, NULL, 0, NULL, 0};
}

static void check_chain_function(void) {
    static chain_args a;
    chain_init(&a);
    CHECK_MSG(etch_opt_dequantize_chain(NULL, a.calls, 4) == 4, "the valid run was refused");
    /* the two dequantizations in the other order */
    etch_kernel_call sw[4] = {a.calls[1], a.calls[0], a.calls[2], a.calls[3]};
    CHECK_MSG(etch_opt_dequantize_chain(NULL, sw, 4) == 4, "the swapped run was refused");
    const char *what[] = {"3 input channels for 2 groups of 2", "a bias of 3",
                          "the conv reading xd as its weight", "xd read twice",
                          "another weight's prepared data", "a transposed convolution",
                          "an int8 result", "groups 3", "an input that is not uint8",
                          "no quantize after the conv"};
    for (int c = 0; c < (int)(sizeof what / sizeof what[0]); c++) {
        chain_init(&a);
        size_t n = 4;
        switch (c) {
        case 0: a.txq.sizes[1] = 3; break;
        case 1: a.tb.sizes[0] = 3; break;
        case 2: a.vc[0] = kt_vtensor(&a.w.tout); a.vc[1] = kt_vtensor(&a.txd); break;
        case 3: a.vc[2] = kt_vtensor(&a.txd); break;
        case 4: ((const void **)(a.prep + 8))[0] = a.xq; break; /* q8w_prep.w */
        case 5: a.vc[6] = kt_vbool(true); break;
        case 6: a.vq[5] = kt_vint(ETCH_DTYPE_CHAR); a.tyq.dtype = ETCH_DTYPE_CHAR; break;
        case 7: a.vc[8] = kt_vint(3); break;
        case 8: a.txq.dtype = ETCH_DTYPE_CHAR; break;
        case 9: n = 3; break;
        default: break;
        }
        CHECK_MSG(etch_opt_dequantize_chain(NULL, a.calls, n) == 0, "the chain took %s",
                  what[c]);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GENERATED_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    CHECK_OK(etch_kernels_register_optimized());
    check_prepare();
    check_chain_function();
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    for (size_t i = 0; i < sizeof PROGS / sizeof PROGS[0]; i++)
        check_prog(&PROGS[i], isas, n_isas);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_kernels_reset();
    return etch_test_finish();
}
