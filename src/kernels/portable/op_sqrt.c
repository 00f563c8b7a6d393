/* aten::sqrt.out, aten::rsqrt.out (Tensor self, *, Tensor(a!) out): sqrt is correctly rounded;
 * rsqrt is 1 / sqrt(x) with the square root rounded first, as torch computes it (so both are
 * bit-exact). Bool and integral self compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(sqrt, sqrt(v))

static void rsqrt_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        r[i] = 1.0 / etch_pm_rnd(e, sqrt(x[0][i]));
}

static const etch_pm_unary_spec rsqrt_spec = {"rsqrt", ETCH_PM_C_ALL, ETCH_PM_FLOAT, rsqrt_row,
                                              NULL};

ETCH_PK_KERNEL(rsqrt_out) { etch_pm_unary(ctx, &rsqrt_spec, args, nargs); }
