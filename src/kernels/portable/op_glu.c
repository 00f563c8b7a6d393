/* aten::glu.out(Tensor self, int dim=-1, *, Tensor(a!) out): splits self in two halves a, b
 * along dim (whose size must be even) and computes a * sigmoid(b) = a / (1 + exp(-b)) in
 * double, rounded once. Floating self only (rank >= 1); out gets self's shape with dim halved
 * and may be any floating dtype torch can cast to. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void glu_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] * (1.0 / (1.0 + exp(-x[1][i])));
}

ETCH_PK_KERNEL(glu_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    int64_t dim;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_pk_check_real(ctx, self, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    if (!etch_pk_is_float(self->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "glu does not support %s inputs",
                         etch_dtype_name(self->dtype));
        return;
    }
    if (self->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "glu does not support zero-dim tensors");
        return;
    }
    int64_t d;
    if (!etch_pk_wrap_dim(ctx, dim, self->dim, &d))
        return;
    int64_t size = self->sizes[d];
    if (size % 2 != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "halving dimension must be even, but dim %lld has size %lld",
                         (long long)d, (long long)size);
        return;
    }
    if (!etch_pm_check_out(ctx, ETCH_PM_OUT_CAST, self->dtype, out))
        return;
    /* the two halves: views with self's strides */
    etch_tensor halves[2] = {*self, *self};
    halves[0].sizes[d] = halves[1].sizes[d] = size / 2;
    if (etch_pk_resize(ctx, out, self->dim, halves[0].sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;
    halves[1].data = (char *)self->data +
                     (size / 2) * self->strides[d] * (int64_t)etch_dtype_size(self->dtype);
    etch_tensor *ins[2] = {&halves[0], &halves[1]};
    etch_pm_ew e;
    etch_pm_ew_init(&e, self->dtype, out->dtype);
    e.nin = 2;
    e.in_dt[0] = e.in_dt[1] = self->dtype;
    e.frow = glu_row;
    etch_pm_ew_run(&e, out, ins);
}
