/* Optimized conv kernels (entry points listed in table_conv.inc). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_CONV_H
#define ETCH_KERNELS_OPTIMIZED_OPT_CONV_H

#include "kernels/optimized/opt.h"

#endif
