/* etch embed FILE -o OUT.c — a program (or any file) as an aligned C array for a firmware's
 * flash, with a header of the sizes the firmware declares its static memory from. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/kernels.h"

void cmd_embed_usage(FILE *out) {
    fprintf(out,
            "usage: etch embed FILE -o OUT.c [--header OUT.h] [--name NAME] [--method NAME]\n"
            "                  [--align N] [--section NAME] [--raw]\n"
            "\n"
            "Write FILE's bytes as a C array for a firmware image: `const uint8_t\n"
            "etch_NAME_pte[]` aligned to N bytes (16 by default: the runtime borrows the\n"
            "program where it lies and refuses one that is not 16-byte aligned), and\n"
            "`etch_NAME_pte_size`. FILE is opened and fully verified as a program first.\n"
            "\n"
            "The header (--header) declares the array and gives, for the method (forward\n"
            "by default), what the firmware's static memory needs, as macros:\n"
            "  ETCH_NAME_PTE_SIZE, ETCH_NAME_PTE_ALIGN\n"
            "  ETCH_NAME_NUM_ARENAS, ETCH_NAME_ARENA_<j>_SIZE, ETCH_NAME_ARENA_SIZES {..}\n"
            "  ETCH_NAME_ARENA_TOTAL   (the arenas back to back, each rounded up to 16)\n"
            "  ETCH_NAME_POOL_SIZE     (method pool with the portable kernels, measured by\n"
            "                          this build: on a 32-bit target the method's\n"
            "                          structures are no larger, so it is an upper bound\n"
            "                          there; etch_method_load refuses a pool too small)\n"
            "  ETCH_NAME_NUM_INPUTS, ETCH_NAME_INPUT_BYTES, ETCH_NAME_NUM_OUTPUTS,\n"
            "  ETCH_NAME_OUTPUT_BYTES, ETCH_NAME_NUM_OPERATORS (each operator in a comment)\n"
            "NAME is upper-cased in macros; it must be a C identifier (default: FILE's base\n"
            "name with other characters made '_').\n"
            "\n"
            "options:\n"
            "  -o FILE         the C source to write\n"
            "  --header FILE   also write the header (the source includes it)\n"
            "  --name NAME     the array's name: etch_NAME_pte\n"
            "  --method NAME   the method the sizes are for (forward)\n"
            "  --align N       array alignment, a power of two >= 16 (16)\n"
            "  --section NAME  place the array in linker section NAME (GCC/Clang)\n"
            "  --raw           any file (an input, a table): no program checks, no sizes\n"
            "  -h, --help      show this help\n");
}

static int read_all(const char *path, unsigned char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot open '%s'\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        unsigned char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        fprintf(stderr, "error: cannot read '%s'\n", path);
        return -1;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* NAME from FILE's base name: [A-Za-z0-9_], not starting with a digit. */
static void default_name(const char *path, char *out, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = 0;
    for (; *b && *b != '.' && n + 1 < cap; b++)
        out[n++] = isalnum((unsigned char)*b) ? *b : '_';
    out[n] = 0;
    if (n == 0 || isdigit((unsigned char)out[0])) {
        memmove(out + 1, out, n + 1 < cap ? n + 1 : cap - 1);
        out[0] = '_';
        out[cap - 1] = 0;
    }
}

static bool valid_name(const char *s) {
    if (!*s || isdigit((unsigned char)*s))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

typedef struct sizes {
    etch_method_meta meta;
    size_t num_arenas, arena_total, pool, in_bytes, out_bytes, num_in, num_out, num_ops;
} sizes;

static int measure(const unsigned char *data, size_t size, const char *path, const char *method,
                   etch_program **prog, sizes *s) {
    etch_status st = etch_kernels_register_portable();
    if (st)
        return cli_fail(st);
    if ((st = etch_program_open_buffer(data, size, NULL, prog)))
        return cli_fail_ctx(st, "%s", path);
    if ((st = etch_program_method_meta(*prog, method, &s->meta)))
        return cli_fail_ctx(st, "%s", path);
    if (s->meta.fallback_from) {
        fprintf(stderr, "error: %s: method '%s' needs a backend this build lacks\n", path,
                method);
        return CLI_FAIL;
    }
    s->num_arenas = etch_method_meta_num_arenas(&s->meta);
    s->arena_total = 0;
    for (size_t j = 0; j < s->num_arenas; j++)
        s->arena_total += (etch_method_meta_arena_size(&s->meta, j) + 15) / 16 * 16;
    s->pool = etch_method_meta_pool_size(&s->meta);
    s->num_in = etch_method_meta_num_inputs(&s->meta);
    s->num_out = etch_method_meta_num_outputs(&s->meta);
    s->in_bytes = s->out_bytes = 0;
    for (size_t i = 0; i < s->num_in; i++) {
        etch_value_info v;
        if (etch_method_meta_input(&s->meta, i, &v) == ETCH_OK && v.tag == ETCH_VALUE_TENSOR)
            s->in_bytes += v.nbytes;
    }
    for (size_t i = 0; i < s->num_out; i++) {
        etch_value_info v;
        if (etch_method_meta_output(&s->meta, i, &v) == ETCH_OK && v.tag == ETCH_VALUE_TENSOR)
            s->out_bytes += v.nbytes;
    }
    s->num_ops = etch_method_meta_num_operators(&s->meta);
    return CLI_OK;
}

static int write_header(const char *path, const char *name, const char *uc, const char *src,
                        size_t size, long align, const char *method, const sizes *s, bool raw) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return CLI_FAIL;
    }
    fprintf(f, "/* Generated by `etch embed %s --name %s`%s: do not edit. */\n", src, name,
            raw ? " --raw" : "");
    fprintf(f, "#ifndef ETCH_EMBED_%s_H\n#define ETCH_EMBED_%s_H\n\n", uc, uc);
    fprintf(f, "#include <stddef.h>\n#include <stdint.h>\n\n");
    fprintf(f, "#define ETCH_%s_PTE_SIZE %zu\n#define ETCH_%s_PTE_ALIGN %ld\n", uc, size, uc,
            align);
    if (!raw) {
        fprintf(f, "#define ETCH_%s_METHOD \"%s\"\n", uc, method);
        fprintf(f, "#define ETCH_%s_NUM_ARENAS %zu\n", uc, s->num_arenas);
        for (size_t j = 0; j < s->num_arenas; j++)
            fprintf(f, "#define ETCH_%s_ARENA_%zu_SIZE %zu\n", uc, j,
                    etch_method_meta_arena_size(&s->meta, j));
        fprintf(f, "#define ETCH_%s_ARENA_SIZES {", uc);
        for (size_t j = 0; j < s->num_arenas; j++)
            fprintf(f, "%s%zu", j ? ", " : "", etch_method_meta_arena_size(&s->meta, j));
        fprintf(f, "%s}\n", s->num_arenas ? "" : "0");
        fprintf(f, "/* the arenas back to back, each rounded up to 16 bytes */\n");
        fprintf(f, "#define ETCH_%s_ARENA_TOTAL %zu\n", uc, s->arena_total);
        fprintf(f, "/* method pool with the portable kernels, measured by the etch that wrote "
                   "this file\n   (%zu-bit): an upper bound for a 32-bit target, whose structures are no "
                   "larger;\n   etch_method_load refuses a pool too small */\n",
                sizeof(void *) * 8);
        fprintf(f, "#define ETCH_%s_POOL_SIZE %zu\n", uc, s->pool);
        fprintf(f, "#define ETCH_%s_NUM_INPUTS %zu\n#define ETCH_%s_INPUT_BYTES %zu\n", uc,
                s->num_in, uc, s->in_bytes);
        fprintf(f, "#define ETCH_%s_NUM_OUTPUTS %zu\n#define ETCH_%s_OUTPUT_BYTES %zu\n", uc,
                s->num_out, uc, s->out_bytes);
        fprintf(f, "#define ETCH_%s_NUM_OPERATORS %zu\n", uc, s->num_ops);
        for (size_t i = 0; i < s->num_ops; i++) {
            etch_operator_info op;
            if (etch_method_meta_operator(&s->meta, i, &op) == ETCH_OK)
                fprintf(f, "/*   operator %zu: %s (%zu calls) */\n", i, op.name, op.num_calls);
        }
    }
    fprintf(f, "\nextern const uint8_t etch_%s_pte[%zu];\nextern const size_t etch_%s_pte_size;\n",
            name, size ? size : 1, name);
    fprintf(f, "\n#endif\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int write_source(const char *path, const char *header, const char *name, const char *src,
                        const unsigned char *data, size_t size, long align,
                        const char *section) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return CLI_FAIL;
    }
    fprintf(f, "/* Generated by `etch embed %s --name %s`: do not edit. */\n", src, name);
    if (header) {
        const char *b = strrchr(header, '/');
        fprintf(f, "#include \"%s\"\n\n", b ? b + 1 : header);
    } else {
        fprintf(f, "#include <stddef.h>\n#include <stdint.h>\n\n");
    }
    if (section)
        fprintf(f, "__attribute__((section(\"%s\"), used))\n", section);
    fprintf(f, "_Alignas(%ld) const uint8_t etch_%s_pte[%zu] = {", align, name, size ? size : 1);
    for (size_t i = 0; i < size; i++)
        fprintf(f, "%s0x%02x,", i % 16 ? " " : "\n    ", data[i]);
    fprintf(f, "%s\n};\nconst size_t etch_%s_pte_size = %zu;\n", size ? "" : "0", name, size);
    if (fclose(f) != 0) {
        fprintf(stderr, "error: cannot write '%s'\n", path);
        return CLI_FAIL;
    }
    return CLI_OK;
}

int cmd_embed(int argc, char **argv) {
    const char *cmd = "embed";
    if (cli_wants_help(argc, argv)) {
        cmd_embed_usage(stdout);
        return CLI_OK;
    }
    const char *file = NULL, *out = NULL, *header = NULL, *name = NULL, *method = NULL;
    const char *align_s = NULL, *section = NULL;
    bool raw = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_opt_value(cmd, argc, argv, &i, "-o", &out)) ||
            (r = cli_opt_value(cmd, argc, argv, &i, "--header", &header)) ||
            (r = cli_opt_value(cmd, argc, argv, &i, "--name", &name)) ||
            (r = cli_opt_value(cmd, argc, argv, &i, "--method", &method)) ||
            (r = cli_opt_value(cmd, argc, argv, &i, "--align", &align_s)) ||
            (r = cli_opt_value(cmd, argc, argv, &i, "--section", &section)) ||
            (r = cli_opt_flag(cmd, argv, i, "--raw", &raw))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        r = cli_opt_file(cmd, argc, argv, &i, &file);
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (!file)
        return cli_usage_error(cmd, "no FILE given");
    if (!out)
        return cli_usage_error(cmd, "no output given (-o OUT.c)");
    if (raw && method)
        return cli_usage_error(cmd, "--method is for programs, not --raw files");
    long long align = 16;
    if (align_s && !cli_parse_long(cmd, "--align", align_s, 16, 1 << 20, &align))
        return CLI_USAGE;
    if (align & (align - 1))
        return cli_usage_error(cmd, "--align %lld is not a power of two", align);
    char defname[64];
    if (!name) {
        default_name(file, defname, sizeof defname);
        name = defname;
    }
    if (!valid_name(name) || strlen(name) > 48)
        return cli_usage_error(cmd, "--name '%s' is not a C identifier of at most 48 characters",
                               name);
    char uc[64];
    size_t n = 0;
    for (; name[n]; n++)
        uc[n] = (char)toupper((unsigned char)name[n]);
    uc[n] = 0;
    if (!method)
        method = "forward";

    unsigned char *data;
    size_t size;
    if (read_all(file, &data, &size) != 0)
        return CLI_FAIL;
    etch_program *prog = NULL;
    sizes s;
    memset(&s, 0, sizeof s);
    int rc = raw ? CLI_OK : measure(data, size, file, method, &prog, &s);
    if (rc == CLI_OK && header)
        rc = write_header(header, name, uc, file, size, (long)align, method, &s, raw);
    if (rc == CLI_OK)
        rc = write_source(out, header, name, file, data, size, (long)align, section);
    etch_program_close(prog);
    free(data);
    return rc;
}
