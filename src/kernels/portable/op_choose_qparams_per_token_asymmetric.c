/*
 * quantized_decomposed::choose_qparams_per_token_asymmetric.out(Tensor input,
 *     ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out)
 *     -> (Tensor(a!), Tensor(b!))
 *
 * One asymmetric (scale, zero point) per token (a row of the last dim), chosen as ExecuTorch
 * does: etch_q_choose over the row's min and max with the range fixed at [-128, 127]
 * whatever `dtype` says (which must still be a quantized dtype). input: Float, Double, Half
 * or BFloat16 (converted to float), rank >= 1, no infinities; scale_out (Double or Float)
 * and zero_point_out (Long or Int) are resized to input.shape[:-1] + [1]. Any dim order.
 */
#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(choose_qparams_per_token_asymmetric_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *s = in ? etch_pk_tensor(ctx, args[2], "scale_out") : NULL;
    etch_tensor *z = s ? etch_pk_tensor(ctx, args[3], "zero_point_out") : NULL;
    int dtype;
    int64_t lo, hi;
    if (!z || !etch_q_dtype_arg(ctx, args[1], "dtype", &dtype) ||
        !etch_q_check_float_in(ctx, in, "input") || !etch_q_check_qparam_outs(ctx, s, z))
        return;
    if (!etch_q_dtype_range(dtype, &lo, &hi)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "dtype %s is not a quantized dtype",
                         etch_dtype_name(dtype));
        return;
    }
    if (in->dim == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input must have at least one dim");
        return;
    }
    int64_t tokens, last;
    etch_q_tokens(in, &tokens, &last);
    if (last == 0 && tokens > 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input's tokens are empty (last dim 0)");
        return;
    }
    float mn, mx;
    if (!etch_q_minmax(ctx, in, 0, tokens * last, &mn, &mx)) /* every check before a write */
        return;
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned d = 0; d < in->dim; d++)
        sizes[d] = in->sizes[d];
    sizes[in->dim - 1] = 1;
    if (etch_pk_resize(ctx, s, in->dim, sizes) != ETCH_OK ||
        etch_pk_resize(ctx, z, in->dim, sizes) != ETCH_OK)
        return;
    for (int64_t t = 0; t < tokens; t++) {
        /* fails only when the outs share bytes with input and wrote an infinity into it */
        if (!etch_q_minmax(ctx, in, t * last, (t + 1) * last, &mn, &mx))
            return;
        double scale;
        int64_t zp;
        etch_q_choose(mn, mx, -128, 127, &scale, &zp);
        etch_pk_store_f64((char *)s->data + etch_q_offset(s, t), s->dtype, scale);
        etch_pk_store_i64((char *)z->data + etch_q_offset(z, t), z->dtype, zp);
    }
}
