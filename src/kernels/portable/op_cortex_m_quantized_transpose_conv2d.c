/*
 * cortex_m::quantized_transpose_conv2d.out(Tensor input, Tensor weight, Tensor? bias,
 *     int[] stride, int[] padding, int[] output_padding, int[] dilation, int input_offset,
 *     int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,
 *     int activation_min, int activation_max, Tensor scratch, Tensor output_scratch, *,
 *     Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_transpose_conv_s8: input [N, C_in, H, W] (Char), weight OHWI
 * [C_out, kH, kW, C_in] (Char; one group), bias [C_out] (Int). Output size per dim:
 * (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1. Each input
 * element (plus input_offset) scatters x * w into out[ih * stride - padding + kh * dilation];
 * out = clamp(requantize(bias + sum, mult[o], shift[o]) + output_offset, activation_min,
 * activation_max). The scratch tensors are CMSIS-NN's buffers, not read.
 */
#include "kernels/portable/portable_cortex_m.h"

static void run(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool nhwc) {
    if (!etch_pk_nargs(ctx, nargs, 16))
        return;
    bool has_bias;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *w = in ? etch_pk_tensor(ctx, args[1], "weight") : NULL;
    etch_tensor *bias = w ? etch_pk_opt_tensor(ctx, args[2], "bias", &has_bias) : NULL;
    if (!w || etch_kernel_failed(ctx))
        return;
    etch_tensor *mult = etch_pk_tensor(ctx, args[9], "requantize_multipliers");
    etch_tensor *shift = mult ? etch_pk_tensor(ctx, args[10], "requantize_shifts") : NULL;
    etch_tensor *out = shift ? etch_pk_tensor(ctx, args[15], "out") : NULL;
    if (!out || !etch_pk_tensor(ctx, args[13], "scratch") ||
        !etch_pk_tensor(ctx, args[14], "output_scratch"))
        return;
    const int64_t *st = etch_cm_list_arg(ctx, args[3], "stride", 2, 1, INT32_MAX);
    const int64_t *pad = st ? etch_cm_list_arg(ctx, args[4], "padding", 2, 0, INT32_MAX) : NULL;
    const int64_t *opad = pad ? etch_cm_list_arg(ctx, args[5], "output_padding", 2, 0, INT32_MAX)
                              : NULL;
    const int64_t *dil = opad ? etch_cm_list_arg(ctx, args[6], "dilation", 2, 1, INT32_MAX) : NULL;
    int32_t in_off, out_off, amin, amax;
    if (!dil || !etch_cm_int_arg(ctx, args[7], "input_offset", -127, 128, &in_off) ||
        !etch_cm_int_arg(ctx, args[8], "output_offset", -128, 127, &out_off) ||
        !etch_cm_int_arg(ctx, args[11], "activation_min", -128, 127, &amin) ||
        !etch_cm_int_arg(ctx, args[12], "activation_max", -128, 127, &amax) ||
        !etch_cm_check_activation(ctx, amin, amax))
        return;
    if (!etch_cm_check_tensor(ctx, in, "input", ETCH_DTYPE_CHAR, 4) ||
        !etch_cm_check_tensor(ctx, w, "weight", ETCH_DTYPE_CHAR, 4) ||
        !etch_cm_check_tensor(ctx, out, "out", ETCH_DTYPE_CHAR, 4))
        return;
    etch_tensor in_view, out_view;
    if (nhwc) {
        etch_cm_nchw_view(in, &in_view);
        in = &in_view;
    }
    int64_t N = in->sizes[0], C = in->sizes[1], H = in->sizes[2], Wd = in->sizes[3];
    int64_t O = w->sizes[0], KH = w->sizes[1], KW = w->sizes[2];
    /* at a load-time check: the constants (weights, their parameters) only */
    if (etch_cm_load_stop(ctx, w, has_bias ? bias : NULL, mult, shift))
        return;
    if (opad[0] >= st[0] && opad[0] >= dil[0]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "output_padding[0] %lld must be smaller than the stride or the dilation",
                         (long long)opad[0]);
        return;
    }
    if (opad[1] >= st[1] && opad[1] >= dil[1]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "output_padding[1] %lld must be smaller than the stride or the dilation",
                         (long long)opad[1]);
        return;
    }
    if (has_bias && (!etch_cm_check_tensor(ctx, bias, "bias", ETCH_DTYPE_INT, 1) ||
                     bias->sizes[0] != O)) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "bias has %lld elements, expected %lld",
                             (long long)bias->sizes[0], (long long)O);
        return;
    }
    if (!etch_cm_check_channel_params(ctx, mult, shift, O))
        return;
    if (etch_kernel_checking(ctx))
        return;
    if (w->sizes[3] != C) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight [%lld, %lld, %lld, %lld] (OHWI) takes %lld input channels, the "
                         "input has %lld",
                         (long long)O, (long long)KH, (long long)KW, (long long)w->sizes[3],
                         (long long)w->sizes[3], (long long)C);
        return;
    }
    int64_t OH = (H - 1) * st[0] - 2 * pad[0] + dil[0] * (KH - 1) + opad[0] + 1;
    int64_t OW = (Wd - 1) * st[1] - 2 * pad[1] + dil[1] * (KW - 1) + opad[1] + 1;
    if (OH < 1 || OW < 1 || H < 1 || Wd < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "the output would be [%lld, %lld]",
                         (long long)OH, (long long)OW);
        return;
    }
    int64_t osz[4] = {N, O, OH, OW};
    out = etch_cm_out_nchw(ctx, out, osz, nhwc, &out_view);
    if (!out)
        return;
    const int8_t *x = in->data, *wt = w->data;
    int8_t *y = out->data;
    /* gather form of the scatter: out (oh, ow) takes (ih, kh) with ih * s - p + kh * d = oh */
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            int32_t b = has_bias ? etch_cm_i32_at(bias, o) : 0;
            int32_t m = etch_cm_i32_at(mult, o), s = etch_cm_i32_at(shift, o);
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int32_t acc = b;
                    for (int64_t kh = 0; kh < KH; kh++) {
                        int64_t th = oh + pad[0] - kh * dil[0];
                        if (th < 0 || th % st[0] != 0 || th / st[0] >= H)
                            continue;
                        for (int64_t kw = 0; kw < KW; kw++) {
                            int64_t tw = ow + pad[1] - kw * dil[1];
                            if (tw < 0 || tw % st[1] != 0 || tw / st[1] >= Wd)
                                continue;
                            for (int64_t c = 0; c < C; c++) {
                                int32_t xv = x[etch_cm_off4(in, n, c, th / st[0], tw / st[1])] + in_off;
                                acc = etch_cm_wadd(acc, xv * wt[etch_cm_off4(w, o, kh, kw, c)]);
                            }
                        }
                    }
                    int32_t r = etch_cm_requantize(acc, m, s) + out_off;
                    y[etch_cm_off4(out, n, o, oh, ow)] = (int8_t)etch_cm_clamp(r, amin, amax);
                }
        }
}

ETCH_PK_KERNEL(cm_quantized_transpose_conv2d_out) { run(ctx, args, nargs, false); }

/* The same with [N, H, W, C] input and output tensors (weights as above). */
ETCH_PK_KERNEL(cm_quantized_transpose_conv2d_nhwc_out) { run(ctx, args, nargs, true); }
