/* aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out): out[i_0, ..] =
 * self[i at dims]; out.size(k) = self.size(dims[k]). Any dtype (converting like copy_ when out's
 * differs), any dim order. */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(permute_copy_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    size_t len;
    const int64_t *dims = out ? etch_pk_int_list(ctx, args[1], "dims", &len) : NULL;
    if (!dims || !etch_pk_check_copy_dtypes(ctx, in, out))
        return;
    if (len != in->dim) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "dims has %zu entries for a rank-%u tensor", len, (unsigned)in->dim);
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS], strides[ETCH_MAX_DIMS];
    uint32_t seen = 0;
    for (size_t k = 0; k < len; k++) {
        int64_t d;
        if (!etch_pk_wrap_dim(ctx, dims[k], in->dim, &d))
            return;
        if (seen & (1u << d)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "dim %lld is repeated in dims",
                             (long long)d);
            return;
        }
        seen |= 1u << d;
        sizes[k] = in->sizes[d];
        strides[k] = in->strides[d];
    }
    if (etch_pk_resize(ctx, out, len, sizes) != ETCH_OK)
        return;
    etch_pk_convert c = {in->dtype, out->dtype};
    etch_pk_iter it;
    etch_pk_iter_init(&it, len, sizes);
    etch_pk_iter_add(&it, out);
    etch_pk_iter_add_strided(&it, in->data, etch_dtype_size(in->dtype), strides);
    etch_pk_iter_run(&it, etch_pk_convert_inner, &c);
}
