/* aten::transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out)
 * aten::t_copy.out(Tensor self, *, Tensor(a!) out)
 *
 * self with two dims swapped (t: a matrix transposed; rank 0 and 1 are copied as they are,
 * rank > 2 fails). Converts to out's dtype (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

static void swap_copy(etch_kernel_context *ctx, etch_tensor *self, etch_tensor *out, int64_t a,
                      int64_t b) {
    if (!etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    etch_sv src;
    etch_sv_of(&src, self);
    if (self->dim) {
        int64_t t = src.sizes[a];
        src.sizes[a] = src.sizes[b];
        src.sizes[b] = t;
        t = src.strides[a];
        src.strides[a] = src.strides[b];
        src.strides[b] = t;
    }
    if (etch_pk_resize(ctx, out, (size_t)src.ndim, src.sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}

ETCH_PK_KERNEL(transpose_copy_int_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    int64_t d0, d1, a, b;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && etch_pk_int(ctx, args[1], "dim0", &d0) && etch_pk_int(ctx, args[2], "dim1", &d1) &&
        etch_shape_dim(ctx, d0, self->dim, "dim0", &a) &&
        etch_shape_dim(ctx, d1, self->dim, "dim1", &b))
        swap_copy(ctx, self, out, a, b);
}

ETCH_PK_KERNEL(t_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[1], "out") : NULL;
    if (!out)
        return;
    if (self->dim > 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "t expects a tensor of rank <= 2, self has rank %u", (unsigned)self->dim);
        return;
    }
    swap_copy(ctx, self, out, 0, self->dim == 2 ? 1 : 0);
}
