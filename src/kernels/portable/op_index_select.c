/* aten::index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out)
 *
 * out = self with dim d replaced by the entries index lists (a Long or Int tensor of rank <= 1;
 * values in [0, size), negative values are out of range as in torch). out's dtype must be
 * self's. A zero-dim self takes a one-element index of value 0. Any dim orders. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(index_select_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    int64_t dim, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *index = self ? etch_pk_tensor(ctx, args[2], "index") : NULL;
    etch_tensor *out = index ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_shape_check_same(ctx, self, "self", out, "out") ||
        !etch_shape_dim(ctx, dim, self->dim, "dim", &d))
        return;
    if (index->dtype != ETCH_DTYPE_LONG && index->dtype != ETCH_DTYPE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "index has dtype %s; it must be Long or Int",
                         etch_dtype_name(index->dtype));
        return;
    }
    if (index->dim > 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "index must have rank 0 or 1, not %u",
                         (unsigned)index->dim);
        return;
    }
    int64_t n = etch_tensor_numel(index);
    int64_t size = self->dim ? self->sizes[d] : 1;
    if (self->dim == 0 && n != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "index into a zero-dim tensor must have one value, it has %lld",
                         (long long)n);
        return;
    }
    int64_t istride = index->dim ? index->strides[0] : 0;
    size_t ies = etch_dtype_size(index->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t v =
            etch_shape_load_index((const char *)index->data + i * istride * (int64_t)ies,
                                  index->dtype);
        if (v < 0 || v >= size) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "index %lld is out of range for dim %lld of size %lld",
                             (long long)v, (long long)d, (long long)size);
            return;
        }
    }
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned k = 0; k < self->dim; k++)
        sizes[k] = (int64_t)k == d ? n : self->sizes[k];
    if (etch_pk_resize(ctx, out, self->dim, sizes) != ETCH_OK)
        return;
    if (self->dim == 0) {
        etch_pk_copy_same_shape(out, self);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v =
            etch_shape_load_index((const char *)index->data + i * istride * (int64_t)ies,
                                  index->dtype);
        etch_sv src, dst;
        etch_sv_of(&src, self);
        etch_sv_select(&src, (int)d, v);
        etch_sv_of(&dst, out);
        etch_sv_select(&dst, (int)d, i);
        etch_sv_copy(&dst, &src, -1);
    }
}
