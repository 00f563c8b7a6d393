/* aten::hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out):
 * clamp to [min_val, max_val] in self's dtype (out must have it): the limits convert to that
 * dtype without overflow or fail (as torch checks), Byte needs non-negative limits, Bool is
 * refused. NaN in self or a limit gives NaN; min_val > max_val gives max_val. Any dim order. */
#include "kernels/portable/portable_math.h"


ETCH_PK_KERNEL(hardtanh_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, self, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    int dt = self->dtype;
    if (dt == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "hardtanh does not support Bool inputs");
        return;
    }
    double lo_d, hi_d;
    int64_t lo_i, hi_i;
    if (!etch_pm_check_out(ctx, ETCH_PM_OUT_EXACT, dt, out) ||
        !etch_pm_scalar_to(ctx, args[1], "min_val", dt, &lo_d, &lo_i) ||
        !etch_pm_scalar_to(ctx, args[2], "max_val", dt, &hi_d, &hi_i))
        return;
    if (dt == ETCH_DTYPE_BYTE) {
        /* the limits as integers before wrapping to Byte */
        double a = 0, b = 0;
        etch_value_scalar_to_double(args[1], &a);
        etch_value_scalar_to_double(args[2], &b);
        if (a <= -1.0 || b <= -1.0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "hardtanh of an unsigned type needs non-negative limits (got %g "
                             "and %g)",
                             a, b);
            return;
        }
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_pm_clamp_scalar_run(self, out, dt, true, lo_d, lo_i, true, hi_d, hi_i);
}
