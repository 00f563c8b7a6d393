/*
 * aten::where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out)
 *
 * out = condition ? self : other, all three broadcasting. condition is Bool (or Byte, which
 * torch still accepts: any non-zero value selects self). self and other convert to their
 * result type, which out must have (torch has no casting path here). Every real dtype, any
 * dim order.
 */
#include "kernels/portable/portable_math.h"

static void where_f(const etch_pm_ew *e, double *r, const double *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] != 0 ? x[1][i] : x[2][i];
}

static void where_i(const etch_pm_ew *e, int64_t *r, const int64_t *const *x, int64_t n) {
    (void)e;
    for (int64_t i = 0; i < n; i++)
        r[i] = x[0][i] != 0 ? x[1][i] : x[2][i];
}

ETCH_PK_KERNEL(where_self_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *cond = etch_pk_tensor(ctx, args[0], "condition");
    etch_tensor *a = cond ? etch_pk_tensor(ctx, args[1], "self") : NULL;
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[2], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, a, "self") || !etch_pk_check_real(ctx, b, "other") ||
        !etch_pk_check_real(ctx, out, "out"))
        return;
    if (cond->dtype != ETCH_DTYPE_BOOL && cond->dtype != ETCH_DTYPE_BYTE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "condition must be a Bool (or Byte) tensor, got %s",
                         etch_dtype_name(cond->dtype));
        return;
    }
    etch_pk_result_type rt;
    etch_pk_rt_init(&rt);
    etch_pk_rt_tensor(&rt, a);
    etch_pk_rt_tensor(&rt, b);
    int common = etch_pk_rt_result(&rt);
    if (!etch_pm_check_out(ctx, ETCH_PM_OUT_EXACT, common, out))
        return;
    etch_tensor *ins[3] = {cond, a, b};
    static const char *const names[3] = {"condition", "self", "other"};
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pm_broadcast(ctx, ins, names, 3, &dim, sizes) ||
        etch_pk_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    etch_pm_ew e;
    etch_pm_ew_init(&e, common, out->dtype);
    e.nin = 3;
    e.in_dt[0] = cond->dtype;
    e.in_dt[1] = a->dtype;
    e.in_dt[2] = b->dtype;
    e.frow = where_f;
    e.irow = where_i;
    etch_pm_ew_run(&e, out, ins);
}
