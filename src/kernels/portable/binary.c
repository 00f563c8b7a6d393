/*
 * The elementwise arithmetic engine behind add/sub/mul/div (Tensor and Scalar overloads).
 *
 * Semantics follow torch: the computation dtype ("common") comes from torch's result-type
 * rule (dimensioned tensors > zero-dim tensors > Python scalars); both operands are converted
 * to it, the operation runs in it (floating: double, then rounded to common; integral: int64
 * wrapped to common's width), and the result is cast to out's dtype, which must be a cast
 * torch allows (no floating -> integral, no non-bool -> bool).
 */
#include <math.h>

#include "kernels/portable/portable.h"

#define CHUNK 128

typedef struct bin_state {
    etch_pk_binop op;
    bool fdom;      /* compute in double (else int64) */
    int a_dt, b_dt; /* operand dtypes as stored */
    int common;     /* computation dtype */
    int opmath;     /* intermediate rounding: Float for Half/BFloat16/Float, else common */
    int out_dt;
    double alpha_d;
    int64_t alpha_i;
} bin_state;

/* Python-style floor division of doubles (the result is an integer value, or inf/nan). */
static double floor_div_f64(double a, double b, int opmath) {
    if (b == 0)
        return a / b;
    double mod = fmod(a, b);
    double diff = a - mod;
    etch_pk_round_row_f64(&diff, 1, opmath);
    double div = diff / b;
    etch_pk_round_row_f64(&div, 1, opmath);
    if (mod != 0 && ((b < 0) != (mod < 0)))
        div -= 1.0;
    if (div == 0)
        return copysign(0.0, a / b);
    double fl = floor(div);
    if (div - fl > 0.5)
        fl += 1.0;
    return fl;
}

static int64_t floor_div_i64(int64_t a, int64_t b) {
    if (b == -1)
        return etch_pk_wrap_sub(0, a); /* INT64_MIN / -1 wraps */
    int64_t q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        q--;
    return q;
}

static int64_t trunc_div_i64(int64_t a, int64_t b) {
    if (b == -1)
        return etch_pk_wrap_sub(0, a);
    return a / b;
}

/* Load a row converted to the computation dtype. Long goes straight to float when common is
 * narrower than double (int64 -> double -> float could round twice). */
static void load_common(double *dst, const char *src, int64_t stride, int64_t m, int dtype,
                        int common) {
    if (dtype == ETCH_DTYPE_LONG && common != ETCH_DTYPE_DOUBLE) {
        int64_t v[CHUNK];
        etch_pk_load_row_i64(v, src, stride, m, dtype);
        for (int64_t i = 0; i < m; i++)
            dst[i] = (float)v[i];
    } else {
        etch_pk_load_row_f64(dst, src, stride, m, dtype);
    }
    if (dtype != common)
        etch_pk_round_row_f64(dst, m, common);
}

static void bin_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const bin_state *st = (const bin_state *)arg;
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t m = n - off < CHUNK ? n - off : CHUNK;
        const char *pa = p[1] + off * s[1], *pb = p[2] + off * s[2];
        char *po = p[0] + off * s[0];
        if (st->fdom) {
            double x[CHUNK], y[CHUNK];
            load_common(x, pa, s[1], m, st->a_dt, st->common);
            load_common(y, pb, s[2], m, st->b_dt, st->common);
            double al = st->alpha_d;
            switch (st->op) {
            case ETCH_PK_ADD:
            case ETCH_PK_SUB:
                if (st->op == ETCH_PK_SUB)
                    al = -al;
                if (al == 1.0 || al == -1.0) {
                    for (int64_t i = 0; i < m; i++)
                        x[i] = x[i] + al * y[i];
                } else if (st->common == ETCH_DTYPE_DOUBLE) {
                    /* one rounding, like torch's fused multiply-add */
                    for (int64_t i = 0; i < m; i++)
                        x[i] = fma(al, y[i], x[i]);
                } else if (st->common != ETCH_DTYPE_FLOAT) {
                    /* Half/BFloat16 arithmetic rounds the product first, as c10's types do */
                    for (int64_t i = 0; i < m; i++)
                        y[i] = al * y[i];
                    etch_pk_round_row_f64(y, m, st->common);
                    for (int64_t i = 0; i < m; i++)
                        x[i] = x[i] + y[i];
                } else {
                    /* float operands: the double product is exact, so this rounds once */
                    for (int64_t i = 0; i < m; i++)
                        x[i] = x[i] + al * y[i];
                }
                break;
            case ETCH_PK_MUL:
                for (int64_t i = 0; i < m; i++)
                    x[i] = x[i] * y[i];
                break;
            case ETCH_PK_DIV:
                for (int64_t i = 0; i < m; i++)
                    x[i] = x[i] / y[i];
                break;
            case ETCH_PK_DIV_TRUNC:
                for (int64_t i = 0; i < m; i++)
                    x[i] = x[i] / y[i];
                etch_pk_round_row_f64(x, m, st->common);
                for (int64_t i = 0; i < m; i++)
                    x[i] = trunc(x[i]);
                break;
            case ETCH_PK_DIV_FLOOR:
                for (int64_t i = 0; i < m; i++)
                    x[i] = floor_div_f64(x[i], y[i], st->opmath);
                break;
            }
            if (st->out_dt != st->common) /* else the store itself rounds the same way */
                etch_pk_round_row_f64(x, m, st->common);
            etch_pk_store_row_f64(po, s[0], x, m, st->out_dt);
        } else {
            int64_t x[CHUNK], y[CHUNK];
            etch_pk_load_row_i64(x, pa, s[1], m, st->a_dt);
            etch_pk_load_row_i64(y, pb, s[2], m, st->b_dt);
            if (st->a_dt != st->common)
                etch_pk_round_row_i64(x, m, st->common);
            if (st->b_dt != st->common)
                etch_pk_round_row_i64(y, m, st->common);
            int64_t al = st->alpha_i;
            switch (st->op) {
            case ETCH_PK_ADD:
                for (int64_t i = 0; i < m; i++)
                    x[i] = etch_pk_wrap_add(x[i], etch_pk_wrap_mul(al, y[i]));
                break;
            case ETCH_PK_SUB:
                for (int64_t i = 0; i < m; i++)
                    x[i] = etch_pk_wrap_sub(x[i], etch_pk_wrap_mul(al, y[i]));
                break;
            case ETCH_PK_MUL:
                for (int64_t i = 0; i < m; i++)
                    x[i] = etch_pk_wrap_mul(x[i], y[i]);
                break;
            case ETCH_PK_DIV: /* never: true division computes in floating point */
                break;
            case ETCH_PK_DIV_TRUNC: /* divisors were checked to be non-zero */
                for (int64_t i = 0; i < m; i++)
                    x[i] = y[i] ? trunc_div_i64(x[i], y[i]) : 0;
                break;
            case ETCH_PK_DIV_FLOOR:
                for (int64_t i = 0; i < m; i++)
                    x[i] = y[i] ? floor_div_i64(x[i], y[i]) : 0;
                break;
            }
            if (st->out_dt != st->common)
                etch_pk_round_row_i64(x, m, st->common);
            etch_pk_store_row_i64(po, s[0], x, m, st->out_dt);
        }
    }
}

typedef struct zero_scan {
    int dtype;
    bool found;
} zero_scan;

static void zero_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    zero_scan *z = (zero_scan *)arg;
    if (z->found)
        return;
    int64_t v[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t m = n - off < CHUNK ? n - off : CHUNK;
        etch_pk_load_row_i64(v, p[0] + off * s[0], s[0], m, z->dtype);
        for (int64_t i = 0; i < m; i++)
            if (v[i] == 0) {
                z->found = true;
                return;
            }
    }
}

static const char *op_word(etch_pk_binop op) {
    switch (op) {
    case ETCH_PK_ADD: return "addition";
    case ETCH_PK_SUB: return "subtraction";
    case ETCH_PK_MUL: return "multiplication";
    default: return "division";
    }
}

void etch_pk_binary(etch_kernel_context *ctx, etch_pk_binop op, etch_tensor *a,
                    etch_tensor *b_tensor, const etch_value *b_scalar, const etch_value *alpha,
                    etch_tensor *out) {
    if (!etch_pk_check_real(ctx, a, "self") ||
        (b_tensor && !etch_pk_check_real(ctx, b_tensor, "other")) ||
        !etch_pk_check_real(ctx, out, "out"))
        return;

    /* the Scalar operand becomes a zero-dim tensor over local storage */
    etch_tensor scalar_t;
    int64_t si = 0;
    double sd = 0;
    uint8_t sb = 0;
    etch_tensor *b = b_tensor;
    etch_pk_result_type rt;
    etch_pk_rt_init(&rt);
    etch_pk_rt_tensor(&rt, a);
    if (!b) {
        if (!etch_pk_is_scalar(b_scalar)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "other must be a Scalar");
            return;
        }
        if (b_scalar->tag == ETCH_VALUE_INT) {
            si = b_scalar->u.i;
            etch_tensor_init(&scalar_t, ETCH_DTYPE_LONG, 0, NULL, &si);
        } else if (b_scalar->tag == ETCH_VALUE_DOUBLE) {
            sd = b_scalar->u.d;
            etch_tensor_init(&scalar_t, ETCH_DTYPE_DOUBLE, 0, NULL, &sd);
        } else {
            sb = b_scalar->u.b ? 1 : 0;
            etch_tensor_init(&scalar_t, ETCH_DTYPE_BOOL, 0, NULL, &sb);
        }
        b = &scalar_t;
        etch_pk_rt_scalar(&rt, b_scalar);
    } else {
        etch_pk_rt_tensor(&rt, b);
    }
    int common = etch_pk_rt_result(&rt);

    if (op == ETCH_PK_SUB && (a->dtype == ETCH_DTYPE_BOOL || b->dtype == ETCH_DTYPE_BOOL)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "subtraction with a Bool operand is not supported (use logical_xor or "
                         "logical_not)");
        return;
    }
    if (op == ETCH_PK_DIV && !etch_pk_is_float(common))
        common = ETCH_DTYPE_FLOAT; /* true division of integers gives the default dtype */

    if ((op == ETCH_PK_DIV_TRUNC || op == ETCH_PK_DIV_FLOOR) && common == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "division with rounding_mode is not "
                                                      "supported for Bool");
        return;
    }

    bin_state st;
    st.op = op;
    st.fdom = etch_pk_is_float(common);
    st.a_dt = a->dtype;
    st.b_dt = b->dtype;
    st.common = common;
    st.opmath = common == ETCH_DTYPE_DOUBLE ? ETCH_DTYPE_DOUBLE : ETCH_DTYPE_FLOAT;
    st.out_dt = out->dtype;
    st.alpha_d = 1.0;
    st.alpha_i = 1;
    if (alpha) {
        if (!etch_pk_is_scalar(alpha)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "alpha must be a Scalar, got %s",
                             etch_value_tag_name(alpha->tag));
            return;
        }
        if (alpha->tag == ETCH_VALUE_DOUBLE && !st.fdom) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "for integral input tensors, alpha must not be a floating point "
                             "number (alpha=%g)",
                             alpha->u.d);
            return;
        }
        if (alpha->tag == ETCH_VALUE_BOOL && common != ETCH_DTYPE_BOOL) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "a Bool alpha is only supported for Bool results (result is %s)",
                             etch_dtype_name(common));
            return;
        }
        etch_value_scalar_to_double(alpha, &st.alpha_d);
        etch_pk_round_row_f64(&st.alpha_d, 1, st.opmath);
        etch_value_scalar_to_int(alpha, &st.alpha_i);
    }
    if (!etch_pk_can_cast(common, out->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "result type %s of %s cannot be cast to the out dtype %s",
                         etch_dtype_name(common), op_word(op), etch_dtype_name(out->dtype));
        return;
    }

    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pk_broadcast_shape(ctx, a, b, &dim, sizes))
        return;
    if (etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;

    if (!st.fdom && (op == ETCH_PK_DIV_TRUNC || op == ETCH_PK_DIV_FLOOR)) {
        /* integer division by zero is an error, found before anything is written */
        zero_scan z = {b->dtype, false};
        etch_pk_iter zi;
        etch_pk_iter_init(&zi, b->dim, b->sizes);
        etch_pk_iter_add(&zi, b);
        etch_pk_iter_run(&zi, zero_inner, &z);
        if (z.found) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "integer division by zero");
            return;
        }
    }

    etch_pk_iter it;
    etch_pk_iter_init(&it, dim, sizes);
    etch_pk_iter_add(&it, out);
    etch_pk_iter_add(&it, a);
    etch_pk_iter_add(&it, b);
    etch_pk_iter_run(&it, bin_inner, &st);
}
