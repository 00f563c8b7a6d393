/* aten::sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out)
 * aten::sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(sub_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_SUB, a, b, NULL, args[2], out);
}

ETCH_PK_KERNEL(sub_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = a ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_SUB, a, NULL, args[1], args[2], out);
}
