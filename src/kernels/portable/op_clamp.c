/*
 * aten::clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out)
 * aten::clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, Tensor(a!) out)
 *
 * min(max(self, min), max): when min > max every element becomes max; a NaN in self, min or
 * max gives NaN (torch 1.13 ignores a NaN Scalar bound when it is the only one; etch does not).
 * At least one bound is required. The computation dtype is torch's result type
 * of self and the bounds (Scalars count as wrapped numbers). clamp.out: out must have that
 * dtype, Bool is refused, and each Scalar must convert to it without overflow (as torch
 * checks). clamp.Tensor_out: every real dtype (Bool only with one bound, as torch), bounds
 * broadcast, out is any cast torch allows.
 * Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_math.h"

/* ip[0], ip[1]: whether min / max take part; scalar bounds in fp/ip[2..3], tensor bounds are
 * the inputs after self, in that order. */
static void clamp_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    bool has_lo = e->ip[0] != 0, has_hi = e->ip[1] != 0;
    const double *lo = NULL, *hi = NULL;
    int k = 1;
    if (has_lo && e->nin > 1)
        lo = x[k++];
    if (has_hi && e->nin > 1)
        hi = x[k];
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i];
        if (!isnan(v) && has_lo) {
            double l = lo ? lo[i] : e->fp[2];
            v = isnan(l) ? l : v < l ? l : v;
        }
        if (!isnan(v) && has_hi) {
            double h = hi ? hi[i] : e->fp[3];
            v = isnan(h) ? h : v > h ? h : v;
        }
        r[i] = v;
    }
}

static void clamp_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    bool has_lo = e->ip[0] != 0, has_hi = e->ip[1] != 0;
    const int64_t *lo = NULL, *hi = NULL;
    int k = 1;
    if (has_lo && e->nin > 1)
        lo = x[k++];
    if (has_hi && e->nin > 1)
        hi = x[k];
    for (int64_t i = 0; i < n; i++) {
        int64_t v = x[0][i];
        if (has_lo) {
            int64_t l = lo ? lo[i] : e->ip[2];
            v = v < l ? l : v;
        }
        if (has_hi) {
            int64_t h = hi ? hi[i] : e->ip[3];
            v = v > h ? h : v;
        }
        r[i] = v;
    }
}

void etch_pm_clamp_scalar_run(etch_tensor *self, etch_tensor *out, int dtype, bool has_lo,
                              double lo_d, int64_t lo_i, bool has_hi, double hi_d,
                              int64_t hi_i) {
    etch_pm_ew e;
    etch_pm_ew_init(&e, dtype, out->dtype);
    e.nin = 1;
    e.in_dt[0] = self->dtype;
    e.ip[0] = has_lo;
    e.ip[1] = has_hi;
    e.fp[2] = lo_d;
    e.fp[3] = hi_d;
    e.ip[2] = lo_i;
    e.ip[3] = hi_i;
    e.frow = clamp_f;
    e.irow = clamp_i;
    etch_pm_ew_run(&e, out, &self);
}

ETCH_PK_KERNEL(clamp_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, self, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    const etch_value *lo = args[1], *hi = args[2];
    bool has_lo = lo && lo->tag != ETCH_VALUE_NONE, has_hi = hi && hi->tag != ETCH_VALUE_NONE;
    if (!has_lo && !has_hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "at least one of min and max must not be None");
        return;
    }
    etch_pk_result_type rt;
    etch_pk_rt_init(&rt);
    etch_pk_rt_tensor(&rt, self);
    if ((has_lo && !etch_pk_is_scalar(lo)) || (has_hi && !etch_pk_is_scalar(hi))) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "min and max must be Scalars or None");
        return;
    }
    if (has_lo)
        etch_pk_rt_scalar(&rt, lo);
    if (has_hi)
        etch_pk_rt_scalar(&rt, hi);
    int common = etch_pk_rt_result(&rt);
    if (common == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "clamp does not support Bool");
        return;
    }
    double lo_d = 0, hi_d = 0;
    int64_t lo_i = 0, hi_i = 0;
    if (!etch_pm_check_out(ctx, ETCH_PM_OUT_EXACT, common, out) ||
        (has_lo && !etch_pm_scalar_to(ctx, lo, "min", common, &lo_d, &lo_i)) ||
        (has_hi && !etch_pm_scalar_to(ctx, hi, "max", common, &hi_d, &hi_i)))
        return;
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_pm_clamp_scalar_run(self, out, common, has_lo, lo_d, lo_i, has_hi, hi_d, hi_i);
}

ETCH_PK_KERNEL(clamp_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    bool has_lo = false, has_hi = false;
    etch_tensor *lo = self ? etch_pk_opt_tensor(ctx, args[1], "min", &has_lo) : NULL;
    if (!self || etch_kernel_failed(ctx))
        return;
    etch_tensor *hi = etch_pk_opt_tensor(ctx, args[2], "max", &has_hi);
    if (etch_kernel_failed(ctx))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[3], "out");
    if (!out || !etch_pk_check_real(ctx, self, "self") || !etch_pk_check_real(ctx, out, "out") ||
        (has_lo && !etch_pk_check_real(ctx, lo, "min")) ||
        (has_hi && !etch_pk_check_real(ctx, hi, "max")))
        return;
    if (!has_lo && !has_hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "at least one of min and max must not be None");
        return;
    }
    etch_tensor *ins[3] = {self, NULL, NULL};
    const char *names[3] = {"self", NULL, NULL};
    int nin = 1;
    etch_pk_result_type rt;
    etch_pk_rt_init(&rt);
    etch_pk_rt_tensor(&rt, self);
    if (has_lo) {
        etch_pk_rt_tensor(&rt, lo);
        names[nin] = "min";
        ins[nin++] = lo;
    }
    if (has_hi) {
        etch_pk_rt_tensor(&rt, hi);
        names[nin] = "max";
        ins[nin++] = hi;
    }
    int common = etch_pk_rt_result(&rt);
    if (common == ETCH_DTYPE_BOOL && has_lo && has_hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "clamp with both min and max does not support Bool (as torch)");
        return;
    }
    if (!etch_pm_check_out(ctx, ETCH_PM_OUT_CAST, common, out))
        return;
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pm_broadcast(ctx, ins, names, nin, &dim, sizes) ||
        etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    etch_pm_ew e;
    etch_pm_ew_init(&e, common, out->dtype);
    e.nin = nin;
    for (int k = 0; k < nin; k++)
        e.in_dt[k] = ins[k]->dtype;
    e.ip[0] = has_lo;
    e.ip[1] = has_hi;
    e.frow = clamp_f;
    e.irow = clamp_i;
    etch_pm_ew_run(&e, out, ins);
}
