/* aten::log.out, log1p.out, log2.out, log10.out (Tensor self, *, Tensor(a!) out): computed in
 * double, rounded once; log of a negative number is NaN, of zero -inf. Bool and integral self
 * compute in Float; out is any floating dtype. */
#include <math.h>

#include "kernels/portable/portable_math.h"

ETCH_PM_UNARY_FLOAT_KERNEL(log, log(v))
ETCH_PM_UNARY_FLOAT_KERNEL(log1p, log1p(v))
ETCH_PM_UNARY_FLOAT_KERNEL(log2, log2(v))
ETCH_PM_UNARY_FLOAT_KERNEL(log10, log10(v))
