/*
 * cortex_m::quantized_depthwise_conv2d.out(Tensor input, Tensor weight, Tensor? bias,
 *     int[] stride, int[] padding, int[] dilation, int depth_multiplier, int input_offset,
 *     int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,
 *     int activation_min, int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_depthwise_conv_wrapper_s8: input [N, C_in, H, W] (Char), weight IHWO
 * [1, kH, kW, C_out] (Char) with C_out = C_in * depth_multiplier; output channel o reads
 * input channel o / depth_multiplier. acc = bias[o] + sum (x + input_offset) * w, out =
 * clamp(requantize(acc, mult[o], shift[o]) + output_offset, activation_min, activation_max).
 */
#include "kernels/portable/portable_cortex_m.h"

static void run(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool nhwc) {
    if (!etch_pk_nargs(ctx, nargs, 15))
        return;
    bool has_bias;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *w = in ? etch_pk_tensor(ctx, args[1], "weight") : NULL;
    etch_tensor *bias = w ? etch_pk_opt_tensor(ctx, args[2], "bias", &has_bias) : NULL;
    if (!w || etch_kernel_failed(ctx))
        return;
    etch_tensor *mult = etch_pk_tensor(ctx, args[9], "requantize_multipliers");
    etch_tensor *shift = mult ? etch_pk_tensor(ctx, args[10], "requantize_shifts") : NULL;
    etch_tensor *out = shift ? etch_pk_tensor(ctx, args[14], "out") : NULL;
    if (!out || !etch_pk_tensor(ctx, args[13], "scratch"))
        return;
    const int64_t *st = etch_cm_list_arg(ctx, args[3], "stride", 2, 1, INT32_MAX);
    const int64_t *pad = st ? etch_cm_list_arg(ctx, args[4], "padding", 2, 0, INT32_MAX) : NULL;
    const int64_t *dil = pad ? etch_cm_list_arg(ctx, args[5], "dilation", 2, 1, INT32_MAX) : NULL;
    int32_t cm, in_off, out_off, amin, amax;
    if (!dil || !etch_cm_int_arg(ctx, args[6], "depth_multiplier", 1, INT32_MAX, &cm) ||
        !etch_cm_int_arg(ctx, args[7], "input_offset", -127, 128, &in_off) ||
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
    int64_t KH = w->sizes[1], KW = w->sizes[2], O = w->sizes[3];
    /* at a load-time check: the constants (weights, their parameters) only */
    if (etch_cm_load_stop(ctx, w, has_bias ? bias : NULL, mult, shift))
        return;
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
    if (w->sizes[0] != 1 || O != C * cm) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight [%lld, %lld, %lld, %lld] must be IHWO [1, kH, kW, C_in * "
                         "depth_multiplier] = [1, kH, kW, %lld]",
                         (long long)w->sizes[0], (long long)KH, (long long)KW, (long long)O,
                         (long long)(C * cm));
        return;
    }
    int64_t OH = etch_cm_pool_out(H, KH, st[0], pad[0], dil[0], false);
    int64_t OW = etch_cm_pool_out(Wd, KW, st[1], pad[1], dil[1], false);
    if (OH < 0 || OW < 0 || KH < 1 || KW < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "the dilated kernel [%lld, %lld] is empty or larger than the padded input",
                         (long long)KH, (long long)KW);
        return;
    }
    int64_t osz[4] = {N, O, OH, OW};
    out = etch_cm_out_nchw(ctx, out, osz, nhwc, &out_view);
    if (!out)
        return;
    const int8_t *x = (const int8_t *)in->data, *wt = (const int8_t *)w->data;
    int8_t *y = (int8_t *)out->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            int64_t c = o / cm;
            /* strides as locals: this loop is most of the work */
            const int8_t *xc = x + n * in->strides[0] + c * in->strides[1];
            const int8_t *wo = wt + o * w->strides[3];
            const int64_t xs2 = in->strides[2], xs3 = in->strides[3];
            const int64_t ws1 = w->strides[1], ws2 = w->strides[2];
            int32_t b = has_bias ? etch_cm_i32_at(bias, o) : 0;
            int32_t m = etch_cm_i32_at(mult, o), s = etch_cm_i32_at(shift, o);
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int32_t acc = b;
                    for (int64_t kh = 0; kh < KH; kh++) {
                        int64_t ih = oh * st[0] - pad[0] + kh * dil[0];
                        if (ih < 0 || ih >= H)
                            continue;
                        for (int64_t kw = 0; kw < KW; kw++) {
                            int64_t iw = ow * st[1] - pad[1] + kw * dil[1];
                            if (iw < 0 || iw >= Wd)
                                continue;
                            int32_t xv = xc[ih * xs2 + iw * xs3] + in_off;
                            int32_t wv = wo[kh * ws1 + kw * ws2];
                            acc = (int32_t)(uint32_t)((uint32_t)acc + (uint32_t)(xv * wv));
                        }
                    }
                    int32_t r = etch_cm_requantize(acc, m, s) + out_off;
                    y[etch_cm_off4(out, n, o, oh, ow)] = (int8_t)etch_cm_clamp(r, amin, amax);
                }
        }
}

ETCH_PK_KERNEL(cm_quantized_depthwise_conv2d_out) { run(ctx, args, nargs, false); }

/* The same with [N, H, W, C] input and output tensors (weights as above). */
ETCH_PK_KERNEL(cm_quantized_depthwise_conv2d_nhwc_out) { run(ctx, args, nargs, true); }
