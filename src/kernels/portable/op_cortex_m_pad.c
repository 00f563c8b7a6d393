/*
 * cortex_m::pad.out(Tensor input, int[] pre_pad, int[] post_pad, int pad_value, *,
 *     Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_pad_s8: pre_pad / post_pad have 4 entries for the dims of the input as they
 * lie in memory (its dim order: N, H, W, C for a channels-last tensor), right-aligned for
 * ranks below 4 (the leading entries of a lower rank must be 0). Rank 1..4, Char; every
 * element the input does not cover is pad_value.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_pad_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    if (!out)
        return;
    const int64_t *pre = etch_cm_list_arg(ctx, args[1], "pre_pad", 4, 0, INT32_MAX);
    const int64_t *post = pre ? etch_cm_list_arg(ctx, args[2], "post_pad", 4, 0, INT32_MAX) : NULL;
    int32_t value;
    if (!post || !etch_cm_int_arg(ctx, args[3], "pad_value", -128, 127, &value))
        return;
    if (!etch_cm_check_int8(ctx, in, "input") || !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    size_t r = in->dim;
    if (r < 1 || r > 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input has rank %zu, expected 1 to 4", r);
        return;
    }
    size_t off = 4 - r;
    for (size_t i = 0; i < off; i++)
        if (pre[i] != 0 || post[i] != 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "pre_pad[%zu] / post_pad[%zu] pad a dim a rank-%zu input lacks", i,
                             i, r);
            return;
        }
    int64_t lpre[4] = {0}, osz[4];
    for (size_t j = 0; j < r; j++) { /* memory position j holds logical dim dim_order[j] */
        size_t d = in->dim_order[j];
        lpre[d] = pre[off + j];
        osz[d] = in->sizes[d] + pre[off + j] + post[off + j];
    }
    if (!etch_cm_resize(ctx, out, r, osz))
        return;
    int8_t *y = (int8_t *)out->data;
    const int8_t *x = (const int8_t *)in->data;
    int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, src = 0;
        bool inside = true;
        for (size_t d = r; d-- > 0;) {
            int64_t c = rem % osz[d] - lpre[d];
            rem /= osz[d];
            if (c < 0 || c >= in->sizes[d])
                inside = false;
            else
                src += c * in->strides[d];
        }
        y[etch_cm_offset(out, i)] = inside ? x[src] : (int8_t)value;
    }
}
