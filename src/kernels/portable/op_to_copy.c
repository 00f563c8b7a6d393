#include "kernels/portable/portable.h"

/* aten::_to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
 *                    Tensor(a!) out): dtype conversion with torch's rules (to Bool: != 0;
 * floating -> integral truncates toward zero, NaN -> 0, out-of-range wraps after saturating to
 * int64; Double -> Half/BFloat16 rounds through Float). */
ETCH_PK_KERNEL(to_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool nb;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && etch_pk_bool(ctx, args[1], "non_blocking", &nb) &&
        etch_pk_check_memory_format(ctx, args[2], out))
        etch_pk_copy_into(ctx, in, out);
}

/* dim_order_ops::_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False,
 *                                       int[]? dim_order=None, Tensor(a!) out) */
ETCH_PK_KERNEL(to_dim_order_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool nb;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && etch_pk_bool(ctx, args[1], "non_blocking", &nb) &&
        etch_pk_check_dim_order_arg(ctx, args[2], out))
        etch_pk_copy_into(ctx, in, out);
}
