/*
 * aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out)
 * aten::minimum.out(Tensor self, Tensor other, *, Tensor(a!) out)
 *
 * Elementwise max/min in torch's result type (NaN wins), cast to out's dtype when torch allows
 * the cast. Broadcasting, every real dtype, any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void max_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        double a = x[0][i], b = x[1][i];
        r[i] = isnan(a) ? a : isnan(b) ? b : a < b ? b : a;
    }
}

static void max_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] < x[1][i] ? x[1][i] : x[0][i];
}

static void min_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        double a = x[0][i], b = x[1][i];
        r[i] = isnan(a) ? a : isnan(b) ? b : b < a ? b : a;
    }
}

static void min_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[1][i] < x[0][i] ? x[1][i] : x[0][i];
}

static const etch_pm_binary_spec max_spec = {"maximum", ETCH_PM_C_ALL, ETCH_PM_COMMON,
                                             ETCH_PM_OUT_CAST, false, false, max_f, max_i};
static const etch_pm_binary_spec min_spec = {"minimum", ETCH_PM_C_ALL, ETCH_PM_COMMON,
                                             ETCH_PM_OUT_CAST, false, false, min_f, min_i};

static bool both_tensors(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return false;
    if (!etch_pk_tensor(ctx, args[0], "self") || !etch_pk_tensor(ctx, args[1], "other"))
        return false;
    return true;
}

ETCH_PK_KERNEL(maximum_out) {
    if (both_tensors(ctx, args, nargs))
        etch_pm_binary(ctx, &max_spec, args, nargs);
}

ETCH_PK_KERNEL(minimum_out) {
    if (both_tensors(ctx, args, nargs))
        etch_pm_binary(ctx, &min_spec, args, nargs);
}
