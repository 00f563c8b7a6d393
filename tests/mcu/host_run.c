/* The host side of the firmware tests: runs firmware/common/fw_run.c — the harness the
 * firmware images run — over a program and input read from files, with the portable kernels,
 * and prints the same lines. tests/mcu/run_mcu.py compares its "out" lines with a board's.
 * Usage: mcu_host_run PROGRAM.pte INPUT.bin [METHOD] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/kernels.h"
#include "fw_run.h"

static void emit(const char *line) { puts(line); }

static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        size_t cap = ((size_t)n + 15) / 16 * 16 + 16;
        buf = aligned_alloc(16, cap);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    if (buf)
        *size = (size_t)n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: mcu_host_run PROGRAM.pte INPUT.bin [METHOD]\n");
        return 2;
    }
    const char *method = argc > 3 ? argv[3] : "forward";
    size_t pte_size = 0, in_size = 0;
    uint8_t *pte = read_file(argv[1], &pte_size), *in = read_file(argv[2], &in_size);
    int rc = 1;
    uint8_t *pool = NULL, *arenas = NULL, *input_ram = NULL;
    if (!pte || !in) {
        fprintf(stderr, "error: cannot read %s\n", !pte ? argv[1] : argv[2]);
        goto done;
    }
    /* memory sized from the method's metadata, as a firmware sizes its static buffers from
     * the `etch embed` header */
    etch_program *prog;
    etch_method_meta meta;
    etch_status st = etch_kernels_register_portable();
    if (st || (st = etch_program_open_buffer(pte, pte_size, NULL, &prog))) {
        fprintf(stderr, "error: %s: %s\n", etch_status_str(st), etch_last_error());
        goto done;
    }
    if ((st = etch_program_method_meta(prog, method, &meta))) {
        fprintf(stderr, "error: %s: %s\n", etch_status_str(st), etch_last_error());
        etch_program_close(prog);
        goto done;
    }
    size_t pool_size = etch_method_meta_pool_size(&meta), arena_total = 0;
    for (size_t j = 0; j < etch_method_meta_num_arenas(&meta); j++)
        arena_total += (etch_method_meta_arena_size(&meta, j) + 15) / 16 * 16;
    etch_program_close(prog);
    pool = aligned_alloc(16, (pool_size + 15) / 16 * 16 + 16);
    arenas = aligned_alloc(16, arena_total + 16);
    input_ram = aligned_alloc(16, (in_size + 15) / 16 * 16 + 16);
    if (!pool || !arenas || !input_ram) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    const fw_case c = {"host",   pte,       pte_size,    method, in,     in_size,
                       input_ram, pool,     pool_size,   arenas, arena_total,
                       etch_kernels_register_portable, 0};
    rc = fw_run(&c, emit);
done:
    free(pool);
    free(arenas);
    free(input_ram);
    free(pte);
    free(in);
    return rc;
}
