/* aten::logit.out(Tensor self, float? eps=None, *, Tensor(a!) out): log(z / (1 - z)) where z is
 * self clamped to [eps, 1 - eps] when eps is given and >= 0 (NaN stays NaN;
 * eps > 0.5 clamps everything to 1 - eps, as torch's vectorised kernel does). The quotient is
 * rounded as torch rounds it; the log is computed in double. Bool and integral self compute in
 * Float; out is any floating dtype. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void logit_row(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    bool clamp = e->ip[0] != 0;
    double lo = e->fp[0], hi = e->fp[1];
    for (int64_t i = 0; i < n; i++) {
        double z = x[0][i];
        if (clamp) { /* as clamp: eps > 0.5 (lo > hi) gives hi */
            z = z < lo ? lo : z;
            z = z > hi ? hi : z;
        }
        double q = etch_pm_rnd(e, z / etch_pm_rnd(e, 1.0 - z));
        r[i] = log(q);
    }
}

static const etch_pm_unary_spec logit_spec = {"logit", ETCH_PM_C_ALL, ETCH_PM_FLOAT, logit_row,
                                              NULL};

ETCH_PK_KERNEL(logit_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    const etch_value *ev = args[1];
    double eps = -1.0;
    if (ev && ev->tag != ETCH_VALUE_NONE &&
        (!(ev->tag == ETCH_VALUE_DOUBLE || ev->tag == ETCH_VALUE_INT) ||
         !etch_value_scalar_to_double(ev, &eps))) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "eps must be a Double or None, got %s",
                         etch_value_tag_name(ev->tag));
        return;
    }
    etch_pm_un u;
    if (!etch_pm_unary_prepare(ctx, &logit_spec, args[0], args[2], &u))
        return;
    if (eps >= 0) { /* NaN or negative eps: no clamping */
        u.e.ip[0] = 1;
        u.e.fp[0] = etch_pm_rnd(&u.e, eps);
        u.e.fp[1] = etch_pm_rnd(&u.e, 1.0 - u.e.fp[0]);
    }
    etch_pm_unary_run(&u);
}
