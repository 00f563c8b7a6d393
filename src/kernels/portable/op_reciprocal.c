/* aten::reciprocal.out(Tensor self, *, Tensor(a!) out): 1 / x, one rounding (so bit-exact);
 * Bool and integral self compute in Float; out is any floating dtype. Any dim order. */
#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(reciprocal, 1.0 / v)
