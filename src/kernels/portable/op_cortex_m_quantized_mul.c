/*
 * cortex_m::quantized_mul.out(Tensor self, int self_zero_point, Tensor other,
 *     int other_zero_point, int output_zero_point, int output_multiplier, int output_shift,
 *     *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_elementwise_mul_s8: out = clamp(requantize((a - self_zero_point) *
 * (b - other_zero_point), output_multiplier, output_shift) + output_zero_point, -128, 127).
 * Char tensors; shapes broadcast.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_quantized_mul_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[2], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[7], "out") : NULL;
    int32_t za, zb, zo;
    int64_t m, s;
    if (!out || !etch_cm_int_arg(ctx, args[1], "self_zero_point", -128, 127, &za) ||
        !etch_cm_int_arg(ctx, args[3], "other_zero_point", -128, 127, &zb) ||
        !etch_cm_int_arg(ctx, args[4], "output_zero_point", -128, 127, &zo) ||
        !etch_pk_int(ctx, args[5], "output_multiplier", &m) ||
        !etch_pk_int(ctx, args[6], "output_shift", &s) ||
        !etch_cm_check_mult_shift(ctx, m, s, "output_multiplier", "output_shift", -1))
        return;
    if (!etch_cm_check_int8(ctx, a, "self") || !etch_cm_check_int8(ctx, b, "other") ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx) || !etch_cm_broadcast(ctx, a, b, out))
        return;
    const int8_t *x = a->data, *y = b->data;
    int8_t *z = out->data;
    int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int32_t p = (x[etch_cm_bcast_offset(out, a, i)] - za) * (y[etch_cm_bcast_offset(out, b, i)] - zb);
        int32_t r = etch_cm_requantize(p, (int32_t)m, (int32_t)s) + zo;
        z[etch_cm_offset(out, i)] = (int8_t)etch_cm_clamp(r, -128, 127);
    }
}
