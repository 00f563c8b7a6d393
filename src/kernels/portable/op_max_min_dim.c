/*
 * aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max,
 *                   Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)
 * aten::min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min,
 *                   Tensor(b!) min_indices) -> (Tensor(a!) values, Tensor(b!) indices)
 *
 * Every real dtype; values have self's dtype, indices are Long. The first extreme element wins
 * ties and the first NaN wins over everything; the value is a copy of that element. dim must be
 * non-empty. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

static void dim_extreme(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool is_max) {
    const char *name = is_max ? "max" : "min";
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *vals = in ? etch_pk_tensor(ctx, args[3], name) : NULL;
    etch_tensor *inds = vals ? etch_pk_tensor(ctx, args[4], "indices") : NULL;
    bool keepdim;
    int64_t d;
    if (!inds || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_check_real(ctx, in, "self") ||
        !etch_pk_check_same_dtype(ctx, in, "self", vals, name) ||
        !etch_nn_check_dtype(ctx, inds, "indices", ETCH_DTYPE_LONG) ||
        !etch_pk_int(ctx, args[1], "dim", &d) || !etch_pk_wrap_dim(ctx, d, in->dim, &d))
        return;
    uint32_t mask = in->dim == 0 ? 0u : 1u << d;
    if (!etch_nn_check_nonempty_dims(ctx, in, mask, name))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, vals, od, osz) != ETCH_OK ||
        etch_pk_resize(ctx, inds, od, osz) != ETCH_OK)
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
        memcpy(etch_nn_at(vals->data, etch_nn_plan_offset(&pl, idx, vals, keepdim) * es), elem,
               (size_t)es);
        memcpy(etch_nn_at(inds->data, etch_nn_plan_offset(&pl, idx, inds, keepdim) * 8), &best, 8);
    }
}

ETCH_PK_KERNEL(max_dim_max) { dim_extreme(ctx, args, nargs, true); }

ETCH_PK_KERNEL(min_dim_min) { dim_extreme(ctx, args, nargs, false); }
