/*
 * quantized_decomposed::choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max,
 *     float eps, ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out)
 *     -> (Tensor(a!), Tensor(b!))
 *
 * The per-tensor affine (scale, zero point) of ExecuTorch's kernel (etch_q_choose over the
 * input's min and max; eps is unused there too): input Float, Double, Half or BFloat16
 * (converted to float), not empty, no infinities (NaN elements are ignored); quant_min <
 * quant_max within dtype's range; scale_out (Double or Float) and zero_point_out (Long or
 * Int) hold one element each. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_quant.h"

bool etch_q_minmax(etch_kernel_context *ctx, const etch_tensor *in, int64_t begin, int64_t end,
                   float *mn, float *mx) {
    bool any = false;
    float lo = 0, hi = 0;
    for (int64_t i = begin; i < end; i++) {
        float v = (float)etch_q_f64_at(in, i);
        if (isnan(v))
            continue;
        if (isinf(v)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "input element %lld is infinite: no scale covers it", (long long)i);
            return false;
        }
        if (!any || v < lo)
            lo = v;
        if (!any || v > hi)
            hi = v;
        any = true;
    }
    *mn = lo;
    *mx = hi;
    return true;
}

bool etch_q_check_qparam_outs(etch_kernel_context *ctx, const etch_tensor *s,
                              const etch_tensor *z) {
    if (s->dtype != ETCH_DTYPE_DOUBLE && s->dtype != ETCH_DTYPE_FLOAT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "scale_out has dtype %s; it must be Double or Float",
                         etch_dtype_name(s->dtype));
        return false;
    }
    if (z->dtype != ETCH_DTYPE_LONG && z->dtype != ETCH_DTYPE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "zero_point_out has dtype %s; it must be Long or Int",
                         etch_dtype_name(z->dtype));
        return false;
    }
    return true;
}

ETCH_PK_KERNEL(choose_qparams_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[5], "scale_out") : NULL;
    etch_tensor *z = s ? etch_pk_tensor(ctx, args[6], "zero_point_out") : NULL;
    int64_t qmin, qmax;
    double eps;
    int dtype;
    if (!z || !etch_pk_int(ctx, args[1], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[2], "quant_max", &qmax) ||
        !etch_nn_double(ctx, args[3], "eps", &eps) ||
        !etch_q_dtype_arg(ctx, args[4], "dtype", &dtype) ||
        !etch_q_check_float_in(ctx, in, "input") || !etch_q_check_qrange(ctx, dtype, qmin, qmax) ||
        !etch_q_check_qparam_outs(ctx, s, z))
        return;
    if (qmin == qmax) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "quant_min must be less than quant_max, both are %lld", (long long)qmin);
        return;
    }
    if (etch_tensor_numel(s) != 1 || etch_tensor_numel(z) != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "scale_out and zero_point_out must have one element, they have %lld "
                         "and %lld",
                         (long long)etch_tensor_numel(s), (long long)etch_tensor_numel(z));
        return;
    }
    int64_t n = etch_tensor_numel(in);
    if (n == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input is empty");
        return;
    }
    float mn, mx;
    if (!etch_q_minmax(ctx, in, 0, n, &mn, &mx))
        return;
    double scale;
    int64_t zp;
    etch_q_choose(mn, mx, qmin, qmax, &scale, &zp);
    etch_pk_store_f64(s->data, s->dtype, scale);
    etch_pk_store_i64(z->data, z->dtype, zp);
}
