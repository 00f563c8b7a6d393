/*
 * Soak: many executes of a zoo model (LeNet) and many generated tokens (the default language
 * model), with the resident set size flat: after a warm-up, RSS may not grow by more than
 * 512 KiB however long it runs (a leak of even a few bytes per execute or token would show
 * over the long run). Outputs are checked too: every LeNet execute equals the first, and
 * each generation (greedy, reset between) equals the first.
 *
 *   test_soak LENET.pte LM.pte TOKENIZER [EXECUTES TOKENS]
 *
 * The suite runs the CI-sized version (3000 and 3000); tests/soak/REPORT.md holds a run of
 * 100000 and 100000 (regenerate: build/tests/soak/test_soak ... 100000 100000).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <etch/etch.h>
#include <etch/llm.h>
#include <etch/llm_runner.h>
#include <etch/module.h>

#include "etch_test.h"

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define FLAT_KB 512

static void soak_executes(const char *path, long n) {
    etch_module *mod = NULL;
    etch_method *m = NULL;
    CHECK_OK(etch_module_open(path, NULL, &mod));
    if (!mod)
        return;
    CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (!m)
        return;
    static float x[28 * 28];
    int64_t sz[4] = {1, 1, 28, 28};
    etch_tensor t;
    float first[10];
    long warm = n / 10 > 100 ? n / 10 : (n < 100 ? n : 100), rss0 = 0, bad = 0;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 28 * 28; k++)
            x[k] = (float)((k * 7 + 3) % 17) / 17.0f;
        CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, sz, x));
        etch_status st = etch_method_set_input_tensor(m, 0, &t);
        if (st == ETCH_OK)
            st = etch_method_execute(m);
        if (st != ETCH_OK) {
            CHECK_OK(st);
            break;
        }
        const float *y = (const float *)etch_method_output(m, 0)->u.tensor->data;
        if (i == 0)
            memcpy(first, y, sizeof first);
        else if (memcmp(first, y, sizeof first) != 0)
            bad++;
        if (i + 1 == warm)
            rss0 = rss_kb();
    }
    long rss1 = rss_kb();
    CHECK_MSG(bad == 0, "%ld executes differ from the first", bad);
    CHECK_MSG(rss1 - rss0 <= FLAT_KB, "RSS grew %ld KiB over %ld executes", rss1 - rss0,
              n - warm);
    printf("executes: %ld of LeNet in %.1f s; RSS %ld KiB after %ld, %ld KiB at the end "
           "(%+ld KiB)\n", n, now_s() - t0, rss0, warm, rss1, rss1 - rss0);
    etch_module_close(mod);
}

typedef struct gen {
    int32_t ids[64];
    long n, total;
} gen;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    gen *g = (gen *)ud;
    (void)text;
    (void)len;
    if (id >= 0) {
        if (g->n < 64)
            g->ids[g->n] = id;
        g->n++;
        g->total++;
    }
    return 0;
}

static void soak_tokens(const char *model, const char *tokpath, long n) {
    etch_tokenizer *tok = NULL;
    CHECK_OK(etch_tokenizer_open_file(tokpath, NULL, &tok));
    if (!tok)
        return;
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0.0f;
    etch_llm_runner *r = NULL;
    CHECK_OK(etch_llm_runner_open(model, tok, &o, &r));
    if (!r)
        return;
    const long per = 200; /* tokens per generation (within the context), reset between */
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = (int32_t)per;
    gp.ignore_eos = true;
    gp.on_token = on_token;
    gen g = {{0}, 0, 0}, first = {{0}, 0, 0};
    gp.user_data = &g;
    long warm_tokens = n / 10 > per ? n / 10 : per, rss0 = 0, bad = 0, rounds = 0;
    double t0 = now_s();
    while (g.total < n) {
        g.n = 0;
        etch_llm_runner_reset(r);
        etch_llm_result res;
        etch_status st = etch_llm_runner_generate(r, "Once upon a time", 16, &gp, &res);
        if (st != ETCH_OK) {
            CHECK_OK(st);
            break;
        }
        if (rounds++ == 0)
            first = g;
        else if (g.n != first.n || memcmp(g.ids, first.ids, sizeof g.ids) != 0)
            bad++;
        if (!rss0 && g.total >= warm_tokens)
            rss0 = rss_kb();
    }
    long rss1 = rss_kb();
    CHECK_MSG(bad == 0, "%ld generations differ from the first", bad);
    CHECK_MSG(rss1 - rss0 <= FLAT_KB, "RSS grew %ld KiB over %ld tokens", rss1 - rss0, g.total);
    printf("tokens: %ld generated (%ld generations of %ld) in %.1f s; RSS %ld KiB after %ld, "
           "%ld KiB at the end (%+ld KiB)\n", g.total, rounds, per, now_s() - t0, rss0,
           warm_tokens, rss1, rss1 - rss0);
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: %s LENET.pte LM.pte TOKENIZER [EXECUTES TOKENS]\n", argv[0]);
        return 2;
    }
    long ne = argc == 6 ? atol(argv[4]) : 3000, nt = argc == 6 ? atol(argv[5]) : 3000;
    if (ne < 1 || nt < 1) {
        fprintf(stderr, "EXECUTES and TOKENS must be positive\n");
        return 2;
    }
    soak_executes(argv[1], ne);
    soak_tokens(argv[2], argv[3], nt);
    return etch_test_finish();
}
