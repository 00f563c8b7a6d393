/* aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out):
 *   "none": x/2 * (1 + erf(x / sqrt(2)))
 *   "tanh": x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
 * computed in double, rounded once (torch's float kernels are within a few ulp). Floating self
 * only; out must have self's dtype. Any dim order. */
#include <math.h>

#include "kernels/portable/portable_math.h"

static void gelu_none(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i];
        r[i] = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
    }
}

static void gelu_tanh(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    const double beta = 0.79788456080286535588; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        double v = x[0][i];
        r[i] = 0.5 * v * (1.0 + tanh(beta * (v + 0.044715 * v * v * v)));
    }
}

static const etch_pm_unary_spec none_spec = {"gelu", ETCH_PM_C_FLOAT, ETCH_PM_SAME, gelu_none,
                                             NULL};
static const etch_pm_unary_spec tanh_spec = {"gelu", ETCH_PM_C_FLOAT, ETCH_PM_SAME, gelu_tanh,
                                             NULL};

ETCH_PK_KERNEL(gelu_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    const etch_value *a = args[1];
    if (!a || a->tag != ETCH_VALUE_STRING || !a->u.str.ptr) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "approximate must be a String, got %s",
                         a ? etch_value_tag_name(a->tag) : "nothing");
        return;
    }
    const etch_pm_unary_spec *spec;
    if (a->u.str.len == 4 && memcmp(a->u.str.ptr, "none", 4) == 0) {
        spec = &none_spec;
    } else if (a->u.str.len == 4 && memcmp(a->u.str.ptr, "tanh", 4) == 0) {
        spec = &tanh_spec;
    } else {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "approximate must be \"none\" or \"tanh\", got \"%.*s\"",
                         (int)(a->u.str.len > 32 ? 32 : a->u.str.len), a->u.str.ptr);
        return;
    }
    etch_pm_un u;
    if (etch_pm_unary_prepare(ctx, spec, args[0], args[2], &u))
        etch_pm_unary_run(&u);
}
