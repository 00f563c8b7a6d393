/* etch run FILE — load a method, feed it inputs, execute it, save/print the outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_store.h"
#include "cli_util.h"
#include "commands.h"
#include "etch/module.h"
#include "cli_inputs.h"
#include "etch/npy.h"

#define PRINT_ITEMS 16

void cmd_run_usage(FILE *out) {
    fprintf(out,
            "usage: etch run FILE [options]\n"
            "       etch run --model FILE|NAME [options]\n"
            "\n"
            "Load a method of FILE (.pte, or the program inside a .bpte), execute it and report\n"
            "the load time and each execution's time.\n"
            "\n"
            "options:\n"
            "  --model FILE|NAME      FILE, or a model in the store (etch model): its current\n"
            "                         version, else its previous one (stderr says why); its\n"
            "                         .ptd, if it has one, unless --data is given\n"
            CLI_HELP_STORE
            "  --method NAME          method to run (default: 'forward', else the only method)\n"
            "  --inputs A.npy,B.npy   one .npy per method input, in order; a non-tensor input\n"
            "                         takes a 0-d array. Default: tensors of ones at the stored\n"
            "                         (upper-bound) shape and the exported value of non-tensor\n"
            "                         inputs\n"
            "  --data FILE.ptd        external tensor data\n"
            "  --output-dir DIR       write output i to DIR/output_<i>.npy (DIR is created;\n"
            "                         Int, Double, Bool and String outputs become 0-d arrays,\n"
            "                         a String one of NumPy dtype <U)\n"
            "  --num-executions N     execute N times (default 1)\n"
            "  --print-output         print each output's dtype, shape and values\n"
            "  --json                 print one JSON object instead: file, method, threads,\n"
            "                         kernels, load_ms, times_ms (the first 1000), mean/min/\n"
            "                         max_ms, outputs (kind, dtype, shape; values with\n"
            "                         --print-output; file with --output-dir)\n"
            "  --load-mode MODE       mmap (default) or read\n"
            CLI_HELP_THREADS_KERNELS
            CLI_HELP_NO_FUSION
            "  -h, --help             show this help\n");
}

#define OUT_PATH_MAX 4096

typedef struct run_opts {
    const char *path, *output_dir, *num_exec, *load_mode, *model, *store;
    cli_module_args ma; /* --method, --inputs, --data, --cpu-threads, --kernels, --no-fusion */
    bool print_output, json;
    long long executions;
    etch_load_mode mode;
} run_opts;

static int parse_args(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        int r;
        if ((r = cli_module_args_take("run", argc, argv, &i, &o->ma)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--output-dir", &o->output_dir)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--model", &o->model)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--store", &o->store)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--num-executions", &o->num_exec)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--load-mode", &o->load_mode)) ||
            (r = cli_opt_flag("run", argv, i, "--print-output", &o->print_output)) ||
            (r = cli_opt_flag("run", argv, i, "--json", &o->json))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_file("run", argc, argv, &i, &o->path)) < 0)
            return CLI_USAGE;
        if (r > 0)
            break;
    }
    if (o->path && o->model)
        return cli_usage_error("run", "give FILE or --model, not both");
    if (!o->path && !o->model)
        return cli_usage_error("run", "missing FILE (or --model NAME)");
    if (o->store && !o->model)
        return cli_usage_error("run", "--store goes with --model NAME");
    /* the files are DIR/output_<i>.npy: refuse what would not fit OUT_PATH_MAX, never cut */
    if (o->output_dir && strlen(o->output_dir) > OUT_PATH_MAX - 40)
        return cli_usage_error("run", "--output-dir: a path of %zu bytes is too long (at most %d)",
                               strlen(o->output_dir), OUT_PATH_MAX - 40);
    o->executions = 1;
    if (o->num_exec &&
        !cli_parse_long("run", "--num-executions", o->num_exec, 1, 1000000000, &o->executions))
        return CLI_USAGE;
    o->mode = ETCH_LOAD_MMAP;
    if (o->load_mode) {
        if (strcmp(o->load_mode, "mmap") == 0)
            o->mode = ETCH_LOAD_MMAP;
        else if (strcmp(o->load_mode, "read") == 0)
            o->mode = ETCH_LOAD_READ;
        else
            return cli_usage_error("run", "--load-mode: '%s' is neither 'mmap' nor 'read'",
                                   o->load_mode);
    }
    return cli_module_args_finish("run", &o->ma);
}

/* The module and what the inputs borrow (until the module is closed). */
typedef struct run_state {
    etch_module *mod;
    cli_inputs in;
} run_state;

static void run_state_free(run_state *s) {
    if (!s)
        return;
    etch_module_close(s->mod); /* methods first: inputs may be borrowed until then */
    cli_inputs_free(&s->in);
    free(s);
}

static void print_output(size_t i, const etch_value *v, bool values) {
    printf("output %zu: ", i);
    cli_print_value_summary(stdout, v);
    if (values && v->tag == ETCH_VALUE_TENSOR && v->u.tensor) {
        printf(" = ");
        cli_print_tensor_values(stdout, v->u.tensor, PRINT_ITEMS);
    }
    printf("\n");
}

#define JSON_TIMES 1000

/* --json: everything the text output says, as one object. */
static void print_json(const run_opts *o, const char *name, etch_module *mod, etch_method *m,
                       double load_ms, const double *times, double total, double best,
                       double worst, const bool *wrote) {
    fputs("{\"file\": ", stdout);
    cli_json_string(stdout, o->path);
    fputs(", \"method\": ", stdout);
    cli_json_string(stdout, name);
    printf(", \"threads\": %d, \"kernels\": \"%s\", \"load_ms\": %.6f, \"executions\": %lld, "
           "\"times_ms\": [",
           etch_module_num_threads(mod), etch_module_kernels_name(o->ma.kernels), load_ms,
           o->executions);
    for (long long k = 0; k < o->executions && k < JSON_TIMES; k++)
        printf(k ? ", %.6f" : "%.6f", times[k]);
    printf("], \"mean_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"output_dir\": ",
           total / (double)o->executions, best, worst);
    cli_json_string(stdout, o->output_dir);
    fputs(", \"outputs\": [", stdout);
    size_t no = etch_method_num_outputs(m);
    for (size_t i = 0; i < no; i++) {
        const etch_value *v = etch_method_output(m, i);
        printf("%s{\"index\": %zu, ", i ? ", " : "", i);
        cli_json_value_fields(stdout, v, o->print_output);
        fputs(", \"file\": ", stdout);
        char path[OUT_PATH_MAX];
        snprintf(path, sizeof path, "%s/output_%zu.npy", o->output_dir ? o->output_dir : "", i);
        cli_json_string(stdout, wrote && wrote[i] ? path : NULL);
        fputc('}', stdout);
    }
    fputs("]}\n", stdout);
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    static cli_served sv; /* --model NAME: the served files (o.path points into it) */
    /* a store name: valid as one, and not an existing path (paths keep working) */
    if (o.model && (cli_is_path(o.model) || !etch_store_name_valid(o.model))) {
        o.path = o.model;
    } else if (o.model) {
        etch_store_options so = etch_store_default_options();
        so.kernels = o.ma.kernels;
        so.no_backends = o.ma.no_backends;
        if ((rc = cli_store_serve("run", o.store, o.model, NULL, false, &so, &sv)) != CLI_OK)
            return rc;
        o.path = sv.s.pte_path;
        if (!o.ma.data && sv.s.ptd_path[0])
            o.ma.data = sv.s.ptd_path;
    }
    if (o.output_dir && (rc = cli_mkdirs(o.output_dir)) != CLI_OK)
        return rc;

    run_state *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
        return CLI_FAIL;
    }
    etch_module_options mo = cli_module_args_options(&o.ma);
    mo.load_mode = o.mode;
    double t0 = cli_now_ms();
    etch_status st = etch_module_open(o.path, &mo, &s->mod);
    if (st != ETCH_OK) {
        run_state_free(s);
        return cli_fail(st);
    }
    const char *name = o.ma.method;
    if (!name && (st = etch_module_default_method(s->mod, &name)) != ETCH_OK) {
        run_state_free(s);
        return cli_fail(st);
    }
    etch_method *m;
    if ((rc = cli_module_load_method(s->mod, name, &o.ma, &m)) != CLI_OK) {
        run_state_free(s);
        return rc;
    }
    double t1 = cli_now_ms();
    if (!o.json)
        printf("loaded method '%s' from %s in %.3f ms (threads %d, kernels %s)\n", cli_safe(name),
               o.path, t1 - t0, etch_module_num_threads(s->mod),
               etch_module_kernels_name(o.ma.kernels));

    if ((rc = cli_inputs_set(&s->in, "run", o.ma.inputs, CLI_FILL_ONES, m)) != CLI_OK) {
        run_state_free(s);
        return rc;
    }

    double total = 0, best = INFINITY, worst = 0;
    size_t no = etch_method_num_outputs(m), written = 0;
    double *times = o.json ? calloc(JSON_TIMES, sizeof *times) : NULL;
    bool *wrote = o.json ? calloc(no + 1, sizeof *wrote) : NULL;
    if (o.json && (!times || !wrote)) {
        free(times);
        free(wrote);
        run_state_free(s);
        fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
        return CLI_FAIL;
    }
    for (long long k = 0; k < o.executions; k++) {
        double a = cli_now_ms();
        st = etch_method_execute(m);
        double dt = cli_now_ms() - a;
        if (st != ETCH_OK) {
            free(times);
            free(wrote);
            run_state_free(s);
            return cli_fail_ctx(st, "execution %lld", k + 1);
        }
        if (times && k < JSON_TIMES)
            times[k] = dt;
        total += dt;
        best = dt < best ? dt : best;
        worst = dt > worst ? dt : worst;
        if (!o.json && (o.executions <= 20 || k < 10))
            printf("execution %lld: %.3f ms\n", k + 1, dt);
    }
    if (!o.json && o.executions > 1)
        printf("%lld executions: mean %.3f ms, min %.3f ms, max %.3f ms\n", o.executions,
               total / (double)o.executions, best, worst);

    for (size_t i = 0; i < no; i++) {
        const etch_value *v = etch_method_output(m, i);
        if (!v) {
            free(times);
            free(wrote);
            run_state_free(s);
            fprintf(stderr, "error: Internal: output %zu is missing\n", i);
            return CLI_FAIL;
        }
        if (!o.json)
            print_output(i, v, o.print_output);
        if (o.output_dir) {
            char path[OUT_PATH_MAX];
            snprintf(path, sizeof path, "%s/output_%zu.npy", o.output_dir, i);
            if (v->tag == ETCH_VALUE_TENSOR || v->tag == ETCH_VALUE_INT ||
                v->tag == ETCH_VALUE_DOUBLE || v->tag == ETCH_VALUE_BOOL ||
                v->tag == ETCH_VALUE_STRING) {
                if ((st = etch_npy_write_value(path, v)) != ETCH_OK) {
                    free(times);
                    free(wrote);
                    run_state_free(s);
                    return cli_fail_ctx(st, "output %zu", i);
                }
                written++;
                if (wrote)
                    wrote[i] = true;
            } else if (!o.json) {
                printf("note: output %zu is a %s value: not written\n", i,
                       etch_value_tag_name(v->tag));
            }
        }
    }
    if (o.json)
        print_json(&o, name, s->mod, m, t1 - t0, times, total, best, worst, wrote);
    else if (o.output_dir)
        printf("wrote %zu output%s to %s\n", written, written == 1 ? "" : "s", o.output_dir);
    free(times);
    free(wrote);
    run_state_free(s);
    return CLI_OK;
}
