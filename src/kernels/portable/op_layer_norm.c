/*
 * aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,
 *     Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
 *     -> (Tensor(a!), Tensor(b!), Tensor(c!))
 *
 * Float, Double, Half or BFloat16 input; normalized_shape (1 to rank values) must equal the
 * input's trailing sizes, and weight / bias (optional) must have exactly that shape, input's
 * dtype (or Float for a Half/BFloat16 input). out0 = (x - mean) * rstd * weight + bias over
 * each row of the trailing dims, with mean and biased variance in double and
 * rstd = 1 / sqrt(var + eps); out1 = mean and out2 = rstd, shaped input.shape[:axis] + [1] *
 * len(normalized_shape), of input's dtype (or Float for Half/BFloat16). An empty row gives
 * mean 0 and rstd NaN, as torch. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct ln_job {
    etch_nn_plan pl; /* kept: leading dims; reduced: normalized dims; tensors in, out0 */
    const etch_tensor *in, *out, *mean, *rstd, *w, *b;
    bool w_contig, b_contig;
    double eps;
} ln_job;

typedef struct ln_acc {
    const ln_job *j;
    double mean, rstd;
    int64_t pos; /* logical index within the row */
} ln_acc;

static double param_at(const etch_tensor *t, bool contig, int64_t j) {
    if (contig)
        return etch_pk_load_f64(
            (const char *)etch_nn_at(t->data, j * (int64_t)etch_dtype_size(t->dtype)), t->dtype);
    return etch_nn_load_logical(t, j);
}

static void ln_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    ln_acc *a = (ln_acc *)arg;
    const ln_job *j = a->j;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, j->in->dtype);
        for (int64_t i = 0; i < m; i++) {
            double y = (v[i] - a->mean) * a->rstd;
            if (j->w)
                y *= param_at(j->w, j->w_contig, a->pos + i);
            if (j->b)
                y += param_at(j->b, j->b_contig, a->pos + i);
            v[i] = y;
        }
        a->pos += m;
        etch_pk_store_row_f64(q + off * qs, qs, v, m, j->out->dtype);
    }
}

static void ln_rows(void *arg, int64_t r0, int64_t r1) {
    const ln_job *j = (const ln_job *)arg;
    int64_t ies = (int64_t)etch_dtype_size(j->in->dtype),
            oes = (int64_t)etch_dtype_size(j->out->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t r = r0; r < r1; r++) {
        etch_nn_plan_index(&j->pl, r, idx);
        char *ib = etch_nn_at(j->in->data, etch_nn_plan_offset(&j->pl, idx, j->in, true) * ies);
        char *ob = etch_nn_at(j->out->data, etch_nn_plan_offset(&j->pl, idx, j->out, true) * oes);
        double mean, var;
        etch_nn_moments(&j->pl, ib, j->in->dtype, &mean, &var);
        ln_acc a = {j, mean, 1.0 / sqrt(var + j->eps), 0};
        etch_pk_store_f64(
            etch_nn_at(j->mean->data, etch_nn_plan_offset(&j->pl, idx, j->mean, true) *
                                          (int64_t)etch_dtype_size(j->mean->dtype)),
            j->mean->dtype, mean);
        etch_pk_store_f64(
            etch_nn_at(j->rstd->data, etch_nn_plan_offset(&j->pl, idx, j->rstd, true) *
                                          (int64_t)etch_dtype_size(j->rstd->dtype)),
            j->rstd->dtype, a.rstd);
        etch_nn_plan_runs(&j->pl, ib, ies, ob, oes, ln_run, &a);
    }
}

ETCH_PK_KERNEL(native_layer_norm_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    ln_job j;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[5], "out0") : NULL;
    etch_tensor *mean = out ? etch_pk_tensor(ctx, args[6], "out1") : NULL;
    etch_tensor *rstd = mean ? etch_pk_tensor(ctx, args[7], "out2") : NULL;
    size_t len;
    const int64_t *ns = rstd ? etch_pk_int_list(ctx, args[1], "normalized_shape", &len) : NULL;
    if (!ns || !etch_nn_double(ctx, args[4], "eps", &j.eps) ||
        !etch_nn_check_float(ctx, in, "input"))
        return;
    bool match = len >= 1 && len <= in->dim;
    for (size_t i = 0; match && i < len; i++)
        match = ns[i] == in->sizes[in->dim - len + i];
    if (!match) {
        char a[ETCH_PK_SHAPE_BUF], b[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "normalized_shape %s must be 1 to rank trailing sizes of input %s",
                         etch_pk_shape_str(a, sizeof a, len, ns),
                         etch_pk_shape_str(b, sizeof b, in->dim, in->sizes));
        return;
    }
    int64_t M = 1;
    for (size_t i = 0; i < len; i++)
        M *= ns[i];
    etch_tensor *w, *b;
    if (!etch_nn_norm_param(ctx, args[2], "weight", in, len, ns, M, false, &w) ||
        !etch_nn_norm_param(ctx, args[3], "bias", in, len, ns, M, false, &b) ||
        !etch_pk_check_same_dtype(ctx, in, "input", out, "out0") ||
        !etch_nn_check_stat_dtype(ctx, in, mean, "out1") ||
        !etch_nn_check_stat_dtype(ctx, in, rstd, "out2"))
        return;
    size_t axis = in->dim - len;
    int64_t ssz[ETCH_MAX_DIMS];
    for (size_t i = 0; i < in->dim; i++)
        ssz[i] = i < axis ? in->sizes[i] : 1;
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK ||
        etch_pk_resize(ctx, mean, in->dim, ssz) != ETCH_OK ||
        etch_pk_resize(ctx, rstd, in->dim, ssz) != ETCH_OK)
        return;
    uint32_t mask = (uint32_t)((1ull << in->dim) - 1u) & ~(uint32_t)((1ull << axis) - 1u);
    etch_nn_plan_init(&j.pl, in, out, mask);
    if (j.pl.outer == 0)
        return;
    j.in = in;
    j.out = out;
    j.mean = mean;
    j.rstd = rstd;
    j.w = w && M > 0 ? w : NULL;
    j.b = b && M > 0 ? b : NULL;
    j.w_contig = w && etch_tensor_is_contiguous(w);
    j.b_contig = b && etch_tensor_is_contiguous(b);
    etch_kernel_parallel_for(ctx, j.pl.outer, M >= 4096 ? 1 : 4096 / (M + 1) + 1, ln_rows, &j);
}
