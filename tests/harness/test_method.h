/* Opening a program and loading its "forward" method on memory the test allocates (header
 * only): planned arenas, the runtime pool and kernel scratch, each 64-byte aligned. */
#ifndef ETCH_TEST_METHOD_H
#define ETCH_TEST_METHOD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"

#define ETCH_TEST_MAX_ARENAS 8

typedef struct etch_test_method {
    etch_program *prog;
    etch_method *m;
    void *pool, *temp;
    void *arenas[ETCH_TEST_MAX_ARENAS];
    size_t sizes[ETCH_TEST_MAX_ARENAS];
    size_t narenas;
} etch_test_method;

static inline void *etch_test_aligned(size_t n) {
    return aligned_alloc(64, (n + 64) / 64 * 64); /* a multiple of the alignment, never 0 */
}

/* Open path (popts may be NULL) and load "forward" with mopts (may be NULL) and temp_size
 * bytes of kernel scratch. 0, or -1 with the error printed; either way release with
 * etch_test_method_unload. */
static inline int etch_test_method_load(etch_test_method *L, const char *path,
                                        const etch_program_options *popts,
                                        const etch_method_options *mopts, size_t temp_size) {
    memset(L, 0, sizeof *L);
    etch_method_meta meta;
    if (etch_program_open_file(path, popts, &L->prog) != ETCH_OK ||
        etch_program_method_meta(L->prog, "forward", &meta) != ETCH_OK) {
        fprintf(stderr, "%s: %s\n", path, etch_last_error());
        return -1;
    }
    size_t narenas = etch_method_meta_num_arenas(&meta);
    if (narenas > ETCH_TEST_MAX_ARENAS) {
        fprintf(stderr, "%s: %zu arenas, the test handles %d\n", path, narenas,
                ETCH_TEST_MAX_ARENAS);
        return -1;
    }
    L->narenas = narenas;
    for (size_t j = 0; j < narenas; j++) {
        L->sizes[j] = etch_method_meta_arena_size(&meta, j);
        L->arenas[j] = etch_test_aligned(L->sizes[j]);
    }
    size_t pool_size = etch_method_meta_pool_size(&meta);
    L->pool = etch_test_aligned(pool_size);
    L->temp = etch_test_aligned(temp_size);
    etch_method_memory mem = {L->pool, pool_size, L->arenas, L->sizes, L->narenas,
                              L->temp, temp_size};
    if (etch_method_load(L->prog, "forward", &mem, mopts, &L->m) != ETCH_OK) {
        fprintf(stderr, "%s: %s\n", path, etch_last_error());
        return -1;
    }
    return 0;
}

static inline void etch_test_method_unload(etch_test_method *L) {
    etch_method_free(L->m);
    etch_program_close(L->prog);
    for (size_t j = 0; j < L->narenas; j++)
        free(L->arenas[j]);
    free(L->pool);
    free(L->temp);
    memset(L, 0, sizeof *L);
}

#endif
