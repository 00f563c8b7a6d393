/*
 * aten::constant_pad_nd.out(Tensor self, int[] pad, Scalar value=0, *, Tensor(a!) out)
 *
 * Every real dtype; out has self's dtype. pad holds (left, right) pairs for the last dims,
 * last dim first: an even number of values, at most twice the rank. Negative pads crop; every
 * padded size must stay >= 0, and > 0 when some pad is positive (as torch). value must fit
 * self's dtype without overflow (as torch's checked conversion: e.g. -1 is accepted for Byte
 * and becomes 255). Any dim order.
 */
#include "kernels/portable/portable_nn.h"

ETCH_PK_KERNEL(constant_pad_nd_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    size_t len;
    const int64_t *pad = out ? etch_pk_int_list(ctx, args[1], "pad", &len) : NULL;
    if (!pad || !etch_pk_check_real(ctx, in, "self") ||
        !etch_pk_check_same_dtype(ctx, in, "self", out, "out") ||
        !etch_nn_scalar_fits(ctx, args[2], in->dtype, "value"))
        return;
    if (len % 2 != 0 || len > 2u * in->dim) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "pad must have an even number of values, at most twice the rank %u; got "
                         "%zu",
                         (unsigned)in->dim, len);
        return;
    }
    int64_t lo[ETCH_MAX_DIMS] = {0}, osz[ETCH_MAX_DIMS];
    bool any_pos = false;
    for (size_t i = 0; i < len; i++)
        any_pos |= pad[i] > 0;
    for (unsigned d = 0; d < in->dim; d++) {
        osz[d] = in->sizes[d];
        size_t k = (size_t)(in->dim - 1 - d); /* pairs count from the last dim */
        if (2 * k < len) {
            int64_t l = pad[2 * k], r = pad[2 * k + 1];
            const int64_t lim = (int64_t)1 << 40;
            if (l < -lim || l > lim || r < -lim || r > lim || in->sizes[d] + l + r < 0 ||
                (any_pos && in->sizes[d] + l + r == 0)) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "padding (%lld, %lld) of dim %u (size %lld) gives a negative, "
                                 "empty or too large size",
                                 (long long)l, (long long)r, d, (long long)in->sizes[d]);
                return;
            }
            lo[d] = l;
            osz[d] = in->sizes[d] + l + r;
        }
    }
    if (etch_pk_resize(ctx, out, in->dim, osz) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(out);
    if (n == 0)
        return;
    int64_t es = (int64_t)etch_dtype_size(in->dtype);
    char fill[16];
    etch_nn_store_scalar(fill, in->dtype, args[2]);
    if (in->dim == 0) {
        memcpy(out->data, in->data, (size_t)es);
        return;
    }
    /* rows of the last dim: every other dim's index is an outer element of out */
    unsigned last = in->dim - 1u;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, out, NULL, 1u << last);
    int64_t W = osz[last], IW = in->sizes[last], l = lo[last];
    int64_t id[ETCH_MAX_DIMS];
    for (int64_t r = 0; r < pl.outer; r++) {
        etch_nn_plan_index(&pl, r, id);
        char *dst = etch_nn_at(out->data, etch_nn_plan_offset(&pl, id, out, true) * es);
        int64_t os = out->strides[last] * es;
        bool inside = IW > 0;
        int64_t soff = 0;
        for (int k = 0; inside && k < pl.nk; k++) {
            int d = pl.kdim[k];
            int64_t si = id[k] - lo[d];
            if (si < 0 || si >= in->sizes[d]) {
                inside = false;
                break;
            }
            soff += si * in->strides[d];
        }
        const char *src = inside ? (const char *)etch_nn_at(in->data, soff * es) : NULL;
        int64_t is = in->strides[last] * es;
        for (int64_t x = 0; x < W; x++) {
            int64_t sx = x - l;
            if (inside && sx >= 0 && sx < IW)
                memcpy(dst + x * os, src + sx * is, (size_t)es);
            else
                memcpy(dst + x * os, fill, (size_t)es);
        }
    }
}
