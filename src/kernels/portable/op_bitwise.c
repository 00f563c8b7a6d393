/*
 * aten::bitwise_{and,or,xor}.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::bitwise_{and,or,xor}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 * aten::bitwise_not.out(Tensor self, *, Tensor(a!) out)
 *
 * Bool and integral dtypes only. Both operands convert to torch's result type (an Int scalar
 * wraps to an integral tensor's width), the result is cast to out when torch allows it.
 * bitwise_not keeps self's dtype (logical not for Bool). Broadcasting, any dim order.
 */
#include "kernels/portable/portable_math.h"

#define BITWISE(name, OP)                                                                     \
    static void name##_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x,           \
                         int64_t n) {                                                         \
        (void)e;                                                                              \
        for (int64_t i = 0; i < n; i++)                                                       \
            r[i] = x[0][i] OP x[1][i];                                                        \
    }                                                                                         \
    static const etch_pm_binary_spec name##_spec = {#name,                                    \
                                                    ETCH_PM_C_BOOL | ETCH_PM_C_INT,               \
                                                    ETCH_PM_COMMON,                           \
                                                    ETCH_PM_OUT_CAST,                         \
                                                    false,                                    \
                                                    false,                                    \
                                                    NULL,                                     \
                                                    name##_i};                                \
    ETCH_PK_KERNEL(name##_tensor_out) { etch_pm_binary(ctx, &name##_spec, args, nargs); }    \
    ETCH_PK_KERNEL(name##_scalar_out) { etch_pm_binary(ctx, &name##_spec, args, nargs); }

BITWISE(bitwise_and, &)
BITWISE(bitwise_or, |)
BITWISE(bitwise_xor, ^)

static void not_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    if (e->common == ETCH_DTYPE_BOOL) {
        for (int64_t i = 0; i < n; i++)
            r[i] = !x[0][i];
    } else {
        for (int64_t i = 0; i < n; i++)
            r[i] = ~x[0][i];
    }
}

static const etch_pm_unary_spec not_spec = {"bitwise_not", ETCH_PM_C_BOOL | ETCH_PM_C_INT,
                                            ETCH_PM_SAME, NULL, not_i};

ETCH_PK_KERNEL(bitwise_not_out) { etch_pm_unary(ctx, &not_spec, args, nargs); }
