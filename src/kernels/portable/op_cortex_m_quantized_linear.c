/*
 * cortex_m::quantized_linear.out(Tensor input, Tensor weights, Tensor? bias,
 *     Tensor? kernel_sum, int input_offset, int filter_offset, int output_offset,
 *     int[] requantize_multipliers, int[] requantize_shifts, int activation_max,
 *     int activation_min, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_fully_connected_s8 (per_channel_s8 when the lists have out_features
 * entries): input [..., K] (Char), weights [N, K] (Char), out [..., N] (Char).
 * Without kernel_sum (the scalar / DSP contract):
 *     acc = bias[n] + sum_k (x[k] + input_offset) * (w[n, k] + filter_offset)
 * with kernel_sum [N] (Int; the MVE contract, which folds bias and input_offset into it):
 *     acc = kernel_sum[n] + sum_k x[k] * w[n, k] + filter_offset * sum_k x[k]
 * out = clamp(requantize(acc, mult, shift) + output_offset, activation_min, activation_max).
 * Note the schema's order: activation_max before activation_min.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_quantized_linear_out) {
    if (!etch_pk_nargs(ctx, nargs, 12))
        return;
    bool has_bias, has_ksum;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *w = in ? etch_pk_tensor(ctx, args[1], "weights") : NULL;
    etch_tensor *bias = w ? etch_pk_opt_tensor(ctx, args[2], "bias", &has_bias) : NULL;
    etch_tensor *ksum =
        !etch_kernel_failed(ctx) && w ? etch_pk_opt_tensor(ctx, args[3], "kernel_sum", &has_ksum)
                                      : NULL;
    etch_tensor *out = !etch_kernel_failed(ctx) && w ? etch_pk_tensor(ctx, args[11], "out") : NULL;
    if (!out)
        return;
    int32_t in_off, f_off, out_off, amin, amax;
    if (!etch_cm_int_arg(ctx, args[4], "input_offset", -127, 128, &in_off) ||
        !etch_cm_int_arg(ctx, args[5], "filter_offset", -127, 128, &f_off) ||
        !etch_cm_int_arg(ctx, args[6], "output_offset", -128, 127, &out_off) ||
        !etch_cm_int_arg(ctx, args[9], "activation_max", -128, 127, &amax) ||
        !etch_cm_int_arg(ctx, args[10], "activation_min", -128, 127, &amin) ||
        !etch_cm_check_activation(ctx, amin, amax))
        return;
    if (!etch_cm_check_int8(ctx, in, "input") ||
        !etch_cm_check_tensor(ctx, w, "weights", ETCH_DTYPE_CHAR, 2) ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (in->dim < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input must have at least one dim");
        return;
    }
    int64_t N = w->sizes[0], K = w->sizes[1];
    /* at a load-time check: the constants (weights, their parameters) only */
    if (etch_cm_load_stop(ctx, w, has_bias ? bias : NULL, has_ksum ? ksum : NULL, NULL))
        return;
    if (has_bias && (!etch_cm_check_tensor(ctx, bias, "bias", ETCH_DTYPE_INT, 1) ||
                     bias->sizes[0] != N)) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "bias has %lld elements, expected %lld",
                             (long long)bias->sizes[0], (long long)N);
        return;
    }
    if (has_ksum && (!etch_cm_check_tensor(ctx, ksum, "kernel_sum", ETCH_DTYPE_INT, 1) ||
                     ksum->sizes[0] != N)) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "kernel_sum has %lld elements, expected %lld",
                             (long long)ksum->sizes[0], (long long)N);
        return;
    }
    size_t nm, ns;
    const int64_t *mult = etch_pk_int_list(ctx, args[7], "requantize_multipliers", &nm);
    const int64_t *shift = mult ? etch_pk_int_list(ctx, args[8], "requantize_shifts", &ns) : NULL;
    if (!shift)
        return;
    if (nm != ns || (nm != 1 && (int64_t)nm != N)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "requantize_multipliers has %zu and requantize_shifts %zu elements, "
                         "expected 1 (per tensor) or out_features = %lld (per channel)",
                         nm, ns, (long long)N);
        return;
    }
    for (size_t i = 0; i < nm; i++)
        if (!etch_cm_check_mult_shift(ctx, mult[i], shift[i], "requantize_multipliers",
                                      "requantize_shifts", (int64_t)i))
            return;
    if (etch_kernel_checking(ctx))
        return;
    if (in->sizes[in->dim - 1] != K) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input's last size is %lld, weights [%lld, %lld] take %lld features",
                         (long long)in->sizes[in->dim - 1], (long long)N, (long long)K,
                         (long long)K);
        return;
    }
    int64_t osz[ETCH_MAX_DIMS];
    for (size_t d = 0; d + 1 < in->dim; d++)
        osz[d] = in->sizes[d];
    osz[in->dim - 1] = N;
    if (!etch_cm_resize(ctx, out, in->dim, osz))
        return;
    int64_t rows = K > 0 ? etch_tensor_numel(in) / K : etch_tensor_numel(out) / (N ? N : 1);
    const int8_t *x = (const int8_t *)in->data, *wt = (const int8_t *)w->data;
    int8_t *y = (int8_t *)out->data;
    const bool dense = in->strides[in->dim - 1] == 1 && w->strides[1] == 1 && K <= INT32_MAX;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = 0; n < N; n++) {
            int32_t acc, xsum = 0;
            if (dense) { /* rows contiguous: the SIMD dot (kernel_sum: x * (w + filter_offset)) */
                acc = has_ksum ? etch_cm_i32_at(ksum, n) : has_bias ? etch_cm_i32_at(bias, n) : 0;
                acc = etch_cm_wadd(acc, etch_cm_dot_s8(x + etch_cm_offset(in, r * K),
                                                       wt + n * w->strides[0], (int32_t)K,
                                                       has_ksum ? 0 : in_off, f_off));
            } else if (has_ksum) {
                acc = etch_cm_i32_at(ksum, n);
                for (int64_t k = 0; k < K; k++) {
                    int32_t xv = x[etch_cm_offset(in, r * K + k)];
                    acc = etch_cm_wadd(acc, xv * wt[n * w->strides[0] + k * w->strides[1]]);
                    xsum += xv;
                }
                acc = etch_cm_wadd(acc, etch_cm_wmul(xsum, f_off));
            } else {
                acc = has_bias ? etch_cm_i32_at(bias, n) : 0;
                for (int64_t k = 0; k < K; k++) {
                    int32_t xv = x[etch_cm_offset(in, r * K + k)] + in_off;
                    int32_t wv = wt[n * w->strides[0] + k * w->strides[1]] + f_off;
                    acc = etch_cm_wadd(acc, xv * wv);
                }
            }
            size_t p = nm == 1 ? 0 : (size_t)n;
            int32_t v = etch_cm_requantize(acc, (int32_t)mult[p], (int32_t)shift[p]) + out_off;
            y[etch_cm_offset(out, r * N + n)] = (int8_t)etch_cm_clamp(v, amin, amax);
        }
}
