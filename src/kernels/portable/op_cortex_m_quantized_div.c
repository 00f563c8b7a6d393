/*
 * cortex_m::quantized_div.out(Tensor self, int self_zero_point, Tensor other,
 *     int other_zero_point, int output_zero_point, float output_scale, *, Tensor(a!) out)
 *     -> Tensor(a!)
 * and the earlier form of the same operator, (..., int output_zero_point,
 *     int output_multiplier, int output_shift, *, Tensor(a!) out), whose scale is
 *     ldexp((float)output_multiplier / 2^31, output_shift).
 *
 * CMSIS-NN has no integer division, so ExecuTorch's kernel divides in single precision:
 * q = (float)(a - self_zero_point) / (float)(b - other_zero_point) (0 where the divisor is 0),
 * out = clamp(round(q * scale) + output_zero_point) to the dtype's range, round = nearest,
 * halves away from zero (std::round). Char or Short tensors of one shape; the zero points
 * within int8, as ExecuTorch checks them.
 */
#include "kernels/portable/portable_cortex_m.h"
#include "kernels/portable/portable_nn.h"

/* std::round for |v| < 2^30 (larger magnitudes saturate: the result is clamped anyway) */
static int32_t round_away(float v) {
    if (!(v < 1073741824.0f))
        return 1073741824;
    if (!(v > -1073741824.0f))
        return -1073741824;
    int32_t t = (int32_t)v; /* toward zero */
    float frac = v - (float)t; /* exact: t <= v < t + 1 (Sterbenz) */
    return frac >= 0.5f ? t + 1 : frac <= -0.5f ? t - 1 : t;
}

ETCH_PK_KERNEL(cm_quantized_div_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    bool legacy = args[5]->tag == ETCH_VALUE_INT; /* multiplier + shift instead of a scale */
    size_t oi = legacy ? 7 : 6;
    if (legacy && !etch_pk_nargs(ctx, nargs, 9))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[2], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[oi], "out") : NULL;
    int32_t za, zb, zo;
    if (!out || !etch_cm_int_arg(ctx, args[1], "self_zero_point", -128, 127, &za) ||
        !etch_cm_int_arg(ctx, args[3], "other_zero_point", -128, 127, &zb) ||
        !etch_cm_int_arg(ctx, args[4], "output_zero_point", -128, 127, &zo))
        return;
    float scale;
    if (legacy) {
        int64_t m, s;
        if (!etch_pk_int(ctx, args[5], "output_multiplier", &m) ||
            !etch_pk_int(ctx, args[6], "output_shift", &s))
            return;
        if (m < INT32_MIN || m > INT32_MAX || s < -31 || s > 31) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "output_multiplier %lld / output_shift %lld outside int32 / "
                             "[-31, 31]",
                             (long long)m, (long long)s);
            return;
        }
        scale = (float)m / 2147483648.0f;
        for (int64_t k = 0; k < s; k++)
            scale *= 2.0f;
        for (int64_t k = 0; k > s; k--)
            scale *= 0.5f;
    } else {
        double d;
        if (!etch_nn_double(ctx, args[5], "output_scale", &d))
            return;
        if (!(d > 0) || !(d <= 3.4028234663852886e38)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "output_scale %g must be finite and > 0", d);
            return;
        }
        scale = (float)d;
    }
    int dt = out->dtype;
    if (dt != ETCH_DTYPE_CHAR && dt != ETCH_DTYPE_SHORT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out has dtype %s, expected Char or Short",
                         etch_dtype_name(dt));
        return;
    }
    if (!etch_cm_check_tensor(ctx, a, "self", dt, -1) ||
        !etch_cm_check_tensor(ctx, b, "other", dt, -1))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    if (a->dim != b->dim || memcmp(a->sizes, b->sizes, a->dim * sizeof a->sizes[0]) != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self and other must have one shape (division does not broadcast)");
        return;
    }
    if (!etch_cm_resize(ctx, out, a->dim, a->sizes))
        return;
    int32_t lo = dt == ETCH_DTYPE_CHAR ? -128 : -32768, hi = dt == ETCH_DTYPE_CHAR ? 127 : 32767;
    size_t es = etch_dtype_size(dt);
    int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int32_t u, v;
        if (dt == ETCH_DTYPE_CHAR) {
            u = ((const int8_t *)a->data)[etch_cm_offset(a, i)];
            v = ((const int8_t *)b->data)[etch_cm_offset(b, i)];
        } else {
            int16_t p, q;
            memcpy(&p, (const char *)a->data + etch_cm_offset(a, i) * (int64_t)es, 2);
            memcpy(&q, (const char *)b->data + etch_cm_offset(b, i) * (int64_t)es, 2);
            u = p, v = q;
        }
        int32_t num = u - za, den = v - zb;
        float q = den != 0 ? (float)num / (float)den : 0.0f;
        int32_t r = etch_cm_clamp(etch_cm_wadd(round_away(q * scale), zo), lo, hi);
        if (dt == ETCH_DTYPE_CHAR) {
            ((int8_t *)out->data)[etch_cm_offset(out, i)] = (int8_t)r;
        } else {
            int16_t w = (int16_t)r;
            memcpy((char *)out->data + etch_cm_offset(out, i) * (int64_t)es, &w, 2);
        }
    }
}
