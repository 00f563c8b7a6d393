/*
 * Load-time prepacking of constant weights (etch_kernels_register_prepare, the optimized
 * GEMM and convolution):
 *  - GEMM: etch_opt_sgemm with a prepacked A, B or both equals the unprepacked call bit for
 *    bit when both take the packed path (M > 2 MR), within float rounding otherwise; a
 *    packed operand made for another ISA or shape is ignored (bit for bit the plain call);
 *    every ISA this CPU supports, 1-3 threads, ample and short scratch;
 *  - programs (gen_prepack.py: convolutions incl. grouped/strided/1x1/1-d, linear over 2-d and
 *    3-d inputs, mm, addmm): the pool metadata counts the prepared data, call sites are
 *    prepared, outputs with prepacking equal those without (and PyTorch's), 1 and 2 threads;
 *    ISA switched after load -> bit for bit the run without prepacking under that ISA; a pool
 *    too small for the prepared data -> loads, fewer call sites prepared, same outputs; no
 *    allocation during execute.
 * Usage: test_prepack PROGRAM_DIR
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
#include "kernels/optimized/gemm_isa.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/sparse.h"
#include "runtime/program_impl.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

static etch_threadpool *pools[4];

static const etch_threadpool_iface *tp_of(int threads) {
    return threads > 1 ? etch_threadpool_get_iface(pools[threads]) : NULL;
}

/* ---- GEMM level ------------------------------------------------------------------------- */

#define AMPLE (24u << 20)
#define SHORT (160u << 10)
static uint8_t *scratch;

/* a tile shape no ISA has (the blocking logic with mr not dividing anything) */
static void ukr_5x24(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,
                     int64_t ldc, int accumulate, const etch_sgemm_tail *tail, const char *pf) {
    (void)pf;
    float acc[5][24];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 24; j++)
                acc[i][j] += ap[k * 5 + i] * bp[k * ldb + j];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 24; j++)
        {
            const float v = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
            c[i * ldc + j] = tail ? etch_sgemm_tail_one(tail, v, i, j) : v;
        }
}
static etch_sgemm_isa emu;
static const etch_sgemm_isa *isa_override; /* NULL: the active ISA */

static void run(const etch_sgemm_desc *d, int threads, size_t temp, float *c) {
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "test", scratch, temp, tp_of(threads));
    etch_sgemm_desc e = *d;
    e.c = c;
    if (isa_override)
        etch_opt_sgemm_isa(&ctx, &e, isa_override);
    else
        etch_opt_sgemm(&ctx, &e);
    CHECK(ctx.temp_used == 0);
}

static int gemm_cases;

static void gemm_case(int64_t M, int64_t N, int64_t K, bool a_t, bool b_t, int threads,
                      size_t temp) {
    const etch_sgemm_isa *isa =
        isa_override ? isa_override : etch_sgemm_isa_for((int)etch_isa_active());
    float *a = malloc((size_t)(M * K) * sizeof(float));
    float *b = malloc((size_t)(K * N) * sizeof(float));
    float *bias = malloc((size_t)N * sizeof(float));
    float *c[5];
    for (int i = 0; i < 5; i++)
        c[i] = malloc((size_t)(M * N) * sizeof(float));
    for (int64_t i = 0; i < M * K; i++)
        a[i] = rndf();
    for (int64_t i = 0; i < K * N; i++)
        b[i] = rndf();
    for (int64_t i = 0; i < N; i++)
        bias[i] = rndf();
    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M;
    d.N = N;
    d.K = K;
    d.a = a;
    d.a_rs = a_t ? 1 : K; /* a_t: A stored transposed (column-major) */
    d.a_cs = a_t ? M : 1;
    d.b = b;
    d.b_rs = b_t ? 1 : N;
    d.b_cs = b_t ? K : 1;
    d.ldc = N;
    d.bias = bias;
    d.bias_cs = 1;
    d.alpha = 1.0f;
    d.beta = 1.0f;
    static const etch_epilogue relu = {ETCH_ACT_RELU, 0, 0};
    d.epilogue = (M + N) % 2 ? &relu : NULL;

    float *pa = malloc(etch_opt_sgemm_packed_size(isa, true, M, K) + 4);
    float *pb = malloc(etch_opt_sgemm_packed_size(isa, false, N, K) + 4);
    etch_sgemm_packed ka, kb;
    etch_opt_sgemm_pack_a(isa, a, d.a_rs, d.a_cs, M, K, pa, &ka);
    etch_opt_sgemm_pack_b(isa, b, d.b_rs, d.b_cs, K, N, pb, &kb);
    CHECK(ka.isa == (const void *)isa && kb.isa == (const void *)isa);

    run(&d, threads, temp, c[0]);
    etch_sgemm_desc e = d;
    e.a_packed = &ka;
    run(&e, threads, temp, c[1]);
    e.a_packed = NULL;
    e.b_packed = &kb;
    run(&e, threads, temp, c[2]);
    e.a_packed = &ka;
    run(&e, threads, temp, c[3]);
    /* stale packings: another ISA's, another shape's -> ignored */
    etch_sgemm_packed wrong_a = ka, wrong_b = kb;
    wrong_a.isa = isa == &etch_sgemm_isa_scalar ? (const void *)&wrong_a : &etch_sgemm_isa_scalar;
    wrong_b.outer = N + 1;
    e.a_packed = &wrong_a;
    e.b_packed = &wrong_b;
    run(&e, threads, temp, c[4]);

    const bool same_path = M > 2 * isa->mr && temp == AMPLE;
    if (same_path) {
        /* the packed operands are what is read: packed from other matrices, the result is
         * the plain product of those */
        float *a2 = malloc((size_t)(M * K) * sizeof(float));
        float *b2 = malloc((size_t)(K * N) * sizeof(float));
        float *c2 = malloc((size_t)(M * N) * sizeof(float));
        float *c3 = malloc((size_t)(M * N) * sizeof(float));
        for (int64_t i = 0; i < M * K; i++)
            a2[i] = rndf();
        for (int64_t i = 0; i < K * N; i++)
            b2[i] = rndf();
        etch_opt_sgemm_pack_a(isa, a2, d.a_rs, d.a_cs, M, K, pa, &ka);
        etch_opt_sgemm_pack_b(isa, b2, d.b_rs, d.b_cs, K, N, pb, &kb);
        e = d;
        e.a = a2;
        e.b = b2;
        run(&e, threads, temp, c2);
        e = d;
        e.a_packed = &ka;
        e.b_packed = &kb;
        run(&e, threads, temp, c3);
        CHECK_MSG(memcmp(c2, c3, (size_t)(M * N) * sizeof(float)) == 0,
                  "[%s] %lldx%lldx%lld: packed operands not used", isa->name, (long long)M,
                  (long long)N, (long long)K);
        free(a2);
        free(b2);
        free(c2);
        free(c3);
    }
    for (int v = 1; v < 5; v++) {
        int bad = 0;
        for (int64_t i = 0; i < M * N; i++) {
            const double want = c[0][i], got = c[v][i];
            bool ok;
            if (v == 4 || same_path)
                ok = memcmp(&c[0][i], &c[v][i], sizeof(float)) == 0;
            else
                ok = fabs(got - want) <= 1e-5 * (double)K * (1.0 + fabs(want));
            if (!ok && bad++ < 3)
                fprintf(stderr,
                        "[%s] %lldx%lldx%lld a_t %d b_t %d threads %d temp %zu variant %d: "
                        "c[%lld] = %.9g, unprepacked %.9g\n",
                        isa->name, (long long)M, (long long)N, (long long)K, a_t, b_t, threads,
                        temp, v, (long long)i, got, want);
        }
        CHECK(bad == 0);
    }
    gemm_cases++;
    free(pa);
    free(pb);
    for (int i = 0; i < 5; i++)
        free(c[i]);
    free(a);
    free(b);
    free(bias);
}

static void gemm_tests(void) {
    static const int64_t shapes[][3] = {
        {64, 48, 100}, {64, 1000, 600}, {200, 70, 33}, {5, 96, 48}, {2, 17, 9},
        {13, 1100, 300}, {97, 64, 1030}, {40, 3000, 27}, {7, 5, 3}, {300, 20, 700}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int threads = 1; threads <= 3; threads++) {
            const size_t temp = (s + (size_t)threads) % 3 == 0 ? SHORT : AMPLE;
            gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], (s + threads) % 2, s % 3 == 1,
                      threads, temp);
        }
}

/* ---- programs --------------------------------------------------------------------------- */

typedef struct pcase {
    char name[64];
    int rank;
    int64_t sizes[4];
    int64_t out_numel;
    float *in, *ref;
} pcase;

static float *read_bin(const char *dir, const char *name, const char *ext, int64_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return NULL;
    float *p = malloc((size_t)n * sizeof(float));
    CHECK(fread(p, sizeof(float), (size_t)n, f) == (size_t)n);
    fclose(f);
    return p;
}

/* The process's resident pages of mapped files, KiB: RssFile + RssShmem of
 * /proc/self/status (the program's mapping, not the allocator's heap; a file on tmpfs or
 * ramfs, such as a build tree in /tmp or an initramfs, counts as shared memory); -1 when
 * unreadable. */
static long rss_file_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long file = -1, shmem = -1, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssFile: %ld kB", &v) == 1)
            file = v;
        else if (sscanf(line, "RssShmem: %ld kB", &v) == 1)
            shmem = v;
    }
    fclose(f);
    return file < 0 || shmem < 0 ? -1 : file + shmem;
}

typedef struct loaded {
    etch_program *prog;
    etch_method *m;
    void *pool, *temp, *arenas[8];
    size_t pool_size, need, arena_sizes[8];
    int prepared; /* call sites with prepared data */
    int distinct; /* distinct prepared buffers */
    long rss_file_opened; /* rss_file_kb() once the program was open (before the load) */
} loaded;

static void unload(loaded *l) {
    etch_method_free(l->m);
    etch_program_close(l->prog);
    free(l->pool);
    free(l->temp);
    for (int j = 0; j < 8; j++)
        free(l->arenas[j]);
    memset(l, 0, sizeof *l);
}

/* pool_cut: bytes fewer than the metadata asks for */
static bool load(const char *dir, const pcase *c, bool no_prepack, int threads, size_t pool_cut,
                 loaded *l) {
    memset(l, 0, sizeof *l);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", dir, c->name);
    CHECK_OK(etch_program_open_file(path, NULL, &l->prog));
    if (!l->prog)
        return false;
    l->rss_file_opened = rss_file_kb();
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(l->prog, "forward", &meta));
    l->need = etch_method_meta_pool_size(&meta);
    l->pool_size = l->need - pool_cut;
    l->pool = aligned_alloc(64, (l->pool_size + 63) / 64 * 64);
    size_t n = etch_method_meta_num_arenas(&meta);
    CHECK(n <= 8);
    for (size_t j = 0; j < n && j < 8; j++) {
        l->arena_sizes[j] = etch_method_meta_arena_size(&meta, j);
        l->arenas[j] = aligned_alloc(64, (l->arena_sizes[j] + 64) / 64 * 64);
    }
    size_t temp_size = 4u << 20;
    l->temp = aligned_alloc(64, temp_size);
    etch_method_memory mem = {l->pool, l->pool_size, l->arenas, l->arena_sizes, n, l->temp,
                              temp_size};
    etch_method_options opts;
    memset(&opts, 0, sizeof opts);
    opts.no_prepack = no_prepack;
    opts.threadpool = tp_of(threads);
    CHECK_MSG(etch_method_load(l->prog, "forward", &mem, &opts, &l->m) == ETCH_OK, "%s: %s",
              c->name, etch_last_error());
    if (!l->m)
        return false;
    for (uint32_t ch = 0; ch < l->m->nchains; ch++)
        for (uint32_t k = 0; k < l->m->chains[ch].n; k++) {
            const void *p = l->m->chains[ch].instrs[k].prepared;
            if (!p)
                continue;
            l->prepared++;
            bool seen = false;
            for (uint32_t c2 = 0; c2 <= ch && !seen; c2++)
                for (uint32_t k2 = 0; k2 < (c2 == ch ? k : l->m->chains[c2].n); k2++)
                    seen = seen || l->m->chains[c2].instrs[k2].prepared == p;
            l->distinct += !seen;
        }
    etch_tensor x;
    CHECK_OK(etch_tensor_init(&x, ETCH_DTYPE_FLOAT, (size_t)c->rank, c->sizes, c->in));
    CHECK_OK(etch_method_set_input_tensor(l->m, 0, &x));
    return true;
}

/* execute (twice, no allocation the second time); copies output 0 to out */
static void execute(loaded *l, const pcase *c, float *out) {
    CHECK_OK(etch_method_execute(l->m));
    etch_alloc_arm();
    CHECK_OK(etch_method_execute(l->m));
    etch_alloc_disarm();
    CHECK_MSG(etch_alloc_calls == 0, "%s: %ld allocations during execute", c->name,
              etch_alloc_calls);
    const etch_tensor *y = etch_method_output(l->m, 0)->u.tensor;
    CHECK(etch_tensor_numel(y) == c->out_numel);
    memcpy(out, y->data, (size_t)c->out_numel * sizeof(float));
}

static void close_to(const pcase *c, const char *what, const float *got, const float *want,
                     double tol) {
    int bad = 0;
    for (int64_t i = 0; i < c->out_numel; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs((double)want[i]))) &&
            bad++ < 3)
            fprintf(stderr, "%s %s: [%lld] = %.9g, want %.9g\n", c->name, what, (long long)i,
                    got[i], want[i]);
    CHECK_MSG(bad == 0, "%s: %s differs", c->name, what);
}

static void same_bits(const pcase *c, const char *what, const float *got, const float *want) {
    CHECK_MSG(memcmp(got, want, (size_t)c->out_numel * sizeof(float)) == 0,
              "%s: %s not bit for bit", c->name, what);
}

static size_t need_without_prepare(const char *dir, const pcase *c) {
    static const struct {
        etch_kernel_fn k;
        etch_kernel_prepare_fn p;
    } prep[] = {/* the registered mm / addmm / linear (sparse.h: 2:4 weights, else dense) */
                {etch_opt_sparse_mm_out, etch_opt_sparse_mm_prepare},
                {etch_opt_sparse_addmm_out, etch_opt_sparse_addmm_prepare},
                {etch_opt_sparse_linear_out, etch_opt_sparse_linear_prepare},
                {etch_opt_convolution_out, etch_opt_convolution_prepare}};
    for (int i = 0; i < 4; i++)
        CHECK(etch_kernels_prepare_of(prep[i].k) == prep[i].p);
    for (int i = 0; i < 4; i++)
        CHECK_OK(etch_kernels_register_prepare(prep[i].k, NULL));
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", dir, c->name);
    etch_program *prog = NULL;
    size_t need = 0;
    CHECK_OK(etch_program_open_file(path, NULL, &prog));
    etch_method_meta meta;
    if (prog && etch_program_method_meta(prog, "forward", &meta) == ETCH_OK)
        need = etch_method_meta_pool_size(&meta);
    etch_program_close(prog);
    for (int i = 0; i < 4; i++)
        CHECK_OK(etch_kernels_register_prepare(prep[i].k, prep[i].p));
    return need;
}

static void program_case(const char *dir, const pcase *c) {
    const etch_isa best = etch_isa_best();
    float *plain = malloc((size_t)c->out_numel * sizeof(float));
    float *got = malloc((size_t)c->out_numel * sizeof(float));
    loaded l;
    for (int threads = 1; threads <= 2; threads++) {
        CHECK_OK(etch_isa_set(best));
        if (!load(dir, c, true, threads, 0, &l))
            return;
        CHECK(l.prepared == 0);
        execute(&l, c, plain);
        unload(&l);
        close_to(c, "unprepacked vs PyTorch", plain, c->ref, 2e-4);

        if (!load(dir, c, false, threads, 0, &l))
            return;
        /* single-row call sites are prepared only for a matrix-vector kernel over the panels */
        if (strcmp(c->name, "mlp1") == 0 && !etch_sgemm_isa_for((int)best)->gemv_p) {
            CHECK_MSG(l.prepared == 0, "mlp1: %d single-row call sites prepared without gemv_p",
                      l.prepared);
            unload(&l);
            continue;
        }
        CHECK_MSG(l.prepared > 0, "%s: nothing prepared", c->name);
        /* one copy per weight: only "shared" reuses one */
        if (strcmp(c->name, "shared") == 0)
            CHECK_MSG(l.prepared == 3 && l.distinct == 1, "shared: %d call sites, %d buffers",
                      l.prepared, l.distinct);
        else
            CHECK(l.distinct == l.prepared);
        execute(&l, c, got);
        close_to(c, "prepacked vs unprepacked", got, plain, 2e-5);
        close_to(c, "prepacked vs PyTorch", got, c->ref, 2e-4);
        {
            /* the kernels read the prepared data: zeroing the packed panels changes outputs */
            float *spoiled = malloc((size_t)c->out_numel * sizeof(float));
            for (uint32_t ch = 0; ch < l.m->nchains; ch++)
                for (uint32_t k = 0; k < l.m->chains[ch].n; k++) {
                    etch_instr *in = &l.m->chains[ch].instrs[k];
                    if (in->prepared && in->prepared_size > 256)
                        memset((uint8_t *)(uintptr_t)in->prepared + 256, 0,
                               in->prepared_size - 256);
                }
            execute(&l, c, spoiled);
            CHECK_MSG(memcmp(spoiled, got, (size_t)c->out_numel * sizeof(float)) != 0,
                      "%s: prepared data not used", c->name);
            free(spoiled);
        }
        unload(&l);
        if (!load(dir, c, false, threads, 0, &l))
            return;
        /* ISA switched after load: the packed weights are ignored */
        CHECK_OK(etch_isa_set(ETCH_ISA_SCALAR));
        execute(&l, c, got);
        unload(&l);
        if (!load(dir, c, true, threads, 0, &l))
            return;
        execute(&l, c, plain);
        unload(&l);
        same_bits(c, "ISA switched after load", got, plain);
        CHECK_OK(etch_isa_set(best));
        printf("%s: threads %d, prepared call sites: ok\n", c->name, threads);
    }
    if (strcmp(c->name, "mlp1") == 0 && !etch_sgemm_isa_for((int)best)->gemv_p) {
        free(plain); /* nothing prepared, no pool room asked for it */
        free(got);
        return;
    }
    /* a pool with room for everything but the prepared data: loads, and prepares less (the
     * load-time checks' scratch, given back before the prepare step, may hold some) */
    const size_t need0 = need_without_prepare(dir, c);
    if (!load(dir, c, true, 1, 0, &l))
        return;
    const size_t need = l.need;
    execute(&l, c, plain);
    unload(&l);
    if (!load(dir, c, false, 1, 0, &l))
        return;
    const int full = l.prepared;
    unload(&l);
    CHECK_MSG(need > need0, "%s: pool size %zu does not count prepared data (%zu without)",
              c->name, need, need0);
    if (!load(dir, c, false, 1, need - need0, &l))
        return;
    CHECK_MSG(l.prepared < full, "%s: %d of %d call sites prepared in a short pool", c->name,
              l.prepared, full);
    execute(&l, c, got);
    unload(&l);
    same_bits(c, "short pool", got, plain);
    printf("%s: pool %zu bytes (%zu without prepared data); short pool ok\n", c->name, need,
           need0);
    free(plain);
    free(got);
}

/* "big" (a 2048 x 1024 linear, 8 MiB of weight) loaded from its mapped file: prepacking
 * reads the weight, packs it into the pool and gives the weight's mapped pages back
 * (etch_kernel_prepared_replaces), and executing reads only the packed copy, so after load
 * and execute (from the program's opening on) the mapped file gained (almost) no resident
 * pages; without prepacking, executing reads the mapped weight (the control: the measure sees
 * it). */
static void release_case(const char *dir, const pcase *c) {
    const long weight_kb = 2048L * 1024L * 4L / 1024L;
    long grew[2] = {0, 0};
    loaded l;
    float *out = malloc((size_t)c->out_numel * sizeof(float));
    for (int prepack = 0; prepack < 2; prepack++) {
        if (!load(dir, c, !prepack, 1, 0, &l))
            break;
        const long before = l.rss_file_opened; /* opening verifies (reads) the file's start */
        CHECK_MSG(before > 0, "cannot read RssFile / RssShmem from /proc/self/status");
        CHECK(prepack ? l.prepared == 1 : l.prepared == 0);
        execute(&l, c, out);
        close_to(c, prepack ? "prepacked, released" : "unprepacked", out, c->ref, 2e-4);
        grew[prepack] = rss_file_kb() - before;
        unload(&l);
    }
    printf("big: resident mapped-file pages grew %ld KiB unprepacked, %ld KiB prepacked "
           "(weight %ld KiB)\n",
           grew[0], grew[1], weight_kb);
    CHECK_MSG(grew[0] > weight_kb / 4, "unprepacked: the weight's pages did not show (+%ld KiB)",
              grew[0]);
    CHECK_MSG(grew[1] < weight_kb / 4,
              "prepacked: the weight's mapped pages stayed resident (+%ld KiB of %ld KiB)",
              grew[1], weight_kb);
    free(out);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_prepack PROGRAM_DIR\n");
        return 2;
    }
    CHECK_OK(etch_kernels_register_optimized());
    for (int t = 2; t <= 3; t++)
        CHECK_OK(etch_threadpool_create(t, &pools[t]));
    scratch = aligned_alloc(64, AMPLE);

    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    for (int i = 0; i < n_isas; i++) {
        CHECK_OK(etch_isa_set(isas[i]));
        const int before = gemm_cases;
        gemm_tests();
        printf("isa %s: %d GEMM cases\n", etch_isa_name(isas[i]), gemm_cases - before);
    }
    CHECK_OK(etch_isa_set(ETCH_ISA_SCALAR));
    const etch_sgemm_isa *sc = etch_sgemm_isa_for(ETCH_ISA_SCALAR);
    emu = (etch_sgemm_isa){"scalar 5x24", 5, 24, 40, 96, 264, ukr_5x24, sc->gemv_n, sc->gemv_t,
                           NULL, 1, NULL, sc->gemv_p};
    if (kt_isa_wanted(ETCH_ISA_SCALAR)) { /* another tile shape, scalar microkernel */
        isa_override = &emu;
        const int before = gemm_cases;
        gemm_tests();
        printf("%s: %d GEMM cases\n", emu.name, gemm_cases - before);
        isa_override = NULL;
    }
    CHECK_OK(etch_isa_set(etch_isa_best()));

    char path[1024];
    snprintf(path, sizeof path, "%s/cases.txt", argv[1]);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    int ncases = 0;
    pcase c;
    while (f && fscanf(f, "%63s %d", c.name, &c.rank) == 2) {
        CHECK(c.rank >= 1 && c.rank <= 4);
        int64_t numel = 1;
        for (int i = 0; i < c.rank && i < 4; i++) {
            long long s = 0;
            CHECK(fscanf(f, "%lld", &s) == 1);
            c.sizes[i] = s;
            numel *= s;
        }
        long long on = 0;
        CHECK(fscanf(f, "%lld", &on) == 1);
        c.out_numel = on;
        c.in = read_bin(argv[1], c.name, ".in.bin", numel);
        c.ref = read_bin(argv[1], c.name, ".out.bin", c.out_numel);
        if (c.in && c.ref)
            program_case(argv[1], &c);
        if (c.in && c.ref && strcmp(c.name, "big") == 0)
            release_case(argv[1], &c);
        free(c.in);
        free(c.ref);
        ncases++;
    }
    if (f)
        fclose(f);
    CHECK(ncases >= 7);
    free(scratch);
    for (int t = 2; t <= 3; t++)
        etch_threadpool_destroy(pools[t]);
    return etch_test_finish();
}
