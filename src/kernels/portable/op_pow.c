/*
 * aten::pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out)
 * aten::pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out)
 * aten::pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out)
 *
 * In torch's result type (Bool is not supported). Integral powers multiply with wrap-around;
 * a negative integral exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise, except
 * that Tensor_Scalar refuses a negative Int exponent for an integral result, as torch does.
 * Tensor_Scalar writes out in exactly the result type and computes torch's special exponents
 * the way torch does (0 -> 1, 1 -> copy, and but for Half 0.5 -> sqrt, 2 -> x*x, 3 -> x*x*x,
 * -0.5 -> rsqrt, -1 -> reciprocal, -2 -> 1/(x*x)); Scalar_out with an Int or Double base of 1
 * fills out (any real dtype) with 1.
 * Broadcasting, any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_math.h"

static int64_t powi(int64_t a, int64_t b) {
    if (b < 0) {
        if (a == 1)
            return 1;
        if (a == -1)
            return (b & 1) ? -1 : 1;
        return 0;
    }
    int64_t r = 1;
    while (b) {
        if (b & 1)
            r = etch_pk_wrap_mul(r, a);
        b >>= 1;
        if (b)
            a = etch_pk_wrap_mul(a, a);
    }
    return r;
}

static void pow_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = pow(x[0][i], x[1][i]);
}

static void pow_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = powi(x[0][i], x[1][i]);
}

static const etch_pm_binary_spec pow_spec = {"pow",  ETCH_PM_C_INT | ETCH_PM_C_FLOAT,
                                             ETCH_PM_COMMON, ETCH_PM_OUT_CAST,
                                             false,  false,
                                             pow_f,  pow_i};

ETCH_PK_KERNEL(pow_tensor_tensor_out) { etch_pm_binary(ctx, &pow_spec, args, nargs); }

/* ---- Tensor_Scalar --------------------------------------------------------------------------- */

enum { P_ONE, P_COPY, P_SQRT, P_SQUARE, P_CUBE, P_RSQRT, P_RECIP, P_RSQUARE, P_POW };

static void pows_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    const double *v = x[0];
    double p = e->fp[0];
    switch (e->ip[0]) {
    case P_ONE:
        for (int64_t i = 0; i < n; i++)
            r[i] = 1.0;
        break;
    case P_COPY:
        for (int64_t i = 0; i < n; i++)
            r[i] = v[i];
        break;
    case P_SQRT:
        for (int64_t i = 0; i < n; i++)
            r[i] = sqrt(v[i]);
        break;
    case P_SQUARE:
        for (int64_t i = 0; i < n; i++)
            r[i] = v[i] * v[i];
        break;
    case P_CUBE:
        for (int64_t i = 0; i < n; i++)
            r[i] = etch_pm_rnd(e, v[i] * v[i]) * v[i];
        break;
    case P_RSQRT:
        for (int64_t i = 0; i < n; i++)
            r[i] = 1.0 / etch_pm_rnd(e, sqrt(v[i]));
        break;
    case P_RECIP:
        for (int64_t i = 0; i < n; i++)
            r[i] = 1.0 / v[i];
        break;
    case P_RSQUARE:
        for (int64_t i = 0; i < n; i++)
            r[i] = 1.0 / etch_pm_rnd(e, v[i] * v[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            r[i] = pow(v[i], p);
        break;
    }
}

static void pows_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    int64_t p = e->ip[1];
    for (int64_t i = 0; i < n; i++)
        r[i] = e->ip[0] == P_ONE ? 1 : powi(x[0][i], p);
}

static const etch_pm_binary_spec pows_spec = {"pow",  ETCH_PM_C_INT | ETCH_PM_C_FLOAT,
                                              ETCH_PM_COMMON, ETCH_PM_OUT_EXACT,
                                              false,  false,
                                              pows_f, pows_i};

ETCH_PK_KERNEL(pow_tensor_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    if (!self || !etch_pk_check_real(ctx, self, "self"))
        return;
    const etch_value *ev = args[1];
    if (ev && ev->tag == ETCH_VALUE_INT && ev->u.i < 0 && !etch_pk_is_float(self->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "integers to negative integer powers are not allowed (exponent %lld)",
                         (long long)ev->u.i);
        return;
    }
    etch_pm_bin st;
    if (!etch_pm_binary_prepare(ctx, &pows_spec, args[0], args[1], args[2], &st))
        return;
    double p = 0;
    etch_value_scalar_to_double(ev, &p);
    int mode = P_POW;
    if (p == 0)
        mode = P_ONE;
    else if (p == 1)
        mode = P_COPY;
    else if (st.e.common == ETCH_DTYPE_HALF) /* torch has no shortcuts for Half */
        mode = P_POW;
    else if (p == 0.5)
        mode = P_SQRT;
    else if (p == 2)
        mode = P_SQUARE;
    else if (p == 3)
        mode = P_CUBE;
    else if (p == -0.5)
        mode = P_RSQRT;
    else if (p == -1)
        mode = P_RECIP;
    else if (p == -2)
        mode = P_RSQUARE;
    st.e.ip[0] = mode;
    /* the exponent converted to the computation dtype, as the wrapped scalar is */
    if (st.e.fdom) {
        st.e.fp[0] = p;
        if (ev->tag == ETCH_VALUE_INT && st.e.common != ETCH_DTYPE_DOUBLE)
            st.e.fp[0] = (float)ev->u.i;
        etch_pk_round_row_f64(&st.e.fp[0], 1, st.e.common);
    } else {
        etch_value_scalar_to_int(ev, &st.e.ip[1]);
        etch_pk_round_row_i64(&st.e.ip[1], 1, st.e.common);
    }
    etch_pm_binary_run(&st);
}

/* ---- Scalar_out ------------------------------------------------------------------------------ */

ETCH_PK_KERNEL(pow_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    double base = 0;
    if (!etch_pk_is_scalar(args[0])) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "self must be a Scalar, got %s",
                         args[0] ? etch_value_tag_name(args[0]->tag) : "nothing");
        return;
    }
    etch_value_scalar_to_double(args[0], &base);
    if (base == 1 && args[0]->tag != ETCH_VALUE_BOOL) { /* torch: out.fill_(1), any dtypes */
        etch_tensor *ex = etch_pk_tensor(ctx, args[1], "exponent");
        etch_tensor *out = ex ? etch_pk_tensor(ctx, args[2], "out") : NULL;
        if (!out || !etch_pk_check_real(ctx, ex, "exponent") ||
            !etch_pk_check_real(ctx, out, "out"))
            return;
        if (etch_pk_resize(ctx, out, ex->dim, ex->sizes) != ETCH_OK)
            return;
        etch_pm_ew e;
        etch_pm_ew_init(&e, out->dtype, out->dtype);
        e.ip[0] = P_ONE;
        e.frow = pows_f;
        e.irow = pows_i;
        etch_pm_ew_run(&e, out, NULL);
        return;
    }
    etch_pm_binary(ctx, &pow_spec, args, nargs);
}
