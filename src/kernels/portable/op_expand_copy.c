/* aten::expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out)
 *
 * out = self broadcast to `size` (at least self's rank; -1 keeps a dim's size, size-1 dims
 * expand to any size, new leading dims take any non-negative size). Converts to out's dtype
 * (copy_). Any dim orders. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(expand_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    bool implicit;
    size_t len;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    const int64_t *size = out ? etch_pk_int_list(ctx, args[1], "size", &len) : NULL;
    if (!size || !etch_pk_bool(ctx, args[2], "implicit", &implicit) ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    if (len < self->dim || len > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "size has %zu entries; expanding a rank-%u tensor needs %u to %d", len,
                         (unsigned)self->dim, (unsigned)self->dim, ETCH_MAX_DIMS);
        return;
    }
    etch_sv src;
    etch_sv_of(&src, self);
    int64_t sizes[ETCH_MAX_DIMS];
    size_t lead = len - self->dim;
    for (size_t k = 0; k < len; k++) {
        int64_t want = size[k];
        if (k < lead) {
            if (want < 0) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "size %lld is not allowed for the new leading dim %zu",
                                 (long long)want, k);
                return;
            }
            etch_sv_insert(&src, (int)k, want, 0);
            sizes[k] = want;
            continue;
        }
        int64_t have = self->sizes[k - lead];
        if (want == -1)
            want = have;
        if (want < 0 || (have != 1 && want != have)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "the expanded size %lld must match the existing size %lld at "
                             "non-singleton dim %zu",
                             (long long)size[k], (long long)have, k);
            return;
        }
        if (have != want)
            etch_sv_broadcast(&src, (int)k, want);
        sizes[k] = want;
    }
    if (etch_pk_resize(ctx, out, len, sizes) != ETCH_OK)
        return;
    etch_sv dst;
    etch_sv_of(&dst, out);
    etch_sv_copy(&dst, &src, -1);
}
