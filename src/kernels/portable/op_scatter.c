/* aten::scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)
 * aten::scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out)
 * aten::scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out)
 *
 * out = self, then for every position i of index (row-major): out[i with dim d replaced by
 * index[i]] = src[i] (or the value, or += src[i]). self, src and out share one dtype (the value
 * converts to it with torch's overflow check); index is Long, of self's rank (zero-dim counts
 * as rank 1), no larger than src anywhere and than self outside d, with values in
 * [0, self.size(d)). An empty index skips the shape checks, as torch does. scatter_add adds in
 * self's dtype (Half/BFloat16 through Float, integers wrap, Bool ors), in index order. */
#include "kernels/portable/portable_shape.h"

typedef enum { SC_SRC, SC_VALUE, SC_ADD } sc_mode;

static void scatter(etch_kernel_context *ctx, etch_value **args, sc_mode mode) {
    int64_t dim, d;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *index = self ? etch_pk_tensor(ctx, args[2], "index") : NULL;
    etch_tensor *src = NULL;
    if (index && mode != SC_VALUE)
        src = etch_pk_tensor(ctx, args[3], "src");
    etch_tensor *out = index && (src || mode == SC_VALUE) ? etch_pk_tensor(ctx, args[4], "out")
                                                          : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_shape_dim(ctx, dim, self->dim, "dim", &d) ||
        !etch_shape_check_same(ctx, self, "self", out, "out") ||
        (src && !etch_shape_check_same(ctx, self, "self", src, "src")))
        return;
    if (index->dtype != ETCH_DTYPE_LONG) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "index has dtype %s; it must be Long",
                         etch_dtype_name(index->dtype));
        return;
    }
    if (mode == SC_ADD && !etch_pk_dtype_is_real(self->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "scatter_add does not support dtype %s",
                         etch_dtype_name(self->dtype));
        return;
    }
    char value[8];
    if (mode == SC_VALUE && !etch_shape_scalar_elem(ctx, args[3], self->dtype, value, "value"))
        return;
    int64_t n = etch_tensor_numel(index);
    unsigned rank = self->dim ? self->dim : 1;
    if (n > 0) {
        if ((index->dim ? index->dim : 1u) != rank || (src && (src->dim ? src->dim : 1u) != rank)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "index (rank %u)%s must have self's rank %u", (unsigned)index->dim,
                             src ? " and src" : "", (unsigned)self->dim);
            return;
        }
        for (unsigned k = 0; k < index->dim; k++) {
            bool bad_self = (int64_t)k != d && index->sizes[k] > (self->dim ? self->sizes[k] : 1);
            bool bad_src = src && index->sizes[k] > (src->dim ? src->sizes[k] : 1);
            if (bad_self || bad_src) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "index size %lld at dim %u is larger than %s's",
                                 (long long)index->sizes[k], k, bad_self ? "self" : "src");
                return;
            }
        }
    }
    int64_t size = self->dim ? self->sizes[d] : 1;
    unsigned nd = index->dim;
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
                ioff += index->strides[k];
                if (++idx[k] < index->sizes[k])
                    break;
                ioff -= index->strides[k] * index->sizes[k];
                idx[k] = 0;
            }
        }
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_pk_copy_same_shape(out, self);
    if (n == 0)
        return;
    int64_t ost[ETCH_MAX_DIMS], sst[ETCH_MAX_DIMS];
    for (unsigned k = 0; k < nd; k++) {
        ost[k] = self->dim && (int64_t)k != d ? out->strides[k] : 0;
        sst[k] = src && src->dim ? src->strides[k] : 0;
    }
    int64_t dstride = self->dim ? out->strides[d] : 0;
    int dt = self->dtype;
    int64_t es = (int64_t)etch_dtype_size(dt);
    bool fdom = etch_pk_is_float(dt);
    int64_t idx[ETCH_MAX_DIMS] = {0}, ioff = 0, soff = 0, ooff = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t v =
            etch_shape_load_index((const char *)index->data + ioff * (int64_t)ies, index->dtype);
        char *o = (char *)out->data + (ooff + v * dstride) * es;
        const char *s = mode == SC_VALUE ? value : (const char *)src->data + soff * es;
        if (mode != SC_ADD)
            memcpy(o, s, (size_t)es);
        else if (fdom)
            etch_pk_store_f64(o, dt, etch_pk_load_f64(o, dt) + etch_pk_load_f64(s, dt));
        else
            etch_pk_store_i64(o, dt, etch_pk_wrap_add(etch_pk_load_i64(o, dt),
                                                      etch_pk_load_i64(s, dt)));
        for (int k = (int)nd - 1; k >= 0; k--) {
            ioff += index->strides[k];
            soff += sst[k];
            ooff += ost[k];
            if (++idx[k] < index->sizes[k])
                break;
            ioff -= index->strides[k] * index->sizes[k];
            soff -= sst[k] * index->sizes[k];
            ooff -= ost[k] * index->sizes[k];
            idx[k] = 0;
        }
    }
}

ETCH_PK_KERNEL(scatter_src_out) {
    if (etch_pk_nargs(ctx, nargs, 5))
        scatter(ctx, args, SC_SRC);
}

ETCH_PK_KERNEL(scatter_value_out) {
    if (etch_pk_nargs(ctx, nargs, 5))
        scatter(ctx, args, SC_VALUE);
}

ETCH_PK_KERNEL(scatter_add_out) {
    if (etch_pk_nargs(ctx, nargs, 5))
        scatter(ctx, args, SC_ADD);
}
