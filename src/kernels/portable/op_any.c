/*
 * aten::any.all_out(Tensor self, *, Tensor(a!) out)
 * aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)
 * aten::any.dims_out(Tensor self, int[1]? dim=None, bool keepdim=False, *, Tensor(a!) out)
 *
 * Every real dtype in; out is Bool or Byte (holding 0/1). An element counts when it is not
 * zero (NaN counts); with a Byte out the elements are first converted to Byte, as torch does
 * (so 0.5 does not count, 256 wraps to 0). An empty reduction gives false. dims None or []
 * reduce every dim. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

typedef struct any_acc {
    int dtype;
    bool byte, any;
} any_acc;

static void any_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    any_acc *a = (any_acc *)arg;
    if (a->any)
        return;
    for (int64_t off = 0; off < n && !a->any; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        const char *q = p + off * s;
        if (etch_pk_is_float(a->dtype) && !a->byte) {
            double v[ETCH_NN_CHUNK];
            etch_pk_load_row_f64(v, q, s, m, a->dtype);
            for (int64_t k = 0; k < m; k++)
                a->any |= v[k] != 0;
        } else {
            int64_t v[ETCH_NN_CHUNK];
            etch_pk_load_row_i64(v, q, s, m, a->dtype);
            for (int64_t k = 0; k < m; k++)
                a->any |= (a->byte ? (v[k] & 0xff) : v[k]) != 0;
        }
    }
}

static void any_common(etch_kernel_context *ctx, etch_tensor *in, uint32_t mask, bool keepdim,
                       etch_tensor *out) {
    if (!etch_pk_check_real(ctx, in, "self"))
        return;
    if (out->dtype != ETCH_DTYPE_BOOL && out->dtype != ETCH_DTYPE_BYTE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "out must be Bool or Byte, got %s",
                         etch_dtype_name(out->dtype));
        return;
    }
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    int64_t ies = (int64_t)etch_dtype_size(in->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        char *base = etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * ies);
        any_acc a = {in->dtype, out->dtype == ETCH_DTYPE_BYTE, false};
        etch_nn_plan_runs(&pl, base, ies, NULL, 0, any_run, &a);
        uint8_t r = a.any ? 1 : 0;
        memcpy(etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, keepdim)), &r, 1);
    }
}

ETCH_PK_KERNEL(any_all_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[1], "out") : NULL;
    if (!out)
        return;
    any_common(ctx, in, in->dim == 0 ? 0u : (uint32_t)((1ull << in->dim) - 1u), false, out);
}

ETCH_PK_KERNEL(any_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    bool keepdim;
    int64_t d;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_int(ctx, args[1], "dim", &d) || !etch_pk_wrap_dim(ctx, d, in->dim, &d))
        return;
    any_common(ctx, in, in->dim == 0 ? 0u : 1u << d, keepdim, out);
}

ETCH_PK_KERNEL(any_dims_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    bool keepdim;
    uint32_t mask;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_nn_dim_mask(ctx, args[1], in, &mask))
        return;
    any_common(ctx, in, mask, keepdim, out);
}
