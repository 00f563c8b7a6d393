/*
 * aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)
 * aten::amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)
 *
 * Every real dtype; out has self's dtype. dim [] reduces every dim; each reduced dim must be
 * non-empty. NaN propagates (the result is the first NaN). The result is a copy of the chosen
 * element. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

static void amax_amin(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool is_max) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    bool keepdim;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_check_real(ctx, in, "self") ||
        !etch_pk_check_same_dtype(ctx, in, "self", out, "out"))
        return;
    if (args[1]->tag != ETCH_VALUE_INT_LIST) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "dim must be an Int list, got %s",
                         etch_value_tag_name(args[1]->tag));
        return;
    }
    uint32_t mask;
    if (!etch_nn_dim_mask(ctx, args[1], in, &mask) ||
        !etch_nn_check_nonempty_dims(ctx, in, mask, is_max ? "amax" : "amin"))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    size_t es = etch_dtype_size(in->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        const char *base = (const char *)etch_nn_at(
            in->data, etch_nn_plan_offset(&pl, idx, in, true) * (int64_t)es);
        const char *elem;
        etch_nn_extreme(&pl, base, in->dtype, is_max, &elem);
        memcpy(etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, keepdim) * (int64_t)es),
               elem, es);
    }
}

ETCH_PK_KERNEL(amax_out) { amax_amin(ctx, args, nargs, true); }

ETCH_PK_KERNEL(amin_out) { amax_amin(ctx, args, nargs, false); }
