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
 *
 * usage: bench_paired FILE.pte [--compare chain|threads] [--threads N] [--threads-b M]
 *                     [--pairs K] [--back-to-back]       (defaults: chain, 1, 2, 300)
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
            "usage: %s FILE.pte [--compare chain|threads] [--threads N] [--threads-b M] "
            "[--pairs K] [--back-to-back]\n",
            argv0);
    return 2;
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

int main(int argc, char **argv) {
    const char *path = NULL;
    long threads = 1, threads_b = 2, pairs = 300;
    bool by_threads = false, back_to_back = false;
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
            if (strcmp(c, "chain") != 0 && strcmp(c, "threads") != 0)
                return fprintf(stderr, "error: --compare takes chain or threads, not '%s'\n", c),
                       2;
            by_threads = strcmp(c, "threads") == 0;
        } else if (strcmp(argv[i], "--back-to-back") == 0) {
            back_to_back = true;
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
    if (load(prog, tp, &a) != 0)
        goto fail;
    const int runs = chained_runs(a.m);
    if (by_threads) {
        if (load(prog, pool_b ? etch_threadpool_get_iface(pool_b) : NULL, &b) != 0)
            goto fail;
    } else {
        const etch_kernel *conv = etch_kernels_find("aten::convolution.out", 21);
        if (!conv || etch_kernels_register_chain(conv->fn, NULL) != ETCH_OK ||
            load(prog, tp, &b) != 0)
            goto fail;
    }
    double *ta = malloc((size_t)pairs * sizeof *ta), *tb = malloc((size_t)pairs * sizeof *tb);
    double *r = malloc((size_t)pairs * sizeof *r);
    if (!ta || !tb || !r)
        return fprintf(stderr, "error: out of memory\n"), 1;
    for (int i = 0; i < 10; i++)
        if (etch_method_execute(a.m) != ETCH_OK || etch_method_execute(b.m) != ETCH_OK)
            goto fail;
    for (long i = 0; i < pairs; i++) {
        etch_method *first = i & 1 ? b.m : a.m, *second = i & 1 ? a.m : b.m;
        if (back_to_back)
            etch_method_execute(first);
        const double t0 = now_ms();
        etch_method_execute(first);
        const double t1 = now_ms();
        if (back_to_back)
            etch_method_execute(second);
        const double t1b = now_ms();
        etch_method_execute(second);
        const double t2 = now_ms();
        ta[i] = i & 1 ? t2 - t1b : t1 - t0;
        tb[i] = i & 1 ? t1 - t0 : t2 - t1b;
        r[i] = ta[i] / tb[i];
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
    else
        printf("%s  threads %ld%s  runs chained %d  pairs %ld  chained min %.3f med %.3f ms  "
               "unchained min %.3f med %.3f ms  ratio med %.3f (q1 %.3f, q3 %.3f)\n",
               path, threads, back_to_back ? " back-to-back" : "", runs, pairs, ta[0],
               ta[pairs / 2], tb[0], tb[pairs / 2], r[pairs / 2], r[pairs / 4],
               r[3 * pairs / 4]);
    unload(&a);
    unload(&b);
    etch_program_close(prog);
    etch_threadpool_destroy(pool);
    etch_threadpool_destroy(pool_b);
    free(ta);
    free(tb);
    free(r);
    return 0;
fail:
    fprintf(stderr, "error: %s\n", etch_last_error());
    return 1;
}
