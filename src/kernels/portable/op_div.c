/* aten::div.out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::div.out_mode(Tensor self, Tensor other, *, str? rounding_mode, Tensor(a!) out)
 * aten::div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
 * aten::div.Scalar_mode_out(Tensor self, Scalar other, *, str? rounding_mode, Tensor(a!) out)
 *
 * True division computes in floating point (integers promote to Float). With a rounding
 * mode, integer inputs stay integral and a zero divisor is an error. */
#include <string.h>

#include "kernels/portable/portable.h"

static bool rounding_mode(etch_kernel_context *ctx, const etch_value *v, etch_pk_binop *op) {
    if (v->tag == ETCH_VALUE_NONE) {
        *op = ETCH_PK_DIV;
        return true;
    }
    if (v->tag == ETCH_VALUE_STRING && v->u.str.ptr) {
        if (v->u.str.len == 5 && memcmp(v->u.str.ptr, "trunc", 5) == 0) {
            *op = ETCH_PK_DIV_TRUNC;
            return true;
        }
        if (v->u.str.len == 5 && memcmp(v->u.str.ptr, "floor", 5) == 0) {
            *op = ETCH_PK_DIV_FLOOR;
            return true;
        }
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "rounding_mode must be None, 'trunc' or 'floor', got '%.*s'",
                         (int)(v->u.str.len > 32 ? 32 : v->u.str.len), v->u.str.ptr);
        return false;
    }
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "rounding_mode must be a String or None, got %s",
                     etch_value_tag_name(v->tag));
    return false;
}

ETCH_PK_KERNEL(div_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_DIV, a, b, NULL, NULL, out);
}

ETCH_PK_KERNEL(div_out_mode) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_pk_binop op;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && rounding_mode(ctx, args[2], &op))
        etch_pk_binary(ctx, op, a, b, NULL, NULL, out);
}

ETCH_PK_KERNEL(div_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = a ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out)
        etch_pk_binary(ctx, ETCH_PK_DIV, a, NULL, args[1], NULL, out);
}

ETCH_PK_KERNEL(div_scalar_mode_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_pk_binop op;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = a ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && rounding_mode(ctx, args[2], &op))
        etch_pk_binary(ctx, op, a, NULL, args[1], NULL, out);
}
