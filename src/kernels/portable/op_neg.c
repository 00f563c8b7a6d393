/* aten::neg.out(Tensor self, *, Tensor(a!) out): -x in self's dtype (out must have it);
 * integral values wrap (INT_MIN stays), Bool is refused as torch refuses it. Any dim order. */
#include "kernels/portable/portable_math.h"

static void neg_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = -x[0][i];
}

static void neg_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = etch_pk_wrap_sub(0, x[0][i]);
}

static const etch_pm_unary_spec neg_spec = {"neg", ETCH_PM_C_INT | ETCH_PM_C_FLOAT, ETCH_PM_SAME,
                                            neg_f, neg_i};

ETCH_PK_KERNEL(neg_out) { etch_pm_unary(ctx, &neg_spec, args, nargs); }
