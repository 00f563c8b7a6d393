/* aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(mul_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_MUL, a, b, NULL, NULL, out);
}

ETCH_PK_KERNEL(mul_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = a ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_MUL, a, NULL, args[1], NULL, out);
}
