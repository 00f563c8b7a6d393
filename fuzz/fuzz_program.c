/*
 * libFuzzer target: untrusted bytes through the whole application path, exactly as the
 * robustness corpus runs them (tests/robustness/rob_case.c): etch_program_open_buffer (with
 * full verification) -> every method loaded with memory sized from its metadata -> inputs set
 * to ones -> two executes -> every output byte read; for a .bpte also the bundled-program API.
 * The built-in backends are registered, so XNNPACK payloads are parsed, verified and run.
 *
 * A sanitizer report, a leak, or a "violation" (a status that is not a known error, a failure
 * without a message, an out-parameter written on failure, a malformed output) is a crash.
 *
 * Environment: ETCH_FUZZ_PTD=path.ptd is opened once and passed as external data to every
 * input (so programs whose weights live in a .ptd load too).
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/backends.h"
#include "etch/kernels.h"
#include "rob_case.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *g_ptd;
static size_t g_ptd_size;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (etch_kernels_register_portable() != ETCH_OK || etch_backends_register_builtin() != ETCH_OK)
        abort();
    const char *ptd = getenv("ETCH_FUZZ_PTD");
    if (ptd && *ptd) {
        FILE *f = fopen(ptd, "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0)
            n = ftell(f);
        void *p = NULL;
        if (n <= 0 || fseek(f, 0, SEEK_SET) != 0 || posix_memalign(&p, 16, (size_t)n) != 0 ||
            fread(p, 1, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "fuzz_program: cannot read ETCH_FUZZ_PTD=%s\n", ptd);
            abort();
        }
        fclose(f);
        g_ptd = p;
        g_ptd_size = (size_t)n;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size, 16-byte aligned copy: a read one byte past the input is a report, and
     * the buffer is used in place (open_buffer copies only unaligned memory) */
    void *copy = NULL;
    if (posix_memalign(&copy, 16, size ? size : 1) != 0)
        return 0;
    if (size)
        memcpy(copy, data, size);
    rob_options o = rob_default_options();
    o.max_memory = (size_t)32 << 20;
    char why[512];
    int violations = rob_run(copy, size, g_ptd, g_ptd_size, &o, NULL, why, sizeof why);
    free(copy);
    if (violations) {
        fprintf(stderr, "fuzz_program: %d violation(s), first: %s\n", violations, why);
        abort();
    }
    return 0;
}
