/* aten::softplus.out(Tensor self, Scalar beta=1, Scalar threshold=20, *, Tensor(a!) out):
 * x * beta > threshold ? x : log1p(exp(x * beta)) / beta, with beta and threshold in Float
 * (Double for Double self) and x * beta rounded there; the rest is computed in double. Floating
 * self only; out must have self's dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void softplus_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    double beta = e->fp[0], thr = e->fp[1];
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i], t = etch_pm_rnd(e, v * beta);
        r[i] = t > thr ? v : log1p(exp(t)) / beta;
    }
}

static const etch_pm_unary_spec softplus_spec = {"softplus", ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                                 softplus_row, NULL};

ETCH_PK_KERNEL(softplus_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_pm_un u;
    int64_t unused;
    if (etch_pm_unary_prepare(ctx, &softplus_spec, args[0], args[3], &u) &&
        etch_pm_scalar_to(ctx, args[1], "beta", u.e.opmath, &u.e.fp[0], &unused) &&
        etch_pm_scalar_to(ctx, args[2], "threshold", u.e.opmath, &u.e.fp[1], &unused))
        etch_pm_unary_run(&u);
}
