/* aten::{sinh,cosh,tanh,asinh,acosh,atanh}.out (Tensor self, *, Tensor(a!) out): computed in
 * double, rounded once. Bool and integral self compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(sinh, sinh(v))
ETCH_PM_UNARY_FLOAT_KERNEL(cosh, cosh(v))
ETCH_PM_UNARY_FLOAT_KERNEL(tanh, tanh(v))
ETCH_PM_UNARY_FLOAT_KERNEL(asinh, asinh(v))
ETCH_PM_UNARY_FLOAT_KERNEL(acosh, acosh(v))
ETCH_PM_UNARY_FLOAT_KERNEL(atanh, atanh(v))
