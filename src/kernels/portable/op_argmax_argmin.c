/*
 * aten::argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)
 * aten::argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)
 *
 * Every real dtype but Bool; out is Long. The first extreme index wins ties, and the first
 * NaN wins over everything. dim None searches the flattened tensor (which must not be empty);
 * its result is 0-dim, or all ones of self's rank with keepdim. A given dim must be
 * non-empty. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

static void arg_extreme(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool is_max) {
    const char *name = is_max ? "argmax" : "argmin";
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    bool keepdim;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_check_real(ctx, in, "self") ||
        !etch_nn_check_dtype(ctx, out, "out", ETCH_DTYPE_LONG))
        return;
    if (in->dtype == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s does not support Bool", name);
        return;
    }
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    uint32_t mask;
    bool full_rank = keepdim;
    if (args[1]->tag == ETCH_VALUE_NONE) {
        if (etch_tensor_numel(in) == 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s: expected a dim for an input with no elements", name);
            return;
        }
        mask = in->dim == 0 ? 0u : (uint32_t)((1ull << in->dim) - 1u);
        etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    } else {
        int64_t d;
        if (!etch_pk_int(ctx, args[1], "dim", &d) || !etch_pk_wrap_dim(ctx, d, in->dim, &d))
            return;
        mask = in->dim == 0 ? 0u : 1u << d;
        if (!etch_nn_check_nonempty_dims(ctx, in, mask, name))
            return;
        etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    }
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    int64_t es = (int64_t)etch_dtype_size(in->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        const char *base =
            (const char *)etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * es);
        const char *elem;
        int64_t best = etch_nn_extreme(&pl, base, in->dtype, is_max, &elem);
        memcpy(etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, full_rank) * 8), &best, 8);
    }
}

ETCH_PK_KERNEL(argmax_out) { arg_extreme(ctx, args, nargs, true); }

ETCH_PK_KERNEL(argmin_out) { arg_extreme(ctx, args, nargs, false); }
