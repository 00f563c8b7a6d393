/* aten::copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out)
 * aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False)
 *
 * src broadcast to self's shape (src's rank at most self's; its dims equal or 1), converted to
 * self's dtype; copy.out then converts that to out's dtype (resized to self's shape), copy_
 * writes it into self (its return slot is self). Any dtypes among the ten real ones (or equal
 * dtypes), any dim orders. */
#include "kernels/portable/portable_shape.h"

/* src as a view of self's shape; false + failure when it does not broadcast. */
static bool broadcast_src(etch_kernel_context *ctx, const etch_tensor *self,
                          const etch_tensor *src, etch_sv *v) {
    bool ok = src->dim <= self->dim;
    size_t lead = ok ? self->dim - src->dim : 0;
    for (size_t k = 0; ok && k < src->dim; k++)
        ok = src->sizes[k] == self->sizes[lead + k] || src->sizes[k] == 1;
    if (!ok) {
        char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "src of shape %s cannot be broadcast to %s",
                         etch_pk_shape_str(b1, sizeof b1, src->dim, src->sizes),
                         etch_pk_shape_str(b2, sizeof b2, self->dim, self->sizes));
        return false;
    }
    etch_sv_of(v, src);
    for (size_t k = 0; k < lead; k++)
        etch_sv_insert(v, 0, 1, 0);
    for (unsigned k = 0; k < self->dim; k++)
        if (v->sizes[k] != self->sizes[k])
            etch_sv_broadcast(v, (int)k, self->sizes[k]);
    return true;
}

ETCH_PK_KERNEL(copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool nb;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *src = self ? etch_pk_tensor(ctx, args[1], "src") : NULL;
    etch_tensor *out = src ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    etch_sv from, dst;
    if (!out || !etch_pk_bool(ctx, args[2], "non_blocking", &nb) ||
        !etch_shape_check_convert(ctx, src->dtype, self->dtype, "src") ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out") ||
        !broadcast_src(ctx, self, src, &from) ||
        etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &from, self->dtype);
}

ETCH_PK_KERNEL(copy_) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    bool nb;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *src = self ? etch_pk_tensor(ctx, args[1], "src") : NULL;
    etch_sv from, dst;
    if (!src || !etch_pk_bool(ctx, args[2], "non_blocking", &nb) ||
        !etch_shape_check_convert(ctx, src->dtype, self->dtype, "src") ||
        !broadcast_src(ctx, self, src, &from))
        return;
    etch_sv_of(&dst, self);
    etch_sv_copy(&dst, &from, -1);
    /* the return slot is self; should it be another tensor, it receives self's data too */
    if (nargs > 3 && args[3] && args[3]->tag == ETCH_VALUE_TENSOR && args[3]->u.tensor &&
        args[3]->u.tensor != self) {
        etch_tensor *ret = etch_pk_tensor(ctx, args[3], "return slot");
        if (ret && etch_shape_check_convert(ctx, self->dtype, ret->dtype, "return slot") &&
            etch_pk_resize(ctx, ret, self->dim, self->sizes) == ETCH_OK)
            etch_pk_copy_same_shape(ret, self);
    }
}
