/* Helpers shared by the nn kernels: argument checks and reduction plans. */
#include <math.h>
#include <stdio.h>

#include "kernels/portable/portable_nn.h"

#define PAIR_LIMIT 0x3fffffffLL

bool etch_nn_check_float(etch_kernel_context *ctx, const etch_tensor *t, const char *name) {
    if (etch_pk_is_float(t->dtype))
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                     "%s has dtype %s; a floating dtype (Float, Double, Half, BFloat16) is "
                     "required",
                     name, etch_dtype_name(t->dtype));
    return false;
}

bool etch_nn_double(etch_kernel_context *ctx, const etch_value *v, const char *name, double *out) {
    if (v && v->tag == ETCH_VALUE_DOUBLE) {
        *out = v->u.d;
        return true;
    }
    if (v && v->tag == ETCH_VALUE_INT) {
        *out = (double)v->u.i;
        return true;
    }
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Double, got %s", name,
                     v ? etch_value_tag_name(v->tag) : "nothing");
    return false;
}

bool etch_nn_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const etch_tensor *out,
                       bool *given) {
    *given = false;
    if (!v || v->tag == ETCH_VALUE_NONE)
        return true;
    int64_t dt;
    if (!etch_pk_int(ctx, v, "dtype", &dt))
        return false;
    if (dt < 0 || dt > 255 || !etch_pk_dtype_is_real((int)dt)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "dtype argument %lld is not a supported dtype",
                         (long long)dt);
        return false;
    }
    if (dt != out->dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "dtype argument %s differs from out's dtype %s", etch_dtype_name((int)dt),
                         etch_dtype_name(out->dtype));
        return false;
    }
    *given = true;
    return true;
}

bool etch_nn_check_dtype(etch_kernel_context *ctx, const etch_tensor *t, const char *name,
                         int dtype) {
    if (t->dtype == dtype)
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must have dtype %s, got %s", name,
                     etch_dtype_name(dtype), etch_dtype_name(t->dtype));
    return false;
}

bool etch_nn_dim_mask(etch_kernel_context *ctx, etch_value *v, const etch_tensor *in,
                      uint32_t *mask) {
    uint32_t all = in->dim == 0 ? 0u : (uint32_t)((1ull << in->dim) - 1u);
    *mask = all;
    if (!v || v->tag == ETCH_VALUE_NONE)
        return true;
    size_t len;
    const int64_t *dims = etch_pk_int_list(ctx, v, "dim", &len);
    if (!dims)
        return false;
    if (len == 0)
        return true;
    uint32_t m = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t d;
        if (!etch_pk_wrap_dim(ctx, dims[i], in->dim, &d))
            return false;
        if (m & (1u << d)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "dim %lld appears more than once in the list of dims", (long long)d);
            return false;
        }
        m |= 1u << d;
    }
    *mask = m & all;
    return true;
}

void etch_nn_reduced_shape(const etch_tensor *in, uint32_t mask, bool keepdim, size_t *dim,
                           int64_t *sizes) {
    size_t od = 0;
    for (unsigned i = 0; i < in->dim; i++) {
        bool r = (mask >> i) & 1u;
        if (!r)
            sizes[od++] = in->sizes[i];
        else if (keepdim)
            sizes[od++] = 1;
    }
    *dim = od;
}

bool etch_nn_check_nonempty_dims(etch_kernel_context *ctx, const etch_tensor *in, uint32_t mask,
                                 const char *what) {
    for (unsigned i = 0; i < in->dim; i++) {
        if (((mask >> i) & 1u) && in->sizes[i] == 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s: expected reduction dim %u to have non-zero size", what, i);
            return false;
        }
    }
    return true;
}

bool etch_nn_pair(etch_kernel_context *ctx, etch_value *val, const char *name, bool allow_empty,
                  int64_t min, int64_t *v, bool *empty) {
    size_t len;
    const int64_t *l = etch_pk_int_list(ctx, val, name, &len);
    if (!l)
        return false;
    *empty = len == 0;
    if ((len == 0 && !allow_empty) || len > 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s must have %s2 values, got %zu", name,
                         allow_empty ? "0, 1 or " : "1 or ", len);
        return false;
    }
    if (len == 0)
        return true;
    for (int i = 0; i < 2; i++) {
        v[i] = l[len == 1 ? 0 : i];
        if (v[i] < min || v[i] > PAIR_LIMIT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s[%d] = %lld is out of range (must be in [%lld, 2^30])", name, i,
                             (long long)v[i], (long long)min);
            return false;
        }
    }
    return true;
}

static double dtype_max(int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_BYTE: return 255.0;
    case ETCH_DTYPE_CHAR: return 127.0;
    case ETCH_DTYPE_SHORT: return 32767.0;
    case ETCH_DTYPE_INT: return 2147483647.0;
    case ETCH_DTYPE_HALF: return 65504.0;
    case ETCH_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case ETCH_DTYPE_FLOAT: return 3.4028234663852886e38;
    default: return INFINITY;
    }
}

bool etch_nn_scalar_fits(etch_kernel_context *ctx, const etch_value *v, int dtype,
                         const char *name) {
    if (!etch_pk_is_scalar(v)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Scalar, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    if (dtype == ETCH_DTYPE_BOOL || dtype == ETCH_DTYPE_DOUBLE || v->tag == ETCH_VALUE_BOOL)
        return true;
    bool ok;
    if (v->tag == ETCH_VALUE_INT) {
        int64_t i = v->u.i;
        if (dtype == ETCH_DTYPE_LONG)
            ok = true;
        else if (dtype == ETCH_DTYPE_BYTE) /* negative values wrap, as c10's checked cast */
            ok = i >= -255 && i <= 255;
        else if (etch_pk_is_float(dtype))
            ok = fabs((double)i) <= dtype_max(dtype);
        else
            ok = i >= -(int64_t)dtype_max(dtype) - 1 && i <= (int64_t)dtype_max(dtype);
    } else {
        double d = v->u.d;
        if (etch_pk_is_float(dtype))
            ok = isnan(d) || isinf(d) || fabs(d) <= dtype_max(dtype);
        else if (isnan(d))
            ok = false;
        else if (dtype == ETCH_DTYPE_LONG)
            ok = d >= -9223372036854775808.0 && d < 9223372036854775808.0;
        else if (dtype == ETCH_DTYPE_BYTE)
            ok = fabs(d) <= 255.0;
        else
            ok = d >= -dtype_max(dtype) - 1.0 && d <= dtype_max(dtype);
    }
    if (!ok) {
        char buf[64];
        if (v->tag == ETCH_VALUE_INT)
            snprintf(buf, sizeof buf, "%lld", (long long)v->u.i);
        else
            snprintf(buf, sizeof buf, "%g", v->u.d);
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s %s cannot be converted to %s without overflow", name, buf,
                         etch_dtype_name(dtype));
    }
    return ok;
}

void etch_nn_store_scalar(void *p, int dtype, const etch_value *v) {
    if (v->tag == ETCH_VALUE_DOUBLE)
        etch_pk_store_f64(p, dtype, v->u.d);
    else if (v->tag == ETCH_VALUE_BOOL)
        etch_pk_store_i64(p, dtype, v->u.b ? 1 : 0);
    else
        etch_pk_store_i64(p, dtype, v->u.i);
}

/* ---- reduction plans ---------------------------------------------------------------------- */

void etch_nn_plan_init(etch_nn_plan *p, const etch_tensor *t0, const etch_tensor *t1,
                       uint32_t mask) {
    p->nk = 0;
    p->nr = 0;
    p->outer = 1;
    p->inner = 1;
    for (unsigned i = 0; i < t0->dim; i++) {
        int64_t sz = t0->sizes[i];
        if ((mask >> i) & 1u) {
            p->inner *= sz;
            if (sz == 1)
                continue;
            int r = p->nr;
            int64_t s0 = t0->strides[i], s1 = t1 ? t1->strides[i] : 0;
            /* merge into the previous reduced dim when both tensors step evenly through both */
            if (r > 0 && sz != 0 && p->rsize[r - 1] != 0 && p->rstride[0][r - 1] == s0 * sz &&
                p->rstride[1][r - 1] == s1 * sz) {
                p->rsize[r - 1] *= sz;
                p->rstride[0][r - 1] = s0;
                p->rstride[1][r - 1] = s1;
                continue;
            }
            p->rsize[r] = sz;
            p->rstride[0][r] = s0;
            p->rstride[1][r] = s1;
            p->nr++;
        } else {
            p->kdim[p->nk] = (int)i;
            p->ksize[p->nk] = sz;
            p->nk++;
            p->outer *= sz;
        }
    }
}

void etch_nn_plan_index(const etch_nn_plan *p, int64_t e, int64_t *idx) {
    for (int k = p->nk - 1; k >= 0; k--) {
        int64_t s = p->ksize[k];
        idx[k] = s ? e % s : 0;
        e = s ? e / s : 0;
    }
}

int64_t etch_nn_plan_offset(const etch_nn_plan *p, const int64_t *idx, const etch_tensor *t,
                            bool full_rank) {
    int64_t off = 0;
    for (int k = 0; k < p->nk; k++)
        off += idx[k] * t->strides[full_rank ? p->kdim[k] : k];
    return off;
}

void etch_nn_plan_runs(const etch_nn_plan *p, char *b0, int64_t es0, char *b1, int64_t es1,
                       etch_nn_run_fn fn, void *arg) {
    if (p->inner == 0)
        return;
    if (p->nr == 0) {
        fn(arg, b0, 0, b1, 0, 1);
        return;
    }
    int last = p->nr - 1;
    int64_t s0 = p->rstride[0][last] * es0, s1 = p->rstride[1][last] * es1;
    int64_t n = p->rsize[last];
    int64_t idx[ETCH_MAX_DIMS] = {0};
    int64_t o0 = 0, o1 = 0;
    for (;;) {
        fn(arg, b0 + o0, s0, b1 ? b1 + o1 : NULL, s1, n);
        int d = last - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            o0 += p->rstride[0][d] * es0;
            o1 += p->rstride[1][d] * es1;
            if (idx[d] < p->rsize[d])
                break;
            o0 -= p->rstride[0][d] * es0 * p->rsize[d];
            o1 -= p->rstride[1][d] * es1 * p->rsize[d];
            idx[d] = 0;
        }
        if (d < 0)
            return;
    }
}

/* ---- max / min scan ------------------------------------------------------------------------- */

typedef struct extreme_state {
    int dtype;
    bool is_max, is_float, have, nan;
    double bf;
    int64_t bi;
    int64_t count, best;
    const char *elem;
} extreme_state;

static void extreme_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    extreme_state *st = (extreme_state *)arg;
    if (st->nan) {
        st->count += n;
        return;
    }
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        const char *q = p + off * s;
        if (st->is_float) {
            double v[ETCH_NN_CHUNK];
            etch_pk_load_row_f64(v, q, s, m, st->dtype);
            for (int64_t i = 0; i < m; i++) {
                if (isnan(v[i])) {
                    st->nan = true;
                    st->best = st->count + off + i;
                    st->elem = q + i * s;
                    st->count += n;
                    return;
                }
                if (!st->have || (st->is_max ? v[i] > st->bf : v[i] < st->bf)) {
                    st->have = true;
                    st->bf = v[i];
                    st->best = st->count + off + i;
                    st->elem = q + i * s;
                }
            }
        } else {
            int64_t v[ETCH_NN_CHUNK];
            etch_pk_load_row_i64(v, q, s, m, st->dtype);
            for (int64_t i = 0; i < m; i++) {
                if (!st->have || (st->is_max ? v[i] > st->bi : v[i] < st->bi)) {
                    st->have = true;
                    st->bi = v[i];
                    st->best = st->count + off + i;
                    st->elem = q + i * s;
                }
            }
        }
    }
    st->count += n;
}

int64_t etch_nn_extreme(const etch_nn_plan *p, const char *base, int dtype, bool is_max,
                        const char **elem) {
    extreme_state st;
    memset(&st, 0, sizeof st);
    st.dtype = dtype;
    st.is_max = is_max;
    st.is_float = etch_pk_is_float(dtype);
    st.elem = base;
    etch_nn_plan_runs(p, (char *)base, (int64_t)etch_dtype_size(dtype), NULL, 0, extreme_run, &st);
    *elem = st.elem;
    return st.best;
}

/* ---- normalization helpers ------------------------------------------------------------------- */

typedef struct moments_acc {
    int dtype;
    double mean, sum;
} moments_acc;

static void msum_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    moments_acc *a = (moments_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->dtype);
        for (int64_t i = 0; i < m; i++)
            a->sum += v[i];
    }
}

static void msq_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    moments_acc *a = (moments_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->dtype);
        for (int64_t i = 0; i < m; i++) {
            double d = v[i] - a->mean;
            a->sum += d * d;
        }
    }
}

void etch_nn_moments(const etch_nn_plan *p, const char *base, int dtype, double *mean,
                     double *var) {
    if (p->inner == 0) {
        *mean = 0.0;
        *var = NAN;
        return;
    }
    int64_t es = (int64_t)etch_dtype_size(dtype);
    moments_acc a = {dtype, 0.0, 0.0};
    etch_nn_plan_runs(p, (char *)base, es, NULL, 0, msum_run, &a);
    a.mean = a.sum / (double)p->inner;
    a.sum = 0;
    etch_nn_plan_runs(p, (char *)base, es, NULL, 0, msq_run, &a);
    *mean = a.mean;
    *var = a.sum / (double)p->inner;
}

bool etch_nn_norm_param(etch_kernel_context *ctx, etch_value *v, const char *name,
                        const etch_tensor *self, size_t dim, const int64_t *sizes, int64_t numel,
                        bool required, etch_tensor **out) {
    *out = NULL;
    if (v && v->tag == ETCH_VALUE_NONE && !required)
        return true;
    etch_tensor *t = etch_pk_tensor(ctx, v, name);
    if (!t)
        return false;
    bool ok = sizes ? t->dim == dim : t->dim == 1;
    for (unsigned i = 0; ok && i < t->dim; i++)
        ok = sizes ? t->sizes[i] == sizes[i] : t->sizes[i] == numel;
    if (!ok) {
        char b[ETCH_PK_SHAPE_BUF], w[ETCH_PK_SHAPE_BUF];
        int64_t n1[1] = {numel};
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has shape %s, expected %s", name,
                         etch_pk_shape_str(b, sizeof b, t->dim, t->sizes),
                         sizes ? etch_pk_shape_str(w, sizeof w, dim, sizes)
                               : etch_pk_shape_str(w, sizeof w, 1, n1));
        return false;
    }
    if (!etch_nn_check_stat_dtype(ctx, self, t, name))
        return false;
    *out = t;
    return true;
}

bool etch_nn_check_stat_dtype(etch_kernel_context *ctx, const etch_tensor *self,
                              const etch_tensor *t, const char *name) {
    bool mixed = (self->dtype == ETCH_DTYPE_HALF || self->dtype == ETCH_DTYPE_BFLOAT16) &&
                 t->dtype == ETCH_DTYPE_FLOAT;
    if (t->dtype == self->dtype || mixed)
        return true;
    etch_kernel_fail(
        ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s; expected %s%s", name,
        etch_dtype_name(t->dtype), etch_dtype_name(self->dtype),
        self->dtype == ETCH_DTYPE_HALF || self->dtype == ETCH_DTYPE_BFLOAT16 ? " or Float" : "");
    return false;
}

double etch_nn_load_logical(const etch_tensor *t, int64_t j) {
    int64_t off = 0;
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        int64_t s = t->sizes[d];
        off += (j % s) * t->strides[d];
        j /= s;
    }
    return etch_pk_load_f64(
        (const char *)etch_nn_at(t->data, off * (int64_t)etch_dtype_size(t->dtype)), t->dtype);
}
