/* Optimized gemm kernels (entry points listed in table_gemm.inc). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_GEMM_H
#define ETCH_KERNELS_OPTIMIZED_OPT_GEMM_H

#include "kernels/optimized/opt.h"

#endif
