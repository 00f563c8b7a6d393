/* Helpers shared by the optimized kernels. */
#include "kernels/optimized/opt.h"

etch_tensor *etch_opt_float_arg(etch_value *v) {
    return v && v->tag == ETCH_VALUE_TENSOR && v->u.tensor &&
                   v->u.tensor->dtype == ETCH_DTYPE_FLOAT && v->u.tensor->dim <= ETCH_MAX_DIMS &&
                   (uintptr_t)v->u.tensor->data % sizeof(float) == 0
               ? v->u.tensor
               : NULL;
}

etch_tensor *etch_opt_fast_tensor(etch_value *v, int dtype, bool contiguous) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return NULL;
    etch_tensor *t = v->u.tensor;
    if (t->dtype != dtype || t->dim > ETCH_MAX_DIMS ||
        (contiguous && !etch_tensor_is_contiguous(t)))
        return NULL;
    double numel = 1; /* index arithmetic stays far from int64 overflow */
    for (unsigned i = 0; i < t->dim; i++) {
        if (t->sizes[i] < 0 || t->sizes[i] > ETCH_OPT_SIZE_LIMIT)
            return NULL;
        numel *= (double)t->sizes[i];
    }
    if (numel > 0x1p50)
        return NULL;
    if (!t->data && etch_tensor_numel(t) > 0)
        return NULL;
    /* element loads need natural alignment (a program may place data anywhere) */
    if ((uintptr_t)t->data % etch_dtype_size((etch_dtype)dtype) != 0)
        return NULL;
    return t;
}
