/* The shape of the cases gen_fusion.py writes into fusion_cases.h. */
#ifndef ETCH_TEST_FUSION_CASE_H
#define ETCH_TEST_FUSION_CASE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/tensor.h"

typedef struct fusion_tensor {
    int dtype; /* ETCH_DTYPE_FLOAT or ETCH_DTYPE_INT */
    int dim;
    const int64_t *sizes;
    const void *data;
    size_t numel;
} fusion_tensor;

typedef struct fusion_case {
    const char *name; /* NAME.pte in the generated directory */
    int ninputs;
    const fusion_tensor *inputs;
    int noutputs;                 /* PyTorch's outputs (0 when only the unfused run decides) */
    const fusion_tensor *outputs;
    bool torch_ref;               /* compare with `outputs` */
    const char *fused;            /* activations fused, in instruction order, comma-separated */
    bool fails;                   /* execute fails (the same way fused or not) */
    double tol;
} fusion_case;

#endif
