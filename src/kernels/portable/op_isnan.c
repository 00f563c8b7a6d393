/*
 * aten::isnan.out(Tensor self, *, Tensor(a!) out)
 * aten::isinf.out(Tensor self, *, Tensor(a!) out)
 *
 * The floating-point classification predicates (always false for Bool and integral self);
 * the 0/1 result is written to out in any real dtype. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void isnan_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = isnan(x[0][i]) ? 1.0 : 0.0;
}

static void isinf_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = isinf(x[0][i]) ? 1.0 : 0.0;
}

static const etch_pm_unary_spec isnan_spec = {"isnan", ETCH_PM_C_ALL, ETCH_PM_PRED, isnan_f, NULL};
static const etch_pm_unary_spec isinf_spec = {"isinf", ETCH_PM_C_ALL, ETCH_PM_PRED, isinf_f, NULL};

ETCH_PK_KERNEL(isnan_out) { etch_pm_unary(ctx, &isnan_spec, args, nargs); }
ETCH_PK_KERNEL(isinf_out) { etch_pm_unary(ctx, &isinf_spec, args, nargs); }
