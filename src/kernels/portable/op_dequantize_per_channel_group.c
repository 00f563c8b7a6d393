/*
 * quantized_decomposed::dequantize_per_channel_group.out(Tensor input, Tensor scales,
 *     Tensor? zero_points, int quant_min, int quant_max, ScalarType dtype, int group_size,
 *     ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)
 *
 * Group-wise dequantization of a 2-D [M, N] integer tensor (ExecuTorch has no kernel of its
 * own; this follows torch.ao's reference, _decomposed.py): every run of group_size elements
 * of a row shares scales[g] / zero_points[g], g = (row * N + col) / group_size, computed as
 * torch does, `input.sub(zero_points).mul(scales).to(output_dtype)` with torch's type
 * promotion (integer subtraction wraps to the promoted width; without zero points the input
 * dtype is kept). group_size > 1 and divides N, except that a group_size above N with
 * scales whose last dim is 1 means one group per row. scales: Float, Double, Half or
 * BFloat16, M * N / group_size elements (any shape); zero_points the same count, of an
 * integer or floating dtype. input has dtype `dtype` (Byte, Char, Short, UInt16, Int);
 * out: output_dtype, floating. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(dequantize_per_channel_group_out) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    bool has_z;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[1], "scales") : NULL;
    etch_tensor *z = s ? etch_pk_opt_tensor(ctx, args[2], "zero_points", &has_z) : NULL;
    if (!s || etch_kernel_failed(ctx))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[8], "out");
    int64_t qmin, qmax, group;
    int dtype, out_dtype;
    if (!out || !etch_pk_int(ctx, args[3], "quant_min", &qmin) ||
        !etch_pk_int(ctx, args[4], "quant_max", &qmax) ||
        !etch_q_dtype_arg(ctx, args[5], "dtype", &dtype) ||
        !etch_pk_int(ctx, args[6], "group_size", &group) ||
        !etch_q_dtype_arg(ctx, args[7], "output_dtype", &out_dtype) ||
        !etch_q_check_qrange(ctx, dtype, qmin, qmax) ||
        !etch_q_check_float_out(ctx, out, true, out_dtype, "output_dtype"))
        return;
    if (in->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "input has dtype %s but dtype is %s",
                         etch_dtype_name(in->dtype), etch_dtype_name(dtype));
        return;
    }
    if (etch_q_check_stop(ctx, in, s, has_z ? z : NULL))
        return;
    if (in->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input must be 2-D, got rank %u",
                         (unsigned)in->dim);
        return;
    }
    int64_t M = in->sizes[0], N = in->sizes[1];
    if (group <= 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "group_size %lld must be > 1",
                         (long long)group);
        return;
    }
    if (group > N && s->dim >= 1 && s->sizes[s->dim - 1] == 1)
        group = N; /* torch's rule for one group per row (GPTQ) */
    if (group == 0 || N % group != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "group_size %lld does not divide the input's %lld columns",
                         (long long)group, (long long)N);
        return;
    }
    int64_t groups = M * (N / group);
    if (!etch_pk_is_float(s->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "scales has dtype %s; it must be Float, Double, Half or BFloat16",
                         etch_dtype_name(s->dtype));
        return;
    }
    if (etch_tensor_numel(s) != groups) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "scales has %lld elements, expected %lld (%lld rows x %lld groups of "
                         "%lld)",
                         (long long)etch_tensor_numel(s), (long long)groups, (long long)M,
                         (long long)(N / group), (long long)group);
        return;
    }
    for (int64_t g = 0; g < groups; g++) {
        double v = etch_q_f64_at(s, g);
        if (!isfinite(v) || v < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "scales[%lld] = %g must be finite and >= 0", (long long)g, v);
            return;
        }
    }
    int zdt = -1;
    if (has_z) {
        zdt = z->dtype;
        if (!etch_pk_dtype_is_real(zdt) || zdt == ETCH_DTYPE_BOOL) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                             "zero_points has dtype %s; it must be an integer or floating dtype",
                             etch_dtype_name(zdt));
            return;
        }
        if (etch_tensor_numel(z) != groups) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "zero_points has %lld elements, expected %lld",
                             (long long)etch_tensor_numel(z), (long long)groups);
            return;
        }
        for (int64_t g = 0; g < groups && etch_pk_is_float(zdt); g++)
            if (!isfinite(etch_q_f64_at(z, g))) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "zero_points[%lld] is not finite", (long long)g);
                return;
            }
    }
    /* torch's promotion: the subtraction in promote(input, zero_points), the product in
     * promote(that, scales). UInt16 is not one of torch's ten dtypes: it takes part as Int. */
    int idt = in->dtype == ETCH_DTYPE_UINT16 ? ETCH_DTYPE_INT : in->dtype;
    int d1 = has_z ? etch_pk_promote(idt, zdt) : idt;
    int d2 = etch_pk_promote(d1, s->dtype);
    if (etch_kernel_checking(ctx) || etch_pk_resize(ctx, out, 2, in->sizes) != ETCH_OK)
        return;
    bool ic = etch_tensor_is_contiguous(in), oc = etch_tensor_is_contiguous(out);
    for (int64_t g = 0; g < groups; g++) {
        double scale = etch_q_f64_at(s, g);
        double zf = 0;
        int64_t zi = 0;
        if (has_z && etch_pk_is_float(d1))
            zf = etch_q_f64_at(z, g);
        else if (has_z)
            zi = etch_q_int_at(z, g);
        for (int64_t i = g * group; i < (g + 1) * group; i++) {
            int64_t q = etch_q_load_int((const char *)in->data + etch_q_offset_c(in, ic, i),
                                        in->dtype);
            double v;
            if (etch_pk_is_float(d1)) {
                v = (double)q - zf;
                etch_pk_round_row_f64(&v, 1, d1);
            } else {
                int64_t d = etch_pk_wrap_sub(q, zi);
                etch_pk_round_row_i64(&d, 1, d1);
                v = (double)d;
                etch_pk_round_row_f64(&v, 1, d2); /* the integer converts to the product's dtype */
            }
            v *= scale;
            etch_pk_round_row_f64(&v, 1, d2);
            etch_pk_store_f64((char *)out->data + etch_q_offset_c(out, oc, i), out->dtype, v);
        }
    }
}
