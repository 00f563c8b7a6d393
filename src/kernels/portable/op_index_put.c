/* aten::index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *,
 *                     Tensor(a!) out)
 * aten::index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False)
 *
 * The positions index.Tensor would read (see op_index.c) receive values, which must have
 * self's dtype and broadcast to the indexing result's shape; in row-major order of that
 * result, so with repeated positions the last write wins, or with accumulate every value is
 * added (in self's dtype: Half/BFloat16 through Float, integers wrap, Bool ors). The out
 * variant writes self's data converted to out's dtype first (accumulating into an out of
 * another dtype is not supported). index_put_ writes self; its return slot is self. */
#include "kernels/portable/portable_shape.h"

typedef struct put_arg {
    char *dst;       /* self's data, or out's (the offsets come from the indexing over it) */
    int dst_dtype;
    const etch_tensor *values;
    int64_t vstrides[ETCH_MAX_DIMS]; /* per result dim (0 = broadcast) */
    size_t rdim;
    bool accumulate;
} put_arg;

static void put_one(void *arg, const int64_t *ridx, int64_t self_off) {
    put_arg *p = (put_arg *)arg;
    int64_t voff = 0;
    for (size_t k = 0; k < p->rdim; k++)
        voff += ridx[k] * p->vstrides[k];
    int vdt = p->values->dtype;
    int64_t des = (int64_t)etch_dtype_size(p->dst_dtype);
    const char *v = (const char *)p->values->data + voff * (int64_t)etch_dtype_size(vdt);
    char *o = p->dst + self_off * des;
    if (!p->accumulate) {
        if (vdt == p->dst_dtype)
            memcpy(o, v, (size_t)des);
        else if (etch_pk_is_float(vdt))
            etch_pk_store_f64(o, p->dst_dtype, etch_pk_load_f64(v, vdt));
        else
            etch_pk_store_i64(o, p->dst_dtype, etch_pk_load_i64(v, vdt));
    } else if (etch_pk_is_float(vdt)) {
        etch_pk_store_f64(o, vdt, etch_pk_load_f64(o, vdt) + etch_pk_load_f64(v, vdt));
    } else {
        etch_pk_store_i64(o, vdt,
                          etch_pk_wrap_add(etch_pk_load_i64(o, vdt), etch_pk_load_i64(v, vdt)));
    }
}

/* Checks values and accumulate, computes the indexing; fills p (dst left to the caller). */
static bool put_prepare(etch_kernel_context *ctx, etch_value **args, etch_tensor *self,
                        etch_adv_index *ai, put_arg *p) {
    bool acc;
    etch_tensor *values = etch_pk_tensor(ctx, args[2], "values");
    if (!values || !etch_pk_bool(ctx, args[3], "accumulate", &acc) ||
        !etch_shape_check_same(ctx, self, "self", values, "values"))
        return false;
    if (acc && !etch_pk_dtype_is_real(self->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "accumulate does not support dtype %s",
                         etch_dtype_name(self->dtype));
        return false;
    }
    if (!etch_adv_index_init(ctx, ai, self, args[1]))
        return false;
    bool ok = values->dim <= ai->rdim;
    for (size_t k = 0; ok && k < values->dim; k++) {
        int64_t vs = values->sizes[values->dim - 1 - k], rs = ai->rsizes[ai->rdim - 1 - k];
        ok = vs == rs || vs == 1;
    }
    if (!ok) {
        char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "values of shape %s cannot be broadcast to the indexing result's "
                         "shape %s",
                         etch_pk_shape_str(b1, sizeof b1, values->dim, values->sizes),
                         etch_pk_shape_str(b2, sizeof b2, ai->rdim, ai->rsizes));
        return false;
    }
    memset(p, 0, sizeof *p);
    p->values = values;
    p->rdim = ai->rdim;
    p->accumulate = acc;
    size_t lead = ai->rdim - values->dim;
    for (size_t k = 0; k < values->dim; k++)
        p->vstrides[lead + k] = values->sizes[k] == 1 ? 0 : values->strides[k];
    return true;
}

ETCH_PK_KERNEL(index_put_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    etch_adv_index ai;
    put_arg p;
    if (!out || !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out") ||
        !put_prepare(ctx, args, self, &ai, &p))
        return;
    if (p.accumulate && out->dtype != self->dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "accumulate into an out of dtype %s (self has %s) is not supported",
                         etch_dtype_name(out->dtype), etch_dtype_name(self->dtype));
        return;
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    etch_pk_copy_same_shape(out, self);
    /* the indexing computed self offsets; out may have another dim order: re-index on out */
    ai.self = out;
    p.dst = (char *)out->data;
    p.dst_dtype = out->dtype;
    etch_adv_index_visit(&ai, put_one, &p);
}

ETCH_PK_KERNEL(index_put_) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_adv_index ai;
    put_arg p;
    if (!self || !put_prepare(ctx, args, self, &ai, &p))
        return;
    p.dst = (char *)self->data;
    p.dst_dtype = self->dtype;
    etch_adv_index_visit(&ai, put_one, &p);
    /* the return slot is self; should it be another tensor, it receives self's data too */
    if (nargs > 4 && args[4] && args[4]->tag == ETCH_VALUE_TENSOR && args[4]->u.tensor &&
        args[4]->u.tensor != self) {
        etch_tensor *ret = etch_pk_tensor(ctx, args[4], "return slot");
        if (ret && etch_shape_check_convert(ctx, self->dtype, ret->dtype, "return slot") &&
            etch_pk_resize(ctx, ret, self->dim, self->sizes) == ETCH_OK)
            etch_pk_copy_same_shape(ret, self);
    }
}
