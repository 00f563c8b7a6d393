/* aten::pixel_shuffle.out(Tensor self, int upscale_factor, *, Tensor(a!) out)
 *
 * [*, C*r*r, H, W] -> [*, C, H*r, W*r]: out[..., c, h*r + i, w*r + j] =
 * self[..., c*r*r + i*r + j, h, w]. Rank >= 3, r > 0. Converts to out's dtype (copy_). Any dim
 * orders. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(pixel_shuffle_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t r;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "upscale_factor", &r) ||
        !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    if (self->dim < 3) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "pixel_shuffle expects a tensor of rank >= 3, self has rank %u",
                         (unsigned)self->dim);
        return;
    }
    if (r <= 0 || r > 3037000499LL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "upscale_factor %lld is not valid",
                         (long long)r);
        return;
    }
    int n = (int)self->dim;
    int64_t C = self->sizes[n - 3], H = self->sizes[n - 2], W = self->sizes[n - 1];
    if (C % (r * r) != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "the channel size %lld is not divisible by upscale_factor^2 = %lld",
                         (long long)C, (long long)(r * r));
        return;
    }
    if ((H && r > INT64_MAX / H) || (W && r > INT64_MAX / W)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "the result's size overflows");
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    for (int k = 0; k < n - 3; k++)
        sizes[k] = self->sizes[k];
    sizes[n - 3] = C / (r * r);
    sizes[n - 2] = H * r;
    sizes[n - 1] = W * r;
    if (etch_pk_resize(ctx, out, (size_t)n, sizes) != ETCH_OK || etch_tensor_numel(out) == 0)
        return;
    /* both as [*, c, h, i, w, j] */
    etch_sv dst, src;
    etch_sv_of(&dst, out);
    etch_sv_split(&dst, n - 1, W, r);
    etch_sv_split(&dst, n - 2, H, r);
    etch_sv_of(&src, self);
    int64_t sc = self->strides[n - 3], sh = self->strides[n - 2], sw = self->strides[n - 1];
    src.ndim = n + 3;
    src.sizes[n - 3] = C / (r * r);
    src.strides[n - 3] = r * r * sc;
    src.sizes[n - 2] = H;
    src.strides[n - 2] = sh;
    src.sizes[n - 1] = r;
    src.strides[n - 1] = r * sc;
    src.sizes[n] = W;
    src.strides[n] = sw;
    src.sizes[n + 1] = r;
    src.strides[n + 1] = sc;
    etch_sv_copy(&dst, &src, -1);
}
