/*
 * aten::var.correction_out(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False,
 *                          Tensor(a!) out)
 * aten::var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *,
 *               Tensor(a!) out)
 *
 * Floating self and out (Float, Double, Half, BFloat16; they may differ). dim None or []
 * reduces every dim. var = sum((x - mean)^2) / max(0, N - correction), correction None = 1,
 * unbiased = correction 1 (else 0); computed in two passes in double, so N - correction <= 0
 * gives inf (or NaN for 0 / 0), and an empty reduction NaN, as torch. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

static void var_common(etch_kernel_context *ctx, etch_value *self_v, etch_value *dim_v,
                       double correction, bool keepdim, etch_value *out_v) {
    etch_tensor *in = etch_pk_tensor(ctx, self_v, "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, out_v, "out") : NULL;
    if (!out || !etch_nn_check_float(ctx, in, "self") || !etch_nn_check_float(ctx, out, "out"))
        return;
    uint32_t mask;
    if (!etch_nn_dim_mask(ctx, dim_v, in, &mask))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    int64_t ies = (int64_t)etch_dtype_size(in->dtype), oes = (int64_t)etch_dtype_size(out->dtype);
    double denom = (double)pl.inner - correction;
    if (denom < 0)
        denom = 0;
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        char *base = etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * ies);
        double mean, pvar; /* population variance: the sum of squares over inner */
        etch_nn_moments(&pl, base, in->dtype, &mean, &pvar);
        double r = pl.inner == 0 ? NAN : pvar * (double)pl.inner / denom;
        etch_pk_store_f64(etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, keepdim) * oes),
                          out->dtype, r);
    }
}

ETCH_PK_KERNEL(var_correction_out) {
    bool keepdim;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[3], "keepdim", &keepdim))
        return;
    int64_t c = 1;
    if (args[2]->tag != ETCH_VALUE_NONE && !etch_pk_int(ctx, args[2], "correction", &c))
        return;
    var_common(ctx, args[0], args[1], (double)c, keepdim, args[4]);
}

ETCH_PK_KERNEL(var_out) {
    bool unbiased, keepdim;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[2], "unbiased", &unbiased) ||
        !etch_pk_bool(ctx, args[3], "keepdim", &keepdim))
        return;
    var_common(ctx, args[0], args[1], unbiased ? 1.0 : 0.0, keepdim, args[4]);
}
