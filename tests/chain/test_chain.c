/*
 * Chained calls (etch/kernel.h; the runtime's pass in src/optimize/fusion.c, the optimized
 * convolution's blocks in src/kernels/optimized/conv_chain.c) on the programs gen_chain.py
 * writes: a network of inverted-residual blocks exported from PyTorch, and hand-built
 * programs where chaining must be refused.
 *
 * Per program, with the optimized kernels, under every instruction set this CPU supports
 * (the rules_* programs: the portable kernels, aten::add.out replaced by a test kernel with a
 * chain function that takes every run of its own calls and runs it call by call):
 *   - the runs the runtime formed (etch_method_instruction_info: chain > 1 on the first call,
 *     0 on the calls it runs, which are skipped) are the generator's list, whatever the
 *     thread count;
 *   - outputs equal PyTorch's (tolerance 1e-4 of the output's magnitude);
 *   - outputs are bitwise those of the same kernels with chaining off (the chain function
 *     unregistered) at 1 thread, for 1 to 4 threads, for the test pool's shuffled chunks with
 *     random thread indices (2 and 3 threads), and with no kernel scratch at all (the
 *     chained kernel then runs the calls one by one; compared with the unchained run without
 *     scratch);
 *   - execute allocates nothing; with etch_method_options.no_fusion nothing is chained.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_wrap.h"
#include "chain_cases.h"
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "test_file.h"
#include "test_method.h"

#define TEMP_SIZE (16u << 20)

static const char *g_dir;

/* ---- the rules_* programs: aten::add.out with a chain function of the test's own ---------- */

static const etch_kernel *g_add; /* the portable kernel */
static size_t g_offered[8];      /* runs offered, by length */

/* Runs a chain call by call (etch_kernel_chain_run), checking what the runtime hands over. */
static void chain_add(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    const size_t n = etch_kernel_chain_length(ctx);
    if (n <= 1) {
        g_add->fn(ctx, args, nargs);
        return;
    }
    etch_kernel_call c;
    CHECK(etch_kernel_chain_call(ctx, 0, &c) && c.args == args && c.nargs == nargs);
    CHECK(!etch_kernel_chain_call(ctx, n, &c));
    for (size_t i = 0; i < n; i++) {
        CHECK(etch_kernel_chain_call(ctx, i, &c) && c.kernel && !c.prepared);
        CHECK(c.nargs == (c.kernel->fn == chain_add ? 5u : 6u));
        if (etch_kernel_chain_run(ctx, i) != ETCH_OK)
            return;
    }
}

static const etch_kernel *g_max; /* the portable aten::max.dim_max */

/* Takes the calls of chain_add (and of max.dim_max: two results) at the start of what it is
 * offered. */
static size_t take_adds(etch_kernel_context *ctx, const etch_kernel_call *calls, size_t n) {
    (void)ctx;
    CHECK(n >= 2 && n <= ETCH_CHAIN_MAX);
    g_offered[n < 8 ? n : 7]++;
    size_t k = 0;
    while (k < n && (calls[k].kernel->fn == chain_add || calls[k].kernel->fn == g_max->fn))
        k++;
    return k;
}

static void register_rules(bool chain) {
    etch_kernels_reset();
    CHECK_OK(etch_kernels_register_portable());
    g_add = etch_kernels_find("aten::add.out", 13);
    g_max = etch_kernels_find("aten::max.dim_max", 17);
    CHECK(g_add != NULL && g_max != NULL);
    static etch_kernel k;
    k = (etch_kernel){"aten::add.out", g_add->signature, chain_add};
    CHECK_OK(etch_kernels_register_ex(&k, 1, "test", 0));
    if (chain)
        CHECK_OK(etch_kernels_register_chain(chain_add, take_adds));
}

static bool is_rules(const chain_case *c) { return strncmp(c->name, "rules_", 6) == 0; }

typedef struct run_out {
    float *out; /* all outputs, one after the other */
    int chains[CHAIN_MAX_RUNS + 1];
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

static uint32_t g_rnd = 12345u;
static uint32_t rnd(void) {
    g_rnd = g_rnd * 1664525u + 1013904223u;
    return g_rnd >> 8;
}

/* Load c with the optimized kernels (chain function registered or not), run it once, keep its
 * outputs and the runs instruction_info reports. threads < 0: the test pool of -threads
 * (kernel_test_util.h: chunks one at a time in a shuffled order, random thread indices). */
static void run_case(const chain_case *c, bool chain, int threads, size_t temp_size,
                     bool no_fusion, run_out *r) {
    memset(r, 0, sizeof *r);
    if (is_rules(c)) {
        register_rules(chain);
    } else {
        etch_kernels_reset();
        CHECK_OK(etch_kernels_register_optimized());
    }
    if (!chain && !is_rules(c)) {
        const etch_kernel *k = etch_kernels_find("aten::convolution.out", 21);
        CHECK(k != NULL);
        CHECK_OK(etch_kernels_register_chain(k->fn, NULL));
    }
    etch_threadpool *pool = NULL;
    kt_shuffle_pool spool;
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    mo.no_fusion = no_fusion;
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
    /* the runs formed */
    for (size_t ch = 0; ch < etch_method_num_chains(L.m); ch++) {
        uint32_t left = 0;
        for (size_t pc = 0; pc < etch_method_chain_length(L.m, ch); pc++) {
            etch_instruction_info info;
            CHECK_OK(etch_method_instruction_info(L.m, ch, pc, &info));
            if (info.chain > 1) {
                CHECK_MSG(left == 0, "%s: a run starts inside another at pc %zu", c->name, pc);
                if (r->nchains < CHAIN_MAX_RUNS + 1)
                    r->chains[r->nchains++] = (int)info.chain;
                left = info.chain - 1;
                CHECK(!info.skipped && info.op_name &&
                      strcmp(info.op_name, is_rules(c) ? "aten::add.out"
                                                       : "aten::convolution.out") == 0);
            } else if (info.chain == 0) {
                CHECK_MSG(left > 0 && info.skipped, "%s: pc %zu chained outside a run",
                          c->name, pc);
                left--;
            }
        }
        CHECK_MSG(left == 0, "%s: a run ends past its chain", c->name);
    }
    /* inputs, then one execute (allocating nothing) */
    int64_t off = 0;
    float *in = read_floats(c->name, "in.bin",
                            c->in_numel[0] + (c->ninputs > 1 ? c->in_numel[1] : 0));
    for (int i = 0; i < c->ninputs && in; i++) {
        etch_value *v = etch_method_input(L.m, (size_t)i);
        CHECK(v && v->tag == ETCH_VALUE_TENSOR &&
              etch_tensor_numel(v->u.tensor) == c->in_numel[i]);
        memcpy(v->u.tensor->data, in + off, (size_t)c->in_numel[i] * sizeof(float));
        CHECK_OK(etch_method_set_input(L.m, (size_t)i, v));
        off += c->in_numel[i];
    }
    free(in);
    etch_alloc_arm();
    etch_status st = etch_method_execute(L.m);
    etch_alloc_disarm();
    CHECK_MSG(st == ETCH_OK, "%s: execute: %s", c->name, etch_last_error());
    CHECK_MSG(etch_alloc_calls == 0, "%s: execute allocated %ld times", c->name,
              etch_alloc_calls);
    r->out = malloc((size_t)c->out_numel * sizeof(float));
    off = 0;
    for (size_t i = 0; i < etch_method_num_outputs(L.m); i++) {
        const etch_value *v = etch_method_output(L.m, i);
        const int64_t n = (int64_t)etch_tensor_numel(v->u.tensor);
        CHECK(off + n <= c->out_numel);
        if (off + n <= c->out_numel)
            memcpy(r->out + off, v->u.tensor->data, (size_t)n * sizeof(float));
        off += n;
    }
    CHECK(off == c->out_numel);
    r->ok = st == ETCH_OK && off == c->out_numel;
    etch_test_method_unload(&L);
    etch_threadpool_destroy(pool);
}

static bool same_runs(const chain_case *c, const run_out *r) {
    if (r->nchains != c->nchains)
        return false;
    for (int i = 0; i < c->nchains; i++)
        if (r->chains[i] != c->chains[i])
            return false;
    return true;
}

/* max |a[k] - b[k]| (b NULL: max |a[k]|). A plain loop: Debian's arm64 cross gcc 12 fails
 * (internal compiler error) vectorizing an fmax reduction here. */
static double max_abs(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t k = 0; k < n; k++) {
        const double d = fabs((double)a[k] - (b ? (double)b[k] : 0.0));
        if (d > m || d != d)
            m = d;
    }
    return m;
}

static void check_case(const chain_case *c, const etch_isa *isas, int n_isas) {
    float *ref = read_floats(c->name, "out.bin", c->out_numel);
    if (!ref)
        return;
    const double mag = max_abs(ref, NULL, c->out_numel);
    const double tol = 1e-4 * fmax(mag, 1.0);
    /* the rules_* programs run portable kernels: the instruction set changes nothing */
    for (int ii = 0; ii < (is_rules(c) ? 1 : n_isas); ii++) {
        CHECK_OK(etch_isa_set(isas[ii]));
        const char *isa = is_rules(c) ? "-" : etch_isa_name(isas[ii]);
        /* unchained references, with scratch and without (no scratch changes the unchained
         * kernels' own paths: a weight packed per call is read unpacked instead) */
        run_out base[2], r;
        run_case(c, false, 1, TEMP_SIZE, false, &base[0]);
        run_case(c, false, 1, 0, false, &base[1]);
        CHECK_MSG(base[0].nchains == 0 && base[1].nchains == 0,
                  "%s (%s): chained with no chain function", c->name, isa);
        double worst = 0;
        for (int b = 0; b < 2; b++)
            if (base[b].ok)
                worst = fmax(worst, max_abs(base[b].out, ref, c->out_numel));
        CHECK_MSG(worst <= tol, "%s (%s): unchained max |etch - torch| = %g > %g", c->name, isa,
                  worst, tol);
        const struct {
            int threads;
            size_t temp;
        } cfg[] = {{1, TEMP_SIZE}, {2, TEMP_SIZE}, {3, TEMP_SIZE}, {4, TEMP_SIZE}, {-2, TEMP_SIZE},
                   {-3, TEMP_SIZE}, {1, 0}, {3, 0}};
        for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
            const run_out *want = &base[cfg[k].temp ? 0 : 1];
            memset(g_offered, 0, sizeof g_offered);
            run_case(c, true, cfg[k].threads, cfg[k].temp, false, &r);
            CHECK_MSG(same_runs(c, &r),
                      "%s (%s, %d threads): %d runs formed (the first of %d calls), expected "
                      "%d",
                      c->name, isa, cfg[k].threads, r.nchains, r.nchains ? r.chains[0] : 0,
                      c->nchains);
            CHECK_MSG(want->ok && r.ok &&
                          memcmp(want->out, r.out, (size_t)c->out_numel * sizeof(float)) == 0,
                      "%s (%s, %d threads, %zu bytes of scratch): outputs differ from the "
                      "unchained run",
                      c->name, isa, cfg[k].threads, cfg[k].temp);
            free(r.out);
        }
        run_case(c, true, 2, TEMP_SIZE, true, &r);
        CHECK_MSG(r.nchains == 0, "%s (%s): chained with no_fusion", c->name, isa);
        CHECK(base[0].ok && r.ok && memcmp(base[0].out, r.out, (size_t)c->out_numel * 4) == 0);
        free(r.out);
        printf("  %-18s %-6s runs [", c->name, isa);
        for (int i = 0; i < c->nchains; i++)
            printf(i ? " %d" : "%d", c->chains[i]);
        printf("], max |etch - torch| %.3g\n", worst);
        free(base[0].out);
        free(base[1].out);
    }
    free(ref);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GENERATED_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        check_case(&CASES[i], isas, n_isas);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_kernels_reset();
    return etch_test_finish();
}
