/* aten::sign.out(Tensor self, *, Tensor(a!) out): -1, 0 or 1 in self's dtype (out must have
 * it); NaN and -0.0 give 0, Bool is the identity. Any dim order. */
#include "kernels/portable/portable_math.h"

static void sign_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = (double)((x[0][i] > 0) - (x[0][i] < 0));
}

static void sign_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = (x[0][i] > 0) - (x[0][i] < 0);
}

static const etch_pm_unary_spec sign_spec = {"sign", ETCH_PM_C_ALL, ETCH_PM_SAME, sign_f, sign_i};

ETCH_PK_KERNEL(sign_out) { etch_pm_unary(ctx, &sign_spec, args, nargs); }
