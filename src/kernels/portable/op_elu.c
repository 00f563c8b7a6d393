/* aten::elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1, *,
 *               Tensor(a!) out):
 * x <= 0 ? (exp(x * input_scale) - 1) * alpha * scale : x * scale, with the coefficients in
 * Float (Double for Double self) and alpha * scale rounded there, as torch computes them; the
 * exponential is computed in double. Floating self only; out must have self's dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void elu_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    double neg = e->fp[0], pos = e->fp[1], in_scale = e->fp[2];
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i];
        if (v <= 0)
            r[i] = etch_pm_rnd(e, etch_pm_rnd(e, exp(etch_pm_rnd(e, v * in_scale))) - 1.0) * neg;
        else
            r[i] = v * pos;
    }
}

static const etch_pm_unary_spec elu_spec = {"elu", ETCH_PM_C_FLOAT, ETCH_PM_SAME, elu_row, NULL};

ETCH_PK_KERNEL(elu_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_pm_un u;
    double alpha = 0, scale = 0, in_scale = 0;
    int64_t unused;
    if (!etch_pm_unary_prepare(ctx, &elu_spec, args[0], args[4], &u))
        return;
    int dt = u.e.opmath;
    if (!etch_pm_scalar_to(ctx, args[1], "alpha", dt, &alpha, &unused) ||
        !etch_pm_scalar_to(ctx, args[2], "scale", dt, &scale, &unused) ||
        !etch_pm_scalar_to(ctx, args[3], "input_scale", dt, &in_scale, &unused))
        return;
    u.e.fp[0] = etch_pm_rnd(&u.e, alpha * scale);
    u.e.fp[1] = scale;
    u.e.fp[2] = in_scale;
    etch_pm_unary_run(&u);
}
