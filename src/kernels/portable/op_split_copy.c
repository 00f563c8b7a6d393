/* aten::split_copy.Tensor_out(Tensor self, int split_size, int dim=0, *, Tensor(a!)[] out)
 * aten::split_with_sizes_copy.out(Tensor self, int[] split_sizes, int dim=0, *,
 *                                 Tensor(a!)[] out)
 * aten::unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out)
 *
 * Each out gets one piece of self along dim (converting to its dtype, as copy_). The number of
 * outs must be the number of pieces. Any dim orders. */
#include <stdio.h>

#include "kernels/portable/portable_shape.h"

/* The outs list: checks count and dtypes. */
static bool outs_check(etch_kernel_context *ctx, etch_value *v, const etch_tensor *self,
                       int64_t want) {
    if (v->tag != ETCH_VALUE_TENSOR_LIST || (v->u.list.len && !v->u.list.items)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out must be a Tensor list, got %s",
                         etch_value_tag_name(v->tag));
        return false;
    }
    if ((int64_t)v->u.list.len != want) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "out has %zu tensors, expected %lld",
                         v->u.list.len, (long long)want);
        return false;
    }
    for (size_t i = 0; i < v->u.list.len; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "out[%zu]", i);
        etch_tensor *o = etch_pk_tensor(ctx, v->u.list.items[i], nm);
        if (!o || !etch_shape_check_convert(ctx, self->dtype, o->dtype, nm))
            return false;
    }
    return true;
}

/* Piece i covers [start_i, start_i + len_i) of dim d (len from lens, or a fixed split). */
static void split_write(etch_kernel_context *ctx, etch_tensor *self, int64_t d, etch_value *outs,
                        const int64_t *lens, int64_t split) {
    size_t n = outs->u.list.len;
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned k = 0; k < self->dim; k++)
        sizes[k] = self->sizes[k];
    int64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t len = lens ? lens[i] : self->sizes[d] - at < split ? self->sizes[d] - at : split;
        sizes[d] = len;
        if (etch_pk_resize(ctx, outs->u.list.items[i]->u.tensor, self->dim, sizes) != ETCH_OK)
            return;
        at += len;
    }
    at = 0;
    for (size_t i = 0; i < n; i++) {
        etch_tensor *o = outs->u.list.items[i]->u.tensor;
        etch_sv src, dst;
        etch_sv_of(&src, self);
        etch_sv_slice(&src, (int)d, at, o->sizes[d], 1);
        etch_sv_of(&dst, o);
        etch_sv_copy(&dst, &src, -1);
        at += o->sizes[d];
    }
}

static bool split_dim(etch_kernel_context *ctx, const etch_tensor *self, etch_value *v,
                      int64_t *d) {
    int64_t dim;
    if (!etch_pk_int(ctx, v, "dim", &dim))
        return false;
    if (self->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "cannot split a zero-dim tensor");
        return false;
    }
    return etch_shape_dim(ctx, dim, self->dim, "dim", d);
}

ETCH_PK_KERNEL(split_copy_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    int64_t split, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    if (!self || !etch_pk_int(ctx, args[1], "split_size", &split) ||
        !split_dim(ctx, self, args[2], &d))
        return;
    int64_t size = self->sizes[d];
    if (split < 0 || (split == 0 && size != 0)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "split_size %lld is invalid for a dim of size %lld (it must be "
                         "positive, or 0 for an empty dim)",
                         (long long)split, (long long)size);
        return;
    }
    int64_t pieces = size == 0 ? 1 : size / split + (size % split != 0);
    if (outs_check(ctx, args[3], self, pieces))
        split_write(ctx, self, d, args[3], NULL, split);
}

ETCH_PK_KERNEL(split_with_sizes_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    int64_t d;
    size_t len;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    const int64_t *lens = self ? etch_pk_int_list(ctx, args[1], "split_sizes", &len) : NULL;
    if (!lens || !split_dim(ctx, self, args[2], &d))
        return;
    int64_t sum = 0;
    for (size_t i = 0; i < len; i++) {
        if (lens[i] < 0 || lens[i] > self->sizes[d] - sum) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "split_sizes[%zu] = %lld is negative or runs past the dim's size "
                             "%lld",
                             i, (long long)lens[i], (long long)self->sizes[d]);
            return;
        }
        sum += lens[i];
    }
    if (sum != self->sizes[d]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "split_sizes sum to %lld, but the dim has size %lld", (long long)sum,
                         (long long)self->sizes[d]);
        return;
    }
    if (outs_check(ctx, args[3], self, (int64_t)len))
        split_write(ctx, self, d, args[3], lens, 0);
}

ETCH_PK_KERNEL(unbind_copy_int_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    if (!self || !split_dim(ctx, self, args[1], &d) ||
        !outs_check(ctx, args[2], self, self->sizes[d]))
        return;
    etch_value *outs = args[2];
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned k = 0, j = 0; k < self->dim; k++)
        if ((int64_t)k != d)
            sizes[j++] = self->sizes[k];
    for (size_t i = 0; i < outs->u.list.len; i++)
        if (etch_pk_resize(ctx, outs->u.list.items[i]->u.tensor, self->dim - 1u, sizes) !=
            ETCH_OK)
            return;
    for (size_t i = 0; i < outs->u.list.len; i++) {
        etch_sv src, dst;
        etch_sv_of(&src, self);
        etch_sv_select(&src, (int)d, (int64_t)i);
        etch_sv_of(&dst, outs->u.list.items[i]->u.tensor);
        etch_sv_copy(&dst, &src, -1);
    }
}
