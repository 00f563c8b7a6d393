/* Method inputs for the CLI: .npy files, or generated tensors at the stored shapes. */
#include "cli_inputs.h"

#include <stdlib.h>
#include <string.h>

int cli_inputs_check_list(const char *cmd, const char *s) {
    if (*s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
        return cli_usage_error(cmd, "--inputs: empty file name in '%s'", s);
    return CLI_OK;
}

/* Split "a,b,c" in place. */
static void split_list(char *buf, char **out, size_t cap) {
    size_t n = 0;
    for (char *p = buf; p && n < cap;) {
        out[n++] = p;
        p = strchr(p, ',');
        if (p)
            *p++ = 0;
    }
}

static uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffffu;
    if (exp <= 0) /* |f| < 2^-14: flush (values here are in [-1, 1]; tiny ones become 0) */
        return (uint16_t)sign;
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
    if ((man & 0x1fffu) > 0x1000u || ((man & 0x1fffu) == 0x1000u && (h & 1)))
        h++; /* round to nearest even */
    return (uint16_t)h;
}

/* A buffer of numel elements of dtype, made as `fill` says; seed varies per input. */
static void *make_tensor_data(int dtype, int64_t numel, cli_fill fill, uint32_t seed) {
    size_t es = etch_dtype_size(dtype);
    size_t nbytes = (size_t)numel * es;
    size_t cap = (nbytes + 15) & ~(size_t)15;
    uint8_t *p = aligned_alloc(16, cap ? cap : 16);
    if (!p)
        return NULL;
    uint32_t s = 0x9e3779b9u ^ (seed * 0x85ebca6bu);
    for (int64_t k = 0; k < numel; k++) {
        uint8_t *e = p + (size_t)k * es;
        double v = 1.0;
        if (fill == CLI_FILL_RANDOM) {
            s ^= s << 13; /* xorshift32 */
            s ^= s >> 17;
            s ^= s << 5;
            if (etch_dtype_is_floating(dtype))
                v = (double)(s >> 8) / (double)(1u << 24) * 2.0 - 1.0;
            else if (dtype == ETCH_DTYPE_BOOL)
                v = 0.0;
            else
                v = (double)(s >> 30); /* 0..3 */
        }
        switch (dtype) {
        case ETCH_DTYPE_HALF: {
            uint16_t h = float_to_half((float)v);
            memcpy(e, &h, 2);
            break;
        }
        case ETCH_DTYPE_BFLOAT16: {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            uint16_t b = (uint16_t)(bits >> 16);
            memcpy(e, &b, 2);
            break;
        }
        case ETCH_DTYPE_FLOAT: { float f = (float)v; memcpy(e, &f, 4); break; }
        case ETCH_DTYPE_DOUBLE: memcpy(e, &v, 8); break;
        default: {
            /* integers and bool, little endian */
            uint64_t u = (uint64_t)v;
            memcpy(e, &u, es < 8 ? es : 8);
            break;
        }
        }
    }
    return p;
}

/* A 0-d .npy as the scalar kind the method expects. */
static int scalar_from_npy(const char *file, size_t i, const etch_value_info *info,
                           const etch_tensor *t, etch_value *v) {
    if (t->dim != 0) {
        fprintf(stderr, "error: InvalidArgument: input %zu is %s: '%s' must hold a 0-d array\n",
                i, etch_value_tag_name(info->tag), file);
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

int cli_inputs_set(cli_inputs *s, const char *cmd, const char *list, cli_fill fill,
                   etch_method *m) {
    const etch_method_meta *meta = etch_method_get_meta(m);
    size_t n = etch_method_num_inputs(m);
    char *files[CLI_MAX_INPUTS];
    size_t nfiles = 0;
    if (n > CLI_MAX_INPUTS) {
        fprintf(stderr, "error: NotSupported: the method has %zu inputs; etch %s handles %d\n",
                n, cmd, CLI_MAX_INPUTS);
        return CLI_FAIL;
    }
    if (list) {
        nfiles = 1;
        for (const char *p = list; *p; p++)
            nfiles += *p == ',';
        if (nfiles != n)
            return cli_usage_error(cmd,
                                   "method '%s' takes %zu input%s, --inputs names %zu file%s",
                                   cli_safe(etch_method_meta_name(meta)), n, n == 1 ? "" : "s", nfiles,
                                   nfiles == 1 ? "" : "s");
        s->list = malloc(strlen(list) + 1);
        if (!s->list) {
            fprintf(stderr, "error: MemoryAllocationFailed: out of memory\n");
            return CLI_FAIL;
        }
        strcpy(s->list, list);
        split_list(s->list, files, CLI_MAX_INPUTS);
    }
    for (size_t i = 0; i < n; i++) {
        etch_value_info info;
        etch_status st = etch_method_meta_input(meta, i, &info);
        if (st != ETCH_OK)
            return cli_fail(st);
        etch_value v;
        memset(&v, 0, sizeof v);
        if (list) {
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
            if (!(s->data[i] = make_tensor_data(info.dtype, numel, fill, (uint32_t)i))) {
                fprintf(stderr, "error: MemoryAllocationFailed: input %zu: %zu bytes\n", i,
                        info.nbytes);
                return CLI_FAIL;
            }
            etch_tensor *t = &s->tensors[i];
            if ((st = etch_tensor_init(t, (etch_dtype)info.dtype, info.dim, info.sizes,
                                       s->data[i])) != ETCH_OK)
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
            if (list)
                return cli_fail_ctx(st, "'%s'", files[i]);
            return cli_fail(st);
        }
    }
    return CLI_OK;
}

void cli_inputs_free(cli_inputs *s) {
    if (!s)
        return;
    for (size_t i = 0; i < CLI_MAX_INPUTS; i++) {
        etch_npy_free(&s->npys[i]);
        free(s->data[i]);
        s->data[i] = NULL;
    }
    free(s->list);
    s->list = NULL;
}

/* ---- the options etch run and etch bench share ------------------------------------------- */

int cli_module_args_take(const char *cmd, int argc, char **argv, int *i, cli_module_args *a) {
    int r;
    if ((r = cli_opt_value(cmd, argc, argv, i, "--method", &a->method)) ||
        (r = cli_opt_value(cmd, argc, argv, i, "--inputs", &a->inputs)) ||
        (r = cli_opt_value(cmd, argc, argv, i, "--data", &a->data)) ||
        (r = cli_opt_value(cmd, argc, argv, i, "--cpu-threads", &a->threads_s)) ||
        (r = cli_opt_value(cmd, argc, argv, i, "--kernels", &a->kernels_s)) ||
        (r = cli_opt_flag(cmd, argv, *i, "--no-fusion", &a->no_fusion)) ||
        (r = cli_opt_flag(cmd, argv, *i, "--no-prepack", &a->no_prepack)) ||
        (r = cli_opt_flag(cmd, argv, *i, "--no-blocked-layout", &a->no_blocked_layout)) ||
        (r = cli_opt_flag(cmd, argv, *i, "--no-backends", &a->no_backends)))
        return r;
    return 0;
}

int cli_module_args_finish(const char *cmd, cli_module_args *a) {
    if (a->inputs && cli_inputs_check_list(cmd, a->inputs) != CLI_OK)
        return CLI_USAGE;
    a->num_threads = cli_default_threads();
    if (a->threads_s && !cli_parse_threads(cmd, a->threads_s, &a->num_threads))
        return CLI_USAGE;
    a->kernels = ETCH_MODULE_KERNELS_OPTIMIZED;
    if (a->kernels_s && !cli_parse_kernels(cmd, a->kernels_s, &a->kernels))
        return CLI_USAGE;
    return CLI_OK;
}

etch_module_options cli_module_args_options(const cli_module_args *a) {
    etch_module_options mo = etch_module_default_options();
    mo.data_path = a->data;
    mo.num_threads = a->num_threads;
    mo.kernels = a->kernels;
    mo.no_fusion = a->no_fusion;
    mo.no_prepack = a->no_prepack;
    mo.no_blocked_layout = a->no_blocked_layout;
    mo.no_backends = a->no_backends;
    return mo;
}

int cli_module_load_method(etch_module *mod, const char *name, const cli_module_args *a,
                           etch_method **out) {
    etch_status st = etch_module_load_method(mod, name, out);
    if (st == ETCH_OK)
        return CLI_OK;
    /* The library names its option (etch_module_options.data_path); here it is --data. */
    etch_method_meta meta;
    if (st == ETCH_ERR_NOT_FOUND && !a->data &&
        etch_program_method_meta(etch_module_program(mod), name, &meta) == ETCH_OK &&
        etch_method_meta_needs_external_data(&meta)) {
        fflush(stdout);
        fprintf(stderr,
                "error: NotFound: method '%s' needs external tensor data: give its .ptd file "
                "with --data FILE.ptd\n",
                cli_safe(name));
        return CLI_FAIL;
    }
    return cli_fail(st);
}
