/* aten::silu.out(Tensor self, *, Tensor(a!) out): x / (1 + exp(-x)) computed in double and
 * rounded once. Floating self only; out must have self's dtype. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void silu_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] / (1.0 + exp(-x[0][i]));
}

static const etch_pm_unary_spec silu_spec = {"silu", ETCH_PM_C_FLOAT, ETCH_PM_SAME, silu_row, NULL};

ETCH_PK_KERNEL(silu_out) { etch_pm_unary(ctx, &silu_spec, args, nargs); }
