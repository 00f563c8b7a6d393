/* Bundled programs (.bpte, BP08): parse and verify the wrapper once at open, then feed test
 * inputs to a loaded method and compare its outputs with the expected ones.
 *
 * Schema (bundled_program_schema.fbs, slots in declaration order):
 *   BundledProgram         0 version: uint, 1 method_test_suites: [BundledMethodTestSuite],
 *                          2 program: [ubyte] (force_align 32)
 *   BundledMethodTestSuite 0 method_name: string, 1 test_cases: [BundledMethodTestCase]
 *   BundledMethodTestCase  0 inputs: [Value], 1 expected_outputs: [Value]
 *   Value                  0 val_type: ubyte (ValueUnion), 1 val: table
 *   ValueUnion             0 NONE, 1 Tensor, 2 Int, 3 Bool, 4 Double
 *   Tensor                 0 scalar_type: byte, 1 sizes: [int], 2 data: [ubyte],
 *                          3 dim_order: [ubyte]
 *   Int / Bool / Double    0 int_val: long / bool_val: bool / double_val: double
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/bundled.h"
#include "format/flatbuf.h"
#include "runtime/error.h"

enum { BV_NONE = 0, BV_TENSOR = 1, BV_INT = 2, BV_BOOL = 3, BV_DOUBLE = 4 };

typedef struct bundled_value {
    uint8_t kind; /* BV_* */
    int64_t i;
    double d;
    bool b;
    /* tensors */
    int dtype;
    uint8_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    uint8_t dim_order[ETCH_MAX_DIMS];
    const uint8_t *data; /* borrowed from the buffer, or from `aligned` when it was misaligned */
    size_t nbytes;
} bundled_value;

typedef struct bundled_case {
    bundled_value *inputs;
    size_t num_inputs;
    bundled_value *outputs;
    size_t num_outputs;
} bundled_case;

typedef struct bundled_suite {
    const char *method; /* NUL-terminated, in the buffer */
    bundled_case *cases;
    size_t num_cases;
} bundled_suite;

struct etch_bundled {
    const uint8_t *program;
    size_t program_size;
    uint32_t version;
    bundled_suite *suites;
    size_t num_suites;
    /* One block holding all parsed values, and one holding copies of tensor data that was not
     * 16-byte aligned in the caller's buffer (kernels read typed elements). */
    bundled_value *values;
    uint8_t *aligned;
};

/* ---- parsing ------------------------------------------------------------------------ */

typedef struct parse_ctx {
    fb_buf fb;
    bundled_value *values; /* NULL in the counting pass */
    size_t num_values;
    size_t misaligned_bytes; /* rounded up to 16 each */
    uint8_t *aligned;        /* NULL in the counting pass */
    size_t aligned_used;
    char msg[160];
    size_t msg_offset;
} parse_ctx;

static bool semantic_fail(parse_ctx *c, size_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bool semantic_fail(parse_ctx *c, size_t offset, const char *fmt, ...) {
    if (c->msg[0] || c->fb.failed)
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    c->msg_offset = offset;
    return false;
}

static bool parse_tensor(parse_ctx *c, const fb_table *t, bundled_value *v) {
    int dtype = (int)fb_i(t, 0, 1, 0);
    fb_vec sizes, data, order;
    bool has_sizes = fb_vec_field(t, 1, 4, 4, &sizes);
    bool has_data = fb_vec_field(t, 2, 1, 1, &data);
    bool has_order = fb_vec_field(t, 3, 1, 1, &order);
    if (c->fb.failed)
        return false;
    if (!etch_dtype_is_valid(dtype))
        return semantic_fail(c, t->pos, "tensor has unknown scalar_type %d", dtype);
    if (!has_sizes)
        sizes.len = 0; /* absent: a 0-d tensor */
    if (sizes.len > ETCH_MAX_DIMS)
        return semantic_fail(c, t->pos, "tensor rank %u exceeds %d", sizes.len, ETCH_MAX_DIMS);
    v->kind = BV_TENSOR;
    v->dtype = dtype;
    v->dim = (uint8_t)sizes.len;
    uint64_t numel = 1;
    size_t elem = etch_dtype_size(dtype);
    for (uint32_t i = 0; i < sizes.len; i++) {
        int32_t s = fb_vec_i32(&sizes, i);
        if (s < 0)
            return semantic_fail(c, sizes.pos + 4 * (size_t)i, "tensor size %d is negative", s);
        v->sizes[i] = s;
    }
    if (etch_shape_extent(sizes.len, v->sizes) < 0)
        return semantic_fail(c, sizes.pos, "tensor element count overflows");
    for (uint32_t i = 0; i < sizes.len; i++)
        numel *= (uint64_t)v->sizes[i];
    uint64_t want = numel * elem;
    uint32_t have = has_data ? data.len : 0;
    if (want != have)
        return semantic_fail(c, has_data ? data.pos : t->pos,
                             "tensor data holds %u bytes, sizes x %s need %llu", have,
                             etch_dtype_name(dtype), (unsigned long long)want);
    if (has_order && order.len > 0) {
        if (order.len != sizes.len)
            return semantic_fail(c, order.pos, "dim_order has %u entries for a rank-%u tensor",
                                 order.len, sizes.len);
        bool seen[ETCH_MAX_DIMS] = {false};
        for (uint32_t i = 0; i < order.len; i++) {
            uint8_t d = fb_vec_u8(&order, i);
            if (d >= sizes.len || seen[d])
                return semantic_fail(c, order.pos, "dim_order is not a permutation");
            seen[d] = true;
            v->dim_order[i] = d;
        }
    } else {
        for (uint32_t i = 0; i < sizes.len; i++)
            v->dim_order[i] = (uint8_t)i;
    }
    v->nbytes = (size_t)want;
    v->data = has_data ? c->fb.data + data.pos : NULL;
    if (want && ((uintptr_t)v->data & 15)) {
        size_t padded = (v->nbytes + 15) & ~(size_t)15;
        if (c->aligned) {
            memcpy(c->aligned + c->aligned_used, v->data, v->nbytes);
            v->data = c->aligned + c->aligned_used;
            c->aligned_used += padded;
        } else {
            c->misaligned_bytes += padded;
        }
    }
    return true;
}

static bool parse_value(parse_ctx *c, const fb_vec *vec, uint32_t i) {
    fb_table vt, val;
    bundled_value scratch;
    bundled_value *v = c->values ? &c->values[c->num_values] : &scratch;
    memset(v, 0, sizeof *v);
    c->num_values++;
    if (!fb_vec_table(vec, i, &vt))
        return false;
    unsigned tag = (unsigned)fb_u(&vt, 0, 1, 0);
    bool has_val = fb_table_field(&vt, 1, &val);
    if (c->fb.failed)
        return false;
    if (tag > BV_DOUBLE)
        return semantic_fail(c, vt.pos, "value has unknown union type %u", tag);
    if (tag != BV_NONE && !has_val)
        return semantic_fail(c, vt.pos, "value of union type %u has no table", tag);
    v->kind = (uint8_t)tag;
    switch (tag) {
    case BV_TENSOR: return parse_tensor(c, &val, v);
    case BV_INT: v->i = fb_i(&val, 0, 8, 0); break;
    case BV_BOOL: v->b = fb_u(&val, 0, 1, 0) != 0; break;
    case BV_DOUBLE: v->d = fb_f64(&val, 0, 0.0); break;
    default: break;
    }
    return !c->fb.failed;
}

static bool parse_values(parse_ctx *c, const fb_table *tc, unsigned slot, bundled_value **first,
                         size_t *count) {
    fb_vec vec;
    if (!fb_vec_field(tc, slot, 4, 4, &vec)) {
        if (c->fb.failed)
            return false;
        vec.len = 0; /* absent list = empty */
    }
    *first = c->values ? c->values + c->num_values : NULL;
    *count = vec.len;
    for (uint32_t i = 0; i < vec.len; i++)
        if (!parse_value(c, &vec, i))
            return false;
    return true;
}

/* Walk the whole buffer. With b == NULL only counts (values, misaligned bytes); otherwise
 * fills b's suites, whose arrays were sized by the counting pass. */
static bool parse_all(parse_ctx *c, etch_bundled *b, fb_vec *suites_out, fb_vec *program_out,
                      uint32_t *version) {
    fb_table root;
    if (!fb_root(&c->fb, &root))
        return false;
    *version = (uint32_t)fb_u(&root, 0, 4, 0);
    fb_vec suites, program;
    bool has_suites = fb_vec_field(&root, 1, 4, 4, &suites);
    bool has_program = fb_vec_field(&root, 2, 1, 1, &program);
    if (c->fb.failed)
        return false;
    if (!has_program || program.len == 0)
        return semantic_fail(c, root.pos, "bundled program has no embedded program");
    if (!has_suites)
        suites.len = 0;
    *suites_out = suites;
    *program_out = program;
    for (uint32_t s = 0; s < suites.len; s++) {
        fb_table st;
        if (!fb_vec_table(&suites, s, &st))
            return false;
        const char *name;
        uint32_t name_len;
        if (!fb_str_field(&st, 0, &name, &name_len))
            return c->fb.failed ? false
                                : semantic_fail(c, st.pos, "test suite %u has no method_name", s);
        fb_vec cases;
        if (!fb_vec_field(&st, 1, 4, 4, &cases)) {
            if (c->fb.failed)
                return false;
            cases.len = 0;
        }
        bundled_suite *suite = b ? &b->suites[s] : NULL;
        if (suite) {
            suite->method = name;
            suite->num_cases = cases.len;
            if (cases.len) {
                suite->cases = calloc(cases.len, sizeof *suite->cases);
                if (!suite->cases)
                    return semantic_fail(c, st.pos, "out of memory");
            }
        }
        for (uint32_t k = 0; k < cases.len; k++) {
            fb_table tc;
            if (!fb_vec_table(&cases, k, &tc))
                return false;
            bundled_case scratch, *bc = suite ? &suite->cases[k] : &scratch;
            if (!parse_values(c, &tc, 0, &bc->inputs, &bc->num_inputs) ||
                !parse_values(c, &tc, 1, &bc->outputs, &bc->num_outputs))
                return false;
        }
    }
    return true;
}

etch_status etch_bundled_open_buffer(const void *data, size_t size, etch_bundled **out) {
    if (!data || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "bundled_open: NULL argument");
    const uint8_t *bytes = (const uint8_t *)data;
    if (size < 8)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "bundled program: %zu bytes is too short (offset 0)", size);
    if (memcmp(bytes + 4, "BP08", 4) != 0) {
        char id[5];
        for (int i = 0; i < 4; i++)
            id[i] = (bytes[4 + i] >= 0x20 && bytes[4 + i] < 0x7f) ? (char)bytes[4 + i] : '?';
        id[4] = 0;
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "bundled program: identifier '%s' at offset 4, expected 'BP08'", id);
    }

    /* Pass 1: verify and count. */
    parse_ctx c;
    memset(&c, 0, sizeof c);
    fb_init(&c.fb, data, size);
    fb_vec suites, program;
    uint32_t version = 0;
    if (!parse_all(&c, NULL, &suites, &program, &version)) {
        if (c.fb.failed)
            return etch_err(ETCH_ERR_INVALID_PROGRAM, "bundled program: %s at offset %zu",
                            c.fb.err_what ? c.fb.err_what : "malformed flatbuffer",
                            c.fb.err_offset);
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "bundled program: %s at offset %zu", c.msg,
                        c.msg_offset);
    }

    /* Pass 2: fill. */
    etch_bundled *b = calloc(1, sizeof *b);
    size_t nvalues = c.num_values, naligned = c.misaligned_bytes;
    if (b) {
        b->num_suites = suites.len;
        b->suites = suites.len ? calloc(suites.len, sizeof *b->suites) : NULL;
        b->values = nvalues ? calloc(nvalues, sizeof *b->values) : NULL;
        b->aligned = naligned ? aligned_alloc(16, naligned) : NULL;
    }
    if (!b || (suites.len && !b->suites) || (nvalues && !b->values) ||
        (naligned && !b->aligned)) {
        etch_bundled_close(b);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "bundled program: out of memory");
    }
    memset(&c, 0, sizeof c);
    fb_init(&c.fb, data, size);
    c.values = b->values;
    c.aligned = b->aligned;
    if (!parse_all(&c, b, &suites, &program, &version)) {
        etch_bundled_close(b);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "bundled program: out of memory");
    }
    b->version = version;
    b->program = bytes + program.pos;
    b->program_size = program.len;
    *out = b;
    return ETCH_OK;
}

void etch_bundled_close(etch_bundled *b) {
    if (!b)
        return;
    for (size_t s = 0; b->suites && s < b->num_suites; s++)
        free(b->suites[s].cases);
    free(b->suites);
    free(b->values);
    free(b->aligned);
    free(b);
}

const void *etch_bundled_program(const etch_bundled *b, size_t *size) {
    if (size)
        *size = b ? b->program_size : 0;
    return b ? b->program : NULL;
}

size_t etch_bundled_num_suites(const etch_bundled *b) { return b ? b->num_suites : 0; }

const char *etch_bundled_suite_method(const etch_bundled *b, size_t suite) {
    return b && suite < b->num_suites ? b->suites[suite].method : NULL;
}

static const bundled_suite *find_suite(const etch_bundled *b, const char *method) {
    for (size_t s = 0; b && method && s < b->num_suites; s++)
        if (strcmp(b->suites[s].method, method) == 0)
            return &b->suites[s];
    return NULL;
}

size_t etch_bundled_num_cases(const etch_bundled *b, const char *method) {
    const bundled_suite *s = find_suite(b, method);
    return s ? s->num_cases : 0;
}

static etch_status find_case(const etch_bundled *b, const etch_method *method, size_t test,
                             const bundled_case **out) {
    if (!b || !method)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "bundled: NULL argument");
    const char *name = etch_method_meta_name(etch_method_get_meta(method));
    const bundled_suite *s = find_suite(b, name);
    if (!s)
        return etch_err(ETCH_ERR_NOT_FOUND, "bundled program has no test suite for method '%s'",
                        name ? name : "?");
    if (test >= s->num_cases)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "method '%s' has %zu bundled test cases; case %zu does not exist", name,
                        s->num_cases, test);
    *out = &s->cases[test];
    return ETCH_OK;
}

/* A tensor over a bundled value's bytes (read only: the runtime copies planned inputs and
 * never writes into a borrowed input). */
static void wrap_tensor(const bundled_value *v, etch_tensor *t) {
    memset(t, 0, sizeof *t);
    t->data = (void *)(uintptr_t)v->data;
    t->dim = v->dim;
    t->dtype = (uint8_t)v->dtype;
    t->dynamism = ETCH_SHAPE_STATIC;
    int64_t n = 1;
    for (unsigned d = 0; d < v->dim; d++) {
        t->sizes[d] = v->sizes[d];
        t->dim_order[d] = v->dim_order[d];
        n *= v->sizes[d];
    }
    t->capacity = n;
    etch_tensor_update_strides(t);
}

etch_status etch_bundled_load_inputs(const etch_bundled *b, etch_method *method, size_t test) {
    const bundled_case *bc = NULL;
    etch_status st = find_case(b, method, test, &bc);
    if (st != ETCH_OK)
        return st;
    size_t n = etch_method_num_inputs(method);
    if (bc->num_inputs != n)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "bundled test case %zu has %zu inputs, the method takes %zu", test,
                        bc->num_inputs, n);
    for (size_t i = 0; i < n; i++) {
        const bundled_value *v = &bc->inputs[i];
        etch_value val;
        etch_tensor t;
        memset(&val, 0, sizeof val);
        switch (v->kind) {
        case BV_TENSOR:
            wrap_tensor(v, &t);
            val.tag = ETCH_VALUE_TENSOR;
            val.u.tensor = &t;
            break;
        case BV_INT: val.tag = ETCH_VALUE_INT; val.u.i = v->i; break;
        case BV_BOOL: val.tag = ETCH_VALUE_BOOL; val.u.b = v->b; break;
        case BV_DOUBLE: val.tag = ETCH_VALUE_DOUBLE; val.u.d = v->d; break;
        default: val.tag = ETCH_VALUE_NONE; break;
        }
        st = etch_method_set_input(method, i, &val);
        if (st != ETCH_OK) {
            etch_err_prefix("bundled test case %zu, input %zu", test, i);
            return st;
        }
    }
    return ETCH_OK;
}

/* ---- comparison ------------------------------------------------------------------------ */

static double half_to_double(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

static double load_float(const uint8_t *p, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_HALF: {
        uint16_t h;
        memcpy(&h, p, 2);
        return half_to_double(h);
    }
    case ETCH_DTYPE_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    }
}

/* Integer-ish element as a printable number (for messages only). */
static long long load_int(const uint8_t *p, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_CHAR: return (int8_t)p[0];
    case ETCH_DTYPE_SHORT: { int16_t v; memcpy(&v, p, 2); return v; }
    case ETCH_DTYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ETCH_DTYPE_INT: { int32_t v; memcpy(&v, p, 4); return v; }
    case ETCH_DTYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ETCH_DTYPE_LONG: case ETCH_DTYPE_UINT64: { int64_t v; memcpy(&v, p, 8); return v; }
    default: return p[0];
    }
}

static void report_fail(etch_bundled_report *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void report_fail(etch_bundled_report *r, const char *fmt, ...) {
    if (r->message[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

static void strides_of(const bundled_value *v, int64_t *strides) {
    int64_t s = 1;
    for (int i = (int)v->dim - 1; i >= 0; i--) {
        uint8_t d = v->dim_order[i];
        strides[d] = s;
        s *= v->sizes[d] == 0 ? 1 : v->sizes[d];
    }
}

static void compare_tensor(size_t j, const etch_tensor *a, const bundled_value *e, double rtol,
                           double atol, etch_bundled_report *r) {
    if (a->dtype != e->dtype) {
        r->mismatches++;
        report_fail(r, "output %zu: dtype %s, expected %s", j, etch_dtype_name(a->dtype),
                    etch_dtype_name(e->dtype));
        return;
    }
    bool same_shape = a->dim == e->dim;
    for (unsigned d = 0; same_shape && d < a->dim; d++)
        same_shape = a->sizes[d] == e->sizes[d];
    if (!same_shape) {
        char got[160], want[160];
        size_t gl = 0, wl = 0;
        got[0] = want[0] = 0;
        for (unsigned d = 0; d < a->dim && gl < sizeof got; d++)
            gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? ", " : "",
                                   (long long)a->sizes[d]);
        for (unsigned d = 0; d < e->dim && wl < sizeof want; d++)
            wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", d ? ", " : "",
                                   (long long)e->sizes[d]);
        r->mismatches++;
        report_fail(r, "output %zu: shape [%s], expected [%s]", j, got, want);
        return;
    }
    int64_t es[ETCH_MAX_DIMS];
    strides_of(e, es);
    for (unsigned d = 0; d < a->dim; d++) {
        if (a->sizes[d] > 1 && a->strides[d] != es[d]) {
            r->mismatches++;
            report_fail(r, "output %zu: memory layout (dim order) differs from the expected one",
                        j);
            return;
        }
    }
    size_t elem = etch_dtype_size(a->dtype);
    size_t numel = e->nbytes / (elem ? elem : 1);
    const uint8_t *ap = (const uint8_t *)a->data, *ep = e->data;
    if (numel && !ap) {
        r->mismatches++;
        report_fail(r, "output %zu: tensor has no data", j);
        return;
    }
    bool is_float = a->dtype == ETCH_DTYPE_FLOAT || a->dtype == ETCH_DTYPE_DOUBLE ||
                    a->dtype == ETCH_DTYPE_HALF;
    for (size_t k = 0; k < numel; k++) {
        const uint8_t *x = ap + k * elem, *y = ep + k * elem;
        if (!is_float) {
            if (memcmp(x, y, elem) != 0) {
                r->mismatches++;
                if (etch_dtype_is_integral(a->dtype, true))
                    report_fail(r, "output %zu: element %zu is %lld, expected %lld", j, k,
                                load_int(x, a->dtype), load_int(y, a->dtype));
                else
                    report_fail(r, "output %zu: element %zu differs (bytewise)", j, k);
            }
            continue;
        }
        double av = load_float(x, a->dtype), ev = load_float(y, a->dtype);
        double abs_err, rel_err;
        bool ok;
        if (isnan(av) || isnan(ev)) {
            ok = isnan(av) && isnan(ev);
            abs_err = rel_err = ok ? 0.0 : INFINITY;
        } else if (av == ev) { /* covers equal infinities and both tolerances 0 */
            ok = true;
            abs_err = rel_err = 0.0;
        } else {
            abs_err = fabs(av - ev);
            rel_err = ev != 0.0 ? abs_err / fabs(ev) : INFINITY;
            ok = abs_err <= atol + rtol * fabs(ev);
            if (isinf(ev))
                rel_err = INFINITY;
        }
        if (abs_err > r->max_abs_error)
            r->max_abs_error = abs_err;
        if (rel_err > r->max_rel_error && (ev != 0.0 || !ok))
            r->max_rel_error = rel_err;
        if (!ok) {
            r->mismatches++;
            report_fail(r, "output %zu: element %zu is %.9g, expected %.9g (|diff| %.3g > "
                        "atol %g + rtol %g * |expected|)",
                        j, k, av, ev, abs_err, atol, rtol);
        }
    }
}

static void compare_scalar(size_t j, const etch_value *a, const bundled_value *e, double rtol,
                           double atol, etch_bundled_report *r) {
    static const uint32_t want_tag[] = {ETCH_VALUE_NONE, ETCH_VALUE_TENSOR, ETCH_VALUE_INT,
                                        ETCH_VALUE_BOOL, ETCH_VALUE_DOUBLE};
    if (a->tag != want_tag[e->kind]) {
        r->mismatches++;
        report_fail(r, "output %zu: got a %s value, expected %s", j, etch_value_tag_name(a->tag),
                    etch_value_tag_name(want_tag[e->kind]));
        return;
    }
    bool ok = true;
    switch (e->kind) {
    case BV_INT: ok = a->u.i == e->i; break;
    case BV_BOOL: ok = a->u.b == e->b; break;
    case BV_DOUBLE: {
        double diff = fabs(a->u.d - e->d);
        ok = a->u.d == e->d || (isnan(a->u.d) && isnan(e->d)) ||
             diff <= atol + rtol * fabs(e->d);
        if (!isnan(diff) && diff > r->max_abs_error && a->u.d != e->d)
            r->max_abs_error = diff;
        break;
    }
    default: break;
    }
    if (!ok) {
        r->mismatches++;
        report_fail(r, "output %zu: %s value differs from the expected one", j,
                    etch_value_tag_name(a->tag));
    }
}

etch_status etch_bundled_verify_outputs(const etch_bundled *b, const etch_method *method,
                                        size_t test, double rtol, double atol,
                                        etch_bundled_report *report) {
    etch_bundled_report local;
    etch_bundled_report *r = report ? report : &local;
    memset(r, 0, sizeof *r);
    const bundled_case *bc = NULL;
    etch_status st = find_case(b, method, test, &bc);
    if (st != ETCH_OK) {
        snprintf(r->message, sizeof r->message, "%s", etch_last_error());
        return st;
    }
    if (!(rtol >= 0) || !(atol >= 0)) {
        snprintf(r->message, sizeof r->message, "tolerances must be non-negative");
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "bundled verify: rtol %g / atol %g invalid",
                        rtol, atol);
    }
    if (bc->num_outputs == 0) {
        snprintf(r->message, sizeof r->message, "test case %zu has no expected outputs", test);
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "bundled test case %zu has no expected outputs",
                        test);
    }
    size_t n = etch_method_num_outputs(method);
    r->num_outputs = n;
    if (bc->num_outputs != n) {
        r->mismatches = 1;
        snprintf(r->message, sizeof r->message,
                 "the method has %zu outputs, test case %zu expects %zu", n, test,
                 bc->num_outputs);
    }
    for (size_t j = 0; j < n && j < bc->num_outputs; j++) {
        const etch_value *a = etch_method_output(method, j);
        const bundled_value *e = &bc->outputs[j];
        if (!a) {
            r->mismatches++;
            report_fail(r, "output %zu is missing", j);
        } else if (e->kind == BV_TENSOR) {
            if (a->tag != ETCH_VALUE_TENSOR || !a->u.tensor) {
                r->mismatches++;
                report_fail(r, "output %zu: got a %s value, expected a tensor", j,
                            etch_value_tag_name(a->tag));
            } else {
                compare_tensor(j, a->u.tensor, e, rtol, atol, r);
            }
        } else if (e->kind == BV_NONE) {
            if (a->tag != ETCH_VALUE_NONE) {
                r->mismatches++;
                report_fail(r, "output %zu: got a %s value, expected None", j,
                            etch_value_tag_name(a->tag));
            }
        } else {
            compare_scalar(j, a, e, rtol, atol, r);
        }
    }
    if (r->mismatches) {
        if (!r->message[0])
            snprintf(r->message, sizeof r->message, "%zu mismatching elements", r->mismatches);
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "bundled test case %zu: %s (%zu mismatches)",
                        test, r->message, r->mismatches);
    }
    return ETCH_OK;
}
