/*
 * aten::embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1,
 *                     bool scale_grad_by_freq=False, bool sparse=False, *, Tensor(a!) out)
 *
 * out[..., :] = weight[indices[...], :]: weight is 2-D [V, D] of any real dtype, indices Int or
 * Long of any shape (0-dim included), out has weight's dtype and shape indices.shape + [D].
 * Every index must be in [0, V) (checked before anything is written). padding_idx,
 * scale_grad_by_freq and sparse only matter for the gradient and are ignored, as in torch's
 * forward. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

ETCH_PK_KERNEL(embedding_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    etch_tensor *w = etch_pk_tensor(ctx, args[0], "weight");
    etch_tensor *ix = w ? etch_pk_tensor(ctx, args[1], "indices") : NULL;
    etch_tensor *out = ix ? etch_pk_tensor(ctx, args[5], "out") : NULL;
    int64_t padding_idx;
    bool sgbf, sparse;
    if (!out || !etch_pk_int(ctx, args[2], "padding_idx", &padding_idx) ||
        !etch_pk_bool(ctx, args[3], "scale_grad_by_freq", &sgbf) ||
        !etch_pk_bool(ctx, args[4], "sparse", &sparse) || !etch_pk_check_real(ctx, w, "weight") ||
        !etch_pk_check_same_dtype(ctx, w, "weight", out, "out"))
        return;
    if (w->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "weight must be 2-D, got rank %u",
                         (unsigned)w->dim);
        return;
    }
    if (ix->dtype != ETCH_DTYPE_LONG && ix->dtype != ETCH_DTYPE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "indices must be Long or Int, got %s",
                         etch_dtype_name(ix->dtype));
        return;
    }
    if (ix->dim + 1 > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "indices of rank %u give an out of rank %u",
                         (unsigned)ix->dim, (unsigned)ix->dim + 1);
        return;
    }
    int64_t V = w->sizes[0], D = w->sizes[1];
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, ix, NULL, 0u); /* every index is an outer element */
    int64_t xes = (int64_t)etch_dtype_size(ix->dtype);
    int64_t id[ETCH_MAX_DIMS];
    for (int64_t e = 0; e < pl.outer; e++) {
        etch_nn_plan_index(&pl, e, id);
        int64_t v = etch_pk_load_i64(
            (const char *)etch_nn_at(ix->data, etch_nn_plan_offset(&pl, id, ix, true) * xes),
            ix->dtype);
        if (v < 0 || v >= V) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "index %lld is out of range for a weight of %lld rows", (long long)v,
                             (long long)V);
            return;
        }
    }
    int64_t osz[ETCH_MAX_DIMS];
    for (unsigned i = 0; i < ix->dim; i++)
        osz[i] = ix->sizes[i];
    osz[ix->dim] = D;
    if (etch_pk_resize(ctx, out, ix->dim + 1u, osz) != ETCH_OK || etch_tensor_numel(out) == 0)
        return;
    int64_t es = (int64_t)etch_dtype_size(w->dtype);
    int64_t ws = w->strides[1] * es, os = out->strides[ix->dim] * es;
    bool rows = ws == es && os == es;
    for (int64_t e = 0; e < pl.outer; e++) {
        etch_nn_plan_index(&pl, e, id);
        int64_t v = etch_pk_load_i64(
            (const char *)etch_nn_at(ix->data, etch_nn_plan_offset(&pl, id, ix, true) * xes),
            ix->dtype);
        const char *src = (const char *)etch_nn_at(w->data, v * w->strides[0] * es);
        char *dst = etch_nn_at(out->data, etch_nn_plan_offset(&pl, id, out, true) * es);
        if (rows) {
            memcpy(dst, src, (size_t)(D * es));
        } else {
            for (int64_t k = 0; k < D; k++)
                memcpy(dst + k * os, src + k * ws, (size_t)es);
        }
    }
}
