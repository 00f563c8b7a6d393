/* aten::atan2.out(Tensor self, Tensor other, *, Tensor(a!) out): atan2(self, other) in torch's
 * result type (Bool and integral results compute in Float), computed in double and rounded
 * once; cast to out when torch allows it. Broadcasting, any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void atan2_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = atan2(x[0][i], x[1][i]);
}

static const etch_pm_binary_spec atan2_spec = {"atan2",  ETCH_PM_C_ALL, ETCH_PM_TO_FLOAT,
                                               ETCH_PM_OUT_CAST, false, false,
                                               atan2_f,  NULL};

ETCH_PK_KERNEL(atan2_out) { etch_pm_binary(ctx, &atan2_spec, args, nargs); }
