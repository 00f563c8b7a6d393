/*
 * Primitive operators: symbolic-size arithmetic on Int/Double/Bool values, and the two
 * tensor helpers the exporter emits for control flow and unresolved views.
 *
 * Scalar ops write their result into the last argument (the result slot). Arithmetic keeps
 * Int when both operands are Int (Bool counts as Int) and gives Double when either is Double;
 * comparisons give Bool. Integer arithmetic wraps (no undefined behaviour); floordiv/mod
 * follow Python (floor); dividing by zero is an error.
 */
#include <math.h>

#include "kernels/portable/portable.h"

typedef struct num {
    bool dbl;
    int64_t i;
    double d;
} num;

static bool get_num(etch_kernel_context *ctx, const etch_value *v, const char *name, num *n) {
    switch (v ? v->tag : ETCH_VALUE_NONE) {
    case ETCH_VALUE_INT: n->dbl = false; n->i = v->u.i; n->d = (double)v->u.i; return true;
    case ETCH_VALUE_BOOL: n->dbl = false; n->i = v->u.b ? 1 : 0; n->d = (double)n->i; return true;
    case ETCH_VALUE_DOUBLE: n->dbl = true; n->d = v->u.d; n->i = 0; return true;
    default:
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be an Int, Double or Bool, got %s",
                         name, v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
}

static void set_int(etch_value *v, int64_t i) {
    v->tag = ETCH_VALUE_INT;
    v->u.i = i;
}
static void set_double(etch_value *v, double d) {
    v->tag = ETCH_VALUE_DOUBLE;
    v->u.d = d;
}
static void set_bool(etch_value *v, bool b) {
    v->tag = ETCH_VALUE_BOOL;
    v->u.b = b;
}

/* Reads a and b for a binary op; args[2] is the result slot. */
static bool binary_args(etch_kernel_context *ctx, etch_value **args, size_t nargs, num *a,
                        num *b) {
    return etch_pk_nargs(ctx, nargs, 3) && get_num(ctx, args[0], "a", a) &&
           get_num(ctx, args[1], "b", b);
}

static bool unary_arg(etch_kernel_context *ctx, etch_value **args, size_t nargs, num *a) {
    return etch_pk_nargs(ctx, nargs, 2) && get_num(ctx, args[0], "a", a);
}

ETCH_PK_KERNEL(prim_add) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], a.d + b.d);
    else
        set_int(args[2], etch_pk_wrap_add(a.i, b.i));
}

ETCH_PK_KERNEL(prim_sub) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], a.d - b.d);
    else
        set_int(args[2], etch_pk_wrap_sub(a.i, b.i));
}

ETCH_PK_KERNEL(prim_mul) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], a.d * b.d);
    else
        set_int(args[2], etch_pk_wrap_mul(a.i, b.i));
}

static bool nonzero(etch_kernel_context *ctx, const num *b, const char *what) {
    if (b->dbl ? b->d != 0 : b->i != 0)
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s by zero", what);
    return false;
}

static int64_t ifloordiv(int64_t a, int64_t b) {
    if (b == -1)
        return etch_pk_wrap_sub(0, a); /* INT64_MIN // -1 wraps */
    int64_t q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t imod(int64_t a, int64_t b) {
    if (b == -1)
        return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

/* Python's float // and %: the quotient is floor((a - a mod b) / b) snapped to an integer. */
static double dmod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0) {
        if ((b < 0) != (m < 0))
            m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

static double dfloordiv(double a, double b) {
    double m = fmod(a, b);
    double div = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0)))
        div -= 1.0;
    if (div == 0)
        return copysign(0.0, a / b);
    double f = floor(div);
    if (div - f > 0.5)
        f += 1.0;
    return f;
}

ETCH_PK_KERNEL(prim_floordiv) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b) || !nonzero(ctx, &b, "floor division"))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], dfloordiv(a.d, b.d));
    else
        set_int(args[2], ifloordiv(a.i, b.i));
}

ETCH_PK_KERNEL(prim_mod) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b) || !nonzero(ctx, &b, "modulo"))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], dmod(a.d, b.d));
    else
        set_int(args[2], imod(a.i, b.i));
}

ETCH_PK_KERNEL(prim_truediv) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b) || !nonzero(ctx, &b, "division"))
        return;
    set_double(args[2], a.d / b.d);
}

/* floordiv.int / mod.int: both operands must be Int. */
static bool int_args(etch_kernel_context *ctx, etch_value **args, size_t nargs, int64_t *a,
                     int64_t *b) {
    return etch_pk_nargs(ctx, nargs, 3) && etch_pk_int(ctx, args[0], "a", a) &&
           etch_pk_int(ctx, args[1], "b", b);
}

ETCH_PK_KERNEL(prim_floordiv_int) {
    int64_t a, b;
    if (!int_args(ctx, args, nargs, &a, &b))
        return;
    if (b == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "floor division by zero");
        return;
    }
    set_int(args[2], ifloordiv(a, b));
}

ETCH_PK_KERNEL(prim_mod_int) {
    int64_t a, b;
    if (!int_args(ctx, args, nargs, &a, &b))
        return;
    if (b == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "modulo by zero");
        return;
    }
    set_int(args[2], imod(a, b));
}

/* Int vs Double compared exactly, as Python does (converting the Int could round). */
static int compare_int_double(int64_t i, double d) {
    if (d != d)
        return 2;
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double t = trunc(d); /* |t| < 2^63: exact as an int64 */
    int64_t ti = (int64_t)t;
    if (i != ti)
        return i < ti ? -1 : 1;
    double frac = d - t;
    return frac > 0 ? -1 : frac < 0;
}

/* -1, 0, 1 for a < b, ==, >; 2 when unordered (NaN) */
static int compare(const num *a, const num *b) {
    if (!a->dbl && !b->dbl)
        return a->i < b->i ? -1 : a->i > b->i;
    if (!a->dbl) /* Int vs Double */
        return compare_int_double(a->i, b->d);
    if (!b->dbl) {
        int c = compare_int_double(b->i, a->d);
        return c == 2 ? 2 : -c;
    }
    if (a->d != a->d || b->d != b->d)
        return 2;
    return a->d < b->d ? -1 : a->d > b->d;
}

#define PRIM_CMP(name, test)                                                                 \
    ETCH_PK_KERNEL(name) {                                                                   \
        num a, b;                                                                            \
        if (!binary_args(ctx, args, nargs, &a, &b))                                          \
            return;                                                                          \
        int c = compare(&a, &b);                                                             \
        set_bool(args[2], c != 2 && (test));                                                 \
    }

PRIM_CMP(prim_eq, c == 0)
PRIM_CMP(prim_gt, c == 1)
PRIM_CMP(prim_lt, c == -1)
PRIM_CMP(prim_ge, c >= 0)
PRIM_CMP(prim_le, c <= 0)

ETCH_PK_KERNEL(prim_sym_max) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], (b.d > a.d || b.d != b.d) ? b.d : a.d);
    else
        set_int(args[2], b.i > a.i ? b.i : a.i);
}

ETCH_PK_KERNEL(prim_sym_min) {
    num a, b;
    if (!binary_args(ctx, args, nargs, &a, &b))
        return;
    if (a.dbl || b.dbl)
        set_double(args[2], (b.d < a.d || b.d != b.d) ? b.d : a.d);
    else
        set_int(args[2], b.i < a.i ? b.i : a.i);
}

ETCH_PK_KERNEL(prim_neg) {
    num a;
    if (!unary_arg(ctx, args, nargs, &a))
        return;
    if (a.dbl)
        set_double(args[1], -a.d);
    else
        set_int(args[1], etch_pk_wrap_sub(0, a.i));
}

ETCH_PK_KERNEL(prim_sym_float) {
    num a;
    if (unary_arg(ctx, args, nargs, &a))
        set_double(args[1], a.d);
}

ETCH_PK_KERNEL(prim_sym_not) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    const etch_value *v = args[0];
    if (v->tag == ETCH_VALUE_BOOL)
        set_bool(args[1], !v->u.b);
    else if (v->tag == ETCH_VALUE_INT)
        set_bool(args[1], v->u.i == 0);
    else
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "a must be a Bool, got %s",
                         etch_value_tag_name(v->tag));
}

/* A Double that must become an Int: finite and within int64. */
static bool to_int(etch_kernel_context *ctx, double d, int64_t *out) {
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "cannot convert %g to an Int", d);
        return false;
    }
    *out = (int64_t)d;
    return true;
}

#define PRIM_ROUNDING(name, fn)                                                              \
    ETCH_PK_KERNEL(name) {                                                                   \
        num a;                                                                               \
        int64_t r;                                                                           \
        if (!unary_arg(ctx, args, nargs, &a))                                                \
            return;                                                                          \
        if (!a.dbl)                                                                          \
            set_int(args[1], a.i);                                                           \
        else if (to_int(ctx, fn(a.d), &r))                                                   \
            set_int(args[1], r);                                                             \
    }

PRIM_ROUNDING(prim_sym_int, trunc)
PRIM_ROUNDING(prim_ceil, ceil)
PRIM_ROUNDING(prim_round, nearbyint) /* half to even, as Python's round() */
PRIM_ROUNDING(prim_trunc, trunc)

/* ---- tensor queries -------------------------------------------------------------------------- */

/* aten::sym_size.int(Tensor self, int dim) -> SymInt */
ETCH_PK_KERNEL(sym_size_int) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t dim, d;
    etch_tensor *t = etch_pk_tensor(ctx, args[0], "self");
    if (!t || !etch_pk_int(ctx, args[1], "dim", &dim))
        return;
    if (t->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "dim %lld given for a tensor with no dims",
                         (long long)dim);
        return;
    }
    if (etch_pk_wrap_dim(ctx, dim, t->dim, &d))
        set_int(args[2], t->sizes[d]);
}

/* aten::sym_numel(Tensor self) -> SymInt */
ETCH_PK_KERNEL(sym_numel) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *t = etch_pk_tensor(ctx, args[0], "self");
    if (t)
        set_int(args[1], etch_tensor_numel(t));
}

/* aten::_local_scalar_dense(Tensor self) -> Scalar: the single element as Int/Double/Bool. */
ETCH_PK_KERNEL(local_scalar_dense) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *t = etch_pk_tensor(ctx, args[0], "self");
    if (!t || !etch_pk_check_real(ctx, t, "self"))
        return;
    if (etch_tensor_numel(t) != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "a tensor with %lld elements cannot be converted to a Scalar",
                         (long long)etch_tensor_numel(t));
        return;
    }
    if (t->dtype == ETCH_DTYPE_BOOL)
        set_bool(args[1], etch_pk_load_i64(t->data, t->dtype) != 0);
    else if (etch_pk_is_float(t->dtype))
        set_double(args[1], etch_pk_load_f64(t->data, t->dtype));
    else
        set_int(args[1], etch_pk_load_i64(t->data, t->dtype));
}

/* ---- tensor helpers ------------------------------------------------------------------------ */

/* executorch_prim::et_copy_index.tensor(Tensor(a!) copy_to, Tensor copy_from, SymInt index):
 * copy_to[index] = copy_from. A dynamically shaped copy_to is resized to
 * [index + 1, *copy_from.shape] first (loops append one slice per iteration); a static one
 * must already hold that slice. */
ETCH_PK_KERNEL(prim_et_copy_index) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t index;
    etch_tensor *to = etch_pk_tensor(ctx, args[0], "copy_to");
    etch_tensor *from = to ? etch_pk_tensor(ctx, args[1], "copy_from") : NULL;
    if (!from || !etch_pk_int(ctx, args[2], "index", &index) ||
        !etch_pk_check_same_dtype(ctx, to, "copy_to", from, "copy_from"))
        return;
    if (to->dim != from->dim + 1u) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "copy_to must have one more dim than copy_from (ranks %u and %u)",
                         (unsigned)to->dim, (unsigned)from->dim);
        return;
    }
    if (!etch_tensor_is_contiguous(to) || !etch_tensor_is_contiguous(from)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "copy_to and copy_from must be contiguous");
        return;
    }
    if (index < 0 || index == INT64_MAX) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "index %lld is out of range",
                         (long long)index);
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    sizes[0] = index + 1;
    for (unsigned i = 0; i < from->dim; i++)
        sizes[i + 1] = from->sizes[i];
    if (to->dynamism != ETCH_SHAPE_STATIC) {
        if (etch_pk_resize(ctx, to, to->dim, sizes) != ETCH_OK)
            return;
    } else {
        bool ok = index < to->sizes[0];
        for (unsigned i = 0; ok && i < from->dim; i++)
            ok = to->sizes[i + 1] == from->sizes[i];
        if (!ok) {
            char a[ETCH_PK_SHAPE_BUF], b[ETCH_PK_SHAPE_BUF];
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "cannot copy %s into slice %lld of static %s",
                             etch_pk_shape_str(a, sizeof a, from->dim, from->sizes),
                             (long long)index, etch_pk_shape_str(b, sizeof b, to->dim, to->sizes));
            return;
        }
    }
    int64_t n = etch_tensor_numel(from);
    if (n == 0)
        return;
    size_t bytes = (size_t)n * etch_dtype_size(from->dtype);
    memmove((char *)to->data + (size_t)index * bytes, from->data, bytes);
}

/* executorch_prim::et_view.default(Tensor self, int[] size, Tensor(a!) out): out becomes a
 * contiguous view of self's data with the given size (one -1 inferred). out has no memory of
 * its own (its data may be NULL before this runs). */
ETCH_PK_KERNEL(prim_et_view) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    if (!self)
        return;
    etch_value *ov = args[2];
    if (ov->tag != ETCH_VALUE_TENSOR || !ov->u.tensor) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out must be a Tensor, got %s",
                         etch_value_tag_name(ov->tag));
        return;
    }
    etch_tensor *out = ov->u.tensor;
    size_t len;
    const int64_t *size = etch_pk_int_list(ctx, args[1], "size", &len);
    if (!size)
        return;
    if (out->dtype != self->dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s but self has dtype %s",
                         etch_dtype_name(out->dtype), etch_dtype_name(self->dtype));
        return;
    }
    if (len != out->dim || len > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "size has %zu entries but out has rank %u",
                         len, (unsigned)out->dim);
        return;
    }
    if (!etch_tensor_is_contiguous(self)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "self must be contiguous to be viewed");
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pk_view_shape(ctx, size, len, etch_tensor_numel(self), sizes))
        return;
    out->data = self->data;
    for (size_t i = 0; i < len && i < ETCH_MAX_DIMS; i++) {
        out->sizes[i] = sizes[i];
        out->dim_order[i] = (uint8_t)i;
    }
    etch_tensor_update_strides(out);
}
