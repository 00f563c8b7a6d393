/* etch verify FILE.bpte — run a bundled program's test cases and compare the outputs. */
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/bundled.h"
#include "etch/module.h"

void cmd_verify_usage(FILE *out) {
    fprintf(out,
            "usage: etch verify FILE.bpte [options]\n"
            "\n"
            "Load the program embedded in a bundled program and run every test case of every\n"
            "test suite (or of one method), comparing each output with the expected one:\n"
            "floating-point elements pass when |actual - expected| <= atol + rtol * |expected|\n"
            "(NaN equals NaN), other dtypes must match exactly; dtypes and shapes must match.\n"
            "Prints PASS/FAIL per case with the max absolute and relative error, then a summary;\n"
            "exits 1 when any case fails.\n"
            "\n"
            "options:\n"
            "  --rtol R        relative tolerance (default 1e-5)\n"
            "  --atol A        absolute tolerance (default 1e-8)\n"
            "  --method NAME   only the test suite of this method\n"
            "  -h, --help      show this help\n");
}

typedef struct verify_counts {
    size_t passed, failed;
} verify_counts;

static void run_case(const etch_bundled *b, etch_method *m, const char *method, size_t k,
                     double rtol, double atol, verify_counts *c) {
    etch_status st = ETCH_OK;
    if (k > 0)
        st = etch_method_reset(m); /* independent cases: inputs and mutable state reset */
    if (st == ETCH_OK)
        st = etch_bundled_load_inputs(b, m, k);
    if (st == ETCH_OK)
        st = etch_method_execute(m);
    if (st != ETCH_OK) {
        printf("%s[%zu]: FAIL  %s: %s\n", cli_safe(method), k, etch_status_str(st),
               cli_safe(etch_last_error()));
        c->failed++;
        return;
    }
    etch_bundled_report r;
    st = etch_bundled_verify_outputs(b, m, k, rtol, atol, &r);
    if (st == ETCH_OK) {
        printf("%s[%zu]: PASS  max abs error %.3g, max rel error %.3g\n", cli_safe(method), k,
               r.max_abs_error, r.max_rel_error);
        c->passed++;
    } else {
        printf("%s[%zu]: FAIL  max abs error %.3g, max rel error %.3g, %zu mismatch%s: %s\n",
               cli_safe(method), k, r.max_abs_error, r.max_rel_error, r.mismatches,
               r.mismatches == 1 ? "" : "es",
               cli_safe(r.message[0] ? r.message : etch_last_error()));
        c->failed++;
    }
}

int cmd_verify(int argc, char **argv) {
    const char *path = NULL, *rtol_s = NULL, *atol_s = NULL, *method = NULL;
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_opt_value("verify", argc, argv, &i, "--rtol", &rtol_s)) ||
            (r = cli_opt_value("verify", argc, argv, &i, "--atol", &atol_s)) ||
            (r = cli_opt_value("verify", argc, argv, &i, "--method", &method))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_file("verify", argc, argv, &i, &path)) < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (!path)
        return cli_usage_error("verify", "missing FILE.bpte");
    double rtol = 1e-5, atol = 1e-8;
    if (rtol_s && !cli_parse_double("verify", "--rtol", rtol_s, 0.0, 1e300, &rtol))
        return CLI_USAGE;
    if (atol_s && !cli_parse_double("verify", "--atol", atol_s, 0.0, 1e300, &atol))
        return CLI_USAGE;

    void *data;
    size_t size;
    int rc = cli_read_file(path, &data, &size);
    if (rc != CLI_OK)
        return rc;
    etch_bundled *b = NULL;
    etch_module *mod = NULL;
    etch_status st = etch_bundled_open_buffer(data, size, &b);
    if (st == ETCH_OK) {
        size_t psize;
        const void *prog = etch_bundled_program(b, &psize);
        st = etch_module_open_buffer(prog, psize, NULL, &mod);
    }
    if (st != ETCH_OK) {
        rc = cli_fail(st);
        goto done;
    }

    size_t ns = etch_bundled_num_suites(b);
    bool found = method == NULL;
    verify_counts c = {0, 0};
    for (size_t s = 0; s < ns; s++) {
        const char *name = etch_bundled_suite_method(b, s);
        if (method && strcmp(method, name) != 0)
            continue;
        found = true;
        size_t n = etch_bundled_num_cases(b, name);
        etch_method *m;
        if ((st = etch_module_load_method(mod, name, &m)) != ETCH_OK) {
            printf("%s: FAIL  cannot load the method: %s: %s\n", cli_safe(name),
                   etch_status_str(st), cli_safe(etch_last_error()));
            c.failed += n ? n : 1;
            continue;
        }
        for (size_t k = 0; k < n; k++)
            run_case(b, m, name, k, rtol, atol, &c);
    }
    if (!found) {
        fprintf(stderr, "error: NotFound: no test suite for method '%s' in %s\n", method, path);
        rc = CLI_FAIL;
        goto done;
    }
    printf("%zu passed, %zu failed (rtol %g, atol %g)\n", c.passed, c.failed, rtol, atol);
    if (c.passed + c.failed == 0) {
        fprintf(stderr, "error: NotFound: %s holds no test cases\n", path);
        rc = CLI_FAIL;
    } else {
        rc = c.failed ? CLI_FAIL : CLI_OK;
    }
done:
    etch_module_close(mod);
    etch_bundled_close(b);
    free(data);
    return rc;
}
