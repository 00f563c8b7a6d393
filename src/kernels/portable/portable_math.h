/* Declarations of the math kernels listed in table_math.inc. */
#ifndef ETCH_KERNELS_PORTABLE_MATH_H
#define ETCH_KERNELS_PORTABLE_MATH_H

#include "kernels/portable/portable.h"

#endif
