/* aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
 *                 Tensor(a!) out): out = beta * self + alpha * (mat1 @ mat2), self broadcast to
 * [n, p]. Every dtype but Bool (see op_mm.c); beta == 0 ignores self's values. For integral
 * dtypes a floating beta/alpha truncates toward zero, as torch casts it. */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(addmm_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    etch_tensor *bias = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *a = bias ? etch_pk_tensor(ctx, args[1], "mat1") : NULL;
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[2], "mat2") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[5], "out") : NULL;
    if (!out)
        return;
    const etch_value *beta = args[3], *alpha = args[4];
    if (!etch_pk_is_scalar(beta) || !etch_pk_is_scalar(alpha)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "beta and alpha must be Scalars");
        return;
    }
    if (a->dim != 2 || b->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "mat1 and mat2 must be matrices, got ranks %u and %u", (unsigned)a->dim,
                         (unsigned)b->dim);
        return;
    }
    if (!etch_pk_check_real(ctx, a, "mat1") || a->dtype == ETCH_DTYPE_BOOL) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "addmm does not support Bool");
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, a, "mat1", b, "mat2") ||
        !etch_pk_check_same_dtype(ctx, a, "mat1", bias, "self") ||
        !etch_pk_check_same_dtype(ctx, a, "mat1", out, "out"))
        return;
    if (a->sizes[1] != b->sizes[0]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "mat1 [%lld, %lld] and mat2 [%lld, %lld] cannot be multiplied",
                         (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                         (long long)b->sizes[1]);
        return;
    }
    int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    /* self broadcasts to [n, p] */
    etch_pk_matrix mbias = {(const char *)bias->data, 0, 0};
    bool ok = bias->dim <= 2;
    for (unsigned i = 0; ok && i < bias->dim; i++) {
        unsigned od = 2 - bias->dim + i; /* output dim it lines up with */
        int64_t st = bias->sizes[i] == 1 ? 0 : bias->strides[i];
        ok = bias->sizes[i] == 1 || bias->sizes[i] == sizes[od];
        if (od == 0)
            mbias.rs = st;
        else
            mbias.cs = st;
    }
    if (!ok) {
        char x[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self %s cannot be broadcast to [%lld, %lld]",
                         etch_pk_shape_str(x, sizeof x, bias->dim, bias->sizes),
                         (long long)sizes[0], (long long)sizes[1]);
        return;
    }
    if (etch_pk_resize(ctx, out, 2, sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;
    if (etch_tensor_numel(bias) == 0) /* only possible when broadcasting to an empty out */
        mbias.data = NULL;
    etch_pk_matrix ma = {(const char *)a->data, a->strides[0], a->strides[1]};
    etch_pk_matrix mb = {(const char *)b->data, b->strides[0], b->strides[1]};
    etch_pk_gemm(ctx, a->dtype, sizes[0], sizes[1], a->sizes[1], ma, mb, mbias,
                 (char *)out->data, out->strides[0], out->strides[1], alpha, beta);
}
