/* aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out):
 * out[..., n] = sum_k input[..., k] * weight[n, k] + bias[n].
 *
 * input has rank >= 1 ([K] gives out [N]), weight is [N, K], bias is None, [N], [1] or a
 * 0-d tensor (broadcast over the last dimension). Every dtype but Bool, shared by all
 * operands (see op_mm.c for the numerics); any dim order. */
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"

ETCH_PK_KERNEL(linear_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool has_bias = false;
    etch_tensor *x = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *w = x ? etch_pk_tensor(ctx, args[1], "weight") : NULL;
    etch_tensor *bias = w ? etch_pk_opt_tensor(ctx, args[2], "bias", &has_bias) : NULL;
    if (!w || etch_kernel_failed(ctx))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[3], "out");
    if (!out)
        return;
    if (x->dim < 1 || w->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input must have rank >= 1 and weight must be a matrix, got ranks %u "
                         "and %u",
                         (unsigned)x->dim, (unsigned)w->dim);
        return;
    }
    if (!etch_pk_check_real(ctx, x, "input") || x->dtype == ETCH_DTYPE_BOOL) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "linear does not support Bool");
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, x, "input", w, "weight") ||
        (has_bias && !etch_pk_check_same_dtype(ctx, x, "input", bias, "bias")) ||
        !etch_pk_check_same_dtype(ctx, x, "input", out, "out"))
        return;
    const int64_t K = x->sizes[x->dim - 1], N = w->sizes[0];
    if (w->sizes[1] != K) {
        char xs[ETCH_PK_SHAPE_BUF], ws[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input %s and weight %s do not match: weight must be [out_features, "
                         "%lld]",
                         etch_pk_shape_str(xs, sizeof xs, x->dim, x->sizes),
                         etch_pk_shape_str(ws, sizeof ws, w->dim, w->sizes), (long long)K);
        return;
    }
    int64_t bias_cs = 0;
    if (has_bias) {
        const bool ok = bias->dim == 0 || (bias->dim == 1 && (bias->sizes[0] == N ||
                                                              bias->sizes[0] == 1));
        if (!ok) {
            char bs[ETCH_PK_SHAPE_BUF];
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "bias %s cannot be broadcast to [%lld] (out_features)",
                             etch_pk_shape_str(bs, sizeof bs, bias->dim, bias->sizes),
                             (long long)N);
            return;
        }
        bias_cs = bias->dim == 1 && bias->sizes[0] == N && N > 1 ? bias->strides[0] : 0;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned i = 0; i + 1 < x->dim; i++)
        sizes[i] = x->sizes[i];
    sizes[x->dim - 1] = N;
    if (etch_pk_resize(ctx, out, x->dim, sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;
    /* rows: the second-to-last dim of input (M = 1 for a vector); batches: the ones before */
    const unsigned d = x->dim;
    const int64_t M = d >= 2 ? x->sizes[d - 2] : 1;
    const int64_t x_rs = d >= 2 ? x->strides[d - 2] : 0, o_rs = d >= 2 ? out->strides[d - 2] : 0;
    int64_t batches = 1;
    for (unsigned i = 0; i + 2 < d; i++)
        batches *= x->sizes[i];
    const int64_t es = (int64_t)etch_dtype_size(x->dtype);
    const bool k0 = K == 0; /* then input and weight may have no data: never read */
    etch_pk_matrix mw = {k0 ? NULL : (const char *)w->data, w->strides[1], w->strides[0]};
    etch_pk_matrix mb = {has_bias && etch_tensor_numel(bias) ? (const char *)bias->data : NULL,
                         0, bias_cs};
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t xoff = 0, ooff = 0, rem = bi;
        for (int i = (int)d - 3; i >= 0; i--) {
            const int64_t idx = rem % x->sizes[i];
            rem /= x->sizes[i];
            xoff += idx * x->strides[i];
            ooff += idx * out->strides[i];
        }
        etch_pk_matrix mx = {k0 ? NULL : (const char *)x->data + xoff * es, x_rs,
                             x->strides[d - 1]};
        etch_pk_gemm(ctx, x->dtype, M, N, K, mx, mw, mb, (char *)out->data + ooff * es, o_rs,
                     out->strides[d - 1], NULL, NULL);
        if (etch_kernel_failed(ctx))
            return;
    }
}
