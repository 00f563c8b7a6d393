/*
 * aten::{eq,ne,lt,le,gt,ge}.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::{eq,ne,lt,le,gt,ge}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 *
 * Both operands convert to torch's result type (a Scalar counts as a wrapped number, so an Int
 * scalar takes an integral tensor's dtype, wrapping), are compared there (NaN compares false
 * except for ne), and the 0/1 result is written to out in any real dtype. Broadcasting, every
 * real dtype, any dim order.
 */
#include "kernels/portable/portable_math.h"

#define CMP_ROWS(name, OP)                                                                    \
    static void name##_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) { \
        (void)e;                                                                              \
        for (int64_t i = 0; i < n; i++)                                                       \
            r[i] = x[0][i] OP x[1][i] ? 1.0 : 0.0;                                            \
    }                                                                                         \
    static void name##_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x,           \
                         int64_t n) {                                                         \
        (void)e;                                                                              \
        for (int64_t i = 0; i < n; i++)                                                       \
            r[i] = x[0][i] OP x[1][i];                                                        \
    }                                                                                         \
    static const etch_pm_binary_spec name##_spec = {                                          \
        #name, ETCH_PM_C_ALL, ETCH_PM_COMMON, ETCH_PM_OUT_ANY, true, false, name##_f, name##_i}; \
    ETCH_PK_KERNEL(name##_tensor_out) { etch_pm_binary(ctx, &name##_spec, args, nargs); }    \
    ETCH_PK_KERNEL(name##_scalar_out) { etch_pm_binary(ctx, &name##_spec, args, nargs); }

CMP_ROWS(eq, ==)
CMP_ROWS(ne, !=)
CMP_ROWS(lt, <)
CMP_ROWS(le, <=)
CMP_ROWS(gt, >)
CMP_ROWS(ge, >=)
