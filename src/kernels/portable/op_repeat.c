/* aten::repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out)
 *
 * self tiled repeats[k] times along dim k (repeats has at least self's rank; self's shape is
 * padded with leading 1s). out.size(k) = repeats[k] * size(k). Converts to out's dtype
 * (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(repeat_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    size_t len;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    const int64_t *reps = out ? etch_pk_int_list(ctx, args[1], "repeats", &len) : NULL;
    if (!reps || !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    if (len < self->dim || len > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "repeats has %zu entries; a rank-%u tensor needs %u to %d", len,
                         (unsigned)self->dim, (unsigned)self->dim, ETCH_MAX_DIMS);
        return;
    }
    size_t lead = len - self->dim;
    int64_t sizes[ETCH_MAX_DIMS], inner[ETCH_MAX_DIMS], numel = 1;
    for (size_t k = 0; k < len; k++) {
        inner[k] = k < lead ? 1 : self->sizes[k - lead];
        if (reps[k] < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "repeats[%zu] = %lld is negative", k,
                             (long long)reps[k]);
            return;
        }
        if (inner[k] && reps[k] > INT64_MAX / inner[k]) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "the repeated size overflows");
            return;
        }
        sizes[k] = reps[k] * inner[k];
        if (sizes[k] && numel > INT64_MAX / sizes[k]) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "the result's size overflows");
            return;
        }
        numel *= sizes[k];
    }
    if (etch_pk_resize(ctx, out, len, sizes) != ETCH_OK || numel == 0)
        return;
    /* out dim k of size r*s splits into (r, s); the source repeats along r (stride 0) */
    etch_sv dst, src;
    etch_sv_of(&dst, out);
    for (int k = (int)len - 1; k >= 0; k--)
        etch_sv_split(&dst, k, reps[k], inner[k]);
    src.base = (char *)self->data;
    src.off = 0;
    src.dtype = self->dtype;
    src.ndim = (int)(2 * len);
    for (size_t k = 0; k < len; k++) {
        src.sizes[2 * k] = reps[k];
        src.strides[2 * k] = 0;
        src.sizes[2 * k + 1] = inner[k];
        src.strides[2 * k + 1] = k < lead ? 0 : self->strides[k - lead];
    }
    etch_sv_copy(&dst, &src, -1);
}
