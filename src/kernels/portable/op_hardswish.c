/* aten::hardswish.out(Tensor self, *, Tensor(a!) out):   x * min(max(x + 3, 0), 6) / 6
 * aten::hardsigmoid.out(Tensor self, *, Tensor(a!) out): min(max(x + 3, 0), 6) / 6
 * Each step rounded as torch's float arithmetic rounds it (bit-exact); NaN stays NaN. Floating
 * self only; out must have self's dtype. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static double relu6_shift(const etch_pm_ew *e, double v) {
    double t = etch_pm_rnd(e, v + 3.0);
    if (isnan(t))
        return t;
    return t < 0 ? 0.0 : t > 6 ? 6.0 : t;
}

static void hardswish_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        r[i] = etch_pm_rnd(e, x[0][i] * relu6_shift(e, x[0][i])) / 6.0;
}

static void hardsigmoid_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        r[i] = relu6_shift(e, x[0][i]) / 6.0;
}

static const etch_pm_unary_spec hardswish_spec = {"hardswish", ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                                  hardswish_row, NULL};
static const etch_pm_unary_spec hardsigmoid_spec = {"hardsigmoid", ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                                    hardsigmoid_row, NULL};

ETCH_PK_KERNEL(hardswish_out) { etch_pm_unary(ctx, &hardswish_spec, args, nargs); }
ETCH_PK_KERNEL(hardsigmoid_out) { etch_pm_unary(ctx, &hardsigmoid_spec, args, nargs); }
