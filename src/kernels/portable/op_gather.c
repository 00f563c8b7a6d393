/* aten::gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False,
 *                  Tensor(a!) out)
 *
 * out[i] = self[i with dim d replaced by index[i]]; out has index's shape and self's dtype.
 * index is Long, of self's rank (zero-dim counts as rank 1), no larger than self outside d,
 * with values in [0, self.size(d)). An empty index skips the shape checks, as torch does. */
#include "kernels/portable/portable_shape.h"

ETCH_PK_KERNEL(gather_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    int64_t dim, d;
    bool sparse;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *index = self ? etch_pk_tensor(ctx, args[2], "index") : NULL;
    etch_tensor *out = index ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_pk_bool(ctx, args[3], "sparse_grad", &sparse) ||
        !etch_shape_check_same(ctx, self, "self", out, "out") ||
        !etch_shape_dim(ctx, dim, self->dim, "dim", &d))
        return;
    if (index->dtype != ETCH_DTYPE_LONG) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "index has dtype %s; it must be Long",
                         etch_dtype_name(index->dtype));
        return;
    }
    int64_t n = etch_tensor_numel(index);
    unsigned rank = self->dim ? self->dim : 1;
    if (n > 0) {
        if ((index->dim ? index->dim : 1u) != rank) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "index has rank %u, but self has rank %u", (unsigned)index->dim,
                             (unsigned)self->dim);
            return;
        }
        for (unsigned k = 0; k < index->dim; k++) {
            int64_t ss = self->dim ? self->sizes[k] : 1;
            if ((int64_t)k != d && index->sizes[k] > ss) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "index size %lld at dim %u is larger than self's %lld",
                                 (long long)index->sizes[k], k, (long long)ss);
                return;
            }
        }
    }
    int64_t size = self->dim ? self->sizes[d] : 1;
    /* walk index (and out) in row-major order */
    int64_t isz[ETCH_MAX_DIMS], ist[ETCH_MAX_DIMS], sst[ETCH_MAX_DIMS];
    unsigned nd = index->dim;
    for (unsigned k = 0; k < nd; k++) {
        isz[k] = index->sizes[k];
        ist[k] = index->strides[k];
        sst[k] = self->dim && (int64_t)k != d ? self->strides[k] : 0;
    }
    int64_t dstride = self->dim ? self->strides[d] : 0;
    size_t ies = etch_dtype_size(index->dtype);
    {
        int64_t idx[ETCH_MAX_DIMS] = {0}, ioff = 0;
        for (int64_t e = 0; e < n; e++) {
            int64_t v =
                etch_shape_load_index((const char *)index->data + ioff * (int64_t)ies, index->dtype);
            if (v < 0 || v >= size) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "index %lld is out of bounds for dim %lld with size %lld",
                                 (long long)v, (long long)d, (long long)size);
                return;
            }
            for (int k = (int)nd - 1; k >= 0; k--) {
                ioff += ist[k];
                if (++idx[k] < isz[k])
                    break;
                ioff -= ist[k] * isz[k];
                idx[k] = 0;
            }
        }
    }
    if (etch_pk_resize(ctx, out, index->dim, index->sizes) != ETCH_OK || n == 0)
        return;
    size_t es = etch_dtype_size(self->dtype);
    int64_t idx[ETCH_MAX_DIMS] = {0}, ioff = 0, soff = 0, ooff = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t v =
            etch_shape_load_index((const char *)index->data + ioff * (int64_t)ies, index->dtype);
        memcpy((char *)out->data + ooff * (int64_t)es,
               (const char *)self->data + (soff + v * dstride) * (int64_t)es, es);
        for (int k = (int)nd - 1; k >= 0; k--) {
            ioff += ist[k];
            soff += sst[k];
            ooff += out->strides[k];
            if (++idx[k] < isz[k])
                break;
            ioff -= ist[k] * isz[k];
            soff -= sst[k] * isz[k];
            ooff -= out->strides[k] * isz[k];
            idx[k] = 0;
        }
    }
}
