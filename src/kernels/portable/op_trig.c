/* aten::{sin,cos,tan,asin,acos,atan}.out (Tensor self, *, Tensor(a!) out): computed in double,
 * rounded once. Bool and integral self compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(sin, sin(v))
ETCH_PM_UNARY_FLOAT_KERNEL(cos, cos(v))
ETCH_PM_UNARY_FLOAT_KERNEL(tan, tan(v))
ETCH_PM_UNARY_FLOAT_KERNEL(asin, asin(v))
ETCH_PM_UNARY_FLOAT_KERNEL(acos, acos(v))
ETCH_PM_UNARY_FLOAT_KERNEL(atan, atan(v))
