/* The elementwise engine of the math kernels: conversions to the computation dtype, scalar
 * arguments, broadcasting, and the unary/binary drivers (see portable_math.h). */
#include <float.h>
#include <math.h>

#include "kernels/portable/portable_math.h"

#define CHUNK 128

unsigned etch_pm_class(int dtype) {
    if (dtype == ETCH_DTYPE_BOOL)
        return ETCH_PM_C_BOOL;
    if (etch_pk_is_float(dtype))
        return ETCH_PM_C_FLOAT;
    return etch_pk_dtype_is_real(dtype) ? ETCH_PM_C_INT : 0u;
}

/* ---- engine ---------------------------------------------------------------------------------- */

void etch_pm_ew_init(etch_pm_ew *e, int common, int out_dt) {
    memset(e, 0, sizeof *e);
    e->common = common;
    e->fdom = etch_pk_is_float(common);
    e->opmath = common == ETCH_DTYPE_DOUBLE ? ETCH_DTYPE_DOUBLE : ETCH_DTYPE_FLOAT;
    e->out_dt = out_dt;
}

/* A row converted to the floating computation dtype. Long goes straight to float when common
 * is narrower than Double (int64 -> double -> float could round twice), as c10 converts. */
static void load_f(double *dst, const char *src, int64_t stride, int64_t m, int dt, int common) {
    if (dt == ETCH_DTYPE_LONG && common != ETCH_DTYPE_DOUBLE) {
        int64_t v[CHUNK];
        etch_pk_load_row_i64(v, src, stride, m, dt);
        for (int64_t i = 0; i < m; i++)
            dst[i] = (float)v[i];
    } else {
        etch_pk_load_row_f64(dst, src, stride, m, dt);
    }
    if (dt != common)
        etch_pk_round_row_f64(dst, m, common);
}

static void load_i(int64_t *dst, const char *src, int64_t stride, int64_t m, int dt, int common) {
    etch_pk_load_row_i64(dst, src, stride, m, dt);
    if (dt != common)
        etch_pk_round_row_i64(dst, m, common);
}

static void ew_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const etch_pm_ew *e = (const etch_pm_ew *)arg;
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t m = n - off < CHUNK ? n - off : CHUNK;
        char *po = p[0] + off * s[0];
        if (e->fdom) {
            double x[ETCH_PM_MAX_IN][CHUNK], r[CHUNK];
            const double *xp[ETCH_PM_MAX_IN] = {x[0], x[1], x[2]};
            for (int k = 0; k < e->nin; k++)
                load_f(x[k], p[k + 1] + off * s[k + 1], s[k + 1], m, e->in_dt[k], e->common);
            e->frow(e, r, xp, m);
            if (!e->pred && e->out_dt != e->common) /* else the store rounds the same way */
                etch_pk_round_row_f64(r, m, e->common);
            etch_pk_store_row_f64(po, s[0], r, m, e->out_dt);
        } else {
            int64_t x[ETCH_PM_MAX_IN][CHUNK], r[CHUNK];
            const int64_t *xp[ETCH_PM_MAX_IN] = {x[0], x[1], x[2]};
            for (int k = 0; k < e->nin; k++)
                load_i(x[k], p[k + 1] + off * s[k + 1], s[k + 1], m, e->in_dt[k], e->common);
            e->irow(e, r, xp, m);
            if (!e->pred && e->out_dt != e->common)
                etch_pk_round_row_i64(r, m, e->common);
            etch_pk_store_row_i64(po, s[0], r, m, e->out_dt);
        }
    }
}

void etch_pm_ew_run(const etch_pm_ew *e, etch_tensor *out, etch_tensor *const *ins) {
    etch_pk_iter it;
    etch_pk_iter_init(&it, out->dim, out->sizes);
    etch_pk_iter_add(&it, out);
    for (int k = 0; k < e->nin; k++)
        etch_pk_iter_add(&it, ins[k]);
    etch_pk_iter_run(&it, ew_inner, (void *)e);
}

/* ---- scalars and shapes ---------------------------------------------------------------------- */

bool etch_pm_wrap_scalar(etch_kernel_context *ctx, const etch_value *v, const char *name,
                         etch_pm_scalar *s) {
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Scalar, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    s->i = 0;
    s->d = 0;
    s->b = 0;
    if (v->tag == ETCH_VALUE_INT) {
        s->i = v->u.i;
        etch_tensor_init(&s->t, ETCH_DTYPE_LONG, 0, NULL, &s->i);
    } else if (v->tag == ETCH_VALUE_DOUBLE) {
        s->d = v->u.d;
        etch_tensor_init(&s->t, ETCH_DTYPE_DOUBLE, 0, NULL, &s->d);
    } else {
        s->b = v->u.b ? 1 : 0;
        etch_tensor_init(&s->t, ETCH_DTYPE_BOOL, 0, NULL, &s->b);
    }
    return true;
}

bool etch_pm_broadcast(etch_kernel_context *ctx, etch_tensor *const *ts, const char *const *names,
                       int n, size_t *dim, int64_t *sizes) {
    size_t rank = 0;
    for (int k = 0; k < n; k++)
        if (ts[k]->dim > rank)
            rank = ts[k]->dim;
    for (size_t i = 0; i < rank; i++) { /* i counts from the right */
        int64_t size = 1;
        int from = -1;
        for (int k = 0; k < n; k++) {
            const etch_tensor *t = ts[k];
            int64_t sk = i < t->dim ? t->sizes[t->dim - 1 - i] : 1;
            if (sk == 1)
                continue;
            if (size != 1 && sk != size) {
                char x[ETCH_PK_SHAPE_BUF], y[ETCH_PK_SHAPE_BUF];
                const etch_tensor *f = ts[from];
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "%s %s and %s %s cannot be broadcast (size %lld vs %lld at dim "
                                 "%zu from the right)",
                                 names[from], etch_pk_shape_str(x, sizeof x, f->dim, f->sizes),
                                 names[k], etch_pk_shape_str(y, sizeof y, t->dim, t->sizes),
                                 (long long)size, (long long)sk, i);
                return false;
            }
            size = sk;
            from = k;
        }
        sizes[rank - 1 - i] = size;
    }
    *dim = rank;
    return true;
}

static double float_max(int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_HALF: return 65504.0;
    case ETCH_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case ETCH_DTYPE_FLOAT: return FLT_MAX;
    default: return DBL_MAX;
    }
}

bool etch_pm_scalar_to(etch_kernel_context *ctx, const etch_value *v, const char *name,
                       int dtype, double *d, int64_t *i) {
    *d = 0;
    *i = 0;
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Scalar, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    if (etch_pk_is_float(dtype)) {
        double x;
        if (v->tag == ETCH_VALUE_INT)
            x = dtype == ETCH_DTYPE_DOUBLE ? (double)v->u.i : (double)(float)v->u.i;
        else if (v->tag == ETCH_VALUE_DOUBLE)
            x = v->u.d;
        else
            x = v->u.b ? 1.0 : 0.0;
        if (isfinite(x) && fabs(x) > float_max(dtype)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s = %g cannot be converted to %s without overflow", name, x,
                             etch_dtype_name(dtype));
            return false;
        }
        etch_pk_round_row_f64(&x, 1, dtype);
        *d = x;
        *i = etch_pk_f64_to_i64(x);
        return true;
    }
    int64_t x;
    if (v->tag == ETCH_VALUE_DOUBLE) {
        double f = v->u.d;
        if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s = %g cannot be converted to an integer without overflow", name,
                             f);
            return false;
        }
        x = (int64_t)f;
    } else if (v->tag == ETCH_VALUE_INT) {
        x = v->u.i;
    } else {
        x = v->u.b ? 1 : 0;
    }
    int64_t lo, hi;
    switch (dtype) {
    case ETCH_DTYPE_BOOL: lo = 0; hi = 1; break;
    case ETCH_DTYPE_BYTE: lo = -255; hi = 255; break; /* negative values wrap, as c10 allows */
    case ETCH_DTYPE_CHAR: lo = INT8_MIN; hi = INT8_MAX; break;
    case ETCH_DTYPE_SHORT: lo = INT16_MIN; hi = INT16_MAX; break;
    case ETCH_DTYPE_INT: lo = INT32_MIN; hi = INT32_MAX; break;
    default: lo = INT64_MIN; hi = INT64_MAX; break;
    }
    if (x < lo || x > hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s = %lld cannot be converted to %s without overflow", name,
                         (long long)x, etch_dtype_name(dtype));
        return false;
    }
    etch_pk_round_row_i64(&x, 1, dtype);
    *i = x;
    *d = (double)x;
    return true;
}

typedef struct zero_scan {
    int dtype, common;
    bool found;
} zero_scan;

static void zero_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    zero_scan *z = (zero_scan *)arg;
    int64_t v[CHUNK];
    for (int64_t off = 0; off < n && !z->found; off += CHUNK) {
        int64_t m = n - off < CHUNK ? n - off : CHUNK;
        load_i(v, p[0] + off * s[0], s[0], m, z->dtype, z->common);
        for (int64_t i = 0; i < m; i++)
            if (v[i] == 0)
                z->found = true;
    }
}

bool etch_pm_has_zero(const etch_tensor *t, int common) {
    zero_scan z = {t->dtype, common, false};
    etch_pk_iter it;
    etch_pk_iter_init(&it, t->dim, t->sizes);
    etch_pk_iter_add(&it, t);
    etch_pk_iter_run(&it, zero_inner, &z);
    return z.found;
}

/* ---- drivers --------------------------------------------------------------------------------- */

bool etch_pm_check_out(etch_kernel_context *ctx, int rule, int result, const etch_tensor *out) {
    if (rule == ETCH_PM_OUT_EXACT && out->dtype != result) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s, expected %s",
                         etch_dtype_name(out->dtype), etch_dtype_name(result));
        return false;
    }
    if (rule == ETCH_PM_OUT_CAST && !etch_pk_can_cast(result, out->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "result type %s cannot be cast to the out dtype %s",
                         etch_dtype_name(result), etch_dtype_name(out->dtype));
        return false;
    }
    return true;
}

static const char *class_word(unsigned c) {
    return c == ETCH_PM_C_BOOL ? "Bool" : c == ETCH_PM_C_INT ? "integral" : "floating";
}

bool etch_pm_unary_prepare(etch_kernel_context *ctx, const etch_pm_unary_spec *spec,
                           etch_value *self, etch_value *outv, etch_pm_un *u) {
    etch_tensor *in = etch_pk_tensor(ctx, self, "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, outv, "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out"))
        return false;
    unsigned c = etch_pm_class(in->dtype);
    if (!(c & spec->allow)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s does not support %s (%s) inputs",
                         spec->what, etch_dtype_name(in->dtype), class_word(c));
        return false;
    }
    int common, result, rule;
    if (spec->result == ETCH_PM_SAME) {
        common = result = in->dtype;
        rule = ETCH_PM_OUT_EXACT;
    } else if (spec->result == ETCH_PM_FLOAT) {
        common = result = c == ETCH_PM_C_FLOAT ? in->dtype : ETCH_DTYPE_FLOAT;
        rule = ETCH_PM_OUT_CAST;
    } else {
        common = ETCH_DTYPE_DOUBLE;
        result = ETCH_DTYPE_BOOL;
        rule = ETCH_PM_OUT_ANY;
    }
    if (!etch_pm_check_out(ctx, rule, result, out))
        return false;
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return false;
    etch_pm_ew_init(&u->e, common, out->dtype);
    u->e.nin = 1;
    u->e.in_dt[0] = in->dtype;
    u->e.pred = spec->result == ETCH_PM_PRED;
    u->e.frow = spec->frow;
    u->e.irow = spec->irow;
    u->in = in;
    u->out = out;
    return true;
}

void etch_pm_unary_run(etch_pm_un *u) { etch_pm_ew_run(&u->e, u->out, &u->in); }

void etch_pm_unary(etch_kernel_context *ctx, const etch_pm_unary_spec *spec, etch_value **args,
                   size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_pm_un u;
    if (etch_pm_unary_prepare(ctx, spec, args[0], args[1], &u))
        etch_pm_unary_run(&u);
}

/* A binary operand: a real tensor, or a Scalar wrapped into a zero-dim tensor. */
static etch_tensor *operand(etch_kernel_context *ctx, etch_value *v, const char *name,
                            etch_pm_scalar *s, etch_pk_result_type *rt) {
    if (v && v->tag == ETCH_VALUE_TENSOR) {
        etch_tensor *t = etch_pk_tensor(ctx, v, name);
        if (!t || !etch_pk_check_real(ctx, t, name))
            return NULL;
        etch_pk_rt_tensor(rt, t);
        return t;
    }
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Tensor or a Scalar, got %s",
                         name, v ? etch_value_tag_name(v->tag) : "nothing");
        return NULL;
    }
    etch_pm_wrap_scalar(ctx, v, name, s);
    etch_pk_rt_scalar(rt, v);
    return &s->t;
}

bool etch_pm_binary_prepare(etch_kernel_context *ctx, const etch_pm_binary_spec *spec,
                            etch_value *av, etch_value *bv, etch_value *outv, etch_pm_bin *st) {
    etch_pk_result_type rt;
    etch_pk_rt_init(&rt);
    const char *bn = spec->divisor ? "other (divisor)" : "other";
    etch_tensor *a = operand(ctx, av, "self", &st->sa, &rt);
    etch_tensor *b = a ? operand(ctx, bv, bn, &st->sb, &rt) : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, outv, "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, out, "out"))
        return false;
    int result = etch_pk_rt_result(&rt);
    unsigned c = etch_pm_class(result);
    if (!(c & spec->allow)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "%s does not support %s operands (self %s, other %s)", spec->what,
                         etch_dtype_name(result), etch_dtype_name(a->dtype),
                         etch_dtype_name(b->dtype));
        return false;
    }
    int compute = result;
    if (spec->compute == ETCH_PM_TO_FLOAT && c != ETCH_PM_C_FLOAT)
        compute = ETCH_DTYPE_FLOAT;
    int checked = spec->pred ? ETCH_DTYPE_BOOL : compute;
    if (spec->compute == ETCH_PM_DOUBLE)
        compute = ETCH_DTYPE_DOUBLE;
    if (!etch_pm_check_out(ctx, spec->out_rule, checked, out))
        return false;
    etch_tensor *ts[2] = {a, b};
    static const char *const names[2] = {"self", "other"};
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pm_broadcast(ctx, ts, names, 2, &dim, sizes) ||
        etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return false;
    if (spec->divisor && !etch_pk_is_float(compute) && etch_tensor_numel(out) > 0 &&
        etch_pm_has_zero(b, compute)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s: integer division by zero",
                         spec->what);
        return false;
    }
    etch_pm_ew_init(&st->e, compute, out->dtype);
    st->e.nin = 2;
    st->e.in_dt[0] = a->dtype;
    st->e.in_dt[1] = b->dtype;
    st->e.pred = spec->pred;
    st->e.frow = spec->frow;
    st->e.irow = spec->irow;
    st->a = a;
    st->b = b;
    st->out = out;
    st->result = result;
    return true;
}

void etch_pm_binary_run(etch_pm_bin *st) {
    etch_tensor *ins[2] = {st->a, st->b};
    etch_pm_ew_run(&st->e, st->out, ins);
}

void etch_pm_binary(etch_kernel_context *ctx, const etch_pm_binary_spec *spec, etch_value **args,
                    size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_pm_bin st;
    if (etch_pm_binary_prepare(ctx, spec, args[0], args[1], args[2], &st))
        etch_pm_binary_run(&st);
}
