/*
 * The sorting family:
 *
 * aten::sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values,
 *                   Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)
 * aten::sort.values_stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False,
 *                          Tensor(a!) values, Tensor(b!) indices)
 * aten::topk.values(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True, *,
 *                   Tensor(a!) values, Tensor(b!) indices)
 * aten::argsort.stable_out(Tensor self, *, bool stable, int dim=-1, bool descending=False,
 *                          Tensor(a!) out)   (torch >= 2.1; 1.13's argsort lowers to sort)
 *
 * Values have self's dtype, indices are Long. Sort takes every real dtype, topk every one but
 * Bool (as torch). The order is total: NaN sorts above +inf, -0.0 equals 0.0, and equal values
 * keep their original order (so every sort is stable, whatever `stable` says; torch.argsort
 * lowers to sort.values). topk returns the k first elements of that order for largest (a
 * descending sort) or smallest (an ascending one), always sorted (a valid result for
 * sorted=False too); k must be in [0, size of dim] (0 or 1 for a 0-dim self).
 *
 * Nothing is allocated: both work in place in the outputs (heapsort; topk keeps a heap of the
 * k best so far in its output slots). Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct key {
    double f;
    int64_t i, pos;
} key;

/* A slot's contents held outside the outputs (the element being sifted). */
typedef struct item {
    key k;
    char v[8];
} item;

typedef struct slots {
    char *v, *x;     /* first value / index slot */
    int64_t vs, xs;  /* byte strides */
    const char *src; /* argsort: no value slots, values are read from src[index] */
    int64_t ss;
    int dtype;
    size_t es;
    bool isf, desc;
} slots;

static inline void load_val(const slots *s, const char *p, key *k) {
    switch (s->dtype) {
    case ETCH_DTYPE_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        k->f = f;
        break;
    }
    case ETCH_DTYPE_DOUBLE: memcpy(&k->f, p, 8); break;
    case ETCH_DTYPE_LONG: memcpy(&k->i, p, 8); break;
    case ETCH_DTYPE_INT: {
        int32_t v;
        memcpy(&v, p, 4);
        k->i = v;
        break;
    }
    default:
        if (s->isf)
            k->f = etch_pk_load_f64(p, s->dtype);
        else
            k->i = etch_pk_load_i64(p, s->dtype);
        break;
    }
}

static inline void copy_val(size_t es, char *d, const char *p) {
    switch (es) {
    case 1: memcpy(d, p, 1); break;
    case 2: memcpy(d, p, 2); break;
    case 4: memcpy(d, p, 4); break;
    default: memcpy(d, p, 8); break;
    }
}

static inline key slot_key(const slots *s, int64_t i) {
    key k;
    k.f = 0;
    k.i = 0;
    memcpy(&k.pos, s->x + i * s->xs, 8);
    load_val(s, s->src ? s->src + k.pos * s->ss : s->v + i * s->vs, &k);
    return k;
}

static inline void read_item(const slots *s, int64_t i, item *it) {
    it->k = slot_key(s, i);
    if (!s->src)
        copy_val(s->es, it->v, s->v + i * s->vs);
}

static inline void write_item(const slots *s, int64_t i, const item *it) {
    memcpy(s->x + i * s->xs, &it->k.pos, 8);
    if (!s->src)
        copy_val(s->es, s->v + i * s->vs, it->v);
}

static inline void move_slot(const slots *s, int64_t dst, int64_t src) {
    memcpy(s->x + dst * s->xs, s->x + src * s->xs, 8);
    if (!s->src)
        copy_val(s->es, s->v + dst * s->vs, s->v + src * s->vs);
}

/* a comes before b in the output order */
static inline bool before(const slots *s, const key *a, const key *b) {
    int c;
    if (s->isf) {
        bool na = isnan(a->f), nb = isnan(b->f);
        c = na || nb ? (int)na - (int)nb : (a->f > b->f) - (a->f < b->f);
    } else {
        c = (a->i > b->i) - (a->i < b->i);
    }
    if (s->desc)
        c = -c;
    return c != 0 ? c < 0 : a->pos < b->pos;
}

/* The slots [0, n) form a max-heap in the output order (the root comes last). Fill the hole
 * at i with `it`, moving later children up. */
static void sift_down(const slots *s, int64_t i, int64_t n, const item *it) {
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n)
            break;
        key kc = slot_key(s, c);
        if (c + 1 < n) {
            key kr = slot_key(s, c + 1);
            if (before(s, &kc, &kr)) {
                c++;
                kc = kr;
            }
        }
        if (!before(s, &it->k, &kc))
            break;
        move_slot(s, i, c);
        i = c;
    }
    write_item(s, i, it);
}

/* Fill the hole at i with `it`, moving earlier parents down. */
static void sift_up(const slots *s, int64_t i, const item *it) {
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        key kp = slot_key(s, p);
        if (!before(s, &kp, &it->k))
            break;
        move_slot(s, i, p);
        i = p;
    }
    write_item(s, i, it);
}

/* Heapsort [0, n) into the output order (extraction as Floyd's bottom-up variant: the hole
 * left by the root goes down to a leaf, then the displaced last element sifts up). */
static void heap_sort(const slots *s, int64_t n) {
    item it;
    for (int64_t i = n / 2; i-- > 0;) {
        read_item(s, i, &it);
        sift_down(s, i, n, &it);
    }
    for (int64_t end = n - 1; end > 0; end--) {
        read_item(s, end, &it);
        move_slot(s, end, 0);
        int64_t i = 0;
        for (;;) {
            int64_t c = 2 * i + 1;
            if (c >= end)
                break;
            if (c + 1 < end) {
                key kc = slot_key(s, c), kr = slot_key(s, c + 1);
                if (before(s, &kc, &kr))
                    c++;
            }
            move_slot(s, i, c);
            i = c;
        }
        sift_up(s, i, &it);
    }
}

typedef struct sort_args {
    etch_tensor *in, *vals, *idx;
    int64_t dim; /* -1 for a 0-dim self */
} sort_args;

static bool sort_prepare(etch_kernel_context *ctx, etch_value *self_v, etch_value *dim_v,
                         etch_value *vals_v, etch_value *idx_v, sort_args *a) {
    a->in = etch_pk_tensor(ctx, self_v, "self");
    a->vals = a->in ? etch_pk_tensor(ctx, vals_v, "values") : NULL;
    a->idx = a->vals ? etch_pk_tensor(ctx, idx_v, "indices") : NULL;
    int64_t d;
    if (!a->idx || !etch_pk_int(ctx, dim_v, "dim", &d) ||
        !etch_pk_wrap_dim(ctx, d, a->in->dim, &d) || !etch_pk_check_real(ctx, a->in, "self") ||
        !etch_pk_check_same_dtype(ctx, a->in, "self", a->vals, "values") ||
        !etch_nn_check_dtype(ctx, a->idx, "indices", ETCH_DTYPE_LONG))
        return false;
    a->dim = a->in->dim == 0 ? -1 : d;
    return true;
}

static slots make_slots(const sort_args *a, bool desc) {
    slots s;
    s.dtype = a->in->dtype;
    s.es = etch_dtype_size(s.dtype);
    s.isf = etch_pk_is_float(s.dtype);
    s.desc = desc;
    s.v = s.x = NULL;
    s.src = NULL;
    s.ss = 0;
    s.vs = a->dim < 0 || !a->vals ? 0 : a->vals->strides[a->dim] * (int64_t)s.es;
    s.xs = a->dim < 0 ? 0 : a->idx->strides[a->dim] * 8;
    return s;
}

static void sort_common(etch_kernel_context *ctx, sort_args *a, bool desc) {
    etch_tensor *in = a->in;
    if (etch_pk_resize(ctx, a->vals, in->dim, in->sizes) != ETCH_OK ||
        etch_pk_resize(ctx, a->idx, in->dim, in->sizes) != ETCH_OK)
        return;
    if (etch_tensor_numel(in) == 0)
        return;
    etch_pk_copy_same_shape(a->vals, in);
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, a->vals, a->idx, a->dim < 0 ? 0u : 1u << a->dim);
    slots s = make_slots(a, desc);
    int64_t n = a->dim < 0 ? 1 : in->sizes[a->dim];
    int64_t id[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, id);
        s.v =
            etch_nn_at(a->vals->data, etch_nn_plan_offset(&pl, id, a->vals, true) * (int64_t)s.es);
        s.x = etch_nn_at(a->idx->data, etch_nn_plan_offset(&pl, id, a->idx, true) * 8);
        for (int64_t i = 0; i < n; i++)
            memcpy(s.x + i * s.xs, &i, 8);
        heap_sort(&s, n);
    }
}

ETCH_PK_KERNEL(sort_values) {
    sort_args a;
    bool desc;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[2], "descending", &desc) ||
        !sort_prepare(ctx, args[0], args[1], args[3], args[4], &a))
        return;
    sort_common(ctx, &a, desc);
}

ETCH_PK_KERNEL(sort_values_stable) {
    sort_args a;
    bool desc, stable;
    if (!etch_pk_nargs(ctx, nargs, 6) || !etch_pk_bool(ctx, args[3], "descending", &desc) ||
        (args[1]->tag != ETCH_VALUE_NONE && !etch_pk_bool(ctx, args[1], "stable", &stable)) ||
        !sort_prepare(ctx, args[0], args[2], args[4], args[5], &a))
        return;
    sort_common(ctx, &a, desc);
}

ETCH_PK_KERNEL(topk_values) {
    sort_args a;
    bool largest, sorted;
    int64_t k;
    if (!etch_pk_nargs(ctx, nargs, 7) || !etch_pk_int(ctx, args[1], "k", &k) ||
        !etch_pk_bool(ctx, args[3], "largest", &largest) ||
        !etch_pk_bool(ctx, args[4], "sorted", &sorted) ||
        !sort_prepare(ctx, args[0], args[2], args[5], args[6], &a))
        return;
    etch_tensor *in = a.in;
    if (in->dtype == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "topk does not support Bool");
        return;
    }
    int64_t n = a.dim < 0 ? 1 : in->sizes[a.dim];
    if (k < 0 || k > n) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "k = %lld is out of range for a dim of size %lld", (long long)k,
                         (long long)n);
        return;
    }
    int64_t osz[ETCH_MAX_DIMS];
    for (unsigned i = 0; i < in->dim; i++)
        osz[i] = (int64_t)i == a.dim ? k : in->sizes[i];
    if (etch_pk_resize(ctx, a.vals, in->dim, osz) != ETCH_OK ||
        etch_pk_resize(ctx, a.idx, in->dim, osz) != ETCH_OK)
        return;
    if (a.dim < 0) { /* torch: a 0-dim self gives itself (even for k = 0) */
        int64_t zero = 0;
        memcpy(a.vals->data, in->data, etch_dtype_size(in->dtype));
        memcpy(a.idx->data, &zero, 8);
        return;
    }
    if (etch_tensor_numel(a.vals) == 0)
        return;
    /* outer elements: the kept dims of self (the same kept dims in the outputs) */
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, 1u << a.dim);
    slots s = make_slots(&a, largest);
    int64_t ies = (int64_t)s.es, istride = in->strides[a.dim] * ies;
    int64_t id[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, id);
        const char *src =
            (const char *)etch_nn_at(in->data, etch_nn_plan_offset(&pl, id, in, true) * ies);
        s.v = etch_nn_at(a.vals->data, etch_nn_plan_offset(&pl, id, a.vals, true) * ies);
        s.x = etch_nn_at(a.idx->data, etch_nn_plan_offset(&pl, id, a.idx, true) * 8);
        /* slots [0, cnt) hold a heap of the best so far, the worst at the root */
        int64_t cnt = 0;
        item it;
        for (int64_t j = 0; j < n; j++) {
            const char *e = src + j * istride;
            it.k.f = 0;
            it.k.i = 0;
            it.k.pos = j;
            load_val(&s, e, &it.k);
            if (cnt < k) {
                copy_val(s.es, it.v, e);
                sift_up(&s, cnt++, &it);
                continue;
            }
            key root = slot_key(&s, 0);
            if (before(&s, &it.k, &root)) {
                copy_val(s.es, it.v, e);
                sift_down(&s, 0, k, &it);
            }
        }
        heap_sort(&s, k);
    }
}

ETCH_PK_KERNEL(argsort_stable_out) {
    bool stable, desc;
    int64_t d;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[1], "stable", &stable) ||
        !etch_pk_bool(ctx, args[3], "descending", &desc))
        return;
    sort_args a;
    a.in = etch_pk_tensor(ctx, args[0], "self");
    a.vals = NULL;
    a.idx = a.in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    if (!a.idx || !etch_pk_int(ctx, args[2], "dim", &d) ||
        !etch_pk_wrap_dim(ctx, d, a.in->dim, &d) || !etch_pk_check_real(ctx, a.in, "self") ||
        !etch_nn_check_dtype(ctx, a.idx, "out", ETCH_DTYPE_LONG))
        return;
    a.dim = a.in->dim == 0 ? -1 : d;
    etch_tensor *in = a.in;
    if (etch_pk_resize(ctx, a.idx, in->dim, in->sizes) != ETCH_OK || etch_tensor_numel(in) == 0)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, a.dim < 0 ? 0u : 1u << a.dim);
    slots s = make_slots(&a, desc);
    s.ss = a.dim < 0 ? 0 : in->strides[a.dim] * (int64_t)s.es;
    int64_t n = a.dim < 0 ? 1 : in->sizes[a.dim];
    int64_t id[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, id);
        s.src = (const char *)etch_nn_at(in->data,
                                         etch_nn_plan_offset(&pl, id, in, true) * (int64_t)s.es);
        s.x = etch_nn_at(a.idx->data, etch_nn_plan_offset(&pl, id, a.idx, true) * 8);
        for (int64_t i = 0; i < n; i++)
            memcpy(s.x + i * s.xs, &i, 8);
        heap_sort(&s, n);
    }
}
