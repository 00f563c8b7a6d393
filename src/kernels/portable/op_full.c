/* aten::full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out)
 * aten::full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None,
 *                     Tensor(a!) out)
 * aten::zeros.out(SymInt[] size, *, Tensor(a!) out)
 * aten::ones.out(SymInt[] size, *, Tensor(a!) out)
 * aten::scalar_tensor.out(Scalar s, *, Tensor(a!) out)
 * aten::fill.Scalar_out(Tensor self, Scalar value, *, Tensor(a!) out)
 * aten::fill.Tensor_out(Tensor self, Tensor value, *, Tensor(a!) out)
 *
 * out (resized to size / self's shape / zero-dim) filled with one value, converted with c10's
 * overflow check: to out's dtype (full, full_like, scalar_tensor), or to self's dtype and then
 * to out's (fill: the functional op fills a tensor like self). fill.Tensor takes a zero-dim
 * value tensor (read as a Bool, Int or Double Scalar by its dtype). zeros works for any dtype
 * (all-zero bytes); the others need one of the ten real dtypes. Any dim orders. */
#include "kernels/portable/portable_shape.h"

static void fill_out(etch_tensor *out, const void *elem) {
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_fill(&dst, elem);
}

/* Resize out to `sizes` and fill it with `value` converted to out's dtype. */
static void fill_sized(etch_kernel_context *ctx, etch_tensor *out, size_t dim,
                       const int64_t *sizes, const etch_value *value, const char *name) {
    char elem[8];
    if (!etch_shape_scalar_elem(ctx, value, out->dtype, elem, name) ||
        etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    fill_out(out, elem);
}

ETCH_PK_KERNEL(full_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *out = etch_pk_tensor(ctx, args[2], "out");
    const int64_t *size = out ? etch_shape_size_list(ctx, args[0], "size", &len) : NULL;
    if (size)
        fill_sized(ctx, out, len, size, args[1], "fill_value");
}

ETCH_PK_KERNEL(full_like_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (out && etch_pk_check_memory_format(ctx, args[2], out))
        fill_sized(ctx, out, self->dim, self->sizes, args[1], "fill_value");
}

ETCH_PK_KERNEL(zeros_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    size_t len;
    etch_tensor *out = etch_pk_tensor(ctx, args[1], "out");
    const int64_t *size = out ? etch_shape_size_list(ctx, args[0], "size", &len) : NULL;
    if (!size || etch_pk_resize(ctx, out, len, size) != ETCH_OK)
        return;
    char zero[8] = {0};
    if (etch_dtype_size(out->dtype) > sizeof zero) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "dtype %s is not supported",
                         etch_dtype_name(out->dtype));
        return;
    }
    fill_out(out, zero);
}

ETCH_PK_KERNEL(ones_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    size_t len;
    etch_value one = {.tag = ETCH_VALUE_INT, .u.i = 1};
    etch_tensor *out = etch_pk_tensor(ctx, args[1], "out");
    const int64_t *size = out ? etch_shape_size_list(ctx, args[0], "size", &len) : NULL;
    if (size)
        fill_sized(ctx, out, len, size, &one, "1");
}

ETCH_PK_KERNEL(scalar_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[1], "out");
    if (out)
        fill_sized(ctx, out, 0, NULL, args[0], "s");
}

/* fill: value -> self's dtype (checked) -> out's dtype. */
static void fill_like(etch_kernel_context *ctx, etch_tensor *self, const etch_value *value,
                      etch_tensor *out) {
    char v_self[8], v_out[8];
    if (!etch_shape_check_convert(ctx, self->dtype, out->dtype, "out") ||
        !etch_shape_scalar_elem(ctx, value, self->dtype, v_self, "value") ||
        etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_sv src, dst;
    etch_sv_scalar(&src, v_self, self->dtype);
    etch_sv_scalar(&dst, v_out, out->dtype);
    etch_sv_copy(&dst, &src, -1);
    fill_out(out, v_out);
}

ETCH_PK_KERNEL(fill_scalar_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (out)
        fill_like(ctx, self, args[1], out);
}

ETCH_PK_KERNEL(fill_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *value = self ? etch_pk_tensor(ctx, args[1], "value") : NULL;
    etch_tensor *out = value ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, value, "value"))
        return;
    if (value->dim != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "fill takes a zero-dim value tensor, this one has rank %u",
                         (unsigned)value->dim);
        return;
    }
    etch_value v;
    memset(&v, 0, sizeof v);
    if (value->dtype == ETCH_DTYPE_BOOL) {
        v.tag = ETCH_VALUE_BOOL;
        v.u.b = etch_pk_load_i64(value->data, value->dtype) != 0;
    } else if (etch_pk_is_float(value->dtype)) {
        v.tag = ETCH_VALUE_DOUBLE;
        v.u.d = etch_pk_load_f64(value->data, value->dtype);
    } else {
        v.tag = ETCH_VALUE_INT;
        v.u.i = etch_pk_load_i64(value->data, value->dtype);
    }
    fill_like(ctx, self, &v, out);
}
