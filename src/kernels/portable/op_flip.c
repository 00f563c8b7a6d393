/* aten::flip.out(Tensor self, int[] dims, *, Tensor(a!) out)
 *
 * self reversed along each dim in dims (negative dims count from the end; a dim named twice
 * fails). Converts to out's dtype (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(flip_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    const int64_t *dims = out ? etch_pk_int_list(ctx, args[1], "dims", &len) : NULL;
    if (!dims || !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    etch_sv src;
    etch_sv_of(&src, self);
    uint32_t seen = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t d;
        if (!etch_shape_dim(ctx, dims[i], self->dim, "dim", &d))
            return;
        if (seen & (1u << d)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "dim %lld appears more than once in dims", (long long)d);
            return;
        }
        seen |= 1u << d;
        if (self->dim)
            etch_sv_flip(&src, (int)d);
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}
