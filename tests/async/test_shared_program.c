/*
 * One program shared by several threads, each with its own method (its own pool, arenas and
 * temp memory): every thread loads "forward" of the default language model concurrently and
 * executes it many times on its own tokens; each output must equal the one computed alone
 * on the main thread, bit for bit. Run under ThreadSanitizer by `make tsan`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etch/etch.h>
#include <etch/kernels.h>

#include "etch_test.h"

#define THREADS 4
#define RUNS 12
#define TOKENS 8

typedef struct loaded {
    etch_method *m;
    void *pool, *temp;
    void *arenas[8];
    size_t sizes[8];
} loaded;

static etch_program *prog;
static float *ref[TOKENS];
static size_t vocab;

static bool load(loaded *l) {
    memset(l, 0, sizeof *l);
    etch_method_meta meta;
    if (etch_program_method_meta(prog, "forward", &meta) != ETCH_OK)
        return false;
    size_t need = etch_method_meta_pool_size(&meta), n = etch_method_meta_num_arenas(&meta);
    if (n > 8)
        return false;
    l->pool = aligned_alloc(64, (need + 63) / 64 * 64);
    for (size_t j = 0; j < n; j++) {
        l->sizes[j] = etch_method_meta_arena_size(&meta, j);
        l->arenas[j] = aligned_alloc(64, (l->sizes[j] + 64) / 64 * 64);
    }
    const size_t temp = 16u << 20;
    l->temp = aligned_alloc(64, temp);
    etch_method_memory mem = {l->pool, need, l->arenas, l->sizes, n, l->temp, temp};
    return etch_method_load(prog, "forward", &mem, NULL, &l->m) == ETCH_OK;
}

static void unload(loaded *l) {
    etch_method_free(l->m);
    free(l->pool);
    free(l->temp);
    for (size_t j = 0; j < 8; j++)
        free(l->arenas[j]);
}

/* forward(token at position 0): the logits row */
static const float *run(etch_method *m, int64_t token) {
    int64_t ts[2] = {1, 1}, ps[1] = {1}, pos = 0;
    etch_tensor t, p;
    if (etch_tensor_init(&t, ETCH_DTYPE_LONG, 2, ts, &token) != ETCH_OK ||
        etch_tensor_init(&p, ETCH_DTYPE_LONG, 1, ps, &pos) != ETCH_OK ||
        etch_method_set_input_tensor(m, 0, &t) != ETCH_OK ||
        etch_method_set_input_tensor(m, 1, &p) != ETCH_OK || etch_method_execute(m) != ETCH_OK)
        return NULL;
    const etch_value *v = etch_method_output(m, 0);
    return (const float *)v->u.tensor->data;
}

static void *worker(void *arg) {
    long id = (long)(intptr_t)arg, bad = 0;
    loaded l;
    if (!load(&l))
        return (void *)(intptr_t)-1;
    for (int r = 0; r < RUNS; r++) {
        int k = (int)((id * 3 + r) % TOKENS);
        const float *y = run(l.m, 7 + 31 * k);
        if (!y || memcmp(y, ref[k], vocab * sizeof(float)) != 0)
            bad++;
    }
    unload(&l);
    return (void *)(intptr_t)bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.pte\n", argv[0]);
        return 2;
    }
    CHECK_OK(etch_kernels_register_optimized()); /* the portable ones under them */
    CHECK_OK(etch_program_open_file(argv[1], NULL, &prog));
    if (!prog)
        return etch_test_finish();
    loaded l;
    CHECK(load(&l));
    for (int k = 0; k < TOKENS; k++) {
        const float *y = run(l.m, 7 + 31 * k);
        CHECK(y != NULL);
        if (!y)
            return etch_test_finish();
        vocab = (size_t)etch_tensor_numel(etch_method_output(l.m, 0)->u.tensor);
        ref[k] = (float *)malloc(vocab * sizeof(float));
        memcpy(ref[k], y, vocab * sizeof(float));
    }
    unload(&l);
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    long bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        CHECK_MSG((intptr_t)r == 0, "thread %d: %ld wrong or failed runs", i, (long)(intptr_t)r);
        bad += (intptr_t)r != 0;
    }
    printf("%d threads x %d executes of one shared program: %s\n", THREADS, RUNS,
           bad ? "MISMATCH" : "all equal to the single-thread outputs");
    for (int k = 0; k < TOKENS; k++)
        free(ref[k]);
    etch_program_close(prog);
    return etch_test_finish();
}
