/*
 * Debug information (Chain.stacktrace) through the C API: etch_method_meta_instruction_debug
 * and _frame give, for every instruction of a program etch.export wrote, what the exporter
 * wrote (debug_mlp.expected, read back with etch.serialize by gen_debuginfo.py); a stack
 * trace of the wrong length is ignored; lying bytes inside it (a string running past the end,
 * a missing terminator, a frame list offset out of the buffer) fail the open with
 * ETCH_ERR_INVALID_PROGRAM naming the stack trace. (Truncations, bit flips and boundary
 * values at every offset of the same file: robustness.debug_mlp.pte.file.)
 *
 * Usage: test_debuginfo DIR (holding gen_debuginfo.py's files)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch_test.h"
#include "test_file.h"

static const char *base(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : p;
}

/* Fields of one expected line, tab separated, in place. */
static int split(char *line, char **f, int max) {
    int n = 0;
    line[strcspn(line, "\n")] = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t)
            break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

static void check_program(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/debug_mlp.pte", dir);
    etch_program *prog;
    CHECK_OK(etch_program_open_file(path, NULL, &prog));
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(prog, "forward", &meta));
    CHECK(etch_method_meta_num_chains(&meta) == 1);
    size_t n = etch_method_meta_chain_length(&meta, 0);
    snprintf(path, sizeof path, "%s/debug_mlp.expected", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[2048];
    size_t lines = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *fld[8] = {0};
        if (split(line, fld, 8) != 8) {
            CHECK_MSG(0, "malformed expected line %zu", lines);
            break;
        }
        size_t pc = (size_t)atoi(fld[0]);
        etch_instruction_debug d;
        CHECK_OK(etch_method_meta_instruction_debug(&meta, 0, pc, &d));
        CHECK_MSG(d.node && strcmp(d.node, fld[1]) == 0, "pc %zu node %s, want %s", pc,
                  d.node ? d.node : "(null)", fld[1]);
        const char *mod = d.module_path && !d.module_path[0] ? "<root>" : d.module_path;
        CHECK_MSG(mod && strcmp(mod, fld[2]) == 0, "pc %zu module %s, want %s", pc,
                  mod ? mod : "(null)", fld[2]);
        CHECK(d.num_frames == (size_t)atoi(fld[3]));
        CHECK(d.filename && strcmp(base(d.filename), fld[4]) == 0);
        CHECK(d.lineno == atoi(fld[5]));
        CHECK(d.function && strcmp(d.function, fld[6]) == 0);
        CHECK(d.source && strcmp(d.source, fld[7]) == 0);
        CHECK(strncmp(d.op_name, "aten::", 6) == 0);
        /* the innermost frame is the last of _frame's; the outermost is the model's forward */
        etch_source_frame fr;
        CHECK_OK(etch_method_meta_instruction_frame(&meta, 0, pc, d.num_frames - 1, &fr));
        CHECK(fr.filename == d.filename && fr.lineno == d.lineno && fr.source == d.source);
        CHECK_STATUS(etch_method_meta_instruction_frame(&meta, 0, pc, d.num_frames, &fr),
                     ETCH_ERR_INVALID_ARGUMENT);
        lines++;
    }
    if (f)
        fclose(f);
    CHECK_MSG(lines == n && n > 0, "%zu expected lines for %zu instructions", lines, n);
    etch_instruction_debug d;
    CHECK_STATUS(etch_method_meta_instruction_debug(&meta, 0, n, &d), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_method_meta_instruction_debug(&meta, 1, 0, &d), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_method_meta_instruction_debug(NULL, 0, 0, &d), ETCH_ERR_INVALID_ARGUMENT);
    /* a loaded method answers the same */
    size_t na = etch_method_meta_num_arenas(&meta), pool_size = etch_method_meta_pool_size(&meta);
    void *pool = aligned_alloc(16, (pool_size + 15) & ~(size_t)15);
    void *arenas[4] = {0};
    size_t sizes[4] = {0};
    CHECK(na <= 4);
    for (size_t j = 0; j < na && j < 4; j++) {
        sizes[j] = etch_method_meta_arena_size(&meta, j);
        arenas[j] = aligned_alloc(16, (sizes[j] + 16) & ~(size_t)15);
    }
    etch_method_memory mem = {pool, pool_size, arenas, sizes, na < 4 ? na : 4, NULL, 0};
    etch_method *m = NULL;
    CHECK_OK(etch_method_load(prog, "forward", &mem, NULL, &m));
    etch_instruction_debug a, b;
    CHECK_OK(etch_method_instruction_debug(m, 0, 2, &a));
    CHECK_OK(etch_method_meta_instruction_debug(&meta, 0, 2, &b));
    CHECK(a.node && b.node && strcmp(a.node, b.node) == 0 && a.lineno == b.lineno);
    CHECK_STATUS(etch_method_instruction_debug(NULL, 0, 0, &a), ETCH_ERR_INVALID_ARGUMENT);
    etch_method_free(m);
    for (size_t j = 0; j < 4; j++)
        free(arenas[j]);
    free(pool);
    etch_program_close(prog);
}

static void check_short(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/debug_mlp_short.pte", dir);
    etch_program *prog;
    CHECK_OK(etch_program_open_file(path, NULL, &prog)); /* ExecuTorch would run it too */
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(prog, "forward", &meta));
    size_t n = etch_method_meta_chain_length(&meta, 0);
    CHECK(n > 1);
    for (size_t pc = 0; pc < n; pc++) {
        etch_instruction_debug d;
        CHECK_OK(etch_method_meta_instruction_debug(&meta, 0, pc, &d));
        CHECK(!d.node && !d.module_path && !d.filename && d.num_frames == 0 && d.op_name[0]);
    }
    etch_program_close(prog);
}

/* Open a mutated copy (16-aligned): must fail as a program with a message naming the
 * stack trace. */
static void check_refused(const unsigned char *img, size_t size, const char *what) {
    void *buf = aligned_alloc(16, (size + 15) & ~(size_t)15);
    memcpy(buf, img, size);
    etch_program *prog = NULL;
    etch_status st = etch_program_open_buffer(buf, size, NULL, &prog);
    CHECK_MSG(st == ETCH_ERR_INVALID_PROGRAM, "%s: got %s", what, etch_status_str(st));
    CHECK_MSG(strstr(etch_last_error(), "stacktrace") != NULL, "%s: message '%s'", what,
              etch_last_error());
    etch_program_close(prog);
    free(buf);
}

static void check_lies(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/debug_mlp.pte", dir);
    size_t size;
    unsigned char *img = etch_test_read_file(path, 0, &size);
    CHECK(img != NULL);
    if (!img)
        return;
    /* the first "<etch>" string: u32 length 6, the bytes, NUL */
    unsigned char *s = NULL;
    for (size_t i = 4; i + 7 <= size && !s; i++)
        if (memcmp(img + i, "<etch>", 7) == 0 && img[i - 4] == 6 && !img[i - 3] && !img[i - 2] &&
            !img[i - 1])
            s = img + i;
    CHECK(s != NULL);
    if (s) {
        unsigned char *copy = malloc(size);
        memcpy(copy, img, size);
        size_t at = (size_t)(s - img);
        copy[at - 4] = 0xff, copy[at - 3] = 0xff, copy[at - 2] = 0xff, copy[at - 1] = 0x7f;
        check_refused(copy, size, "string length past the end");
        memcpy(copy, img, size);
        copy[at + 6] = 'x'; /* no terminator */
        check_refused(copy, size, "string without terminator");
        free(copy);
    }
    free(img);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_debuginfo DIR\n");
        return 2;
    }
    CHECK_OK(etch_kernels_register_portable());
    check_program(argv[1]);
    check_short(argv[1]);
    check_lies(argv[1]);
    return etch_test_finish();
}
