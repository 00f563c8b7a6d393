/* aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out): self's elements in
 * row-major order, reshaped to `size` (one -1 is inferred). Any dtype (converting when out's
 * differs), any dim orders. */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(view_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    size_t len;
    const int64_t *size = out ? etch_pk_int_list(ctx, args[1], "size", &len) : NULL;
    if (!size || !etch_pk_check_copy_dtypes(ctx, in, out))
        return;
    if (len > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "size has %zu entries, more than %d", len,
                         ETCH_MAX_DIMS);
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    if (!etch_pk_view_shape(ctx, size, len, etch_tensor_numel(in), sizes))
        return;
    if (etch_pk_resize(ctx, out, len, sizes) != ETCH_OK)
        return;
    etch_pk_copy_logical(out, in);
}
