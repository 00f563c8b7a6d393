/*
 * quantized_decomposed::quantize_per_channel.out(Tensor input, Tensor scales,
 *     Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *,
 *     Tensor(a!) out) -> Tensor(a!)
 *
 * quantize_per_tensor with scales[c] / zero_points[c] for the elements whose index along
 * `axis` (negative wraps) is c. scales: Float or Double, zero_points: an integer dtype, each
 * with input.size(axis) elements (any shape, read in row-major order); every scale finite and
 * > 0, every zero point within dtype's range. Any dim order.
 */
#include "kernels/portable/portable_quant.h"

/* inner/count of the parameters along `axis` of `in` (0-dim: one channel). */
bool etch_q_channel_params(etch_kernel_context *ctx, const etch_tensor *in, int64_t axis,
                           etch_q_params *p) {
    int64_t a;
    if (in->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input must have at least one dim for per-channel quantization");
        return false;
    }
    if (!etch_pk_wrap_dim(ctx, axis, in->dim, &a))
        return false;
    p->count = in->sizes[a];
    p->inner = 1;
    for (unsigned d = (unsigned)a + 1; d < in->dim; d++)
        p->inner *= in->sizes[d];
    if (p->inner == 0 || p->count == 0) {
        p->inner = 1;
        p->count = p->count ? p->count : 1;
    }
    return true;
}

ETCH_PK_KERNEL(quantize_per_channel_out) {
    if (!etch_pk_nargs(ctx, nargs, 9))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[1], "scales") : NULL;
    etch_tensor *z = s ? etch_pk_tensor(ctx, args[2], "zero_points") : NULL;
    etch_tensor *out = z ? etch_pk_tensor(ctx, args[7], "out") : NULL;
    int64_t axis, qmin, qmax;
    int dtype;
    if (!out || !etch_pk_int(ctx, args[3], "axis", &axis) ||
        !etch_pk_int(ctx, args[4], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[5], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[6], "dtype", &dtype) ||
        !etch_q_check_float_in(ctx, in, "input") || !etch_q_check_qrange(ctx, dtype, qmin, qmax))
        return;
    if (out->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s but dtype is %s",
                         etch_dtype_name(out->dtype), etch_dtype_name(dtype));
        return;
    }
    if (etch_q_check_stop(ctx, in, s, z))
        return;
    etch_q_params p = {s, z, 0, 0, 1, 1};
    if (!etch_q_channel_params(ctx, in, axis, &p))
        return;
    int64_t channels = in->sizes[in->dim == 0 ? 0 : (axis < 0 ? axis + in->dim : axis)];
    if (!etch_q_check_scales(ctx, s, "scales", channels, true) ||
        !etch_q_check_zero_points(ctx, z, "zero_points", channels, dtype))
        return;
    etch_q_quantize_run(ctx, in, out, &p, qmin, qmax);
}
