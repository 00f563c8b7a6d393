/* aten::triu.out(Tensor self, int diagonal=0, *, Tensor(a!) out)
 * aten::tril.out(Tensor self, int diagonal=0, *, Tensor(a!) out)
 *
 * Per matrix of the last two dims: out[i, j] = self[i, j] where j - i >= diagonal (triu) /
 * j - i <= diagonal (tril), else 0. Rank >= 2; out's dtype must be self's. Any dim orders. */
#include "kernels/portable/portable_shape.h"

static void tri(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool upper) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t diag;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_pk_int(ctx, args[1], "diagonal", &diag) ||
        !etch_shape_check_same(ctx, self, "self", out, "out"))
        return;
    if (self->dim < 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s expects a tensor of rank >= 2, self has rank %u",
                         upper ? "triu" : "tril", (unsigned)self->dim);
        return;
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(self);
    if (n == 0)
        return;
    int nd = (int)self->dim;
    int64_t es = (int64_t)etch_dtype_size(self->dtype);
    int64_t idx[ETCH_MAX_DIMS] = {0}, soff = 0, ooff = 0;
    for (int64_t e = 0; e < n; e++) {
        int64_t dj = idx[nd - 1] - idx[nd - 2];
        bool keep = upper ? dj >= diag : dj <= diag;
        char *o = (char *)out->data + ooff * es;
        if (keep)
            memcpy(o, (const char *)self->data + soff * es, (size_t)es);
        else
            memset(o, 0, (size_t)es);
        for (int k = nd - 1; k >= 0; k--) {
            soff += self->strides[k];
            ooff += out->strides[k];
            if (++idx[k] < self->sizes[k])
                break;
            soff -= self->strides[k] * self->sizes[k];
            ooff -= out->strides[k] * self->sizes[k];
            idx[k] = 0;
        }
    }
}

ETCH_PK_KERNEL(triu_out) { tri(ctx, args, nargs, true); }
ETCH_PK_KERNEL(tril_out) { tri(ctx, args, nargs, false); }
