/* aten::sigmoid.out(Tensor self, *, Tensor(a!) out): 1 / (1 + exp(-x)) computed in double and
 * rounded once (within an ulp or two of torch's float kernels). Bool and integral self compute
 * in Float; out is any floating dtype. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(sigmoid, 1.0 / (1.0 + exp(-v)))
