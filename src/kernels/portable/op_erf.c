/* aten::erf.out(Tensor self, *, Tensor(a!) out): computed in double, rounded once. Bool and
 * integral self compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(erf, erf(v))
