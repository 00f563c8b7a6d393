/*
 * cortex_m::quantized_max_pool2d.out(Tensor input, int[] kernel_size, int[] stride,
 *     int[] padding, int[] dilation, bool ceil_mode, int input_zero_point,
 *     int output_zero_point, int activation_min, int activation_max, *, Tensor(a!) out)
 *     -> Tensor(a!)
 *
 * CMSIS-NN's arm_max_pool_s8 over [N, C, H, W] Char tensors: the largest element of each
 * window inside the input (padding never wins), clamped to [activation_min, activation_max].
 * As ExecuTorch, the zero points must be equal and dilation 1 (CMSIS-NN has no dilation).
 */
#include "kernels/portable/portable_cortex_m.h"

static void run(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool nhwc) {
    if (!etch_pk_nargs(ctx, nargs, 11))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[10], "out") : NULL;
    if (!out)
        return;
    const int64_t *k = etch_cm_list_arg(ctx, args[1], "kernel_size", 2, 1, INT32_MAX);
    const int64_t *st = k ? etch_cm_list_arg(ctx, args[2], "stride", 2, 1, INT32_MAX) : NULL;
    const int64_t *pad = st ? etch_cm_list_arg(ctx, args[3], "padding", 2, 0, INT32_MAX) : NULL;
    const int64_t *dil = pad ? etch_cm_list_arg(ctx, args[4], "dilation", 2, 1, 1) : NULL;
    bool ceil_mode;
    int32_t izp, ozp, amin, amax;
    if (!dil || !etch_pk_bool(ctx, args[5], "ceil_mode", &ceil_mode) ||
        !etch_cm_int_arg(ctx, args[6], "input_zero_point", -128, 127, &izp) ||
        !etch_cm_int_arg(ctx, args[7], "output_zero_point", -128, 127, &ozp) ||
        !etch_cm_int_arg(ctx, args[8], "activation_min", -128, 127, &amin) ||
        !etch_cm_int_arg(ctx, args[9], "activation_max", -128, 127, &amax) ||
        !etch_cm_check_activation(ctx, amin, amax))
        return;
    if (izp != ozp) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input_zero_point %d differs from output_zero_point %d", (int)izp,
                         (int)ozp);
        return;
    }
    etch_tensor in_view, out_view;
    if (!etch_cm_pool_setup(ctx, &in, &out, k, st, pad, ceil_mode, nhwc, &in_view, &out_view))
        return;
    int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], W = in->sizes[3];
    int64_t OH = out->sizes[2], OW = out->sizes[3];
    const int8_t *x = (const int8_t *)in->data;
    int8_t *y = (int8_t *)out->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    /* only the part of the window inside the input: padding never counts */
                    int64_t h0 = oh * st[0] - pad[0], w0 = ow * st[1] - pad[1];
                    int32_t mx = -128;
                    for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + k[0] && ih < H; ih++)
                        for (int64_t iw = w0 < 0 ? 0 : w0; iw < w0 + k[1] && iw < W; iw++)
                            {
                                int32_t v = x[etch_cm_off4(in, n, c, ih, iw)];
                                mx = v > mx ? v : mx;
                            }
                    y[etch_cm_off4(out, n, c, oh, ow)] = (int8_t)etch_cm_clamp(mx, amin, amax);
                }
}

ETCH_PK_KERNEL(cm_quantized_max_pool2d_out) { run(ctx, args, nargs, false); }

/* The same with [N, H, W, C] input and output tensors (weights as above). */
ETCH_PK_KERNEL(cm_quantized_max_pool2d_nhwc_out) { run(ctx, args, nargs, true); }
