/*
 * quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point,
 *     int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
 * quantized_decomposed::quantize_per_tensor.Tensor_out(Tensor input, Tensor scale,
 *     Tensor zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out)
 *
 * out = clamp(zero_point + nearbyint(input * (1.0f / (float)scale)), quant_min, quant_max) in
 * single precision, as ExecuTorch (see portable_quant.h). input: Float, Double, Half or
 * BFloat16; out: `dtype`, one of Byte, Char, Short, UInt16, Int. scale must be finite and > 0,
 * zero_point within dtype's range. The Tensor_out overload takes one-element scale (Float or
 * Double) and zero_point (an integer dtype) tensors. Any dim order.
 */
#include "kernels/portable/portable_quant.h"

static void quantize_per_tensor(etch_kernel_context *ctx, etch_tensor *in, double scale,
                                int64_t zp, etch_value **args, etch_tensor *out) {
    int64_t qmin, qmax;
    int dtype;
    if (!etch_pk_int(ctx, args[3], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[4], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[5], "dtype", &dtype) ||
        !etch_q_check_float_in(ctx, in, "input") || !etch_q_check_qrange(ctx, dtype, qmin, qmax))
        return;
    if (out->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s but dtype is %s",
                         etch_dtype_name(out->dtype), etch_dtype_name(dtype));
        return;
    }
    if (!etch_q_check_scale(ctx, scale, true) || !etch_q_check_zero_point(ctx, zp, dtype))
        return;
    etch_q_params p = {NULL, NULL, scale, zp, 1, 1};
    etch_q_quantize_run(ctx, in, out, &p, qmin, qmax);
}

ETCH_PK_KERNEL(quantize_per_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    double scale;
    int64_t zp;
    if (!out || !etch_nn_double(ctx, args[1], "scale", &scale) ||
        !etch_pk_int(ctx, args[2], "zero_point", &zp))
        return;
    quantize_per_tensor(ctx, in, scale, zp, args, out);
}

ETCH_PK_KERNEL(quantize_per_tensor_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[1], "scale") : NULL;
    etch_tensor *z = s ? etch_pk_tensor(ctx, args[2], "zero_point") : NULL;
    etch_tensor *out = z ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    if (!out || etch_q_check_stop(ctx, s, z, NULL))
        return;
    if (!etch_q_check_scales(ctx, s, "scale", 1, true) ||
        !etch_q_check_zero_points(ctx, z, "zero_point", 1, -1))
        return;
    quantize_per_tensor(ctx, in, etch_q_f64_at(s, 0), etch_q_int_at(z, 0), args, out);
}
