/* aten::alias_copy.out(Tensor self, *, Tensor(a!) out)
 * aten::detach_copy.out(Tensor self, *, Tensor(a!) out)
 * aten::lift_fresh_copy.out(Tensor self, *, Tensor(a!) out)
 *
 * out = self (resized to self's shape, converted to out's dtype as copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

static void plain_copy(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[1], "out") : NULL;
    if (out)
        etch_pk_copy_into(ctx, self, out);
}

ETCH_PK_KERNEL(alias_copy_out) { plain_copy(ctx, args, nargs); }
ETCH_PK_KERNEL(detach_copy_out) { plain_copy(ctx, args, nargs); }
ETCH_PK_KERNEL(lift_fresh_copy_out) { plain_copy(ctx, args, nargs); }
