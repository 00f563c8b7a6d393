/* etch info FILE — describe a program (.pte / .bpte) or an external data file (.ptd). */
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/bundled.h"
#include "etch/kernels.h"

void cmd_info_usage(FILE *out) {
    fprintf(out,
            "usage: etch info FILE\n"
            "\n"
            "Describe FILE: a program (.pte), a bundled program (.bpte: its embedded program\n"
            "plus the number of test cases) or external tensor data (.ptd).\n"
            "\n"
            "For a program it prints the identifier, the header (extended header, lengths,\n"
            "segment base and size), the segments, the named data count and every method:\n"
            "inputs and outputs (kind, dtype, shape, dynamism, planned), operators (those this\n"
            "build lacks are marked MISSING), delegates (and whether their backend is\n"
            "available), planned arena sizes, method pool size and constant bytes.\n"
            "\n"
            "options:\n"
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

static int print_method(const etch_program *prog, const char *name) {
    etch_method_meta meta;
    etch_status st = etch_program_method_meta(prog, name, &meta);
    if (st != ETCH_OK)
        return cli_fail(st);
    printf("\nmethod '%s'\n", name);
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
        printf("    %-40s %zu call%s%s\n", op.name, op.num_calls, op.num_calls == 1 ? "" : "s",
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
        printf("    %s: %zu byte blob (%s), %zu compile spec%s, %s\n", d.id ? d.id : "?",
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
    return CLI_OK;
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
        printf("  method '%s': %zu test case%s\n", m, n, n == 1 ? "" : "s");
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
        printf("  %s: %zu bytes", e.key ? e.key : "?", e.size);
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
    for (int i = 1; i < argc; i++) {
        int r = cli_opt_file("info", argc, argv, &i, &path);
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (!path)
        return cli_usage_error("info", "missing FILE");

    char id[5];
    peek_identifier(path, id);
    if (strcmp(id, "FT01") == 0)
        return print_data_map(path);

    etch_status st = etch_kernels_register_portable();
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
        printf("  %s\n", etch_program_method_name(prog, i));

    int rc = CLI_OK;
    for (size_t i = 0; i < nm && rc == CLI_OK; i++)
        rc = print_method(prog, etch_program_method_name(prog, i));
    etch_program_close(prog);
    if (rc == CLI_OK && h.bundled)
        rc = print_bundled(path);
    return rc;
}
