/* Helpers of the optimized element-wise family (eltwise_util.h). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/optimized/eltwise_util.h"
#include "kernels/optimized/epilogue.h"

etch_tensor *etch_ew_tensor(etch_value *v) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return NULL;
    etch_tensor *t = v->u.tensor;
    if (t->dim > ETCH_MAX_DIMS || etch_dtype_size(t->dtype) == 0)
        return NULL;
    int64_t n = 1;
    for (unsigned d = 0; d < t->dim; d++) {
        if (t->sizes[d] < 0)
            return NULL;
        n *= t->sizes[d];
    }
    if (n > 0 && !t->data)
        return NULL;
    return t;
}

etch_tensor *etch_ew_float(etch_value *v) {
    etch_tensor *t = etch_ew_tensor(v);
    return t && t->dtype == ETCH_DTYPE_FLOAT ? t : NULL;
}

bool etch_ew_same_layout(const etch_tensor *a, const etch_tensor *b) {
    if (a->dim != b->dim)
        return false;
    for (unsigned d = 0; d < a->dim; d++)
        if (a->sizes[d] != b->sizes[d] || a->dim_order[d] != b->dim_order[d])
            return false;
    return true;
}

bool etch_ew_scalar_f(const etch_value *v, float *out) {
    if (!v)
        return false;
    switch (v->tag) {
    case ETCH_VALUE_INT:
        *out = (float)v->u.i;
        return true;
    case ETCH_VALUE_BOOL:
        *out = v->u.b ? 1.0f : 0.0f;
        return true;
    case ETCH_VALUE_DOUBLE:
        if (isfinite(v->u.d) && fabs(v->u.d) > FLT_MAX)
            return false; /* torch rejects it: the portable kernel reports */
        *out = (float)v->u.d;
        return true;
    default:
        return false;
    }
}

bool etch_ew_resize(etch_tensor *out, size_t dim, const int64_t *sizes) {
    if (etch_tensor_resize(out, dim, sizes) != ETCH_OK)
        return false;
    return etch_tensor_numel(out) == 0 || out->data != NULL;
}

/* ---- broadcasting walk ---------------------------------------------------------------- */

void etch_ew_walk_init(etch_ew_walk *w, etch_tensor *out) {
    memset(w, 0, sizeof *w);
    w->ndim = out->dim;
    w->numel = 1;
    for (int d = 0; d < w->ndim; d++) {
        w->sizes[d] = out->sizes[d];
        w->st[0][d] = out->strides[d];
        w->numel *= out->sizes[d];
    }
    w->base[0] = (char *)out->data;
    w->esize[0] = (int64_t)etch_dtype_size(out->dtype);
    w->nops = 1;
}

void etch_ew_walk_add(etch_ew_walk *w, const etch_tensor *t) {
    const int k = w->nops++;
    const int off = w->ndim - (int)t->dim;
    for (int d = 0; d < w->ndim; d++) {
        const int td = d - off;
        w->st[k][d] = td < 0 || t->sizes[td] == 1 ? 0 : t->strides[td];
    }
    w->base[k] = (char *)t->data;
    w->esize[k] = (int64_t)etch_dtype_size(t->dtype);
}

void etch_ew_walk_add_value(etch_ew_walk *w, const void *p, int64_t esize) {
    const int k = w->nops++;
    for (int d = 0; d < w->ndim; d++)
        w->st[k][d] = 0;
    w->base[k] = (char *)(uintptr_t)p;
    w->esize[k] = esize;
}

void etch_ew_walk_finish(etch_ew_walk *w) {
    /* drop size-1 dims */
    int nd = 0;
    for (int d = 0; d < w->ndim; d++) {
        if (w->sizes[d] == 1)
            continue;
        w->sizes[nd] = w->sizes[d];
        for (int k = 0; k < w->nops; k++)
            w->st[k][nd] = w->st[k][d];
        nd++;
    }
    if (nd == 0) {
        nd = 1;
        w->sizes[0] = 1;
        for (int k = 0; k < w->nops; k++)
            w->st[k][0] = 0;
    }
    /* merge dim d-1 into d when every operand steps through both as one */
    int out = nd - 1;
    for (int d = nd - 2; d >= 0; d--) {
        bool ok = true;
        for (int k = 0; k < w->nops && ok; k++)
            ok = w->st[k][d] == w->st[k][out] * w->sizes[out];
        if (ok) {
            w->sizes[out] *= w->sizes[d];
        } else {
            out--;
            w->sizes[out] = w->sizes[d];
            for (int k = 0; k < w->nops; k++)
                w->st[k][out] = w->st[k][d];
        }
    }
    const int shift = out;
    w->ndim = nd - shift;
    for (int d = 0; d < w->ndim; d++) {
        w->sizes[d] = w->sizes[d + shift];
        for (int k = 0; k < w->nops; k++)
            w->st[k][d] = w->st[k][d + shift];
    }
}

typedef struct walk_job {
    const etch_ew_walk *w;
    etch_ew_row_fn fn;
    void *arg;
} walk_job;

static void walk_range(void *arg, int64_t begin, int64_t end) {
    const walk_job *j = (const walk_job *)arg;
    const etch_ew_walk *w = j->w;
    const int nd = w->ndim, inner_d = nd - 1;
    const int64_t inner = w->sizes[inner_d];
    int64_t idx[ETCH_MAX_DIMS];
    int64_t row = begin / inner, col = begin % inner;
    int64_t off[ETCH_EW_MAX_OPS] = {0, 0, 0};
    for (int d = inner_d - 1; d >= 0; d--) {
        idx[d] = row % w->sizes[d];
        row /= w->sizes[d];
        for (int k = 0; k < w->nops; k++)
            off[k] += idx[d] * w->st[k][d];
    }
    int bc[ETCH_EW_MAX_OPS];
    for (int k = 0; k < w->nops; k++)
        bc[k] = w->st[k][inner_d] == 0;
    char *ptrs[ETCH_EW_MAX_OPS];
    int64_t pos = begin;
    while (pos < end) {
        const int64_t len = inner - col < end - pos ? inner - col : end - pos;
        for (int k = 0; k < w->nops; k++)
            ptrs[k] = w->base[k] + (off[k] + col * w->st[k][inner_d]) * w->esize[k];
        j->fn(j->arg, ptrs, bc, len);
        pos += len;
        col = 0;
        for (int d = inner_d - 1; d >= 0; d--) { /* odometer */
            for (int k = 0; k < w->nops; k++)
                off[k] += w->st[k][d];
            if (++idx[d] < w->sizes[d])
                break;
            for (int k = 0; k < w->nops; k++)
                off[k] -= idx[d] * w->st[k][d];
            idx[d] = 0;
        }
    }
}

void etch_ew_walk_run(etch_kernel_context *ctx, etch_ew_walk *w, int64_t grain,
                      etch_ew_row_fn fn, void *arg) {
    if (w->numel <= 0)
        return;
    walk_job j = {w, fn, arg};
    etch_ew_parallel(ctx, w->numel, grain, walk_range, &j);
}

void etch_ew_parallel(etch_kernel_context *ctx, int64_t n, int64_t grain, etch_parallel_fn fn,
                      void *arg) {
    if (n <= 0)
        return;
    if (n <= grain || etch_kernel_num_threads(ctx) <= 1) {
        fn(arg, 0, n);
        return;
    }
    etch_kernel_parallel_for(ctx, n, grain, fn, arg);
}

void etch_ew_epilogue_after_fallback(etch_kernel_context *ctx, etch_tensor *out) {
    const etch_epilogue *e = etch_kernel_epilogue(ctx);
    if (!e || etch_kernel_failed(ctx) || !out || out->dtype != ETCH_DTYPE_FLOAT)
        return;
    etch_opt_apply_epilogue(e, (float *)out->data, etch_tensor_numel(out));
}
