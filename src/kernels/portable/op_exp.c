/* aten::exp.out, aten::expm1.out (Tensor self, *, Tensor(a!) out): computed in double and
 * rounded once to the computation dtype (torch's vectorised float kernels are within an ulp
 * or two of that). Bool and integral self compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(exp, exp(v))
ETCH_PM_UNARY_FLOAT_KERNEL(expm1, expm1(v))
