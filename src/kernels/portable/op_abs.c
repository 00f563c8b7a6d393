/* aten::abs.out(Tensor self, *, Tensor(a!) out): |x| in self's dtype (out must have it);
 * integral INT_MIN wraps to itself, Bool is refused as torch refuses it. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void abs_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = fabs(x[0][i]);
}

static void abs_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] < 0 ? etch_pk_wrap_sub(0, x[0][i]) : x[0][i];
}

static const etch_pm_unary_spec abs_spec = {"abs", ETCH_PM_C_INT | ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                            abs_f, abs_i};

ETCH_PK_KERNEL(abs_out) { etch_pm_unary(ctx, &abs_spec, args, nargs); }
