/* Declarations of the shape kernels listed in table_shape.inc. */
#ifndef ETCH_KERNELS_PORTABLE_SHAPE_H
#define ETCH_KERNELS_PORTABLE_SHAPE_H

#include "kernels/portable/portable.h"

#endif
