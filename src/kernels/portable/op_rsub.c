/*
 * aten::rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out)
 *
 * out = other - alpha * self, i.e. sub with the operands swapped: the same result type (the
 * Scalar is a wrapped number), alpha rules, rounding and casts as aten::sub.Scalar_out. A Bool
 * operand is refused, as torch refuses subtraction with Bool.
 */
#include "kernels/portable/portable_math.h"

ETCH_PK_KERNEL(rsub_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, self, "self"))
        return;
    const etch_value *v = args[1];
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "other must be a Scalar, got %s",
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return;
    }
    /* The scalar becomes a zero-dim tensor whose dtype gives the wrapped number's result type
     * against self: self's own dtype when self decides it (the value converts as torch
     * converts the wrapped scalar), Float for a Double against an integral self, and the
     * scalar's natural dtype otherwise (Bool scalars stay Bool so the Bool check applies). */
    int dt;
    if (v->tag == ETCH_VALUE_BOOL || self->dtype == ETCH_DTYPE_BOOL)
        dt = v->tag == ETCH_VALUE_BOOL ? ETCH_DTYPE_BOOL
             : v->tag == ETCH_VALUE_INT ? ETCH_DTYPE_LONG
                                        : ETCH_DTYPE_FLOAT;
    else if (v->tag == ETCH_VALUE_DOUBLE && !etch_pk_is_float(self->dtype))
        dt = ETCH_DTYPE_FLOAT;
    else
        dt = self->dtype;
    uint64_t storage = 0;
    if (v->tag == ETCH_VALUE_DOUBLE)
        etch_pk_store_f64(&storage, dt, v->u.d);
    else
        etch_pk_store_i64(&storage, dt, v->tag == ETCH_VALUE_INT ? v->u.i : (int64_t)v->u.b);
    etch_tensor other;
    etch_tensor_init(&other, (etch_dtype)dt, 0, NULL, &storage);
    etch_pk_binary(ctx, ETCH_PK_SUB, &other, self, NULL, args[2], out);
}
