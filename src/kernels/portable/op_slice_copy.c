/* aten::slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None,
 *                             SymInt step=1, *, Tensor(a!) out)
 * aten::slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None,
 *                         SymInt? end=None, SymInt step=1, *, Tensor(a!) out)
 * aten::narrow_copy.out(Tensor self, int dim, SymInt start, SymInt length, *, Tensor(a!) out)
 *
 * start/end are clamped like Python slices (negative counts from the end), step must be
 * positive. slice_copy converts to out's dtype (copy_); narrow_copy needs out's dtype equal to
 * self's; slice_scatter writes self with src (of exactly the slice's shape, converted to self's
 * dtype) in the slice, converted to out's dtype. Any dim orders. */
#include "kernels/portable/portable_shape.h"

/* Resolve dim/start/end/step against self: d, first index, count, step. */
static bool slice_range(etch_kernel_context *ctx, const etch_tensor *self, etch_value *dim_v,
                        etch_value *start_v, etch_value *end_v, etch_value *step_v, int64_t *d,
                        int64_t *start, int64_t *len, int64_t *step) {
    int64_t dim;
    if (!etch_pk_int(ctx, dim_v, "dim", &dim) || !etch_pk_int(ctx, step_v, "step", step))
        return false;
    int64_t s = 0, e = INT64_MAX;
    if (start_v->tag != ETCH_VALUE_NONE && !etch_pk_int(ctx, start_v, "start", &s))
        return false;
    if (end_v->tag != ETCH_VALUE_NONE && !etch_pk_int(ctx, end_v, "end", &e))
        return false;
    if (self->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "cannot slice a zero-dim tensor");
        return false;
    }
    if (!etch_shape_dim(ctx, dim, self->dim, "dim", d))
        return false;
    if (*step <= 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "slice step %lld must be positive",
                         (long long)*step);
        return false;
    }
    int64_t size = self->sizes[*d];
    if (s < 0)
        s += size;
    if (e < 0)
        e += size;
    if (s < 0)
        s = 0;
    else if (s > size)
        s = size;
    if (e < s)
        e = s;
    else if (e > size)
        e = size;
    *start = s;
    *len = e == s ? 0 : 1 + (e - s - 1) / *step;
    return true;
}

static void sliced_shape(const etch_tensor *self, int64_t d, int64_t len, int64_t *sizes) {
    for (unsigned k = 0; k < self->dim; k++)
        sizes[k] = self->sizes[k];
    sizes[d] = len;
}

ETCH_PK_KERNEL(slice_copy_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    int64_t d, start, len, step;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[5], "out") : NULL;
    if (!out || !slice_range(ctx, self, args[1], args[2], args[3], args[4], &d, &start, &len,
                             &step) ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    int64_t sizes[ETCH_MAX_DIMS];
    sliced_shape(self, d, len, sizes);
    if (etch_pk_resize(ctx, out, self->dim, sizes) != ETCH_OK)
        return;
    etch_sv src, dst;
    etch_sv_of(&src, self);
    etch_sv_slice(&src, (int)d, start, len, step);
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}

ETCH_PK_KERNEL(narrow_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    int64_t dim, start, length, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_pk_int(ctx, args[2], "start", &start) ||
        !etch_pk_int(ctx, args[3], "length", &length) ||
        !etch_shape_check_same(ctx, self, "self", out, "out"))
        return;
    if (self->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "cannot narrow a zero-dim tensor");
        return;
    }
    if (!etch_shape_dim(ctx, dim, self->dim, "dim", &d))
        return;
    int64_t size = self->sizes[d];
    if (start < -size || start > size) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start %lld is out of range for a dim of size %lld", (long long)start,
                         (long long)size);
        return;
    }
    if (start < 0)
        start += size;
    if (length < 0 || length > size - start) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start (%lld) + length (%lld) exceeds the dim's size (%lld)",
                         (long long)start, (long long)length, (long long)size);
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    sliced_shape(self, d, length, sizes);
    if (etch_pk_resize(ctx, out, self->dim, sizes) != ETCH_OK)
        return;
    etch_sv src, dst;
    etch_sv_of(&src, self);
    etch_sv_slice(&src, (int)d, start, length, 1);
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}

ETCH_PK_KERNEL(slice_scatter_out) {
    if (!etch_pk_nargs(ctx, nargs, 7))
        return;
    int64_t d, start, len, step;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *src = self ? etch_pk_tensor(ctx, args[1], "src") : NULL;
    etch_tensor *out = src ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    if (!out || !slice_range(ctx, self, args[2], args[3], args[4], args[5], &d, &start, &len,
                             &step) ||
        !etch_shape_check_convert(ctx, src->dtype, self->dtype, "src") ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    int64_t sizes[ETCH_MAX_DIMS];
    sliced_shape(self, d, len, sizes);
    bool same = src->dim == self->dim;
    for (unsigned k = 0; same && k < src->dim; k++)
        same = src->sizes[k] == sizes[k];
    if (!same) {
        char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "src has shape %s, but the slice of self has shape %s",
                         etch_pk_shape_str(b1, sizeof b1, src->dim, src->sizes),
                         etch_pk_shape_str(b2, sizeof b2, self->dim, sizes));
        return;
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy_from_tensor(&dst, self, -1);
    etch_sv_slice(&dst, (int)d, start, len, step);
    etch_sv_copy_from_tensor(&dst, src, self->dtype);
}
