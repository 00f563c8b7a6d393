/*
 * quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales,
 *     Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *,
 *     ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)
 *
 * dequantize_per_tensor with scales[c] / zero_points[c] (0 when None) for the elements whose
 * index along `axis` (negative wraps) is c; scales Float or Double (finite, >= 0),
 * zero_points an integer dtype within dtype's range, each with input.size(axis) elements.
 * Any dim order.
 */
#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(dequantize_per_channel_out) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    bool has_z;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[1], "scales") : NULL;
    etch_tensor *z = s ? etch_pk_opt_tensor(ctx, args[2], "zero_points", &has_z) : NULL;
    if (!s || etch_kernel_failed(ctx))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[8], "out");
    int64_t axis, qmin, qmax;
    int dtype, out_dtype = 0;
    bool given;
    if (!out || !etch_pk_int(ctx, args[3], "axis", &axis) ||
        !etch_pk_int(ctx, args[4], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[5], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[6], "dtype", &dtype) ||
        !etch_q_opt_dtype_arg(ctx, args[7], "out_dtype", &out_dtype, &given) ||
        !etch_q_check_qrange(ctx, dtype, qmin, qmax))
        return;
    if (in->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "input has dtype %s but dtype is %s",
                         etch_dtype_name(in->dtype), etch_dtype_name(dtype));
        return;
    }
    if (!etch_q_check_float_out(ctx, out, given, out_dtype, "out_dtype"))
        return;
    if (etch_q_check_stop(ctx, in, s, has_z ? z : NULL))
        return;
    etch_q_params p = {s, has_z ? z : NULL, 0, 0, 1, 1};
    if (!etch_q_channel_params(ctx, in, axis, &p))
        return;
    int64_t channels = in->sizes[axis < 0 ? axis + in->dim : axis];
    if (!etch_q_check_scales(ctx, s, "scales", channels, false) ||
        (has_z && !etch_q_check_zero_points(ctx, z, "zero_points", channels, dtype)))
        return;
    etch_q_dequantize_run(ctx, in, out, &p);
}
