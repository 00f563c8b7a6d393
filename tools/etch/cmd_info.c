/* etch info FILE — describe a program (.pte / .bpte) or an external data file (.ptd). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/backends.h"
#include "etch/bundled.h"
#include "etch/kernels.h"

void cmd_info_usage(FILE *out) {
    fprintf(out,
            "usage: etch info FILE [--instructions] [--json]\n"
            "\n"
            "Describe FILE: a program (.pte), a bundled program (.bpte: its embedded program\n"
            "plus the number of test cases) or external tensor data (.ptd).\n"
            "\n"
            "For a program it prints the identifier, the header (extended header, lengths,\n"
            "segment base and size), the segments, the named data count and every method:\n"
            "inputs and outputs (kind, dtype, shape, dynamism, planned), operators (those this\n"
            "build lacks are marked MISSING), delegates (and whether their backend is\n"
            "available), planned arena sizes, method pool size, constant bytes and how many\n"
            "instructions carry debug information (Chain.stacktrace: what etch.export records\n"
            "for each instruction: the module path, the graph node, the model's source line).\n"
            "\n"
            "options:\n"
            "  --instructions  list every instruction: what it calls, its module path and\n"
            "               graph node, and the source line (FILE:LINE  code) it comes from\n"
            "  --json       print the same facts as one JSON object (keys in\n"
            "               tools/etch/README.md; the instructions' debug information\n"
            "               always included)\n"
            "  -h, --help   show this help\n");
}

static const char *dynamism_str(uint8_t d) {
    switch (d) {
    case ETCH_SHAPE_STATIC: return "static";
    case ETCH_SHAPE_DYNAMIC_BOUND: return "dynamic (bound)";
    case ETCH_SHAPE_DYNAMIC_UNBOUND: return "dynamic (unbound)";
    default: return "dynamism?";
    }
}

static void print_value_info(const char *role, size_t i, const etch_value_info *v) {
    char shape[256];
    printf("    %s %zu: %s", role, i, etch_value_tag_name(v->tag));
    switch (v->tag) {
    case ETCH_VALUE_TENSOR:
        printf(" %s %s %s%s%s, %zu bytes", etch_dtype_name(v->dtype),
               cli_shape_str(shape, sizeof shape, v->dim, v->sizes), dynamism_str(v->dynamism),
               v->planned ? ", planned" : ", not planned", v->constant ? ", constant" : "",
               v->nbytes);
        bool identity = true;
        for (unsigned d = 0; d < v->dim; d++)
            identity = identity && v->dim_order[d] == d;
        if (!identity) {
            printf(", dim_order (");
            for (unsigned d = 0; d < v->dim; d++)
                printf("%s%u", d ? ", " : "", v->dim_order[d]);
            printf(")");
        }
        break;
    case ETCH_VALUE_INT: printf(" = %lld", (long long)v->int_val); break;
    case ETCH_VALUE_BOOL: printf(" = %s", v->int_val ? "true" : "false"); break;
    case ETCH_VALUE_DOUBLE: printf(" = %.10g", v->double_val); break;
    default: break;
    }
    printf(" (value %u)\n", v->value_index);
}

/* The metadata of method `name` itself (not the CPU twin a load would fall back to, whose
 * name goes to *loads_as; NULL when none). */
static etch_status own_meta(const etch_program *prog, const char *name, etch_method_meta *meta,
                            const char **loads_as) {
    etch_status st = etch_program_method_meta(prog, name, meta);
    *loads_as = NULL;
    if (st != ETCH_OK || !meta->fallback_from)
        return st;
    *loads_as = etch_method_meta_name(meta);
    for (size_t i = 0; i < etch_program_num_methods(prog); i++)
        if (strcmp(etch_program_method_name(prog, i), name) == 0) {
            meta->index = (uint32_t)i;
            meta->fallback_from = NULL;
        }
    return ETCH_OK;
}

/* Is method `name` the CPU twin of another method of prog? */
static const char *twin_of(const etch_program *prog, const char *name) {
    size_t n = strlen(name), s = strlen(ETCH_CPU_TWIN_SUFFIX);
    if (n <= s || strcmp(name + n - s, ETCH_CPU_TWIN_SUFFIX) != 0)
        return NULL;
    for (size_t i = 0; i < etch_program_num_methods(prog); i++) {
        const char *m = etch_program_method_name(prog, i);
        if (strlen(m) == n - s && strncmp(m, name, n - s) == 0)
            return m;
    }
    return NULL;
}

static const char *base_name(const char *path) {
    const char *b = path ? strrchr(path, '/') : NULL;
    return b ? b + 1 : path;
}

/* Instructions with debug information (and, with `list`, one line each). */
static int print_debug(const etch_method_meta *meta, bool list) {
    size_t nc = etch_method_meta_num_chains(meta), with = 0, total = 0;
    for (size_t c = 0; c < nc; c++) {
        size_t n = etch_method_meta_chain_length(meta, c);
        for (size_t pc = 0; pc < n; pc++, total++) {
            etch_instruction_debug d;
            etch_status st = etch_method_meta_instruction_debug(meta, c, pc, &d);
            if (st != ETCH_OK)
                return cli_fail(st);
            with += d.node || d.num_frames;
            if (!list)
                continue;
            printf("    %s%zu  ", nc > 1 ? "chain " : "", pc);
            fputs(cli_safe(d.op_name[0] ? d.op_name : "(runtime)"), stdout);
            if (d.module_path) {
                fputs("  ", stdout);
                fputs(cli_safe(d.module_path[0] ? d.module_path : "<root>"), stdout);
            }
            if (d.node) {
                fputs(" (", stdout);
                fputs(cli_safe(d.node), stdout);
                putchar(')');
            }
            if (d.filename) {
                fputs("  ", stdout);
                fputs(cli_safe(base_name(d.filename)), stdout);
                printf(":%d", (int)d.lineno);
                if (d.source && d.source[0]) {
                    fputs("  ", stdout);
                    fputs(cli_safe(d.source), stdout);
                }
            }
            putchar('\n');
        }
    }
    if (!list)
        printf("  debug information: %zu of %zu instructions%s\n", with, total,
               with ? " (--instructions lists them)" : "");
    return CLI_OK;
}

static int print_method(const etch_program *prog, const char *name, bool list) {
    etch_method_meta meta;
    const char *loads_as, *twin = twin_of(prog, name);
    etch_status st = own_meta(prog, name, &meta, &loads_as);
    if (st != ETCH_OK)
        return cli_fail(st);
    printf("\nmethod '%s'%s%s%s\n", cli_safe(name), twin ? " (CPU twin of '" : "",
           twin ? cli_safe(twin) : "",
           twin ? "')" : "");
    if (loads_as)
        printf("  loads as: '%s' (its CPU twin: a backend it delegates to is missing here)\n",
               cli_safe(loads_as));
    size_t ni = etch_method_meta_num_inputs(&meta), no = etch_method_meta_num_outputs(&meta);
    printf("  inputs: %zu\n", ni);
    for (size_t i = 0; i < ni; i++) {
        etch_value_info v;
        if ((st = etch_method_meta_input(&meta, i, &v)) != ETCH_OK)
            return cli_fail(st);
        print_value_info("input", i, &v);
    }
    printf("  outputs: %zu\n", no);
    for (size_t i = 0; i < no; i++) {
        etch_value_info v;
        if ((st = etch_method_meta_output(&meta, i, &v)) != ETCH_OK)
            return cli_fail(st);
        print_value_info("output", i, &v);
    }
    printf("  values: %zu, instructions: %zu\n", etch_method_meta_num_values(&meta),
           etch_method_meta_num_instructions(&meta));

    size_t nops = etch_method_meta_num_operators(&meta), missing = 0;
    printf("  operators: %zu\n", nops);
    for (size_t i = 0; i < nops; i++) {
        etch_operator_info op;
        if ((st = etch_method_meta_operator(&meta, i, &op)) != ETCH_OK)
            return cli_fail(st);
        printf("    %-40s %zu call%s%s\n", cli_safe(op.name), op.num_calls, op.num_calls == 1 ? "" : "s",
               op.available ? "" : "  MISSING");
        missing += !op.available;
    }
    if (missing)
        printf("  note: %zu operator%s missing from this build: the method cannot be loaded\n",
               missing, missing == 1 ? " is" : "s are");

    size_t nd = etch_method_meta_num_delegates(&meta);
    printf("  delegates: %zu\n", nd);
    for (size_t i = 0; i < nd; i++) {
        etch_delegate_info d;
        if ((st = etch_method_meta_delegate(&meta, i, &d)) != ETCH_OK)
            return cli_fail(st);
        printf("    %s: %zu byte blob (%s), %zu compile spec%s, %s\n", d.id ? cli_safe(d.id) : "?",
               d.blob_size, d.inline_blob ? "inline" : "segment", d.num_compile_specs,
               d.num_compile_specs == 1 ? "" : "s", d.available ? "available" : "NOT AVAILABLE");
    }

    size_t na = etch_method_meta_num_arenas(&meta);
    size_t total = 0;
    printf("  planned arenas: %zu\n", na);
    for (size_t j = 0; j < na; j++) {
        size_t sz = etch_method_meta_arena_size(&meta, j);
        total += sz;
        printf("    arena %zu: %zu bytes\n", j + 1, sz);
    }
    printf("  planned memory: %zu bytes\n", total);
    printf("  method pool: %zu bytes\n", etch_method_meta_pool_size(&meta));
    printf("  constant bytes: %llu\n",
           (unsigned long long)etch_method_meta_constant_bytes(&meta));
    printf("  needs external data: %s\n",
           etch_method_meta_needs_external_data(&meta) ? "yes (.ptd)" : "no");
    int rc = print_debug(&meta, false);
    if (rc == CLI_OK && list) {
        printf("  instructions:\n");
        rc = print_debug(&meta, true);
    }
    return rc;
}

static int print_bundled(const char *path) {
    void *data;
    size_t size;
    int rc = cli_read_file(path, &data, &size);
    if (rc != CLI_OK)
        return rc;
    etch_bundled *b;
    etch_status st = etch_bundled_open_buffer(data, size, &b);
    if (st != ETCH_OK) {
        free(data);
        return cli_fail(st);
    }
    size_t ns = etch_bundled_num_suites(b), total = 0;
    printf("\nbundled test suites: %zu\n", ns);
    for (size_t s = 0; s < ns; s++) {
        const char *m = etch_bundled_suite_method(b, s);
        size_t n = etch_bundled_num_cases(b, m);
        total += n;
        printf("  method '%s': %zu test case%s\n", cli_safe(m), n, n == 1 ? "" : "s");
    }
    printf("bundled test cases: %zu\n", total);
    etch_bundled_close(b);
    free(data);
    return CLI_OK;
}

static int print_data_map(const char *path) {
    etch_data_map *map;
    etch_status st = etch_data_map_open_file(path, NULL, &map);
    if (st != ETCH_OK)
        return cli_fail(st);
    size_t n = etch_data_map_count(map);
    printf("file: %s\nidentifier: FT01 (external tensor data)\nentries: %zu\n", path, n);
    for (size_t i = 0; i < n; i++) {
        etch_data_entry e;
        if ((st = etch_data_map_entry(map, i, &e)) != ETCH_OK) {
            etch_data_map_close(map);
            return cli_fail(st);
        }
        printf("  %s: %zu bytes", e.key ? cli_safe(e.key) : "?", e.size);
        if (e.rank >= 0) {
            char shape[256];
            printf(", %s %s", etch_dtype_name(e.dtype),
                   cli_shape_str(shape, sizeof shape, (size_t)e.rank, e.sizes));
        }
        printf("\n");
    }
    etch_data_map_close(map);
    return CLI_OK;
}

/* ---- --json ------------------------------------------------------------------------------ */

static void json_value_info(FILE *j, const etch_value_info *v) {
    fputs("{\"kind\": ", j);
    cli_json_string(j, etch_value_tag_name(v->tag));
    switch (v->tag) {
    case ETCH_VALUE_TENSOR:
        fputs(", \"dtype\": ", j);
        cli_json_string(j, etch_dtype_name(v->dtype));
        fputs(", \"shape\": ", j);
        cli_json_shape(j, v->dim, v->sizes);
        fputs(", \"dynamism\": ", j);
        cli_json_string(j, dynamism_str(v->dynamism));
        fprintf(j, ", \"planned\": %s, \"constant\": %s, \"nbytes\": %zu, \"dim_order\": [",
                v->planned ? "true" : "false", v->constant ? "true" : "false", v->nbytes);
        for (unsigned d = 0; d < v->dim; d++)
            fprintf(j, d ? ", %u" : "%u", v->dim_order[d]);
        fputc(']', j);
        break;
    case ETCH_VALUE_INT: fprintf(j, ", \"value\": %lld", (long long)v->int_val); break;
    case ETCH_VALUE_BOOL: fprintf(j, ", \"value\": %s", v->int_val ? "true" : "false"); break;
    case ETCH_VALUE_DOUBLE:
        fputs(", \"value\": ", j);
        cli_json_double(j, v->double_val);
        break;
    default: break;
    }
    fprintf(j, ", \"value_index\": %u}", v->value_index);
}

static etch_status json_method(FILE *j, const etch_program *prog, const char *name) {
    etch_method_meta meta;
    const char *loads_as, *twin = twin_of(prog, name);
    etch_status st = own_meta(prog, name, &meta, &loads_as);
    if (st != ETCH_OK)
        return st;
    fputs("{\"name\": ", j);
    cli_json_string(j, name);
    fputs(", \"cpu_twin_of\": ", j);
    if (twin)
        cli_json_string(j, twin);
    else
        fputs("null", j);
    fputs(", \"loads_as\": ", j);
    cli_json_string(j, loads_as ? loads_as : name);
    for (int io = 0; io < 2; io++) {
        size_t n = io ? etch_method_meta_num_outputs(&meta) : etch_method_meta_num_inputs(&meta);
        fputs(io ? ", \"outputs\": [" : ", \"inputs\": [", j);
        for (size_t i = 0; i < n; i++) {
            etch_value_info v;
            st = io ? etch_method_meta_output(&meta, i, &v) : etch_method_meta_input(&meta, i, &v);
            if (st != ETCH_OK)
                return st;
            fputs(i ? ", " : "", j);
            json_value_info(j, &v);
        }
        fputc(']', j);
    }
    fprintf(j, ", \"values\": %zu, \"instructions\": %zu, \"operators\": [",
            etch_method_meta_num_values(&meta), etch_method_meta_num_instructions(&meta));
    size_t nops = etch_method_meta_num_operators(&meta), missing = 0;
    for (size_t i = 0; i < nops; i++) {
        etch_operator_info op;
        if ((st = etch_method_meta_operator(&meta, i, &op)) != ETCH_OK)
            return st;
        fputs(i ? ", {\"name\": " : "{\"name\": ", j);
        cli_json_string(j, op.name);
        fprintf(j, ", \"calls\": %zu, \"available\": %s}", op.num_calls,
                op.available ? "true" : "false");
        missing += !op.available;
    }
    fprintf(j, "], \"missing_operators\": %zu, \"delegates\": [", missing);
    size_t nd = etch_method_meta_num_delegates(&meta);
    for (size_t i = 0; i < nd; i++) {
        etch_delegate_info d;
        if ((st = etch_method_meta_delegate(&meta, i, &d)) != ETCH_OK)
            return st;
        fputs(i ? ", {\"id\": " : "{\"id\": ", j);
        cli_json_string(j, d.id);
        fprintf(j, ", \"blob_size\": %zu, \"inline_blob\": %s, \"compile_specs\": %zu, "
                   "\"available\": %s}",
                d.blob_size, d.inline_blob ? "true" : "false", d.num_compile_specs,
                d.available ? "true" : "false");
    }
    fputs("], \"arenas\": [", j);
    size_t na = etch_method_meta_num_arenas(&meta), total = 0;
    for (size_t a = 0; a < na; a++) {
        size_t sz = etch_method_meta_arena_size(&meta, a);
        total += sz;
        fprintf(j, a ? ", %zu" : "%zu", sz);
    }
    fprintf(j, "], \"planned_memory\": %zu, \"method_pool\": %zu, \"constant_bytes\": %llu, "
               "\"needs_external_data\": %s, \"instruction_debug\": [",
            total, etch_method_meta_pool_size(&meta),
            (unsigned long long)etch_method_meta_constant_bytes(&meta),
            etch_method_meta_needs_external_data(&meta) ? "true" : "false");
    size_t nc = etch_method_meta_num_chains(&meta), k = 0;
    for (size_t c = 0; c < nc; c++) {
        size_t n = etch_method_meta_chain_length(&meta, c);
        for (size_t pc = 0; pc < n; pc++) {
            etch_instruction_debug d;
            if ((st = etch_method_meta_instruction_debug(&meta, c, pc, &d)) != ETCH_OK)
                return st;
            if (!d.node && !d.num_frames)
                continue;
            fprintf(j, "%s{\"chain\": %zu, \"pc\": %zu, \"op\": ", k++ ? ", " : "", c, pc);
            cli_json_string(j, d.op_name);
            const char *keys[] = {"node", "module", "file", "function", "source"};
            const char *vals[] = {d.node, d.module_path, d.filename, d.function, d.source};
            for (int f = 0; f < 5; f++) {
                fprintf(j, ", \"%s\": ", keys[f]);
                if (vals[f])
                    cli_json_string(j, vals[f]);
                else
                    fputs("null", j);
            }
            fprintf(j, ", \"line\": %d, \"frames\": %zu}", (int)d.lineno, d.num_frames);
        }
    }
    fputs("]}", j);
    return ETCH_OK;
}

/* (the CLI_FAIL of reading the file, already reported, is *reported) */
static etch_status json_bundled(FILE *j, const char *path, bool *reported) {
    void *data;
    size_t size;
    if (cli_read_file(path, &data, &size) != CLI_OK) {
        *reported = true;
        return ETCH_ERR_ACCESS_FAILED;
    }
    etch_bundled *b;
    etch_status st = etch_bundled_open_buffer(data, size, &b);
    if (st != ETCH_OK) {
        free(data);
        return st;
    }
    size_t ns = etch_bundled_num_suites(b), total = 0;
    fputs(", \"bundled_suites\": [", j);
    for (size_t s = 0; s < ns; s++) {
        const char *m = etch_bundled_suite_method(b, s);
        size_t n = etch_bundled_num_cases(b, m);
        total += n;
        fputs(s ? ", {\"method\": " : "{\"method\": ", j);
        cli_json_string(j, m);
        fprintf(j, ", \"test_cases\": %zu}", n);
    }
    fprintf(j, "], \"bundled_test_cases\": %zu", total);
    etch_bundled_close(b);
    free(data);
    return ETCH_OK;
}

static etch_status json_data_map(FILE *j, const char *path) {
    etch_data_map *map;
    etch_status st = etch_data_map_open_file(path, NULL, &map);
    if (st != ETCH_OK)
        return st;
    size_t n = etch_data_map_count(map);
    fputs("{\"file\": ", j);
    cli_json_string(j, path);
    fputs(", \"identifier\": \"FT01\", \"kind\": \"external tensor data\", \"entries\": [", j);
    for (size_t i = 0; i < n; i++) {
        etch_data_entry e;
        if ((st = etch_data_map_entry(map, i, &e)) != ETCH_OK)
            break;
        fputs(i ? ", {\"key\": " : "{\"key\": ", j);
        cli_json_string(j, e.key);
        fprintf(j, ", \"size\": %zu", e.size);
        if (e.rank >= 0) {
            fputs(", \"dtype\": ", j);
            cli_json_string(j, etch_dtype_name(e.dtype));
            fputs(", \"shape\": ", j);
            cli_json_shape(j, (size_t)e.rank, e.sizes);
        }
        fputc('}', j);
    }
    fputs("]}\n", j);
    etch_data_map_close(map);
    return st;
}

static etch_status json_program(FILE *j, const char *path, const etch_program *prog,
                                const etch_program_header *h, bool *reported) {
    fputs("{\"file\": ", j);
    cli_json_string(j, path);
    fputs(", \"identifier\": ", j);
    cli_json_string(j, h->identifier);
    fprintf(j, ", \"bundled\": %s, \"extended_header\": %s, \"header_length\": %u, "
               "\"program_image\": %llu, \"program_size\": %llu, \"segment_base_offset\": "
               "%llu, \"segment_data_size\": %llu, \"segments\": [",
            h->bundled ? "true" : "false", h->has_extended_header ? "true" : "false",
            h->header_length, (unsigned long long)h->file_size,
            (unsigned long long)h->program_size, (unsigned long long)h->segment_base_offset,
            (unsigned long long)h->segment_data_size);
    etch_status st;
    for (size_t i = 0; i < h->num_segments; i++) {
        uint64_t off = 0, size = 0;
        if ((st = etch_program_segment(prog, i, &off, &size)) != ETCH_OK)
            return st;
        fprintf(j, "%s{\"offset\": %llu, \"size\": %llu}", i ? ", " : "",
                (unsigned long long)off, (unsigned long long)size);
    }
    fprintf(j, "], \"constant_bytes\": %llu, \"legacy_constant_buffer\": %s, "
               "\"named_data\": %zu, \"methods\": [",
            (unsigned long long)h->constant_bytes, h->legacy_constant_buffer ? "true" : "false",
            h->num_named_data);
    size_t nm = etch_program_num_methods(prog);
    for (size_t i = 0; i < nm; i++) {
        fputs(i ? ", " : "", j);
        if ((st = json_method(j, prog, etch_program_method_name(prog, i))) != ETCH_OK)
            return st;
    }
    fputc(']', j);
    if (h->bundled && (st = json_bundled(j, path, reported)) != ETCH_OK)
        return st;
    fputs("}\n", j);
    return ETCH_OK;
}

/* Write the JSON to memory first: stdout gets the whole object or nothing. */
static int info_json(const char *path, bool data_map) {
    char *text = NULL;
    size_t len = 0;
    FILE *j = open_memstream(&text, &len);
    if (!j) {
        fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
        return CLI_FAIL;
    }
    etch_status st = ETCH_OK;
    etch_program *prog = NULL;
    bool reported = false;
    if (data_map) {
        st = json_data_map(j, path);
    } else if ((st = etch_kernels_register_portable()) == ETCH_OK &&
               (st = etch_backends_register_builtin()) == ETCH_OK &&
               (st = etch_program_open_file(path, NULL, &prog)) == ETCH_OK) {
        etch_program_header h;
        etch_program_get_header(prog, &h);
        st = json_program(j, path, prog, &h, &reported);
    }
    etch_program_close(prog);
    fclose(j);
    int rc = CLI_OK;
    if (st == ETCH_OK)
        fwrite(text, 1, len, stdout);
    else
        rc = reported ? CLI_FAIL : cli_fail(st);
    free(text);
    return rc;
}

/* The 4-byte identifier at offset 4, or "" when the file is shorter. */
static void peek_identifier(const char *path, char id[5]) {
    memset(id, 0, 5);
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    unsigned char b[8];
    if (fread(b, 1, 8, f) == 8)
        memcpy(id, b + 4, 4);
    fclose(f);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool json = false, list = false;
    for (int i = 1; i < argc; i++) {
        int r = cli_opt_flag("info", argv, i, "--json", &json);
        if (r == 0)
            r = cli_opt_flag("info", argv, i, "--instructions", &list);
        if (r > 0)
            continue;
        if (r == 0)
            r = cli_opt_file("info", argc, argv, &i, &path);
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (!path)
        return cli_usage_error("info", "missing FILE");

    char id[5];
    peek_identifier(path, id);
    if (json)
        return info_json(path, strcmp(id, "FT01") == 0);
    if (strcmp(id, "FT01") == 0)
        return print_data_map(path);

    etch_status st = etch_kernels_register_portable();
    if (st == ETCH_OK)
        st = etch_backends_register_builtin();
    if (st != ETCH_OK)
        return cli_fail(st);
    etch_program *prog;
    if ((st = etch_program_open_file(path, NULL, &prog)) != ETCH_OK)
        return cli_fail(st);

    etch_program_header h;
    etch_program_get_header(prog, &h);
    printf("file: %s\n", path);
    printf("identifier: %s%s\n", h.identifier, h.bundled ? " (inside a BP08 bundled program)" : "");
    printf("extended header: %s\n", h.has_extended_header ? "yes (eh00)" : "no");
    printf("header length: %u bytes\n", h.header_length);
    printf("program image: %llu bytes\n", (unsigned long long)h.file_size);
    printf("program size: %llu bytes (flatbuffer)\n", (unsigned long long)h.program_size);
    printf("segment base offset: %llu\n", (unsigned long long)h.segment_base_offset);
    printf("segment data size: %llu bytes\n", (unsigned long long)h.segment_data_size);
    printf("segments: %zu\n", h.num_segments);
    for (size_t i = 0; i < h.num_segments; i++) {
        uint64_t off = 0, size = 0;
        if ((st = etch_program_segment(prog, i, &off, &size)) != ETCH_OK) {
            etch_program_close(prog);
            return cli_fail(st);
        }
        printf("  segment %zu: offset %llu, %llu bytes\n", i, (unsigned long long)off,
               (unsigned long long)size);
    }
    printf("constant data: %llu bytes%s\n", (unsigned long long)h.constant_bytes,
           h.legacy_constant_buffer ? " (legacy inline constant_buffer)" : "");
    printf("named data: %zu\n", h.num_named_data);
    size_t nm = etch_program_num_methods(prog);
    printf("methods: %zu\n", nm);
    for (size_t i = 0; i < nm; i++)
        printf("  %s\n", cli_safe(etch_program_method_name(prog, i)));

    int rc = CLI_OK;
    for (size_t i = 0; i < nm && rc == CLI_OK; i++)
        rc = print_method(prog, etch_program_method_name(prog, i), list);
    etch_program_close(prog);
    if (rc == CLI_OK && h.bundled)
        rc = print_bundled(path);
    return rc;
}
