/* aten::leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out):
 * x > 0 ? x : x * negative_slope, the slope converted to Float (Double for Double self) and
 * the product rounded once (bit-exact). Floating self only; out must have self's dtype. */
#include "kernels/portable/portable_math.h"

static void leaky_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    double s = e->fp[0];
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] > 0 ? x[0][i] : x[0][i] * s;
}

static const etch_pm_unary_spec leaky_spec = {"leaky_relu", ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                              leaky_row, NULL};

ETCH_PK_KERNEL(leaky_relu_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_pm_un u;
    int64_t unused;
    if (etch_pm_unary_prepare(ctx, &leaky_spec, args[0], args[2], &u) &&
        etch_pm_scalar_to(ctx, args[1], "negative_slope", u.e.opmath, &u.e.fp[0], &unused))
        etch_pm_unary_run(&u);
}
