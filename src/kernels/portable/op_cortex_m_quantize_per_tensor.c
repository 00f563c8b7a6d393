/*
 * cortex_m::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
 *     int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
 *
 * ExecuTorch's Cortex-M quantize: Float input to Char out only, otherwise the arithmetic of
 * quantized_decomposed::quantize_per_tensor (q = clamp(zp + nearbyint(x * (1.0f /
 * (float)scale)), quant_min, quant_max) in single precision, portable_quant.h).
 */
#include "kernels/portable/portable_cortex_m.h"
#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(cm_quantize_per_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    double scale;
    int64_t zp, qmin, qmax;
    int dtype;
    if (!out || !etch_nn_double(ctx, args[1], "scale", &scale) ||
        !etch_pk_int(ctx, args[2], "zero_point", &zp) ||
        !etch_pk_int(ctx, args[3], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[4], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[5], "dtype", &dtype))
        return;
    if (!etch_cm_check_tensor(ctx, in, "input", ETCH_DTYPE_FLOAT, -1) ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (dtype != ETCH_DTYPE_CHAR) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "dtype is %s, only Char is supported",
                         etch_dtype_name(dtype));
        return;
    }
    if (!etch_q_check_qrange(ctx, dtype, qmin, qmax) || !etch_q_check_scale(ctx, scale, true) ||
        !etch_q_check_zero_point(ctx, zp, dtype))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    etch_q_params p = {NULL, NULL, scale, zp, 1, 1};
    etch_q_quantize_run(ctx, in, out, &p, qmin, qmax);
}
