/*
 * Operator fusion at method load (src/optimize/fusion.c) on the programs gen_fusion.py writes
 * (exported torch models and hand-built edge cases).
 *
 * Each program runs in these configurations:
 *   portable         the portable kernels only: nothing can fuse; checked against PyTorch
 *   test, no_fusion  plus this file's fusing kernels, etch_method_options.no_fusion set
 *   test             the same with fusion on (the default)
 *   optimized        etch_kernels_register_optimized(), fusion on and off
 * The fusing test kernels are aten::mm/addmm/convolution registered with
 * ETCH_KERNEL_FUSES_ACTIVATION: the portable kernel, then the epilogue applied with the
 * portable activations' own formulas (double, rounded once), so a fused run must equal the
 * unfused one bit for bit. The six activation kernels are the portable ones behind a counting
 * wrapper (registered as impl "portable", which the fusion pass requires of an activation).
 *
 * Checked per program: the fusions etch_method_instruction_info reports (the expected list;
 * skipped instructions paired with the call they were folded into), outputs (bitwise against
 * the unfused run, within tolerance against PyTorch and the optimized kernels), the same
 * failure status where the program fails, the activation calls executed (fewer by the number
 * of fusions), the observer seeing the same instructions, no allocation during execute, and
 * the method pool exactly etch_method_meta_pool_size bytes (malloc'd to that size, so ASan
 * sees an overrun).
 *
 * Then the robustness replay (tests/robustness/rob_case.c) runs every mutation of every
 * program's structure with the fusing kernels registered: the fusion pass sees thousands of
 * odd but verified programs and must neither crash nor break the error contract.
 *
 * usage: test_fusion GENERATED_DIR [--mutations-per-site N] [--model FILE.pte]...
 *   --model: also compare fused and unfused runs of another program (deterministic inputs;
 *            no expected fusion list, no PyTorch reference), e.g. an exported torchvision
 *            model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"

#include "alloc_wrap.h"
#include "etch_test.h"
#include "test_file.h"
#include "fusion_cases.h"
#include "random_cases.h"
#include "rob_case.h"
#include "rob_mutate.h"

#define NCASES (sizeof CASES / sizeof CASES[0])
#define MAX_OUT 4
#define MAX_OUT_BYTES 65536

/* ---- kernels ------------------------------------------------------------------------------ */

static long act_calls, producer_calls, epilogue_calls;

typedef struct wrapped {
    const char *name;
    const etch_kernel *base; /* the portable kernel */
} wrapped;

static wrapped acts[] = {{"aten::relu.out", NULL},  {"aten::clamp.out", NULL},
                         {"aten::hardtanh.out", NULL}, {"aten::gelu.out", NULL},
                         {"aten::silu.out", NULL},  {"aten::sigmoid.out", NULL}};
static wrapped producers[] = {
    {"aten::mm.out", NULL}, {"aten::addmm.out", NULL}, {"aten::convolution.out", NULL}};
#define NACTS (sizeof acts / sizeof acts[0])
#define NPRODUCERS (sizeof producers / sizeof producers[0])

/* The portable activations' formulas (src/kernels/portable/op_*.c), in double. */
static float epilogue_ref(const etch_epilogue *e, float x) {
    double v = x;
    switch (e->act) {
    case ETCH_ACT_RELU:
        v = v < 0 ? 0.0 : v;
        break;
    case ETCH_ACT_CLAMP:
        if (!isnan(v)) {
            v = v < e->lo ? e->lo : v;
            v = v > e->hi ? e->hi : v;
        }
        break;
    case ETCH_ACT_GELU:
        v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
        break;
    case ETCH_ACT_GELU_TANH:
        v = 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
        break;
    case ETCH_ACT_SILU:
        v = v / (1.0 + exp(-v));
        break;
    case ETCH_ACT_SIGMOID:
        v = 1.0 / (1.0 + exp(-v));
        break;
    default:
        break;
    }
    return (float)v;
}

static void produce(size_t i, etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    producer_calls++;
    producers[i].base->fn(ctx, args, nargs);
    const etch_epilogue *e = etch_kernel_epilogue(ctx);
    if (!e || etch_kernel_failed(ctx))
        return;
    epilogue_calls++;
    etch_tensor *out = args[nargs - 1]->u.tensor; /* the return slot repeats the out tensor */
    if (out->dtype != ETCH_DTYPE_FLOAT) {
        etch_kernel_fail(ctx, ETCH_ERR_INTERNAL, "epilogue on a %s output",
                         etch_dtype_name(out->dtype));
        return;
    }
    uint8_t *d = (uint8_t *)out->data; /* any alignment */
    int64_t n = etch_tensor_numel(out);
    for (int64_t k = 0; k < n; k++) {
        float x;
        memcpy(&x, d + k * 4, 4);
        x = epilogue_ref(e, x);
        memcpy(d + k * 4, &x, 4);
    }
}

#define PRODUCER(i)                                                                           \
    static void produce_##i(etch_kernel_context *ctx, etch_value **args, size_t nargs) {      \
        produce(i, ctx, args, nargs);                                                         \
    }
PRODUCER(0)
PRODUCER(1)
PRODUCER(2)
static const etch_kernel_fn producer_fns[] = {produce_0, produce_1, produce_2};

#define ACT(i)                                                                                \
    static void act_##i(etch_kernel_context *ctx, etch_value **args, size_t nargs) {          \
        act_calls++;                                                                          \
        acts[i].base->fn(ctx, args, nargs);                                                   \
    }
ACT(0)
ACT(1)
ACT(2)
ACT(3)
ACT(4)
ACT(5)
static const etch_kernel_fn act_fns[] = {act_0, act_1, act_2, act_3, act_4, act_5};

static etch_kernel act_table[NACTS], producer_table[NPRODUCERS];

enum { REG_PORTABLE, REG_TEST, REG_OPTIMIZED };

static void register_kernels(int which) {
    etch_kernels_reset();
    if (which == REG_OPTIMIZED) {
        CHECK_OK(etch_kernels_register_optimized());
        return;
    }
    CHECK_OK(etch_kernels_register_portable());
    for (size_t i = 0; i < NACTS; i++) {
        acts[i].base = etch_kernels_find(acts[i].name, strlen(acts[i].name));
        CHECK(acts[i].base != NULL);
        act_table[i] = (etch_kernel){acts[i].name, acts[i].base->signature, act_fns[i]};
    }
    CHECK_OK(etch_kernels_register_ex(act_table, NACTS, "portable", 0));
    if (which != REG_TEST)
        return;
    for (size_t i = 0; i < NPRODUCERS; i++) {
        producers[i].base = etch_kernels_find(producers[i].name, strlen(producers[i].name));
        CHECK(producers[i].base != NULL);
        producer_table[i] =
            (etch_kernel){producers[i].name, producers[i].base->signature, producer_fns[i]};
    }
    CHECK_OK(etch_kernels_register_ex(producer_table, NPRODUCERS, "test",
                                      ETCH_KERNEL_FUSES_ACTIVATION));
}

/* ---- one run of a program --------------------------------------------------------------- */

typedef struct run_result {
    etch_status load_st, exec_st;
    int nout;
    int out_dtype[MAX_OUT];
    int out_dim[MAX_OUT];
    int64_t out_sizes[MAX_OUT][ETCH_MAX_DIMS];
    size_t out_bytes[MAX_OUT];
    uint8_t out[MAX_OUT][MAX_OUT_BYTES];
    char fused[4096]; /* instruction_info's fused names, comma-separated */
    size_t nskipped;
    size_t nchains; /* calls that run a chain of calls (etch/kernel.h) */
    long act_calls, producer_calls, epilogues, allocs;
    size_t observed;  /* observer calls in one execute */
    uint64_t pc_hash; /* of the (chain, pc) sequence the observer saw */
} run_result;

static void observe(void *user, size_t chain, size_t pc, const char *op) {
    run_result *r = (run_result *)user;
    (void)op;
    r->observed++;
    r->pc_hash = (r->pc_hash ^ (chain * 1000003u + pc + 1)) * 0x100000001b3ull;
}

/* Deterministic inputs for a program without a case: tensors get a smooth pattern in place
 * (their planned memory, or a static buffer when unplanned), other inputs their own value. */
static float input_buf[1 << 20];
static void set_generated_inputs(etch_method *m) {
    size_t used = 0;
    for (size_t i = 0; i < etch_method_num_inputs(m); i++) {
        etch_value *v = etch_method_input(m, i);
        if (v->tag != ETCH_VALUE_TENSOR) {
            CHECK_OK(etch_method_set_input(m, i, v));
            continue;
        }
        etch_tensor t = *v->u.tensor;
        int64_t n = etch_tensor_numel(&t);
        size_t need = (etch_tensor_nbytes(&t) + 3) / 4;
        if (!t.data) {
            CHECK(used + need <= sizeof input_buf / sizeof input_buf[0]);
            if (used + need > sizeof input_buf / sizeof input_buf[0])
                return;
            t.data = &input_buf[used];
            used += need;
        }
        for (int64_t k = 0; k < n; k++) {
            double x = sin((double)k * 0.37 + (double)i) * 2.0;
            switch (t.dtype) {
            case ETCH_DTYPE_FLOAT: ((float *)t.data)[k] = (float)x; break;
            case ETCH_DTYPE_DOUBLE: ((double *)t.data)[k] = x; break;
            case ETCH_DTYPE_INT: ((int32_t *)t.data)[k] = (int32_t)(k % 7); break;
            case ETCH_DTYPE_LONG: ((int64_t *)t.data)[k] = k % 7; break;
            default: memset((uint8_t *)t.data + (size_t)k * etch_dtype_size(t.dtype), 0,
                            etch_dtype_size(t.dtype));
            }
        }
        CHECK_OK(etch_method_set_input_tensor(m, i, &t));
    }
}

static void set_inputs(etch_method *m, const fusion_case *c) {
    if (!c->inputs) {
        set_generated_inputs(m);
        return;
    }
    for (int i = 0; i < c->ninputs; i++) {
        const fusion_tensor *in = &c->inputs[i];
        etch_tensor t;
        CHECK_OK(etch_tensor_init(&t, (etch_dtype)in->dtype, (size_t)in->dim, in->sizes,
                                  (void *)(uintptr_t)in->data));
        CHECK_OK(etch_method_set_input_tensor(m, (size_t)i, &t));
    }
}

static void run_program(const char *dir, const fusion_case *c, bool no_fusion, run_result *r) {
    memset(r, 0, sizeof *r);
    char path[1024];
    if (dir)
        snprintf(path, sizeof path, "%s/%s.pte", dir, c->name);
    else
        snprintf(path, sizeof path, "%s", c->name);
    etch_program *prog = NULL;
    r->load_st = etch_program_open_file(path, NULL, &prog);
    CHECK_MSG(r->load_st == ETCH_OK, "%s: %s", path, etch_last_error());
    if (r->load_st)
        return;
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(prog, "forward", &meta));
    size_t pool_size = etch_method_meta_pool_size(&meta);
    size_t narenas = etch_method_meta_num_arenas(&meta);
    void *pool = malloc(pool_size); /* exactly what the metadata asks for */
    void *arenas[8] = {0};
    size_t arena_sizes[8] = {0};
    CHECK(narenas <= 8);
    for (size_t j = 0; j < narenas && j < 8; j++) {
        arena_sizes[j] = etch_method_meta_arena_size(&meta, j);
        arenas[j] = calloc(1, arena_sizes[j] ? arena_sizes[j] : 1);
    }
    size_t temp_size = 1 << 20;
    void *temp = malloc(temp_size);
    etch_method_memory mem = {pool, pool_size, arenas, arena_sizes, narenas, temp, temp_size};
    etch_method_options opts;
    memset(&opts, 0, sizeof opts);
    opts.no_fusion = no_fusion;
    etch_method *m = NULL;
    r->load_st = etch_method_load(prog, "forward", &mem, &opts, &m);
    CHECK_MSG(r->load_st == ETCH_OK, "%s: load: %s", c->name, etch_last_error());
    if (r->load_st == ETCH_OK) {
        /* what instruction_info says was fused */
        for (size_t ch = 0; ch < etch_method_num_chains(m); ch++) {
            const char *prev_fused = NULL;
            uint32_t chain_left = 0;
            for (size_t pc = 0; pc < etch_method_chain_length(m, ch); pc++) {
                etch_instruction_info info;
                CHECK_OK(etch_method_instruction_info(m, ch, pc, &info));
                if (info.fused) {
                    size_t o = strlen(r->fused);
                    snprintf(r->fused + o, sizeof r->fused - o, "%s%s", o ? "," : "",
                             info.fused);
                    CHECK(!info.skipped || info.chain == 0);
                    CHECK(info.impl && strcmp(info.impl, "portable") != 0);
                }
                if (info.chain > 1) {
                    r->nchains++;
                    chain_left = info.chain - 1;
                } else if (info.chain == 0) {
                    /* run by the chain's first call, as one of the calls it said it runs */
                    CHECK(info.skipped && chain_left > 0);
                    chain_left--;
                } else if (info.skipped) {
                    r->nskipped++;
                    /* folded into the call just before it, which names it */
                    CHECK(prev_fused && info.op_name && strcmp(prev_fused, info.op_name) == 0);
                }
                prev_fused = info.fused;
            }
        }
        etch_method_set_observer(m, observe, r);
        /* inputs before each execute: a plan may reuse an input's bytes once it is dead */
        set_inputs(m, c);
        etch_status first = etch_method_execute(m);
        set_inputs(m, c);
        /* the second execute is the one measured */
        act_calls = producer_calls = epilogue_calls = 0;
        r->observed = 0;
        r->pc_hash = 0;
        etch_alloc_arm();
        r->exec_st = etch_method_execute(m);
        etch_alloc_disarm();
        r->allocs = etch_alloc_calls;
        CHECK_MSG(first == r->exec_st, "%s: executes differ: %s then %s", c->name,
                  etch_status_str(first), etch_status_str(r->exec_st));
        r->act_calls = act_calls;
        r->producer_calls = producer_calls;
        r->epilogues = epilogue_calls;
        r->nout = (int)etch_method_num_outputs(m);
        CHECK(r->nout <= MAX_OUT);
        for (int i = 0; i < r->nout && i < MAX_OUT && r->exec_st == ETCH_OK; i++) {
            const etch_value *v = etch_method_output(m, (size_t)i);
            CHECK(v && v->tag == ETCH_VALUE_TENSOR);
            if (!v || v->tag != ETCH_VALUE_TENSOR)
                continue;
            const etch_tensor *t = v->u.tensor;
            r->out_dtype[i] = t->dtype;
            r->out_dim[i] = t->dim;
            memcpy(r->out_sizes[i], t->sizes, sizeof t->sizes[0] * t->dim);
            r->out_bytes[i] = etch_tensor_nbytes(t);
            CHECK(r->out_bytes[i] <= MAX_OUT_BYTES);
            if (r->out_bytes[i] <= MAX_OUT_BYTES)
                memcpy(r->out[i], t->data, r->out_bytes[i]);
        }
        etch_method_free(m);
    }
    free(temp);
    for (size_t j = 0; j < narenas && j < 8; j++)
        free(arenas[j]);
    free(pool);
    etch_program_close(prog);
}

/* ---- comparisons ---------------------------------------------------------------------------- */

static size_t count_names(const char *list) {
    if (!*list)
        return 0;
    size_t n = 1;
    for (; *list; list++)
        n += *list == ',';
    return n;
}

static double elem(const run_result *r, int i, size_t k) {
    if (r->out_dtype[i] == ETCH_DTYPE_INT)
        return ((const int32_t *)(const void *)r->out[i])[k];
    return ((const float *)(const void *)r->out[i])[k];
}

static bool close_to(double a, double b, double tol) {
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= tol * (1.0 + fabs(b));
}

static void check_torch(const fusion_case *c, const run_result *r, const char *what) {
    if (!c->torch_ref || c->fails || r->exec_st != ETCH_OK)
        return;
    CHECK_MSG(r->nout == c->noutputs, "%s (%s): %d outputs, torch has %d", c->name, what,
              r->nout, c->noutputs);
    for (int i = 0; i < r->nout && i < c->noutputs; i++) {
        const fusion_tensor *e = &c->outputs[i];
        bool shape = r->out_dtype[i] == e->dtype && r->out_dim[i] == e->dim;
        for (int d = 0; shape && d < e->dim; d++)
            shape = r->out_sizes[i][d] == e->sizes[d];
        CHECK_MSG(shape, "%s (%s): output %d has another dtype or shape than torch's", c->name,
                  what, i);
        if (!shape)
            continue;
        size_t bad = 0;
        for (size_t k = 0; k < e->numel; k++) {
            double want = e->dtype == ETCH_DTYPE_INT ? ((const int32_t *)e->data)[k]
                                                     : ((const float *)e->data)[k];
            if (!close_to(elem(r, i, k), want, c->tol) && bad++ == 0)
                fprintf(stderr, "%s (%s): output %d[%zu] = %.9g, torch %.9g\n", c->name, what,
                        i, k, elem(r, i, k), want);
        }
        CHECK_MSG(bad == 0, "%s (%s): %zu elements of output %d differ from torch", c->name,
                  what, bad, i);
    }
}

/* Same status and shapes; outputs bitwise equal (tol < 0) or within tol. */
static void check_same(const fusion_case *c, const run_result *a, const run_result *b,
                       const char *what, double tol) {
    CHECK_MSG(a->exec_st == b->exec_st, "%s (%s): status %s vs %s", c->name, what,
              etch_status_str(a->exec_st), etch_status_str(b->exec_st));
    if (a->exec_st != ETCH_OK || b->exec_st != ETCH_OK)
        return;
    CHECK(a->nout == b->nout);
    for (int i = 0; i < a->nout && i < b->nout && i < MAX_OUT; i++) {
        bool shape = a->out_dtype[i] == b->out_dtype[i] && a->out_dim[i] == b->out_dim[i] &&
                     a->out_bytes[i] == b->out_bytes[i] &&
                     memcmp(a->out_sizes[i], b->out_sizes[i],
                            sizeof a->out_sizes[i][0] * (size_t)a->out_dim[i]) == 0;
        CHECK_MSG(shape, "%s (%s): output %d's shape differs", c->name, what, i);
        if (!shape)
            continue;
        if (tol < 0) {
            CHECK_MSG(memcmp(a->out[i], b->out[i], a->out_bytes[i]) == 0,
                      "%s (%s): output %d differs from the unfused run", c->name, what, i);
            continue;
        }
        size_t n = a->out_bytes[i] / etch_dtype_size(a->out_dtype[i]), bad = 0;
        for (size_t k = 0; k < n; k++)
            bad += !close_to(elem(a, i, k), elem(b, i, k), tol);
        CHECK_MSG(bad == 0, "%s (%s): %zu elements of output %d differ", c->name, what, bad, i);
    }
}

static run_result base, unfused, fused, opt, opt_unfused;

static void test_case(const char *dir, const fusion_case *c, size_t *total_fused,
                      size_t *opt_fused, bool verbose) {
    register_kernels(REG_PORTABLE);
    run_program(dir, c, false, &base);
    CHECK_MSG(base.fused[0] == 0, "%s: fused with portable kernels only: %s", c->name,
              base.fused);
    CHECK_MSG((base.exec_st != ETCH_OK) == c->fails, "%s: portable run: %s (%s)", c->name,
              etch_status_str(base.exec_st), etch_last_error());
    check_torch(c, &base, "portable");

    register_kernels(REG_TEST);
    run_program(dir, c, true, &unfused);
    CHECK_MSG(unfused.fused[0] == 0 && unfused.nskipped == 0, "%s: no_fusion still fused %s",
              c->name, unfused.fused);
    check_same(c, &unfused, &base, "no_fusion", -1);
    CHECK(unfused.act_calls == base.act_calls);
    CHECK(unfused.epilogues == 0);

    run_program(dir, c, false, &fused);
    size_t n = count_names(c->fused ? c->fused : fused.fused);
    *total_fused += n;
    CHECK_MSG(!c->fused || strcmp(fused.fused, c->fused) == 0, "%s: fused [%s], expected [%s]",
              c->name, fused.fused, c->fused);
    CHECK(fused.nskipped == count_names(fused.fused));
    check_same(c, &fused, &base, "fused", -1);
    check_torch(c, &fused, "fused");
    CHECK_MSG(fused.observed == base.observed && fused.pc_hash == base.pc_hash,
              "%s: the observer saw %zu instructions, unfused %zu", c->name, fused.observed,
              base.observed);
    if (!c->fails) {
        CHECK_MSG(fused.act_calls == base.act_calls - (long)n,
                  "%s: %ld activation calls, unfused %ld, %zu fusions", c->name,
                  fused.act_calls, base.act_calls, n);
        CHECK(fused.epilogues == (long)n);
        CHECK(fused.producer_calls == unfused.producer_calls);
    }
    CHECK_MSG(fused.allocs == 0 && unfused.allocs == 0 && base.allocs == 0,
              "%s: execute allocated (%ld fused, %ld unfused)", c->name, fused.allocs,
              unfused.allocs);

    register_kernels(REG_OPTIMIZED);
    run_program(dir, c, false, &opt);
    run_program(dir, c, true, &opt_unfused);
    *opt_fused += count_names(opt.fused);
    CHECK(opt_unfused.fused[0] == 0);
    check_same(c, &opt, &base, "optimized", c->tol);
    check_same(c, &opt, &opt_unfused, "optimized, no_fusion", c->tol);
    check_torch(c, &opt, "optimized");
    CHECK(opt.allocs == 0);
    CHECK_MSG(opt.observed == base.observed, "%s: optimized: observer saw %zu, unfused %zu",
              c->name, opt.observed, base.observed);
    if (verbose)
        printf("  %-28s fused [%s]%s%s%s\n", c->name, fused.fused,
           opt.fused[0] ? "  optimized: [" : "", opt.fused, opt.fused[0] ? "]" : "");
}

/* ---- mutated programs ---------------------------------------------------------------------- */

/* Mutations of one site: the robustness test's boundary values, plus, for indices and
 * scalars (value indices of instruction arguments, inputs, outputs; offsets; jump
 * destinations), neighbours and small values, which tend to give odd programs that still
 * verify: exactly what the fusion pass must be robust to. */
static size_t site_values(const rob_site *site, uint64_t cur, uint64_t size, uint64_t *rng,
                          size_t per_site, uint64_t vals[32]) {
    uint64_t b[16];
    size_t nb = rob_site_values(site->width, cur, size, rng, b), n = 0;
    for (size_t k = 0; k < nb && n < per_site; k++)
        vals[n++] = b[(k + site->pos) % nb];
    if (site->kind == SITE_ELEMENT || site->kind == SITE_SCALAR) {
        vals[n++] = cur + 1;
        vals[n++] = cur - 1;
        vals[n++] = cur + 2;
        vals[n++] = rob_rand(rng) % 48;
        vals[n++] = rob_rand(rng) % 48;
    }
    return n;
}

static void mutate_file(const char *dir, const char *name, size_t per_site, uint64_t *rng,
                        const rob_options *o, rob_stats *stats, unsigned long *cases,
                        unsigned long *violations) {
    char path[1024];
    size_t size = 0;
    snprintf(path, sizeof path, "%s/%s.pte", dir, name);
    uint8_t *orig = (uint8_t *)etch_test_read_file(path, 0, &size);
    CHECK_MSG(orig != NULL, "cannot read %s", path);
    if (!orig)
        return;
    uint8_t *mut = malloc(size);
    rob_sites sites;
    memset(&sites, 0, sizeof sites);
    CHECK(rob_find_sites(orig, size, ROB_SCHEMA_PTE, &sites));
    for (size_t s = 0; s < sites.n && mut; s++) {
        const rob_site *site = &sites.v[s];
        uint64_t vals[32];
        uint64_t cur = rob_read_le(orig + site->pos, site->width);
        size_t nv = site_values(site, cur, size, rng, per_site, vals);
        for (size_t k = 0; k < nv; k++) {
            if (vals[k] == cur)
                continue;
            memcpy(mut, orig, size);
            rob_write_le(mut + site->pos, site->width, vals[k]);
            char why[512];
            why[0] = 0;
            int bad = rob_run(mut, size, NULL, 0, o, stats, why, sizeof why);
            ++*cases;
            if (bad && (*violations)++ < 5)
                fprintf(stderr, "%s: site %zu (offset %u) = %llu: %s\n", name, s,
                        (unsigned)site->pos, (unsigned long long)vals[k], why);
        }
    }
    rob_sites_free(&sites);
    free(mut);
    free(orig);
}

static void mutate_all(const char *dir, size_t per_site) {
    register_kernels(REG_TEST);
    rob_options o = rob_default_options();
    o.quiet = 1;
    rob_stats stats;
    memset(&stats, 0, sizeof stats);
    uint64_t rng = 0x5eed;
    unsigned long cases = 0, violations = 0;
    for (size_t i = 0; i < NCASES; i++)
        mutate_file(dir, CASES[i].name, per_site, &rng, &o, &stats, &cases, &violations);
    for (size_t i = 0; i < sizeof RANDOM_CASES / sizeof RANDOM_CASES[0]; i += 8)
        mutate_file(dir, RANDOM_CASES[i].name, per_site, &rng, &o, &stats, &cases,
                    &violations);
    printf("mutations: %lu programs run through open/load/execute with fusing kernels, "
           "%lu violations\n", cases, violations);
    rob_stats_print(&stats, "  ");
    CHECK(cases > 0);
    CHECK_MSG(violations == 0, "%lu mutated programs broke the error contract", violations);

    /* the convolutional programs again with the optimized kernels: fusion, the blocked-layout
     * pass (layout functions asked about odd calls) and the blocked kernels on whatever the
     * mutated programs make of them */
    register_kernels(REG_OPTIMIZED);
    memset(&stats, 0, sizeof stats);
    unsigned long conv_cases = 0, conv_violations = 0;
    for (size_t i = 0; i < NCASES; i++)
        if (strstr(CASES[i].name, "conv") || strstr(CASES[i].name, "cnn"))
            mutate_file(dir, CASES[i].name, per_site, &rng, &o, &stats, &conv_cases,
                        &conv_violations);
    printf("mutations: %lu convolutional programs run with the optimized kernels (channel-"
           "blocked layout on), %lu violations\n", conv_cases, conv_violations);
    rob_stats_print(&stats, "  ");
    CHECK(conv_cases > 0);
    CHECK_MSG(conv_violations == 0, "%lu mutated programs broke the error contract (optimized)",
              conv_violations);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s GENERATED_DIR [--mutations-per-site N]\n", argv[0]);
        return 2;
    }
    size_t per_site = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mutations-per-site") == 0) {
            per_site = (size_t)strtoul(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--model") == 0) {
            fusion_case c = {argv[i + 1], 0, NULL, 0, NULL, false, NULL, false, 1e-3};
            size_t t = 0, o = 0;
            test_case(NULL, &c, &t, &o, true);
            printf("%s: %zu fusions with the test kernels, %zu with the optimized ones\n",
                   argv[i + 1], t, o);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    size_t total = 0, opt_total = 0;
    for (size_t i = 0; i < NCASES; i++)
        test_case(argv[1], &CASES[i], &total, &opt_total, true);
    printf("%zu programs, %zu fusions with the test kernels, %zu with the optimized ones\n",
           NCASES, total, opt_total);
    CHECK(total > 0);
    /* random programs with valid tight plans: fused == unfused == PyTorch */
    size_t nrandom = sizeof RANDOM_CASES / sizeof RANDOM_CASES[0], rtotal = 0, ropt = 0;
    for (size_t i = 0; i < nrandom; i++)
        test_case(argv[1], &RANDOM_CASES[i], &rtotal, &ropt, false);
    printf("%zu random programs: %zu fusions with the test kernels, %zu with the optimized "
           "ones\n", nrandom, rtotal, ropt);
    CHECK(rtotal > nrandom / 4);
    if (per_site)
        mutate_all(argv[1], per_site);
    return etch_test_finish();
}
