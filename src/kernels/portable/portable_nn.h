/* Declarations of the nn kernels listed in table_nn.inc. */
#ifndef ETCH_KERNELS_PORTABLE_NN_H
#define ETCH_KERNELS_PORTABLE_NN_H

#include "kernels/portable/portable.h"

#endif
