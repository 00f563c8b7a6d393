/*
 * cortex_m::softmax.out(Tensor input, int dim, int input_zero_point, int output_zero_point,
 *     int input_multiplier, int input_shift, int diff_min, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_softmax_s8 along the last dim (the only one ExecuTorch's kernel takes):
 * gemmlowp-style fixed point. Per row, with d = x - max(row) and the input scaled as
 * s = sat_dhm(d * 2^input_shift, input_multiplier) (Q5.26):
 *   sum = sum over d >= diff_min of rdiv(exp(s), 12)                  (exp in Q0.31)
 *   h = count of leading zero bits of sum; r = 1 / (1 + x) of x = sum * 2^h - 2^31 (Q0.31)
 *   out = clamp(rdiv(sat_dhm(r, exp(s)), 35 - h) - 128, -128, 127), or -128 when d < diff_min
 * The output quantization is fixed (scale 1/256, zero point -128); the input zero point
 * cancels in d. Rows are limited to 511 elements: beyond that the final shift passes 31 bits,
 * where CMSIS-NN's C is undefined.
 */
#include "kernels/portable/portable_cortex_m.h"

#define CM_Q31_MIN (-2147483647 - 1)
#define CM_Q31_MAX 2147483647

static int32_t sel(bool c, int32_t a, int32_t b) { return c ? a : b; }

/* arm_nn_mult_by_power_of_two: val * 2^e, saturated */
static int32_t mul_pow2(int32_t val, int32_t e) {
    int32_t thresh = (int32_t)(((int64_t)1 << (31 - e)) - 1);
    if (val > thresh)
        return CM_Q31_MAX;
    if (val < -thresh)
        return CM_Q31_MIN;
    return etch_cm_wmul(val, (int32_t)1 << e);
}

/* arm_nn_exp_on_negative_values: exp(val / 2^26) for val <= 0, Q0.31 */
static int32_t exp_on_negative(int32_t val) {
    const int32_t shift = 24;
    int32_t mod = (int32_t)(((uint32_t)val & ((1u << shift) - 1)) - (1u << shift));
    int32_t remainder = mod - val;
    int32_t x = mod * 32 + (1 << 28);
    int32_t x2 = etch_cm_sat_dhm(x, x);
    int32_t inner = etch_cm_rdiv_pot(etch_cm_sat_dhm(etch_cm_rdiv_pot(etch_cm_sat_dhm(x2, x2), 2) +
                                                         etch_cm_sat_dhm(x2, x),
                                                     715827883) +
                                         x2,
                                     1);
    int32_t result = 1895147668 + etch_cm_sat_dhm(1895147668, x + inner);
    static const int32_t k[7] = {1672461947, 1302514674, 790015084, 290630308,
                                 39332535,   720401,     242};
    for (int i = 0; i < 7; i++)
        result = sel((remainder & (1 << (shift + i))) != 0, etch_cm_sat_dhm(result, k[i]), result);
    return sel(val == 0, CM_Q31_MAX, result);
}

/* arm_nn_one_over_one_plus_x_for_x_in_0_1: Newton-Raphson, Q0.31 in and out */
static int32_t one_over_one_plus_x(int32_t val) {
    int64_t sum = (int64_t)val + CM_Q31_MAX;
    int32_t half_den = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = 1515870810 + etch_cm_sat_dhm(half_den, -1010580540);
    const int32_t one = 1 << 29;
    for (int i = 0; i < 3; i++)
        x += mul_pow2(etch_cm_sat_dhm(x, one - etch_cm_sat_dhm(half_den, x)), 2);
    return mul_pow2(x, 1);
}

static int32_t clz32(uint32_t v) {
    int32_t n = 0;
    if (!v)
        return 32;
    while (!(v & 0x80000000u)) {
        v <<= 1;
        n++;
    }
    return n;
}

ETCH_PK_KERNEL(cm_softmax_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[7], "out") : NULL;
    int64_t dim, m;
    int32_t izp, ozp, shift, diff_min;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim) ||
        !etch_cm_int_arg(ctx, args[2], "input_zero_point", -128, 127, &izp) ||
        !etch_cm_int_arg(ctx, args[3], "output_zero_point", -128, -128, &ozp) ||
        !etch_pk_int(ctx, args[4], "input_multiplier", &m) ||
        !etch_cm_int_arg(ctx, args[5], "input_shift", 0, 30, &shift) ||
        !etch_cm_check_mult_shift(ctx, m, shift, "input_multiplier", "input_shift", -1) ||
        !etch_cm_int_arg(ctx, args[6], "diff_min", INT32_MIN, 0, &diff_min))
        return;
    if (!etch_cm_check_int8(ctx, in, "input") || !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    int64_t d;
    if (in->dim < 1 || !etch_pk_wrap_dim(ctx, dim, in->dim, &d))
        return;
    if (d != (int64_t)in->dim - 1) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "dim %lld: only the last dim (%d) is supported", (long long)dim,
                         (int)in->dim - 1);
        return;
    }
    int64_t row = in->sizes[d];
    if (row < 1 || row > 511) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "rows of %lld elements: CMSIS-NN's s8 softmax is defined for 1 to 511",
                         (long long)row);
        return;
    }
    if (!etch_cm_resize(ctx, out, in->dim, in->sizes))
        return;
    const int8_t *x = in->data;
    int8_t *y = out->data;
    int64_t rows = etch_tensor_numel(in) / row;
    for (int64_t r = 0; r < rows; r++) {
        int32_t mx = -128;
        for (int64_t c = 0; c < row; c++) {
            int32_t v = x[etch_cm_offset(in, r * row + c)];
            mx = v > mx ? v : mx;
        }
        int32_t sum = 0;
        for (int64_t c = 0; c < row; c++) {
            int32_t df = x[etch_cm_offset(in, r * row + c)] - mx;
            if (df >= diff_min)
                sum += etch_cm_rdiv_pot(
                    exp_on_negative(etch_cm_sat_dhm(etch_cm_wmul(df, 1 << shift), (int32_t)m)),
                    12);
        }
        int32_t head = clz32((uint32_t)sum);
        uint32_t norm = sum > 0 ? (uint32_t)sum << head : 0;
        int32_t scale = one_over_one_plus_x(norm ? (int32_t)(norm - 2147483648u) : CM_Q31_MIN);
        int32_t bits = 12 - head + 23;
        for (int64_t c = 0; c < row; c++) {
            int32_t df = x[etch_cm_offset(in, r * row + c)] - mx, res = -128;
            if (df >= diff_min) {
                int32_t e = exp_on_negative(etch_cm_sat_dhm(etch_cm_wmul(df, 1 << shift), (int32_t)m));
                res = etch_cm_clamp(etch_cm_rdiv_pot(etch_cm_sat_dhm(scale, e), bits) - 128, -128, 127);
            }
            y[etch_cm_offset(out, r * row + c)] = (int8_t)res;
        }
    }
}
