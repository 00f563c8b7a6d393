/* aten::index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out)
 *
 * Advanced indexing with ATen's rules: entry k of indices (None, or a Long/Int index tensor, or
 * a Bool/Byte mask standing for as many dims as its rank) indexes self's next dim(s); the index
 * tensors broadcast together (a mask as the 1-D list of its set positions). When the indexed
 * dims are adjacent the broadcast dims replace them in place, otherwise they come first.
 * Negative indices count from the end; out-of-range indices fail. out has self's dtype (torch
 * 1.13 accepts others but copies raw bytes). Any dim orders. */
#include "kernels/portable/portable_shape.h"

typedef struct gather_arg {
    etch_tensor *out;
    const etch_tensor *self;
    int64_t oes, ses;
} gather_arg;

static void gather_one(void *arg, const int64_t *ridx, int64_t self_off) {
    gather_arg *g = (gather_arg *)arg;
    int64_t ooff = 0;
    for (unsigned k = 0; k < g->out->dim; k++)
        ooff += ridx[k] * g->out->strides[k];
    char *o = (char *)g->out->data + ooff * g->oes;
    memcpy(o, (const char *)g->self->data + self_off * g->ses, (size_t)g->oes);
}

ETCH_PK_KERNEL(index_tensor_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out || !etch_shape_check_same(ctx, self, "self", out, "out"))
        return;
    etch_adv_index ai;
    if (!etch_adv_index_init(ctx, &ai, self, args[1]))
        return;
    if (etch_pk_resize(ctx, out, ai.rdim, ai.rsizes) != ETCH_OK)
        return;
    gather_arg g = {out, self, (int64_t)etch_dtype_size(out->dtype),
                    (int64_t)etch_dtype_size(self->dtype)};
    etch_adv_index_visit(&ai, gather_one, &g);
}
