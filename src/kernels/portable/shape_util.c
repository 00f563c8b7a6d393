/* Helpers shared by the shape kernels (declared in portable_shape.h): strided views and copies
 * between them, dtype and argument checks, Scalar -> element conversion, advanced indexing. */
#include <math.h>
#include <stdio.h>

#include "kernels/portable/portable_shape.h"

/* ---- strided views ---------------------------------------------------------------------- */

void etch_sv_of(etch_sv *v, const etch_tensor *t) {
    v->base = (char *)t->data;
    v->off = 0;
    v->dtype = t->dtype;
    v->ndim = t->dim;
    for (unsigned i = 0; i < t->dim; i++) {
        v->sizes[i] = t->sizes[i];
        v->strides[i] = t->strides[i];
    }
}

void etch_sv_scalar(etch_sv *v, const void *p, int dtype) {
    v->base = (char *)(uintptr_t)p;
    v->off = 0;
    v->dtype = dtype;
    v->ndim = 0;
}

int64_t etch_sv_numel(const etch_sv *v) {
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->sizes[i];
    return n;
}

void etch_sv_select(etch_sv *v, int d, int64_t i) {
    v->off += i * v->strides[d];
    for (int k = d; k + 1 < v->ndim; k++) {
        v->sizes[k] = v->sizes[k + 1];
        v->strides[k] = v->strides[k + 1];
    }
    v->ndim--;
}

void etch_sv_slice(etch_sv *v, int d, int64_t start, int64_t len, int64_t step) {
    if (len > 0)
        v->off += start * v->strides[d];
    v->sizes[d] = len;
    v->strides[d] *= step;
}

void etch_sv_insert(etch_sv *v, int d, int64_t size, int64_t stride) {
    for (int k = v->ndim; k > d; k--) {
        v->sizes[k] = v->sizes[k - 1];
        v->strides[k] = v->strides[k - 1];
    }
    v->sizes[d] = size;
    v->strides[d] = stride;
    v->ndim++;
}

void etch_sv_split(etch_sv *v, int d, int64_t a, int64_t b) {
    int64_t s = v->strides[d];
    v->sizes[d] = b;
    etch_sv_insert(v, d, a, s * b);
}

void etch_sv_flip(etch_sv *v, int d) {
    if (v->sizes[d] > 0)
        v->off += (v->sizes[d] - 1) * v->strides[d];
    v->strides[d] = -v->strides[d];
}

void etch_sv_broadcast(etch_sv *v, int d, int64_t n) {
    v->sizes[d] = n;
    v->strides[d] = 0;
}

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* One element: src (sdt) -> dst (ddt), optionally through `via`. */
static inline void convert_elem(char *dst, int ddt, const char *src, int sdt, int via) {
    char tmp[8];
    if (via >= 0 && via != sdt && via != ddt) {
        if (etch_pk_is_float(sdt))
            etch_pk_store_f64(tmp, via, etch_pk_load_f64(src, sdt));
        else
            etch_pk_store_i64(tmp, via, etch_pk_load_i64(src, sdt));
        src = tmp;
        sdt = via;
    }
    if (ddt == sdt)
        memmove(dst, src, etch_dtype_size(sdt));
    else if (etch_pk_is_float(sdt))
        etch_pk_store_f64(dst, ddt, etch_pk_load_f64(src, sdt));
    else
        etch_pk_store_i64(dst, ddt, etch_pk_load_i64(src, sdt));
}

typedef struct copy_run {
    int ddt, sdt, via;
    size_t es; /* element size when the dtypes are equal */
} copy_run;

/* n elements, byte strides ds / ss. */
static void copy_inner(const copy_run *c, char *d, int64_t ds, const char *s, int64_t ss,
                       int64_t n) {
    if (c->via >= 0) {
        for (int64_t i = 0; i < n; i++)
            convert_elem(d + i * ds, c->ddt, s + i * ss, c->sdt, c->via);
        return;
    }
    if (c->ddt == c->sdt) {
        size_t es = c->es;
        if (ds == (int64_t)es && ss == (int64_t)es) {
            memmove(d, s, (size_t)n * es);
            return;
        }
        switch (es) {
        case 1:
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = s[i * ss];
            return;
        case 2:
            for (int64_t i = 0; i < n; i++)
                memmove(d + i * ds, s + i * ss, 2);
            return;
        case 4:
            for (int64_t i = 0; i < n; i++)
                memmove(d + i * ds, s + i * ss, 4);
            return;
        case 8:
            for (int64_t i = 0; i < n; i++)
                memmove(d + i * ds, s + i * ss, 8);
            return;
        default:
            for (int64_t i = 0; i < n; i++)
                memmove(d + i * ds, s + i * ss, es);
            return;
        }
    }
    char *ptrs[2] = {d, (char *)(uintptr_t)s};
    int64_t strides[2] = {ds, ss};
    etch_pk_convert conv = {c->sdt, c->ddt};
    etch_pk_convert_inner(&conv, ptrs, strides, n);
}

void etch_sv_copy(etch_sv *dst, const etch_sv *src, int via) {
    int nd = 0;
    int64_t sizes[ETCH_SV_MAX_DIMS], ds[ETCH_SV_MAX_DIMS], ss[ETCH_SV_MAX_DIMS];
    int64_t des = (int64_t)etch_dtype_size(dst->dtype), ses = (int64_t)etch_dtype_size(src->dtype);
    for (int i = 0; i < dst->ndim; i++) {
        if (dst->sizes[i] == 0)
            return;
        if (dst->sizes[i] == 1)
            continue;
        sizes[nd] = dst->sizes[i];
        ds[nd] = dst->strides[i] * des;
        ss[nd] = src->strides[i] * ses;
        nd++;
    }
    /* outermost = largest destination stride (stable insertion sort) */
    for (int i = 1; i < nd; i++) {
        for (int j = i; j > 0 && abs64(ds[j]) > abs64(ds[j - 1]); j--) {
            int64_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
            t = ds[j];
            ds[j] = ds[j - 1];
            ds[j - 1] = t;
            t = ss[j];
            ss[j] = ss[j - 1];
            ss[j - 1] = t;
        }
    }
    /* merge an outer dim into the next inner one when both operands step through it evenly;
     * the merged dims are kept innermost first */
    int m = 0;
    int64_t msz[ETCH_SV_MAX_DIMS], mds[ETCH_SV_MAX_DIMS], mss[ETCH_SV_MAX_DIMS];
    for (int i = nd - 1; i >= 0; i--) {
        if (m > 0 && ds[i] == mds[m - 1] * msz[m - 1] && ss[i] == mss[m - 1] * msz[m - 1]) {
            msz[m - 1] *= sizes[i];
            continue;
        }
        msz[m] = sizes[i];
        mds[m] = ds[i];
        mss[m] = ss[i];
        m++;
    }
    if (via == src->dtype || via == dst->dtype)
        via = -1; /* converting through one of the ends is the direct conversion */
    copy_run c = {dst->dtype, src->dtype, via, (size_t)des};
    char *dbase = dst->base + dst->off * des;
    const char *sbase = src->base + src->off * ses;
    if (m == 0) {
        copy_inner(&c, dbase, 0, sbase, 0, 1);
        return;
    }
    int64_t idx[ETCH_SV_MAX_DIMS] = {0};
    int64_t doff = 0, soff = 0;
    for (;;) {
        copy_inner(&c, dbase + doff, mds[0], sbase + soff, mss[0], msz[0]);
        int d = 1;
        for (; d < m; d++) {
            idx[d]++;
            doff += mds[d];
            soff += mss[d];
            if (idx[d] < msz[d])
                break;
            doff -= mds[d] * msz[d];
            soff -= mss[d] * msz[d];
            idx[d] = 0;
        }
        if (d >= m)
            break;
    }
}

void etch_sv_fill(etch_sv *dst, const void *elem) {
    etch_sv src;
    etch_sv_scalar(&src, elem, dst->dtype);
    src.ndim = dst->ndim;
    for (int i = 0; i < dst->ndim; i++) {
        src.sizes[i] = dst->sizes[i];
        src.strides[i] = 0;
    }
    etch_sv_copy(dst, &src, -1);
}

void etch_sv_copy_from_tensor(etch_sv *dst, const etch_tensor *src, int via) {
    etch_sv s;
    etch_sv_of(&s, src);
    etch_sv_copy(dst, &s, via);
}

/* ---- argument checks ---------------------------------------------------------------------- */

bool etch_shape_check_convert(etch_kernel_context *ctx, int from, int to, const char *what) {
    if (from == to || (etch_pk_dtype_is_real(from) && etch_pk_dtype_is_real(to)))
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "%s: conversion from %s to %s is not supported",
                     what, etch_dtype_name(from), etch_dtype_name(to));
    return false;
}

const int64_t *etch_shape_size_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                                    size_t *len) {
    const int64_t *s = etch_pk_int_list(ctx, v, name, len);
    if (!s)
        return NULL;
    if (*len > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "%s has %zu entries, more than %d", name,
                         *len, ETCH_MAX_DIMS);
        return NULL;
    }
    for (size_t i = 0; i < *len; i++) {
        if (s[i] < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s[%zu] = %lld is negative", name, i,
                             (long long)s[i]);
            return NULL;
        }
    }
    return s;
}

bool etch_shape_check_same(etch_kernel_context *ctx, const etch_tensor *a, const char *an,
                           const etch_tensor *b, const char *bn) {
    if (a->dtype == b->dtype)
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s, expected %s's dtype %s", bn,
                     etch_dtype_name(b->dtype), an, etch_dtype_name(a->dtype));
    return false;
}

bool etch_shape_dim(etch_kernel_context *ctx, int64_t dim, int64_t rank, const char *name,
                    int64_t *out) {
    int64_t r = rank <= 0 ? 1 : rank;
    if (dim < -r || dim >= r) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s %lld is out of range for a rank-%lld tensor (expected [%lld, %lld])",
                         name, (long long)dim, (long long)rank, (long long)-r, (long long)(r - 1));
        return false;
    }
    *out = dim < 0 ? dim + r : dim;
    return true;
}

bool etch_shape_tensor_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                            etch_tensor **out, size_t cap, size_t *len) {
    *len = 0;
    if (!v || v->tag != ETCH_VALUE_TENSOR_LIST || (v->u.list.len && !v->u.list.items)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Tensor list, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    if (v->u.list.len > cap) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "%s has %zu tensors, more than %zu", name,
                         v->u.list.len, cap);
        return false;
    }
    for (size_t i = 0; i < v->u.list.len; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s[%zu]", name, i);
        out[i] = etch_pk_tensor(ctx, v->u.list.items[i], nm);
        if (!out[i])
            return false;
    }
    *len = v->u.list.len;
    return true;
}

/* ---- Scalar -> element ------------------------------------------------------------------ */

static bool int_range(int dtype, int64_t *lo, int64_t *hi) {
    switch (dtype) {
    case ETCH_DTYPE_BYTE: *lo = 0; *hi = 255; return true;
    case ETCH_DTYPE_CHAR: *lo = -128; *hi = 127; return true;
    case ETCH_DTYPE_SHORT: *lo = -32768; *hi = 32767; return true;
    case ETCH_DTYPE_INT: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case ETCH_DTYPE_LONG: *lo = INT64_MIN; *hi = INT64_MAX; return true;
    default: return false;
    }
}

static double float_max(int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_HALF: return 65504.0;
    case ETCH_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case ETCH_DTYPE_FLOAT: return 3.4028234663852886e38;
    default: return INFINITY;
    }
}

bool etch_shape_scalar_elem(etch_kernel_context *ctx, const etch_value *v, int dtype, void *elem,
                            const char *name) {
    memset(elem, 0, 8);
    if (!etch_pk_dtype_is_real(dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "%s cannot be stored as %s", name,
                         etch_dtype_name(dtype));
        return false;
    }
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Scalar, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    if (v->tag == ETCH_VALUE_BOOL || dtype == ETCH_DTYPE_BOOL) {
        int64_t b;
        if (v->tag == ETCH_VALUE_BOOL)
            b = v->u.b;
        else if (v->tag == ETCH_VALUE_INT)
            b = v->u.i != 0;
        else
            b = v->u.d != 0; /* NaN != 0 */
        etch_pk_store_i64(elem, dtype, b);
        return true;
    }
    int64_t lo, hi;
    bool integral = int_range(dtype, &lo, &hi);
    if (v->tag == ETCH_VALUE_INT) {
        int64_t x = v->u.i;
        bool bad;
        if (!integral)
            bad = (double)x > float_max(dtype) || (double)x < -float_max(dtype);
        else if (dtype == ETCH_DTYPE_BYTE) /* c10 lets negatives wrap into an unsigned type */
            bad = x > hi || (x < 0 && (x < -hi));
        else
            bad = x < lo || x > hi;
        if (bad) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s %lld cannot be converted to %s without overflow", name,
                             (long long)x, etch_dtype_name(dtype));
            return false;
        }
        etch_pk_store_i64(elem, dtype, x);
        return true;
    }
    double d = v->u.d;
    bool bad;
    if (integral)
        bad = !(d == d) || d < (double)lo || d > (double)hi;
    else
        bad = !isinf(d) && d == d && (d > float_max(dtype) || d < -float_max(dtype));
    if (bad) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s %g cannot be converted to %s without overflow", name, d,
                         etch_dtype_name(dtype));
        return false;
    }
    etch_pk_store_f64(elem, dtype, d);
    return true;
}

/* ---- advanced indexing -------------------------------------------------------------------- */

static bool is_mask_dtype(int dt) { return dt == ETCH_DTYPE_BOOL || dt == ETCH_DTYPE_BYTE; }

/* Element at logical (row-major) flat position q of t. */
static const char *elem_at_flat(const etch_tensor *t, int64_t q) {
    int64_t off = 0;
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        int64_t s = t->sizes[d];
        off += (q % s) * t->strides[d];
        q /= s;
    }
    return (const char *)t->data + off * (int64_t)etch_dtype_size(t->dtype);
}

bool etch_adv_index_init(etch_kernel_context *ctx, etch_adv_index *ai, const etch_tensor *self,
                         etch_value *list) {
    memset(ai, 0, sizeof *ai);
    ai->self = self;
    if (!list || list->tag != ETCH_VALUE_OPTIONAL_TENSOR_LIST ||
        (list->u.list.len && !list->u.list.items)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "indices must be an optional-Tensor list, got %s",
                         list ? etch_value_tag_name(list->tag) : "nothing");
        return false;
    }
    size_t n = list->u.list.len;
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
    /* entries: each takes 1 self dim, a mask as many as its rank */
    int pos = 0, defined = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= ETCH_MAX_DIMS || pos >= (int)self->dim) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "too many indices for a tensor of rank %u", (unsigned)self->dim);
            return false;
        }
        etch_value *item = list->u.list.items[i];
        ai->first_dim[i] = pos;
        if (!item || item->tag == ETCH_VALUE_NONE) {
            pos++;
            continue;
        }
        char nm[32];
        snprintf(nm, sizeof nm, "indices[%zu]", i);
        const etch_tensor *t = etch_pk_tensor(ctx, item, nm);
        if (!t)
            return false;
        if (t->dtype != ETCH_DTYPE_LONG && t->dtype != ETCH_DTYPE_INT &&
            !is_mask_dtype(t->dtype)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                             "indices[%zu] has dtype %s; index tensors must be Long, Int, Bool "
                             "or Byte",
                             i, etch_dtype_name(t->dtype));
            return false;
        }
        ai->t[i] = t;
        ai->mask[i] = is_mask_dtype(t->dtype);
        if (ai->mask[i] && t->dim == 0) {
            etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                             "indices[%zu] is a zero-dim mask, which is not supported", i);
            return false;
        }
        pos += ai->mask[i] ? (int)t->dim : 1;
        defined++;
        if (pos > (int)self->dim) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "too many indices for a tensor of rank %u", (unsigned)self->dim);
            return false;
        }
    }
    ai->n = n;
    if (defined == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "indices must contain at least one tensor");
        return false;
    }
    /* masks: shapes must match the dims they index; count set elements */
    for (size_t i = 0; i < n; i++) {
        const etch_tensor *t = ai->t[i];
        if (!t || !ai->mask[i])
            continue;
        int f = ai->first_dim[i];
        for (unsigned k = 0; k < t->dim; k++) {
            if (t->sizes[k] != self->sizes[f + (int)k]) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "the shape of the mask %s at index %zu does not match the shape "
                                 "of the indexed tensor %s at dim %d",
                                 etch_pk_shape_str(b1, sizeof b1, t->dim, t->sizes), i,
                                 etch_pk_shape_str(b2, sizeof b2, self->dim, self->sizes), f);
                return false;
            }
        }
        int64_t cnt = 0, numel = etch_tensor_numel(t);
        for (int64_t q = 0; q < numel; q++)
            cnt += *elem_at_flat(t, q) != 0;
        ai->nnz[i] = cnt;
    }
    /* broadcast shape of the index tensors (masks as 1-D [nnz]) */
    size_t bd = 0;
    int64_t bs[ETCH_MAX_DIMS];
    for (size_t i = 0; i < n; i++) {
        const etch_tensor *t = ai->t[i];
        if (!t)
            continue;
        size_t td = ai->mask[i] ? 1 : t->dim;
        const int64_t *tsz = ai->mask[i] ? &ai->nnz[i] : t->sizes;
        size_t nb = td > bd ? td : bd;
        int64_t ns[ETCH_MAX_DIMS];
        for (size_t k = 0; k < nb; k++) {
            int64_t a = k < bd ? bs[bd - 1 - k] : 1;
            int64_t b = k < td ? tsz[td - 1 - k] : 1;
            if (a != b && a != 1 && b != 1) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "indexing tensors cannot be broadcast together (sizes %lld and "
                                 "%lld at dim %zu from the right)",
                                 (long long)a, (long long)b, k);
                return false;
            }
            ns[nb - 1 - k] = a == 1 ? b : a;
        }
        bd = nb;
        memcpy(bs, ns, sizeof ns[0] * nb);
    }
    ai->bdim = bd;
    memcpy(ai->bsizes, bs, sizeof bs[0] * bd);
    int64_t bnumel = 1;
    for (size_t k = 0; k < bd; k++)
        bnumel *= bs[k];
    /* index values must be in range (torch checks the ones it reads: none when empty) */
    if (bnumel > 0) {
        for (size_t i = 0; i < n; i++) {
            const etch_tensor *t = ai->t[i];
            if (!t || ai->mask[i])
                continue;
            int64_t size = self->sizes[ai->first_dim[i]], numel = etch_tensor_numel(t);
            for (int64_t q = 0; q < numel; q++) {
                int64_t v = etch_shape_load_index(elem_at_flat(t, q), t->dtype);
                if (v < -size || v >= size) {
                    etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                     "index %lld is out of bounds for dim %d with size %lld",
                                     (long long)v, ai->first_dim[i], (long long)size);
                    return false;
                }
            }
        }
    }
    /* which self dims are indexed, and are they one contiguous run? */
    int runs = 0;
    bool prev = false;
    int first_indexed = -1;
    for (size_t i = 0; i < n; i++) {
        bool def = ai->t[i] != NULL;
        int width = def && ai->mask[i] ? (int)ai->t[i]->dim : 1;
        for (int k = 0; k < width; k++) {
            int d = ai->first_dim[i] + k;
            if (def) {
                ai->consumed[d] = true;
                ai->nindexed++;
                if (first_indexed < 0)
                    first_indexed = d;
            }
            if (def && !prev)
                runs++;
            prev = def;
        }
    }
    size_t rdim = self->dim - (size_t)ai->nindexed + bd;
    if (rdim > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "the indexing result would have rank %zu",
                         rdim);
        return false;
    }
    size_t r = 0;
    bool bfirst = runs > 1;
    if (bfirst) {
        for (size_t k = 0; k < bd; k++) {
            ai->rsizes[r] = bs[k];
            ai->rmap[r++] = -1 - (int)k;
        }
    }
    for (int d = 0; d < (int)self->dim; d++) {
        if (!bfirst && d == first_indexed) {
            for (size_t k = 0; k < bd; k++) {
                ai->rsizes[r] = bs[k];
                ai->rmap[r++] = -1 - (int)k;
            }
        }
        if (ai->consumed[d])
            continue;
        ai->rsizes[r] = self->sizes[d];
        ai->rmap[r++] = d;
    }
    ai->rdim = r;
    return true;
}

/* Mask cursor: position of the j-th set element. */
typedef struct mask_cursor {
    int64_t j, q; /* j-th set element is at flat q (j = -1: before the start) */
} mask_cursor;

static int64_t mask_seek(const etch_tensor *m, mask_cursor *c, int64_t j) {
    if (j < c->j) {
        c->j = -1;
        c->q = -1;
    }
    while (c->j < j) {
        c->q++;
        if (*elem_at_flat(m, c->q) != 0)
            c->j++;
    }
    return c->q;
}

/* Self element offset contributed by the index tensors at broadcast position bidx. */
static int64_t indexed_offset(const etch_adv_index *ai, const int64_t *bidx, mask_cursor *cur) {
    const etch_tensor *self = ai->self;
    int64_t off = 0;
    for (size_t i = 0; i < ai->n; i++) {
        const etch_tensor *t = ai->t[i];
        if (!t)
            continue;
        int f = ai->first_dim[i];
        if (ai->mask[i]) {
            int64_t j = ai->nnz[i] == 1 ? 0 : bidx[ai->bdim - 1];
            int64_t q = mask_seek(t, &cur[i], j);
            for (int d = (int)t->dim - 1; d >= 0; d--) {
                int64_t s = t->sizes[d];
                off += (q % s) * self->strides[f + d];
                q /= s;
            }
            continue;
        }
        int64_t toff = 0;
        size_t lead = ai->bdim - t->dim;
        for (unsigned d = 0; d < t->dim; d++)
            if (t->sizes[d] != 1)
                toff += bidx[lead + d] * t->strides[d];
        int64_t v = etch_shape_load_index(
            (const char *)t->data + toff * (int64_t)etch_dtype_size(t->dtype), t->dtype);
        if (v < 0)
            v += self->sizes[f];
        off += v * self->strides[f];
    }
    return off;
}

void etch_adv_index_visit(etch_adv_index *ai, etch_adv_visit_fn fn, void *arg) {
    const etch_tensor *self = ai->self;
    int64_t total = 1;
    for (size_t k = 0; k < ai->rdim; k++)
        total *= ai->rsizes[k];
    if (total == 0)
        return;
    mask_cursor cur[ETCH_MAX_DIMS];
    for (size_t i = 0; i < ETCH_MAX_DIMS; i++)
        cur[i].j = cur[i].q = -1;
    int64_t ridx[ETCH_MAX_DIMS] = {0}, bidx[ETCH_MAX_DIMS] = {0};
    int64_t plain = 0; /* offset from the non-indexed dims */
    int64_t ioff = indexed_offset(ai, bidx, cur);
    for (int64_t e = 0; e < total; e++) {
        fn(arg, ridx, plain + ioff);
        bool bchanged = false;
        for (int k = (int)ai->rdim - 1; k >= 0; k--) {
            int map = ai->rmap[k];
            ridx[k]++;
            if (map >= 0)
                plain += self->strides[map];
            else {
                bidx[-1 - map] = ridx[k];
                bchanged = true;
            }
            if (ridx[k] < ai->rsizes[k])
                break;
            if (map >= 0)
                plain -= self->strides[map] * ai->rsizes[k];
            else
                bidx[-1 - map] = 0;
            ridx[k] = 0;
        }
        if (bchanged && e + 1 < total)
            ioff = indexed_offset(ai, bidx, cur);
    }
}
