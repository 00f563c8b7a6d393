/* aten::masked_fill.Scalar_out(Tensor self, Tensor mask, Scalar value, *, Tensor(a!) out)
 *
 * out = where(mask, value, self) over the broadcast shape of self and mask. mask is Bool;
 * value converts to self's dtype with torch's overflow check, and the result converts to out's
 * dtype (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

typedef struct fill_arg {
    int self_dtype, out_dtype;
    const char *value; /* already in out's dtype */
} fill_arg;

static void fill_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const fill_arg *f = (const fill_arg *)arg;
    size_t oes = etch_dtype_size(f->out_dtype);
    for (int64_t i = 0; i < n; i++) {
        char *o = p[0] + i * s[0];
        const char *x = p[1] + i * s[1];
        if (p[2][i * s[2]])
            memcpy(o, f->value, oes);
        else if (f->self_dtype == f->out_dtype)
            memcpy(o, x, oes);
        else if (etch_pk_is_float(f->self_dtype))
            etch_pk_store_f64(o, f->out_dtype, etch_pk_load_f64(x, f->self_dtype));
        else
            etch_pk_store_i64(o, f->out_dtype, etch_pk_load_i64(x, f->self_dtype));
    }
}

ETCH_PK_KERNEL(masked_fill_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *mask = self ? etch_pk_tensor(ctx, args[1], "mask") : NULL;
    etch_tensor *out = mask ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    if (mask->dtype != ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "mask has dtype %s; it must be Bool",
                         etch_dtype_name(mask->dtype));
        return;
    }
    char v_self[8], v_out[8];
    if (!etch_shape_scalar_elem(ctx, args[2], self->dtype, v_self, "value"))
        return;
    if (self->dtype == out->dtype)
        memcpy(v_out, v_self, sizeof v_out);
    else if (etch_pk_is_float(self->dtype))
        etch_pk_store_f64(v_out, out->dtype, etch_pk_load_f64(v_self, self->dtype));
    else
        etch_pk_store_i64(v_out, out->dtype, etch_pk_load_i64(v_self, self->dtype));
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pk_broadcast_shape(ctx, self, mask, &dim, sizes) ||
        etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    fill_arg f = {self->dtype, out->dtype, v_out};
    etch_pk_iter it;
    etch_pk_iter_init(&it, dim, sizes);
    etch_pk_iter_add(&it, out);
    etch_pk_iter_add(&it, self);
    etch_pk_iter_add(&it, mask);
    etch_pk_iter_run(&it, fill_inner, &f);
}
