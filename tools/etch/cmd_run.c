/* etch run FILE — load a method, feed it inputs, execute it, save/print the outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/module.h"
#include "etch/npy.h"

#define MAX_INPUTS 256
#define PRINT_ITEMS 16

void cmd_run_usage(FILE *out) {
    fprintf(out,
            "usage: etch run FILE [options]\n"
            "\n"
            "Load a method of FILE (.pte, or the program inside a .bpte), execute it and report\n"
            "the load time and each execution's time.\n"
            "\n"
            "options:\n"
            "  --method NAME          method to run (default: 'forward', else the only method)\n"
            "  --inputs A.npy,B.npy   one .npy per method input, in order; a non-tensor input\n"
            "                         takes a 0-d array. Default: tensors of ones at the stored\n"
            "                         (upper-bound) shape and the exported value of non-tensor\n"
            "                         inputs\n"
            "  --data FILE.ptd        external tensor data\n"
            "  --output-dir DIR       write output i to DIR/output_<i>.npy (DIR is created;\n"
            "                         non-tensor outputs become 0-d arrays)\n"
            "  --num-executions N     execute N times (default 1)\n"
            "  --print-output         print each output's dtype, shape and values\n"
            "  --load-mode MODE       mmap (default) or read\n"
            "  -h, --help             show this help\n");
}

typedef struct run_opts {
    const char *path, *method, *inputs, *data, *output_dir, *num_exec, *load_mode;
    bool print_output;
    long long executions;
    etch_load_mode mode;
} run_opts;

static int parse_args(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r;
        if (strcmp(a, "--") == 0) {
            if (o->path || i + 2 != argc)
                return cli_usage_error("run", "expected exactly one FILE after '--'");
            o->path = argv[++i];
            break;
        }
        if ((r = cli_opt_value("run", argc, argv, &i, "--method", &o->method)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--inputs", &o->inputs)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--data", &o->data)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--output-dir", &o->output_dir)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--num-executions", &o->num_exec)) ||
            (r = cli_opt_value("run", argc, argv, &i, "--load-mode", &o->load_mode)) ||
            (r = cli_opt_flag("run", argv, i, "--print-output", &o->print_output))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (a[0] == '-' && a[1])
            return cli_usage_error("run", "unknown option '%s'", a);
        if (o->path)
            return cli_usage_error("run", "expected one FILE, got '%s' and '%s'", o->path, a);
        o->path = a;
    }
    if (!o->path)
        return cli_usage_error("run", "missing FILE");
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
    if (o->inputs) {
        /* Every comma-separated entry must be non-empty. */
        const char *s = o->inputs;
        if (*s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
            return cli_usage_error("run", "--inputs: empty file name in '%s'", s);
    }
    return CLI_OK;
}

/* Split "a,b,c" into owned strings. */
static void split_inputs(char *buf, char **out, size_t cap) {
    size_t n = 0;
    for (char *p = buf; p && n < cap;) {
        out[n++] = p;
        p = strchr(p, ',');
        if (p)
            *p++ = 0;
    }
}

/* A buffer of ones in `dtype`. */
static void *ones(int dtype, int64_t numel) {
    size_t es = etch_dtype_size(dtype);
    size_t nbytes = (size_t)numel * es;
    uint8_t *p = aligned_alloc(16, ((nbytes + 15) & ~(size_t)15) ? ((nbytes + 15) & ~(size_t)15)
                                                                   : 16);
    if (!p)
        return NULL;
    uint8_t one[8] = {0};
    switch (dtype) {
    case ETCH_DTYPE_HALF: one[0] = 0x00; one[1] = 0x3c; break;
    case ETCH_DTYPE_BFLOAT16: one[0] = 0x80; one[1] = 0x3f; break;
    case ETCH_DTYPE_FLOAT: { float f = 1.0f; memcpy(one, &f, 4); break; }
    case ETCH_DTYPE_DOUBLE: { double d = 1.0; memcpy(one, &d, 8); break; }
    default: one[0] = 1; break; /* integers and bool, little endian */
    }
    for (int64_t k = 0; k < numel; k++)
        memcpy(p + (size_t)k * es, one, es);
    return p;
}

/* A 0-d .npy as the scalar kind the method expects. */
static int scalar_from_npy(const char *file, size_t i, const etch_value_info *info,
                           const etch_tensor *t, etch_value *v) {
    if (t->dim != 0) {
        fprintf(stderr,
                "error: InvalidArgument: input %zu is %s: '%s' must hold a 0-d array\n", i,
                etch_value_tag_name(info->tag), file);
        return CLI_FAIL;
    }
    double d = cli_elem_as_double(t->data, t->dtype, 0);
    memset(v, 0, sizeof *v);
    v->tag = info->tag;
    switch (info->tag) {
    case ETCH_VALUE_INT:
        if (!etch_dtype_is_integral(t->dtype, true))
            goto bad;
        if (t->dtype == ETCH_DTYPE_LONG || t->dtype == ETCH_DTYPE_UINT64)
            memcpy(&v->u.i, t->data, 8);
        else
            v->u.i = (int64_t)d;
        return CLI_OK;
    case ETCH_VALUE_BOOL:
        if (t->dtype != ETCH_DTYPE_BOOL && !etch_dtype_is_integral(t->dtype, false))
            goto bad;
        v->u.b = d != 0;
        return CLI_OK;
    case ETCH_VALUE_DOUBLE:
        v->u.d = d;
        return CLI_OK;
    case ETCH_VALUE_NONE:
        return CLI_OK;
    default:
        fprintf(stderr, "error: NotSupported: input %zu is a %s: it cannot come from a .npy\n", i,
                etch_value_tag_name(info->tag));
        return CLI_FAIL;
    }
bad:
    fprintf(stderr, "error: InvalidArgument: input %zu is %s, '%s' holds %s\n", i,
            etch_value_tag_name(info->tag), file, etch_dtype_name(t->dtype));
    return CLI_FAIL;
}

/* Everything the inputs borrow: it lives until the module (and its method) is closed. */
typedef struct run_state {
    etch_module *mod;
    etch_npy npys[MAX_INPUTS];
    etch_tensor ones_tensors[MAX_INPUTS];
    void *ones[MAX_INPUTS];
    char *input_buf;
} run_state;

static void run_state_free(run_state *s) {
    if (!s)
        return;
    etch_module_close(s->mod); /* methods first: inputs may be borrowed until then */
    for (size_t i = 0; i < MAX_INPUTS; i++) {
        etch_npy_free(&s->npys[i]);
        free(s->ones[i]);
    }
    free(s->input_buf);
    free(s);
}

static int set_inputs(run_state *s, const run_opts *o, etch_method *m) {
    const etch_method_meta *meta = etch_method_get_meta(m);
    size_t n = etch_method_num_inputs(m);
    char *files[MAX_INPUTS];
    size_t nfiles = 0;
    if (n > MAX_INPUTS) {
        fprintf(stderr, "error: NotSupported: the method has %zu inputs; etch run handles %d\n",
                n, MAX_INPUTS);
        return CLI_FAIL;
    }
    if (o->inputs) {
        nfiles = 1;
        for (const char *p = o->inputs; *p; p++)
            nfiles += *p == ',';
        if (nfiles != n)
            return cli_usage_error("run",
                                   "method '%s' takes %zu input%s, --inputs names %zu file%s",
                                   etch_method_meta_name(meta), n, n == 1 ? "" : "s", nfiles,
                                   nfiles == 1 ? "" : "s");
        s->input_buf = malloc(strlen(o->inputs) + 1);
        if (!s->input_buf) {
            fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
            return CLI_FAIL;
        }
        strcpy(s->input_buf, o->inputs);
        split_inputs(s->input_buf, files, MAX_INPUTS);
    }
    for (size_t i = 0; i < n; i++) {
        etch_value_info info;
        etch_status st = etch_method_meta_input(meta, i, &info);
        if (st != ETCH_OK)
            return cli_fail(st);
        etch_value v;
        memset(&v, 0, sizeof v);
        if (o->inputs) {
            if ((st = etch_npy_read_file(files[i], &s->npys[i])) != ETCH_OK)
                return cli_fail_ctx(st, "input %zu", i);
            if (info.tag == ETCH_VALUE_TENSOR) {
                v.tag = ETCH_VALUE_TENSOR;
                v.u.tensor = &s->npys[i].tensor;
            } else {
                int rc = scalar_from_npy(files[i], i, &info, &s->npys[i].tensor, &v);
                if (rc != CLI_OK)
                    return rc;
            }
        } else if (info.tag == ETCH_VALUE_TENSOR) {
            int64_t numel = 1;
            for (unsigned d = 0; d < info.dim; d++)
                numel *= info.sizes[d];
            if (!(s->ones[i] = ones(info.dtype, numel))) {
                fprintf(stderr, "error: MemoryAllocationFailed: input %zu: %zu bytes\n", i,
                        info.nbytes);
                return CLI_FAIL;
            }
            etch_tensor *t = &s->ones_tensors[i];
            if ((st = etch_tensor_init(t, (etch_dtype)info.dtype, info.dim, info.sizes,
                                       s->ones[i])) != ETCH_OK)
                return cli_fail_ctx(st, "input %zu", i);
            memcpy(t->dim_order, info.dim_order, sizeof t->dim_order);
            etch_tensor_update_strides(t);
            v.tag = ETCH_VALUE_TENSOR;
            v.u.tensor = t;
        } else if (info.tag == ETCH_VALUE_INT || info.tag == ETCH_VALUE_BOOL ||
                   info.tag == ETCH_VALUE_DOUBLE || info.tag == ETCH_VALUE_NONE) {
            v.tag = info.tag;
            if (info.tag == ETCH_VALUE_INT)
                v.u.i = info.int_val;
            else if (info.tag == ETCH_VALUE_BOOL)
                v.u.b = info.int_val != 0;
            else if (info.tag == ETCH_VALUE_DOUBLE)
                v.u.d = info.double_val;
        } else {
            /* Strings and lists: hand back the value the program was exported with. */
            const etch_value *cur = etch_method_input(m, i);
            if (!cur) {
                fprintf(stderr, "error: NotSupported: input %zu (%s) has no default\n", i,
                        etch_value_tag_name(info.tag));
                return CLI_FAIL;
            }
            v = *cur;
        }
        if ((st = etch_method_set_input(m, i, &v)) != ETCH_OK) {
            /* The runtime's message already names the input. */
            if (o->inputs)
                return cli_fail_ctx(st, "'%s'", files[i]);
            return cli_fail(st);
        }
    }
    return CLI_OK;
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

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    if (o.output_dir && (rc = cli_mkdirs(o.output_dir)) != CLI_OK)
        return rc;

    run_state *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
        return CLI_FAIL;
    }
    etch_module_options mo = etch_module_default_options();
    mo.load_mode = o.mode;
    mo.data_path = o.data;
    double t0 = cli_now_ms();
    etch_status st = etch_module_open(o.path, &mo, &s->mod);
    if (st != ETCH_OK) {
        run_state_free(s);
        return cli_fail(st);
    }
    const char *name = o.method;
    if (!name && (st = etch_module_default_method(s->mod, &name)) != ETCH_OK) {
        run_state_free(s);
        return cli_fail(st);
    }
    etch_method *m;
    if ((st = etch_module_load_method(s->mod, name, &m)) != ETCH_OK) {
        run_state_free(s);
        return cli_fail(st);
    }
    double t1 = cli_now_ms();
    printf("loaded method '%s' from %s in %.3f ms\n", name, o.path, t1 - t0);

    if ((rc = set_inputs(s, &o, m)) != CLI_OK) {
        run_state_free(s);
        return rc;
    }

    double total = 0, best = INFINITY, worst = 0;
    for (long long k = 0; k < o.executions; k++) {
        double a = cli_now_ms();
        st = etch_method_execute(m);
        double dt = cli_now_ms() - a;
        if (st != ETCH_OK) {
            run_state_free(s);
            return cli_fail_ctx(st, "execution %lld", k + 1);
        }
        total += dt;
        best = dt < best ? dt : best;
        worst = dt > worst ? dt : worst;
        if (o.executions <= 20 || k < 10)
            printf("execution %lld: %.3f ms\n", k + 1, dt);
    }
    if (o.executions > 1)
        printf("%lld executions: mean %.3f ms, min %.3f ms, max %.3f ms\n", o.executions,
               total / (double)o.executions, best, worst);

    size_t no = etch_method_num_outputs(m), written = 0;
    for (size_t i = 0; i < no; i++) {
        const etch_value *v = etch_method_output(m, i);
        if (!v) {
            run_state_free(s);
            fprintf(stderr, "error: Internal: output %zu is missing\n", i);
            return CLI_FAIL;
        }
        print_output(i, v, o.print_output);
        if (o.output_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/output_%zu.npy", o.output_dir, i);
            if (v->tag == ETCH_VALUE_TENSOR || v->tag == ETCH_VALUE_INT ||
                v->tag == ETCH_VALUE_DOUBLE || v->tag == ETCH_VALUE_BOOL) {
                if ((st = etch_npy_write_value(path, v)) != ETCH_OK) {
                    run_state_free(s);
                    return cli_fail_ctx(st, "output %zu", i);
                }
                written++;
            } else {
                printf("note: output %zu is a %s value: not written\n", i,
                       etch_value_tag_name(v->tag));
            }
        }
    }
    if (o.output_dir)
        printf("wrote %zu output%s to %s\n", written, written == 1 ? "" : "s", o.output_dir);
    run_state_free(s);
    return CLI_OK;
}
