/* aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)
 * aten::stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)
 *
 * The inputs promote to a common dtype (torch.result_type), which out's dtype must be able to
 * hold (torch's can_cast); values convert to out's dtype. cat skips 1-D empty inputs (legacy
 * torch behaviour: a [0] tensor joins anything). Any dim orders. */
#include <stdio.h>

#include "kernels/portable/portable_shape.h"

static etch_tensor *item(etch_kernel_context *ctx, etch_value *list, size_t i) {
    char nm[40];
    snprintf(nm, sizeof nm, "tensors[%zu]", i);
    return etch_pk_tensor(ctx, list->u.list.items[i], nm);
}

/* Checks the list and the dtypes; returns the list length (0 on failure). */
static size_t join_check(etch_kernel_context *ctx, etch_value *list, const etch_tensor *out,
                         const char *op) {
    if (list->tag != ETCH_VALUE_TENSOR_LIST || (list->u.list.len && !list->u.list.items)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "tensors must be a Tensor list, got %s",
                         etch_value_tag_name(list->tag));
        return 0;
    }
    size_t n = list->u.list.len;
    if (n == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s expects a non-empty list of tensors",
                         op);
        return 0;
    }
    int common = -1;
    bool all_real = true, all_same = true;
    for (size_t i = 0; i < n; i++) {
        etch_tensor *t = item(ctx, list, i);
        if (!t)
            return 0;
        all_real = all_real && etch_pk_dtype_is_real(t->dtype);
        all_same = all_same && (common < 0 || common == t->dtype);
        if (common < 0)
            common = t->dtype;
    }
    if (!all_real && !all_same) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "tensors of different dtypes can only be joined when all are real");
        return 0;
    }
    for (size_t i = 1; all_real && i < n; i++)
        common = etch_pk_promote(common, list->u.list.items[i]->u.tensor->dtype);
    if (all_real ? !etch_pk_dtype_is_real(out->dtype) || !etch_pk_can_cast(common, out->dtype)
                 : out->dtype != common) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "the inputs' common dtype %s cannot be cast to out's dtype %s",
                         etch_dtype_name(common), etch_dtype_name(out->dtype));
        return 0;
    }
    return n;
}

static bool skipped(const etch_tensor *t) { return t->dim == 1 && t->sizes[0] == 0; }

ETCH_PK_KERNEL(cat_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t dim;
    etch_tensor *out = etch_pk_tensor(ctx, args[2], "out");
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim))
        return;
    size_t n = join_check(ctx, args[0], out, "cat");
    if (n == 0)
        return;
    etch_value *list = args[0];
    const etch_tensor *ref = NULL;
    size_t ref_i = 0;
    for (size_t i = 0; i < n && !ref; i++) {
        const etch_tensor *t = list->u.list.items[i]->u.tensor;
        if (!skipped(t)) {
            ref = t;
            ref_i = i;
        }
    }
    int64_t sizes[ETCH_MAX_DIMS];
    size_t rank = 1;
    int64_t d = 0;
    if (!ref) {
        sizes[0] = 0; /* only [0] tensors: the result is [0] */
    } else {
        if (ref->dim == 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "zero-dim tensors[%zu] cannot be concatenated", ref_i);
            return;
        }
        if (!etch_shape_dim(ctx, dim, ref->dim, "dim", &d))
            return;
        rank = ref->dim;
        for (size_t k = 0; k < rank; k++)
            sizes[k] = ref->sizes[k];
        sizes[d] = 0;
        char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
        for (size_t i = 0; i < n; i++) {
            const etch_tensor *t = list->u.list.items[i]->u.tensor;
            if (skipped(t))
                continue;
            if (t->dim != rank) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "tensors must have the same rank: tensors[%zu] has rank %u, "
                                 "tensors[%zu] rank %zu",
                                 i, (unsigned)t->dim, ref_i, rank);
                return;
            }
            for (size_t k = 0; k < rank; k++) {
                if ((int64_t)k != d && t->sizes[k] != ref->sizes[k]) {
                    etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                     "sizes must match except in dim %lld: tensors[%zu] is %s, "
                                     "tensors[%zu] is %s",
                                     (long long)d, i,
                                     etch_pk_shape_str(b1, sizeof b1, t->dim, t->sizes), ref_i,
                                     etch_pk_shape_str(b2, sizeof b2, ref->dim, ref->sizes));
                    return;
                }
            }
            if (sizes[d] > INT64_MAX - t->sizes[d]) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "result size overflows");
                return;
            }
            sizes[d] += t->sizes[d];
        }
    }
    if (etch_pk_resize(ctx, out, rank, sizes) != ETCH_OK || !ref)
        return;
    int64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const etch_tensor *t = list->u.list.items[i]->u.tensor;
        if (skipped(t))
            continue;
        etch_sv dst;
        etch_sv_of(&dst, out);
        etch_sv_slice(&dst, (int)d, at, t->sizes[d], 1);
        etch_sv_copy_from_tensor(&dst, t, -1);
        at += t->sizes[d];
    }
}

ETCH_PK_KERNEL(stack_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    int64_t dim;
    etch_tensor *out = etch_pk_tensor(ctx, args[2], "out");
    if (!out || !etch_pk_int(ctx, args[1], "dim", &dim))
        return;
    size_t n = join_check(ctx, args[0], out, "stack");
    if (n == 0)
        return;
    etch_value *list = args[0];
    const etch_tensor *ref = list->u.list.items[0]->u.tensor;
    if (ref->dim >= ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "the result would have more than %d dims",
                         ETCH_MAX_DIMS);
        return;
    }
    int64_t d;
    if (!etch_shape_dim(ctx, dim, (int64_t)ref->dim + 1, "dim", &d))
        return;
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
    for (size_t i = 1; i < n; i++) {
        const etch_tensor *t = list->u.list.items[i]->u.tensor;
        bool same = t->dim == ref->dim;
        for (unsigned k = 0; same && k < t->dim; k++)
            same = t->sizes[k] == ref->sizes[k];
        if (!same) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "stack expects tensors of equal shape, got %s at 0 and %s at %zu",
                             etch_pk_shape_str(b1, sizeof b1, ref->dim, ref->sizes),
                             etch_pk_shape_str(b2, sizeof b2, t->dim, t->sizes), i);
            return;
        }
    }
    int64_t sizes[ETCH_MAX_DIMS];
    size_t rank = ref->dim + 1u;
    for (size_t k = 0, j = 0; k < rank; k++)
        sizes[k] = (int64_t)k == d ? (int64_t)n : ref->sizes[j++];
    if (etch_pk_resize(ctx, out, rank, sizes) != ETCH_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        etch_sv dst;
        etch_sv_of(&dst, out);
        etch_sv_select(&dst, (int)d, (int64_t)i);
        etch_sv_copy_from_tensor(&dst, list->u.list.items[i]->u.tensor, -1);
    }
}
