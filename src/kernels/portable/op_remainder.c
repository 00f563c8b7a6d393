/*
 * aten::remainder.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::remainder.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 * aten::fmod.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::fmod.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 * aten::floor_divide.out(Tensor self, Tensor other, *, Tensor(a!) out)
 *
 * In torch's result type (Bool is not supported), cast to out when torch allows it:
 * remainder takes the sign of the divisor (Python's %), fmod the sign of the dividend (C's
 * fmod), floor_divide rounds the quotient down. Floating division by zero gives NaN/inf as
 * IEEE says; integral division by zero fails before anything is written. Integral results
 * wrap (INT_MIN // -1, with a zero remainder). Floating floor division rounds each step to
 * the operands' dtype as torch's vectorised loop does (Half/BFloat16 included; torch's scalar
 * tail keeps those steps in Float, so it may differ there in the last place). Broadcasting,
 * any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void rem_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double a = x[0][i], b = x[1][i];
        double m = fmod(a, b); /* exact */
        if (m != 0 && ((b < 0) != (m < 0)))
            m = etch_pm_rnd(e, m + b);
        r[i] = m;
    }
}

static void rem_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = x[0][i], b = x[1][i];
        if (b == 0 || b == -1) { /* zero divisors were refused; -1 avoids INT64_MIN % -1 */
            r[i] = 0;
            continue;
        }
        int64_t m = a % b;
        if (m != 0 && ((m < 0) != (b < 0)))
            m += b;
        r[i] = m;
    }
}

static void fmod_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = fmod(x[0][i], x[1][i]);
}

static void fmod_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = x[1][i];
        r[i] = (b == 0 || b == -1) ? 0 : x[0][i] % b;
    }
}

/* Floor division of floating values the way torch computes it in the operands' own dtype:
 * from the exact remainder, with the quotient rounded to the nearest integer. */
static void fdiv_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double a = x[0][i], b = x[1][i];
        if (b == 0) {
            r[i] = a / b;
            continue;
        }
        double m = fmod(a, b);
        double q = etch_pm_rnd_common(e, etch_pm_rnd_common(e, a - m) / b);
        if (m != 0 && ((b < 0) != (m < 0)))
            q = etch_pm_rnd_common(e, q - 1.0);
        if (q == 0) {
            r[i] = copysign(0.0, a / b);
            continue;
        }
        double f = floor(q);
        if (etch_pm_rnd_common(e, q - f) > 0.5)
            f += 1.0;
        r[i] = f;
    }
}

static void fdiv_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = x[0][i], b = x[1][i];
        if (b == 0) {
            r[i] = 0;
        } else if (b == -1) {
            r[i] = etch_pk_wrap_sub(0, a);
        } else {
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0)))
                q--;
            r[i] = q;
        }
    }
}

#define SPEC(name, what, f, i)                                                                \
    static const etch_pm_binary_spec name = {what, ETCH_PM_C_INT | ETCH_PM_C_FLOAT,           \
                                             ETCH_PM_COMMON, ETCH_PM_OUT_CAST, false, true, f, i}

SPEC(rem_spec, "remainder", rem_f, rem_i);
SPEC(fmod_spec, "fmod", fmod_f, fmod_i);
SPEC(fdiv_spec, "floor_divide", fdiv_f, fdiv_i);

ETCH_PK_KERNEL(remainder_tensor_out) { etch_pm_binary(ctx, &rem_spec, args, nargs); }
ETCH_PK_KERNEL(remainder_scalar_out) { etch_pm_binary(ctx, &rem_spec, args, nargs); }
ETCH_PK_KERNEL(fmod_tensor_out) { etch_pm_binary(ctx, &fmod_spec, args, nargs); }
ETCH_PK_KERNEL(fmod_scalar_out) { etch_pm_binary(ctx, &fmod_spec, args, nargs); }
ETCH_PK_KERNEL(floor_divide_out) { etch_pm_binary(ctx, &fdiv_spec, args, nargs); }
