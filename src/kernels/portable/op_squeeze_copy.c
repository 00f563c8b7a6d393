/* aten::unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out)
 * aten::squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out)
 * aten::squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out)
 * aten::squeeze_copy.out(Tensor self, *, Tensor(a!) out)
 *
 * self's elements under a shape with a size-1 dim inserted at dim (in [-rank-1, rank]), or with
 * the named size-1 dims removed (named dims of other sizes stay; a dim named twice fails), or
 * with every size-1 dim removed. Converts to out's dtype (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

/* Copy self into out resized to `sizes`, dropping the dims in `drop` (all size 1) or inserting
 * one at `insert` (-1: none). */
static void reshape_copy(etch_kernel_context *ctx, etch_tensor *self, etch_tensor *out,
                         uint32_t drop, int insert) {
    if (!etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    etch_sv src;
    etch_sv_of(&src, self);
    for (int k = (int)self->dim - 1; k >= 0; k--)
        if (drop & (1u << k))
            etch_sv_select(&src, k, 0);
    if (insert >= 0)
        etch_sv_insert(&src, insert, 1, 0);
    if (etch_pk_resize(ctx, out, (size_t)src.ndim, src.sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}

ETCH_PK_KERNEL(unsqueeze_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t dim, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim))
        return;
    if (self->dim >= ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "the result would have more than %d dims",
                         ETCH_MAX_DIMS);
        return;
    }
    if (etch_shape_dim(ctx, dim, (int64_t)self->dim + 1, "dim", &d))
        reshape_copy(ctx, self, out, 0, (int)d);
}

ETCH_PK_KERNEL(squeeze_copy_dim_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t dim, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_shape_dim(ctx, dim, self->dim, "dim", &d))
        return;
    uint32_t drop = self->dim && self->sizes[d] == 1 ? 1u << d : 0;
    reshape_copy(ctx, self, out, drop, -1);
}

ETCH_PK_KERNEL(squeeze_copy_dims_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    const int64_t *dims = out ? etch_pk_int_list(ctx, args[1], "dim", &len) : NULL;
    if (!dims)
        return;
    uint32_t seen = 0, drop = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t d;
        if (!etch_shape_dim(ctx, dims[i], self->dim, "dim", &d))
            return;
        if (seen & (1u << d)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "dim %lld appears more than once in the list of dims", (long long)d);
            return;
        }
        seen |= 1u << d;
        if (self->dim && self->sizes[d] == 1)
            drop |= 1u << d;
    }
    reshape_copy(ctx, self, out, drop, -1);
}

ETCH_PK_KERNEL(squeeze_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[1], "out") : NULL;
    if (!out)
        return;
    uint32_t drop = 0;
    for (unsigned k = 0; k < self->dim; k++)
        if (self->sizes[k] == 1)
            drop |= 1u << k;
    reshape_copy(ctx, self, out, drop, -1);
}
