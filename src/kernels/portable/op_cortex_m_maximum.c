/*
 * cortex_m::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)
 *
 * CMSIS-NN's arm_maximum_s8: the larger of each pair of Char elements, shapes broadcast.
 */
#include "kernels/portable/portable_cortex_m.h"

ETCH_PK_KERNEL(cm_maximum_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "other") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_cm_check_int8(ctx, a, "self") || !etch_cm_check_int8(ctx, b, "other") ||
        !etch_cm_check_int8(ctx, out, "out"))
        return;
    if (etch_kernel_checking(ctx) || !etch_cm_broadcast(ctx, a, b, out))
        return;
    const int8_t *x = a->data, *y = b->data;
    int8_t *z = out->data;
    int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int8_t u = x[etch_cm_bcast_offset(out, a, i)], v = y[etch_cm_bcast_offset(out, b, i)];
        z[etch_cm_offset(out, i)] = u > v ? u : v;
    }
}
