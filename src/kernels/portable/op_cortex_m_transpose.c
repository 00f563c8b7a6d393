/*
 * cortex_m::transpose.out(Tensor input, int[] perm, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_transpose_s8: out's dim i is input's dim perm[i] (input.permute(perm)),
 * Char tensors of rank 1..4.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_transpose_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_cm_check_int8(ctx, in, "input") || !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return;
    size_t r = in->dim;
    if (r < 1 || r > 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input has rank %zu, expected 1 to 4", r);
        return;
    }
    const int64_t *perm = etch_cm_list_arg(ctx, args[1], "perm", r, 0, (int64_t)r - 1);
    if (!perm)
        return;
    bool seen[4] = {false};
    int64_t osz[4];
    for (size_t i = 0; i < r; i++) {
        if (seen[perm[i]]) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "perm names dim %lld twice: not a permutation", (long long)perm[i]);
            return;
        }
        seen[perm[i]] = true;
        osz[i] = in->sizes[perm[i]];
    }
    if (!etch_cm_resize(ctx, out, r, osz))
        return;
    const int8_t *x = in->data;
    int8_t *y = out->data;
    int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, src = 0;
        for (size_t d = r; d-- > 0;) {
            src += (rem % osz[d]) * in->strides[perm[d]];
            rem /= osz[d];
        }
        y[etch_cm_offset(out, i)] = x[src];
    }
}
