/* aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
 *                       Tensor(a!) out)
 *
 * dim None or [] reduces everything. The sum is computed in out's dtype, as torch's out=
 * variant does (a given dtype must equal it): floating accumulates in double, integral in
 * int64 with wrap-around. Any dim order. */
#include "kernels/portable/portable.h"

ETCH_PK_KERNEL(sum_intlist_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    bool keepdim;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    if (args[3]->tag != ETCH_VALUE_NONE) {
        int64_t dt;
        if (!etch_pk_int(ctx, args[3], "dtype", &dt))
            return;
        if (dt != out->dtype) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                             "dtype argument (%lld) differs from out's dtype %s", (long long)dt,
                             etch_dtype_name(out->dtype));
            return;
        }
    }
    uint32_t reduce = 0;
    if (args[1]->tag != ETCH_VALUE_NONE) {
        size_t len;
        const int64_t *dims = etch_pk_int_list(ctx, args[1], "dim", &len);
        if (!dims)
            return;
        for (size_t i = 0; i < len; i++) {
            int64_t d;
            if (!etch_pk_wrap_dim(ctx, dims[i], in->dim, &d))
                return;
            if (reduce & (1u << d)) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "dim %lld appears more than once in the list of dims",
                                 (long long)d);
                return;
            }
            reduce |= 1u << d;
        }
        if (len == 0)
            reduce = 0xffffu;
    } else {
        reduce = 0xffffu;
    }
    if (in->dim == 0)
        reduce = 0;
    else
        reduce &= (1u << in->dim) - 1u;

    /* output shape and, per input dim, the out stride it maps to (0 when reduced) */
    int64_t osz[ETCH_MAX_DIMS];
    size_t od = 0;
    int outdim_of[ETCH_MAX_DIMS];
    for (unsigned i = 0; i < in->dim; i++) {
        bool r = reduce & (1u << i);
        outdim_of[i] = -1;
        if (!r || keepdim) {
            if (!r)
                outdim_of[i] = (int)od;
            osz[od++] = r ? 1 : in->sizes[i];
        }
    }
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    int64_t out_n = etch_tensor_numel(out);
    if (out_n == 0)
        return;

    int kept[ETCH_MAX_DIMS], red[ETCH_MAX_DIMS], nk = 0, nr = 0;
    for (unsigned i = 0; i < in->dim; i++) {
        if (reduce & (1u << i))
            red[nr++] = (int)i;
        else
            kept[nk++] = (int)i;
    }
    int64_t ies = (int64_t)etch_dtype_size(in->dtype), oes = (int64_t)etch_dtype_size(out->dtype);
    bool fdom = etch_pk_is_float(out->dtype);
    bool empty_reduce = etch_tensor_numel(in) == 0;
    int64_t kidx[ETCH_MAX_DIMS] = {0};
    int64_t in_off = 0, out_off = 0;
    for (int64_t e = 0; e < out_n; e++) {
        double accd = 0;
        int64_t acci = 0;
        if (!empty_reduce) {
            int64_t ridx[ETCH_MAX_DIMS] = {0};
            int64_t roff = 0;
            for (;;) {
                const char *p = (const char *)in->data + (in_off + roff) * ies;
                if (fdom)
                    accd += etch_pk_load_f64(p, in->dtype);
                else
                    acci = etch_pk_wrap_add(acci, etch_pk_load_i64(p, in->dtype));
                int k = nr - 1;
                for (; k >= 0; k--) {
                    int d = red[k];
                    ridx[k]++;
                    roff += in->strides[d];
                    if (ridx[k] < in->sizes[d])
                        break;
                    roff -= in->strides[d] * in->sizes[d];
                    ridx[k] = 0;
                }
                if (k < 0)
                    break;
            }
        }
        char *o = (char *)out->data + out_off * oes;
        if (fdom)
            etch_pk_store_f64(o, out->dtype, accd);
        else
            etch_pk_store_i64(o, out->dtype, acci);
        /* next kept index */
        for (int k = nk - 1; k >= 0; k--) {
            int d = kept[k];
            int64_t ostr = out->strides[outdim_of[d]];
            kidx[k]++;
            in_off += in->strides[d];
            out_off += ostr;
            if (kidx[k] < in->sizes[d])
                break;
            in_off -= in->strides[d] * in->sizes[d];
            out_off -= ostr * in->sizes[d];
            kidx[k] = 0;
        }
    }
}
