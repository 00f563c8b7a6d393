/*
 * cortex_m::quantized_avg_pool2d.out(Tensor input, int[] kernel_size, int[] stride,
 *     int[] padding, bool ceil_mode, int zero_point, int multiplier, int shift,
 *     Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_avgpool_s8 over [N, C, H, W] Char tensors: each output is the sum of the
 * window's elements inside the input (padding is not counted) divided by their count, rounded
 * to nearest with ties away from zero, clamped to [-128, 127]. Input and output share one
 * scale and zero point, so ExecuTorch's kernel (and this one) only checks zero_point,
 * multiplier and shift; `scratch` is CMSIS-NN's buffer, not read.
 */
#include "kernels/portable/portable_cortex_m.h"

static void run(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool nhwc) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[9], "out") : NULL;
    if (!out || !etch_pk_tensor(ctx, args[8], "scratch"))
        return;
    const int64_t *k = etch_cm_list_arg(ctx, args[1], "kernel_size", 2, 1, INT32_MAX);
    const int64_t *st = k ? etch_cm_list_arg(ctx, args[2], "stride", 2, 1, INT32_MAX) : NULL;
    const int64_t *pad = st ? etch_cm_list_arg(ctx, args[3], "padding", 2, 0, INT32_MAX) : NULL;
    bool ceil_mode;
    int32_t zp;
    int64_t mult, shift;
    if (!pad || !etch_pk_bool(ctx, args[4], "ceil_mode", &ceil_mode) ||
        !etch_cm_int_arg(ctx, args[5], "zero_point", -128, 127, &zp) ||
        !etch_pk_int(ctx, args[6], "multiplier", &mult) ||
        !etch_pk_int(ctx, args[7], "shift", &shift) ||
        !etch_cm_check_mult_shift(ctx, mult, shift, "multiplier", "shift", -1))
        return;
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
                    int64_t sum = 0, count = 0;
                    for (int64_t ih = h0 < 0 ? 0 : h0; ih < h0 + k[0] && ih < H; ih++)
                        for (int64_t iw = w0 < 0 ? 0 : w0; iw < w0 + k[1] && iw < W; iw++)
                            {
                                sum += x[etch_cm_off4(in, n, c, ih, iw)];
                                count++;
                            }
                    int64_t avg = 0;
                    if (count > 0) /* a ceil_mode window may hold no element: 0, as torch */
                        avg = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    y[etch_cm_off4(out, n, c, oh, ow)] = (int8_t)etch_cm_clamp((int32_t)avg, -128, 127);
                }
}

ETCH_PK_KERNEL(cm_quantized_avg_pool2d_out) { run(ctx, args, nargs, false); }

/* The same with [N, H, W, C] input and output tensors (weights as above). */
ETCH_PK_KERNEL(cm_quantized_avg_pool2d_nhwc_out) { run(ctx, args, nargs, true); }
