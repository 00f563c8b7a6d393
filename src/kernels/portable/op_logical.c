/*
 * aten::logical_{and,or,xor}.out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::logical_not.out(Tensor self, *, Tensor(a!) out)
 *
 * Operands of any real dtypes count as true when non-zero (NaN is true); the 0/1 result is
 * written to out in any real dtype. Broadcasting, any dim order.
 */
#include "kernels/portable/portable_math.h"

#define LOGICAL(name, EXPR)                                                                   \
    static void name##_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) { \
        (void)e;                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                     \
            bool a = x[0][i] != 0, b = x[1][i] != 0;                                          \
            r[i] = (EXPR) ? 1.0 : 0.0;                                                        \
        }                                                                                     \
    }                                                                                         \
    static const etch_pm_binary_spec name##_spec = {                                          \
        #name, ETCH_PM_C_ALL, ETCH_PM_DOUBLE, ETCH_PM_OUT_ANY, true, false, name##_f, NULL};    \
    ETCH_PK_KERNEL(name##_out) { etch_pm_binary(ctx, &name##_spec, args, nargs); }

LOGICAL(logical_and, a && b)
LOGICAL(logical_or, a || b)
LOGICAL(logical_xor, a != b)

static void not_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] == 0 ? 1.0 : 0.0;
}

static const etch_pm_unary_spec not_spec = {"logical_not", ETCH_PM_C_ALL, ETCH_PM_PRED, not_f,
                                            NULL};

ETCH_PK_KERNEL(logical_not_out) { etch_pm_unary(ctx, &not_spec, args, nargs); }
