/* Optimized eltwise kernels (entry points listed in table_eltwise.inc). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_ELTWISE_H
#define ETCH_KERNELS_OPTIMIZED_OPT_ELTWISE_H

#include "kernels/optimized/opt.h"

#endif
