/* aten::{floor,ceil,round,trunc}.out (Tensor self, *, Tensor(a!) out): in self's dtype (out
 * must have it); round takes ties to even; integral values are copied; Bool is refused as
 * torch refuses it. Bit-exact. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void copy_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    memcpy(r, x[0], (size_t)n * sizeof *r);
}

#define ROUNDING(name, FN)                                                                    \
    static void name##_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) { \
        (void)e;                                                                              \
        for (int64_t i = 0; i < n; i++)                                                       \
            r[i] = FN(x[0][i]);                                                               \
    }                                                                                         \
    static const etch_pm_unary_spec name##_spec = {#name, ETCH_PM_C_INT | ETCH_PM_C_FLOAT,        \
                                                   ETCH_PM_SAME, name##_f, copy_i};           \
    ETCH_PK_KERNEL(name##_out) { etch_pm_unary(ctx, &name##_spec, args, nargs); }

ROUNDING(floor, floor)
ROUNDING(ceil, ceil)
ROUNDING(round, nearbyint)
ROUNDING(trunc, trunc)
