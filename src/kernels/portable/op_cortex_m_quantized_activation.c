/*
 * cortex_m::quantized_activation.out(Tensor input, Tensor lut, *, Tensor(a!) out)
 *     -> Tensor(a!)
 *
 * A table activation (sigmoid, tanh, ... precomputed ahead of time from the quantization
 * parameters): out = lut[input + 128], Char input, a Char lut of 256 entries.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_quantized_activation_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *lut = in ? etch_pk_tensor(ctx, args[1], "lut") : NULL;
    etch_tensor *out = lut ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_cm_check_int8(ctx, in, "input") || !etch_cm_check_int8(ctx, lut, "lut") ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_cm_load_stop(ctx, lut, NULL, NULL, NULL)) /* at load: a constant lut only */
        return;
    if (etch_tensor_numel(lut) != 256) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "lut has %lld entries, expected 256",
                         (long long)etch_tensor_numel(lut));
        return;
    }
    if (etch_kernel_checking(ctx))
        return;
    if (!etch_cm_resize(ctx, out, in->dim, in->sizes))
        return;
    const int8_t *x = in->data, *t = lut->data;
    int8_t *y = out->data;
    int64_t n = etch_tensor_numel(in);
    for (int64_t i = 0; i < n; i++)
        y[etch_cm_offset(out, i)] = t[etch_cm_offset(lut, x[etch_cm_offset(in, i)] + 128)];
}
