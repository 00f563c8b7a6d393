/*
 * cortex_m::quantized_batch_matmul.out(Tensor lhs, int lhs_zero_point, Tensor rhs_transposed,
 *     int rhs_zero_point, int output_zero_point, int output_multiplier, int output_shift,
 *     Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_batch_matmul_s8: lhs [B, M, K], rhs_transposed [B, N, K], out [B, M, N], all
 * Char. The "zero points" are CMSIS-NN offsets (negated zero points) and are added:
 * acc = sum_k (lhs + lhs_zero_point) * (rhs + rhs_zero_point); out = clamp(requantize(acc,
 * output_multiplier, output_shift) + output_zero_point, -128, 127). `scratch` is not read.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_quantized_batch_matmul_out) {
    if (!etch_pk_nargs(ctx, nargs, 9))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "lhs");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[2], "rhs_transposed") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[8], "out") : NULL;
    int32_t za, zb, zo;
    int64_t m, s;
    if (!out || !etch_pk_tensor(ctx, args[7], "scratch") ||
        !etch_cm_int_arg(ctx, args[1], "lhs_zero_point", -127, 128, &za) ||
        !etch_cm_int_arg(ctx, args[3], "rhs_zero_point", -127, 128, &zb) ||
        !etch_cm_int_arg(ctx, args[4], "output_zero_point", -128, 127, &zo) ||
        !etch_pk_int(ctx, args[5], "output_multiplier", &m) ||
        !etch_pk_int(ctx, args[6], "output_shift", &s) ||
        !etch_cm_check_mult_shift(ctx, m, s, "output_multiplier", "output_shift", -1))
        return;
    if (!etch_cm_check_tensor(ctx, a, "lhs", ETCH_DTYPE_CHAR, 3) ||
        !etch_cm_check_tensor(ctx, b, "rhs_transposed", ETCH_DTYPE_CHAR, 3) ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    int64_t B = a->sizes[0], M = a->sizes[1], K = a->sizes[2], N = b->sizes[1];
    if (b->sizes[0] != B || b->sizes[2] != K) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "rhs_transposed [%lld, %lld, %lld] does not match lhs [%lld, %lld, %lld] "
                         "(expected [%lld, N, %lld])",
                         (long long)b->sizes[0], (long long)N, (long long)b->sizes[2],
                         (long long)B, (long long)M, (long long)K, (long long)B, (long long)K);
        return;
    }
    int64_t osz[3] = {B, M, N};
    if (!etch_cm_resize(ctx, out, 3, osz))
        return;
    const int8_t *x = a->data, *y = b->data;
    int8_t *z = out->data;
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                int32_t acc = 0;
                for (int64_t k = 0; k < K; k++) {
                    int32_t u = x[bi * a->strides[0] + i * a->strides[1] + k * a->strides[2]] + za;
                    int32_t v = y[bi * b->strides[0] + j * b->strides[1] + k * b->strides[2]] + zb;
                    acc = etch_cm_wadd(acc, u * v);
                }
                int32_t r = etch_cm_requantize(acc, (int32_t)m, (int32_t)s) + zo;
                z[bi * out->strides[0] + i * out->strides[1] + j * out->strides[2]] =
                    (int8_t)etch_cm_clamp(r, -128, 127);
            }
}
