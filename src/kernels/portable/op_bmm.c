/* aten::bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out): [B,n,m] @ [B,m,p] -> [B,n,p],
 * every dtype but Bool (see op_mm.c). */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(bmm_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "mat2") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out)
        return;
    if (a->dim != 3 || b->dim != 3) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self and mat2 must be 3-D batches of matrices, got ranks %u and %u",
                         (unsigned)a->dim, (unsigned)b->dim);
        return;
    }
    if (!etch_pk_check_real(ctx, a, "self") || a->dtype == ETCH_DTYPE_BOOL) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "bmm does not support Bool");
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, a, "self", b, "mat2") ||
        !etch_pk_check_same_dtype(ctx, a, "self", out, "out"))
        return;
    if (a->sizes[0] != b->sizes[0] || a->sizes[2] != b->sizes[1]) {
        char x[ETCH_PK_SHAPE_BUF], y[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self %s and mat2 %s cannot be batch-multiplied",
                         etch_pk_shape_str(x, sizeof x, 3, a->sizes),
                         etch_pk_shape_str(y, sizeof y, 3, b->sizes));
        return;
    }
    int64_t sizes[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    if (etch_pk_resize(ctx, out, 3, sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;
    int64_t es = (int64_t)etch_dtype_size(a->dtype);
    etch_pk_matrix none = {NULL, 0, 0};
    for (int64_t i = 0; i < sizes[0]; i++) {
        /* with K == 0 the operands have no data; etch_pk_gemm then never reads them */
        bool k0 = a->sizes[2] == 0;
        etch_pk_matrix ma = {k0 ? NULL : (const char *)a->data + i * a->strides[0] * es,
                             a->strides[1], a->strides[2]};
        etch_pk_matrix mb = {k0 ? NULL : (const char *)b->data + i * b->strides[0] * es,
                             b->strides[1], b->strides[2]};
        etch_pk_gemm(ctx, a->dtype, sizes[1], sizes[2], a->sizes[2], ma, mb, none,
                     (char *)out->data + i * out->strides[0] * es, out->strides[1],
                     out->strides[2], NULL, NULL);
    }
}
