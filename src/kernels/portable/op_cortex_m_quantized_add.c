/*
 * cortex_m::quantized_add.out(Tensor self, int self_zero_point, int self_multiplier,
 *     int self_shift, Tensor other, int other_zero_point, int other_multiplier,
 *     int other_shift, int output_zero_point, int output_multiplier, int output_shift,
 *     int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_elementwise_add_s8 with ExecuTorch's left shift of 20: each input is
 * a' = requantize((a - zero_point) * 2^20, multiplier, shift); out = clamp(requantize(a' + b',
 * output_multiplier, output_shift) + output_zero_point, activation_min, activation_max).
 * Char tensors; shapes broadcast (ExecuTorch emits equal shapes or a channel broadcast).
 */
#include "kernels/portable/portable_cortex_m.h"

#define CM_ADD_LEFT_SHIFT 20

typedef struct {
    int32_t zp, mult, shift;
} side;

static bool side_args(etch_kernel_context *ctx, etch_value **args, const char *zn,
                      const char *mn, const char *sn, side *s) {
    int64_t m, sh;
    return etch_cm_int_arg(ctx, args[0], zn, -128, 127, &s->zp) &&
           etch_pk_int(ctx, args[1], mn, &m) && etch_pk_int(ctx, args[2], sn, &sh) &&
           etch_cm_check_mult_shift(ctx, m, sh, mn, sn, -1) &&
           ((s->mult = (int32_t)m), (s->shift = (int32_t)sh), true);
}

ETCH_PK_KERNEL(cm_quantized_add_out) {
    if (!etch_pk_nargs(ctx, nargs, 14))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[4], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[13], "out") : NULL;
    side sa, sb, so;
    int32_t amin, amax;
    if (!out ||
        !side_args(ctx, args + 1, "self_zero_point", "self_multiplier", "self_shift", &sa) ||
        !side_args(ctx, args + 5, "other_zero_point", "other_multiplier", "other_shift", &sb) ||
        !side_args(ctx, args + 8, "output_zero_point", "output_multiplier", "output_shift", &so) ||
        !etch_cm_int_arg(ctx, args[11], "activation_min", -128, 127, &amin) ||
        !etch_cm_int_arg(ctx, args[12], "activation_max", -128, 127, &amax) ||
        !etch_cm_check_activation(ctx, amin, amax))
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
        int32_t u = (x[etch_cm_bcast_offset(out, a, i)] - sa.zp) * (1 << CM_ADD_LEFT_SHIFT);
        int32_t v = (y[etch_cm_bcast_offset(out, b, i)] - sb.zp) * (1 << CM_ADD_LEFT_SHIFT);
        int32_t s = etch_cm_wadd(etch_cm_requantize(u, sa.mult, sa.shift),
                                 etch_cm_requantize(v, sb.mult, sb.shift));
        int32_t r = etch_cm_wadd(etch_cm_requantize(s, so.mult, so.shift), so.zp);
        z[etch_cm_offset(out, i)] = (int8_t)etch_cm_clamp(r, amin, amax);
    }
}
