/* aten::clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out)
 * dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False,
 *                                     int[]? dim_order=None, Tensor(a!) out)
 * Elementwise copy into out's own dim order (so these also convert layouts); out's dtype may
 * differ (converting like copy_). */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(clone_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out && etch_pk_check_memory_format(ctx, args[1], out))
        etch_pk_copy_into(ctx, in, out);
}

ETCH_PK_KERNEL(clone_dim_order_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool nb;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && etch_pk_bool(ctx, args[1], "non_blocking", &nb) &&
        etch_pk_check_dim_order_arg(ctx, args[2], out))
        etch_pk_copy_into(ctx, in, out);
}
