/* aten::select_copy.int_out(Tensor self, int dim, int index, *, Tensor(a!) out)
 * aten::select_scatter.out(Tensor self, Tensor src, int dim, int index, *, Tensor(a!) out)
 *
 * index in [-size, size). select_copy converts to out's dtype (copy_); select_scatter writes
 * self with src (of exactly the selected shape, converted to self's dtype) at the index,
 * converted to out's dtype. Any dim orders. */
#include "kernels/portable/portable_shape.h"

static bool select_args(etch_kernel_context *ctx, const etch_tensor *self, etch_value *dim_v,
                        etch_value *index_v, int64_t *d, int64_t *index) {
    int64_t dim;
    if (!etch_pk_int(ctx, dim_v, "dim", &dim) || !etch_pk_int(ctx, index_v, "index", index))
        return false;
    if (self->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "cannot select from a zero-dim tensor");
        return false;
    }
    if (!etch_shape_dim(ctx, dim, self->dim, "dim", d))
        return false;
    int64_t size = self->sizes[*d];
    if (*index < -size || *index >= size) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "index %lld is out of range for dim %lld of size %lld",
                         (long long)*index, (long long)*d, (long long)size);
        return false;
    }
    if (*index < 0)
        *index += size;
    return true;
}

static size_t selected_shape(const etch_tensor *self, int64_t d, int64_t *sizes) {
    size_t j = 0;
    for (unsigned k = 0; k < self->dim; k++)
        if ((int64_t)k != d)
            sizes[j++] = self->sizes[k];
    return j;
}

ETCH_PK_KERNEL(select_copy_int_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    int64_t d, index;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !select_args(ctx, self, args[1], args[2], &d, &index) ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    int64_t sizes[ETCH_MAX_DIMS];
    size_t rank = selected_shape(self, d, sizes);
    if (etch_pk_resize(ctx, out, rank, sizes) != ETCH_OK)
        return;
    etch_sv src, dst;
    etch_sv_of(&src, self);
    etch_sv_select(&src, (int)d, index);
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}

ETCH_PK_KERNEL(select_scatter_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    int64_t d, index;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *src = self ? etch_pk_tensor(ctx, args[1], "src") : NULL;
    etch_tensor *out = src ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    if (!out || !select_args(ctx, self, args[2], args[3], &d, &index) ||
        !etch_shape_check_convert(ctx, src->dtype, self->dtype, "src") ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    int64_t sizes[ETCH_MAX_DIMS];
    size_t rank = selected_shape(self, d, sizes);
    bool same = src->dim == rank;
    for (unsigned k = 0; same && k < src->dim; k++)
        same = src->sizes[k] == sizes[k];
    if (!same) {
        char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "src has shape %s, but the selected part of self has shape %s",
                         etch_pk_shape_str(b1, sizeof b1, src->dim, src->sizes),
                         etch_pk_shape_str(b2, sizeof b2, rank, sizes));
        return;
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy_from_tensor(&dst, self, -1);
    etch_sv_select(&dst, (int)d, index);
    etch_sv_copy_from_tensor(&dst, src, self->dtype);
}
