/*
 * quantized_decomposed::quantize_per_token.out(Tensor input, Tensor scales,
 *     Tensor zero_points, int quant_min, int quant_max, ScalarType dtype, *,
 *     Tensor(a!) out) -> Tensor(a!)
 *
 * quantize_per_tensor with one (scale, zero point) per token: a token is a row of the last
 * dim, so scales and zero_points have prod(input.shape[:-1]) elements (any shape, e.g.
 * [..., 1] as choose_qparams_per_token_asymmetric writes them; Float/Double and an integer
 * dtype). Any dim order.
 */
#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(quantize_per_token_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[1], "scales") : NULL;
    etch_tensor *z = s ? etch_pk_tensor(ctx, args[2], "zero_points") : NULL;
    etch_tensor *out = z ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    int64_t qmin, qmax;
    int dtype;
    if (!out || !etch_pk_int(ctx, args[3], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[4], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[5], "dtype", &dtype) ||
        !etch_q_check_float_in(ctx, in, "input") || !etch_q_check_qrange(ctx, dtype, qmin, qmax))
        return;
    if (out->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s but dtype is %s",
                         etch_dtype_name(out->dtype), etch_dtype_name(dtype));
        return;
    }
    if (etch_q_check_stop(ctx, in, s, z))
        return;
    int64_t tokens, last;
    etch_q_tokens(in, &tokens, &last);
    if (!etch_q_check_scales(ctx, s, "scales", tokens, true) ||
        !etch_q_check_zero_points(ctx, z, "zero_points", tokens, dtype))
        return;
    etch_q_params p = {s, z, 0, 0, last ? last : 1, tokens ? tokens : 1};
    etch_q_quantize_run(ctx, in, out, &p, qmin, qmax);
}
