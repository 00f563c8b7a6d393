/* aten::empty.out(SymInt[] size, *, MemoryFormat? memory_format=None, Tensor(a!) out)
 * dim_order_ops::_empty_dim_order.out(int[] size, *, int[]? dim_order=None, Tensor(a!) out)
 *
 * Resize out to size; the contents are left as they are. memory_format may be None,
 * contiguous (out must be) or preserve (torch's out= variant only takes None); dim_order, when
 * given, must be out's. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(empty_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *out = etch_pk_tensor(ctx, args[2], "out");
    const int64_t *size = out ? etch_shape_size_list(ctx, args[0], "size", &len) : NULL;
    if (size && etch_pk_check_memory_format(ctx, args[1], out)) {
        if (args[1]->tag == ETCH_VALUE_INT && args[1]->u.i == 2) {
            etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                             "memory_format=channels_last is not supported by empty.out");
            return;
        }
        etch_pk_resize(ctx, out, len, size);
    }
}

ETCH_PK_KERNEL(empty_dim_order_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *out = etch_pk_tensor(ctx, args[2], "out");
    const int64_t *size = out ? etch_shape_size_list(ctx, args[0], "size", &len) : NULL;
    if (size && etch_pk_check_dim_order_arg(ctx, args[1], out))
        etch_pk_resize(ctx, out, len, size);
}
