/* Fused activations (etch_kernel_epilogue) applied to float32 results. */
#ifndef ETCH_KERNELS_OPTIMIZED_EPILOGUE_H
#define ETCH_KERNELS_OPTIMIZED_EPILOGUE_H

#include "kernels/optimized/opt.h"

/* x[0..n) = act(x[0..n)); e may be NULL (nothing to do). */
void etch_opt_apply_epilogue(const etch_epilogue *e, float *x, int64_t n);

#endif
