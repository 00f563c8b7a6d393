/*
 * Two loads of one program in one process, executed in alternation (A B, B A, ...), so that
 * both see the same machine noise; prints each side's minimum and median and the median (with
 * quartiles) of the per-pair time ratio A / B. Two comparisons:
 *
 *   --compare chain     (default) A: the optimized kernels as registered, so the runtime runs
 *                       the convolution blocks it can as chained calls; B: the same with the
 *                       convolution's chain function unregistered. Both at --threads N.
 *   --compare threads   A: a pool of --threads N (default 1); B: a pool of --threads-b M
 *                       (default 2). The ratio is then B's speedup over A.
 *   --compare isa       A: the optimized kernels' instruction set --isa X (default: the best
 *                       this CPU supports); B: --isa-b Y (default avx2). Each side is loaded
 *                       (weights packed, layouts chosen) and executed under its own set: the
 *                       set is switched before every execute. Both at --threads N.
 *
 * usage: bench_paired FILE.pte [--compare chain|threads|isa] [--threads N] [--threads-b M]
 *                     [--isa X] [--isa-b Y] [--pairs K] [--back-to-back] [--by-instruction]
 *                     (defaults: chain, 1, 2, best, avx2, 300)
 *
 * --by-instruction also times every instruction of the first chain (an observer, called after
 * each) and prints where the noise lands: the pairs are split by B's time into the fastest
 * quarter and the slowest, and for each instruction taking at least 1% of A's time, the mean
 * time of A and of B in each group. Work that loses CPU time (a vCPU stalled or slowed) slows
 * every instruction of the slow group; work bound by memory bandwidth slows only where it
 * streams.
 *
 * By default each timed execute follows the other load's: a pool has sat idle (its threads
 * asleep) through the other side's run, as between the frames of a periodic task.
 * --back-to-back runs each side once, untimed, right before its timed execute: the pool's
 * threads still spinning and the side's own data recently used, as in a stream of executes
 * (what `etch bench` and bench/cpu time).
 * Inputs: every float input filled with a fixed pattern. Both sides compute the same bits
 * (tests/chain and tests/threadpool check it).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *zalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 64) / 64 * 64);
    if (!p) {
        fprintf(stderr, "error: out of memory\n");
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

typedef struct loaded {
    etch_method *m;
    void *pool, *temp;
    void *arenas[8];
    size_t sizes[8];
    size_t narenas;
} loaded;

static int load(etch_program *prog, const etch_threadpool_iface *tp, loaded *L) {
    memset(L, 0, sizeof *L);
    etch_method_meta meta;
    if (etch_program_method_meta(prog, "forward", &meta) != ETCH_OK)
        return -1;
    L->narenas = etch_method_meta_num_arenas(&meta);
    if (L->narenas > 8) {
        fprintf(stderr, "error: %zu arenas (at most 8)\n", L->narenas);
        return -1;
    }
    for (size_t j = 0; j < L->narenas; j++) {
        L->sizes[j] = etch_method_meta_arena_size(&meta, j);
        L->arenas[j] = zalloc(L->sizes[j]);
    }
    const size_t pool_size = etch_method_meta_pool_size(&meta), temp_size = (size_t)16 << 20;
    L->pool = zalloc(pool_size);
    L->temp = zalloc(temp_size);
    etch_method_memory mem = {L->pool, pool_size, L->arenas, L->sizes, L->narenas,
                              L->temp, temp_size};
    etch_method_options o;
    memset(&o, 0, sizeof o);
    o.threadpool = tp;
    if (etch_method_load(prog, "forward", &mem, &o, &L->m) != ETCH_OK)
        return -1;
    for (size_t i = 0; i < etch_method_num_inputs(L->m); i++) {
        etch_value *v = etch_method_input(L->m, i);
        if (!v || v->tag != ETCH_VALUE_TENSOR || v->u.tensor->dtype != ETCH_DTYPE_FLOAT ||
            !v->u.tensor->data) {
            fprintf(stderr, "error: input %zu is not a planned float tensor\n", i);
            return -1;
        }
        float *d = (float *)v->u.tensor->data;
        for (int64_t k = 0; k < etch_tensor_numel(v->u.tensor); k++)
            d[k] = (float)(k % 17) * 0.1f - 0.8f;
        if (etch_method_set_input(L->m, i, v) != ETCH_OK)
            return -1;
    }
    return 0;
}

static void unload(loaded *L) {
    etch_method_free(L->m);
    for (size_t j = 0; j < L->narenas; j++)
        free(L->arenas[j]);
    free(L->pool);
    free(L->temp);
}

static int usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s FILE.pte [--compare chain|threads|isa] [--threads N] [--threads-b M] "
            "[--isa X] [--isa-b Y] [--pairs K] [--back-to-back] [--by-instruction]\n",
            argv0);
    return 2;
}

/* Per-instruction times of one load's timed executes (--by-instruction). */
typedef struct itimes {
    double *t;   /* [pairs][n] ms */
    size_t n;    /* instructions of chain 0 */
    long run;    /* the timed execute being recorded; -1: none */
    double last; /* when the previous instruction ended */
} itimes;

static void observe(void *user, size_t chain, size_t pc, const char *op) {
    (void)op;
    itimes *it = (itimes *)user;
    const double t = now_ms();
    if (it->run >= 0 && chain == 0 && pc < it->n)
        it->t[(size_t)it->run * it->n + pc] += t - it->last;
    it->last = t;
}

/* The pairs split by B's total time (bt, unsorted): mean time per instruction of A and B in
 * the fastest quarter and in the slowest. */
static void print_by_instruction(const etch_method *m, const itimes *A, const itimes *B,
                                 const double *bt, long pairs, const char *la,
                                 const char *lb) {
    double *sorted = malloc((size_t)pairs * sizeof *sorted);
    if (!sorted)
        return;
    memcpy(sorted, bt, (size_t)pairs * sizeof *sorted);
    qsort(sorted, (size_t)pairs, sizeof *sorted, cmp);
    const double q1 = sorted[pairs / 4], q3 = sorted[3 * pairs / 4];
    free(sorted);
    double a_all = 0;
    for (long r = 0; r < pairs; r++)
        for (size_t pc = 0; pc < A->n; pc++)
            a_all += A->t[(size_t)r * A->n + pc];
    a_all /= (double)pairs;
    printf("  by instruction (mean ms), pairs split by %s's time: fastest quarter (<= %.3f ms) "
           "| slowest quarter (>= %.3f ms)\n",
           lb, q1, q3);
    printf("  %4s %-26s %8s %8s %6s | %8s %8s %6s | %s slow/fast\n", "pc", "op", la, lb,
           "ratio", la, lb, "ratio", lb);
    double sum[4] = {0, 0, 0, 0};
    for (size_t pc = 0; pc < A->n && pc < B->n; pc++) {
        double g[4] = {0, 0, 0, 0}; /* A fast, B fast, A slow, B slow */
        long nf = 0, ns = 0;
        for (long r = 0; r < pairs; r++) {
            const double a = A->t[(size_t)r * A->n + pc], b = B->t[(size_t)r * B->n + pc];
            if (bt[r] <= q1) {
                g[0] += a;
                g[1] += b;
                nf++;
            }
            if (bt[r] >= q3) {
                g[2] += a;
                g[3] += b;
                ns++;
            }
        }
        for (int k = 0; k < 4; k++) {
            g[k] /= (double)(k < 2 ? nf : ns);
            sum[k] += g[k];
        }
        if ((g[0] + g[2]) / 2 < 0.01 * a_all)
            continue;
        etch_instruction_info info;
        const char *op = etch_method_instruction_info(m, 0, pc, &info) == ETCH_OK && info.op_name
                             ? info.op_name
                             : "-";
        char name[40];
        snprintf(name, sizeof name, "%s%s", op, info.chain > 1 ? " (chain)" : "");
        printf("  %4zu %-26s %8.3f %8.3f %6.2f | %8.3f %8.3f %6.2f | %.2f\n", pc, name, g[0],
               g[1], g[0] / g[1], g[2], g[3], g[2] / g[3], g[3] / g[1]);
    }
    printf("  %4s %-26s %8.3f %8.3f %6.2f | %8.3f %8.3f %6.2f | %.2f\n", "", "all instructions",
           sum[0], sum[1], sum[0] / sum[1], sum[2], sum[3], sum[2] / sum[3], sum[3] / sum[1]);
}

/* Chained runs a method formed (instructions whose info says chain > 1). */
static int chained_runs(const etch_method *m) {
    int runs = 0;
    for (size_t ch = 0; ch < etch_method_num_chains(m); ch++)
        for (size_t pc = 0; pc < etch_method_chain_length(m, ch); pc++) {
            etch_instruction_info info;
            if (etch_method_instruction_info(m, ch, pc, &info) == ETCH_OK && info.chain > 1)
                runs++;
        }
    return runs;
}

/* One side of the comparison: its method and, under --compare isa, its instruction set (set
 * before each of its executes, while the pool's workers wait). */
typedef struct side {
    etch_method *m;
    bool own_isa;
    etch_isa isa;
} side;

static void set_isa(const side *s) {
    if (s->own_isa)
        etch_isa_set(s->isa); /* checked supported when parsed */
}

static etch_status run(const side *s) {
    set_isa(s);
    return etch_method_execute(s->m);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long threads = 1, threads_b = 2, pairs = 300;
    bool by_threads = false, by_isa = false, back_to_back = false, by_instr = false;
    etch_isa isa_a = etch_isa_best(), isa_b = ETCH_ISA_AVX2;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = strtol(argv[++i], &end, 10);
            if (*end || threads < 1 || threads > 64)
                return fprintf(stderr, "error: --threads takes 1..64\n"), 2;
        } else if (strcmp(argv[i], "--threads-b") == 0 && i + 1 < argc) {
            threads_b = strtol(argv[++i], &end, 10);
            if (*end || threads_b < 1 || threads_b > 64)
                return fprintf(stderr, "error: --threads-b takes 1..64\n"), 2;
        } else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc) {
            pairs = strtol(argv[++i], &end, 10);
            if (*end || pairs < 4 || pairs > 100000)
                return fprintf(stderr, "error: --pairs takes 4..100000\n"), 2;
        } else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) {
            const char *c = argv[++i];
            if (strcmp(c, "chain") != 0 && strcmp(c, "threads") != 0 && strcmp(c, "isa") != 0)
                return fprintf(stderr,
                               "error: --compare takes chain, threads or isa, not '%s'\n", c),
                       2;
            by_threads = strcmp(c, "threads") == 0;
            by_isa = strcmp(c, "isa") == 0;
        } else if ((strcmp(argv[i], "--isa") == 0 || strcmp(argv[i], "--isa-b") == 0) &&
                   i + 1 < argc) {
            etch_isa *dst = strcmp(argv[i], "--isa-b") == 0 ? &isa_b : &isa_a;
            if (etch_isa_parse(argv[i + 1], dst) != ETCH_OK || !etch_isa_supported(*dst))
                return fprintf(stderr,
                               "error: %s '%s': not an instruction set this build and CPU "
                               "support (scalar, avx2, avx512, neon; best here: %s)\n",
                               argv[i], argv[i + 1], etch_isa_name(etch_isa_best())),
                       2;
            i++;
        } else if (strcmp(argv[i], "--back-to-back") == 0) {
            back_to_back = true;
        } else if (strcmp(argv[i], "--by-instruction") == 0) {
            by_instr = true;
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            return usage(argv[0]);
        }
    }
    if (!path)
        return usage(argv[0]);
    etch_program *prog = NULL;
    etch_threadpool *pool = NULL, *pool_b = NULL;
    loaded a, b;
    if (etch_kernels_register_optimized() != ETCH_OK ||
        etch_program_open_file(path, NULL, &prog) != ETCH_OK ||
        (threads > 1 && etch_threadpool_create((int)threads, &pool) != ETCH_OK) ||
        (by_threads && threads_b > 1 && etch_threadpool_create((int)threads_b, &pool_b) != ETCH_OK))
        goto fail;
    const etch_threadpool_iface *tp = pool ? etch_threadpool_get_iface(pool) : NULL;
    if ((by_isa && etch_isa_set(isa_a) != ETCH_OK) || load(prog, tp, &a) != 0)
        goto fail;
    const int runs = chained_runs(a.m);
    if (by_threads) {
        if (load(prog, pool_b ? etch_threadpool_get_iface(pool_b) : NULL, &b) != 0)
            goto fail;
    } else if (by_isa) {
        if (etch_isa_set(isa_b) != ETCH_OK || load(prog, tp, &b) != 0)
            goto fail;
    } else {
        const etch_kernel *conv = etch_kernels_find("aten::convolution.out", 21);
        if (!conv || etch_kernels_register_chain(conv->fn, NULL) != ETCH_OK ||
            load(prog, tp, &b) != 0)
            goto fail;
    }
    double *ta = malloc((size_t)pairs * sizeof *ta), *tb = malloc((size_t)pairs * sizeof *tb);
    double *r = malloc((size_t)pairs * sizeof *r), *bt = malloc((size_t)pairs * sizeof *bt);
    itimes ia = {NULL, 0, -1, 0}, ib = {NULL, 0, -1, 0};
    if (by_instr) {
        ia.n = etch_method_num_chains(a.m) ? etch_method_chain_length(a.m, 0) : 0;
        ib.n = etch_method_num_chains(b.m) ? etch_method_chain_length(b.m, 0) : 0;
        ia.t = calloc((size_t)pairs * ia.n + 1, sizeof(double));
        ib.t = calloc((size_t)pairs * ib.n + 1, sizeof(double));
    }
    if (!ta || !tb || !r || !bt || (by_instr && (!ia.t || !ib.t)))
        return fprintf(stderr, "error: out of memory\n"), 1;
    side sa = {a.m, by_isa, isa_a}, sb = {b.m, by_isa, isa_b};
    for (int i = 0; i < 10; i++)
        if (run(&sa) != ETCH_OK || run(&sb) != ETCH_OK)
            goto fail;
    if (by_instr) {
        etch_method_set_observer(a.m, observe, &ia);
        etch_method_set_observer(b.m, observe, &ib);
    }
    for (long i = 0; i < pairs; i++) {
        const side *first = i & 1 ? &sb : &sa, *second = i & 1 ? &sa : &sb;
        itimes *fi = i & 1 ? &ib : &ia, *si = i & 1 ? &ia : &ib;
        if (back_to_back)
            run(first);
        else
            set_isa(first);
        fi->run = i;
        const double t0 = now_ms();
        fi->last = t0;
        etch_method_execute(first->m);
        const double t1 = now_ms();
        fi->run = -1;
        if (back_to_back)
            run(second);
        else
            set_isa(second);
        si->run = i;
        const double t1b = now_ms();
        si->last = t1b;
        etch_method_execute(second->m);
        const double t2 = now_ms();
        si->run = -1;
        ta[i] = i & 1 ? t2 - t1b : t1 - t0;
        tb[i] = i & 1 ? t1 - t0 : t2 - t1b;
        r[i] = ta[i] / tb[i];
        bt[i] = tb[i];
    }
    qsort(ta, (size_t)pairs, sizeof *ta, cmp);
    qsort(tb, (size_t)pairs, sizeof *tb, cmp);
    qsort(r, (size_t)pairs, sizeof *r, cmp);
    if (by_threads)
        printf("%s  threads %ld vs %ld%s  runs chained %d  pairs %ld  %ld threads min %.3f med "
               "%.3f ms  %ld threads min %.3f med %.3f ms  speedup (ratio) med %.3f (q1 %.3f, "
               "q3 %.3f)\n",
               path, threads, threads_b, back_to_back ? " back-to-back" : "", runs, pairs,
               threads, ta[0], ta[pairs / 2], threads_b, tb[0], tb[pairs / 2], r[pairs / 2],
               r[pairs / 4], r[3 * pairs / 4]);
    else if (by_isa)
        printf("%s  threads %ld%s  isa %s vs %s  pairs %ld  %s min %.3f med %.3f ms  %s min "
               "%.3f med %.3f ms  ratio med %.3f (q1 %.3f, q3 %.3f)\n",
               path, threads, back_to_back ? " back-to-back" : "", etch_isa_name(isa_a),
               etch_isa_name(isa_b), pairs, etch_isa_name(isa_a), ta[0], ta[pairs / 2],
               etch_isa_name(isa_b), tb[0], tb[pairs / 2], r[pairs / 2], r[pairs / 4],
               r[3 * pairs / 4]);
    else
        printf("%s  threads %ld%s  runs chained %d  pairs %ld  chained min %.3f med %.3f ms  "
               "unchained min %.3f med %.3f ms  ratio med %.3f (q1 %.3f, q3 %.3f)\n",
               path, threads, back_to_back ? " back-to-back" : "", runs, pairs, ta[0],
               ta[pairs / 2], tb[0], tb[pairs / 2], r[pairs / 2], r[pairs / 4],
               r[3 * pairs / 4]);
    if (by_instr) {
        char la[32], lb[32];
        if (by_threads) {
            snprintf(la, sizeof la, "%ldt", threads);
            snprintf(lb, sizeof lb, "%ldt", threads_b);
        } else if (by_isa) {
            snprintf(la, sizeof la, "%s", etch_isa_name(isa_a));
            snprintf(lb, sizeof lb, "%s", etch_isa_name(isa_b));
        } else {
            snprintf(la, sizeof la, "chained");
            snprintf(lb, sizeof lb, "unchained");
        }
        print_by_instruction(a.m, &ia, &ib, bt, pairs, la, lb);
    }
    unload(&a);
    unload(&b);
    etch_program_close(prog);
    etch_threadpool_destroy(pool);
    etch_threadpool_destroy(pool_b);
    free(ta);
    free(tb);
    free(r);
    free(bt);
    free(ia.t);
    free(ib.t);
    return 0;
fail:
    fprintf(stderr, "error: %s\n", etch_last_error());
    return 1;
}
