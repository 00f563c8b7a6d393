/*
 * aten::native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
 *     SymInt HxW, int group, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)
 *     -> (Tensor(a!), Tensor(b!), Tensor(c!))
 *
 * Input [N, C, *] (rank 2 to 15) with N, C the given values and HxW the product of the rest;
 * Float, Double, Half or BFloat16. group > 0 divides C. weight / bias (optional) are 1-D [C] of
 * input's dtype (or Float for Half/BFloat16). Each (n, g) group of C / group channels is
 * normalized with its mean and biased variance (double): out0 = (x - mean) * rstd * weight[c]
 * + bias[c], rstd = 1 / sqrt(var + eps); out1 = mean and out2 = rstd, [N, group], of input's
 * dtype (or Float for Half/BFloat16). Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct gn_job {
    etch_nn_plan pl; /* over the [N, G, C/G, *] views: kept N, G; tensors in, out0 */
    etch_tensor vin, vout;
    const etch_tensor *mean, *rstd, *w, *b;
    int64_t G, cg, hw;
    double eps;
} gn_job;

typedef struct gn_acc {
    const gn_job *j;
    double mean, rstd;
    int64_t c0, pos; /* first channel of the group; logical index within the group */
} gn_acc;

static double param(const etch_tensor *t, int64_t c, double dflt) {
    if (!t)
        return dflt;
    return etch_pk_load_f64(
        (const char *)etch_nn_at(t->data, c * t->strides[0] * (int64_t)etch_dtype_size(t->dtype)),
        t->dtype);
}

static void gn_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    gn_acc *a = (gn_acc *)arg;
    const gn_job *j = a->j;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, j->vin.dtype);
        for (int64_t i = 0; i < m; i++) {
            int64_t c = a->c0 + (a->pos + i) / j->hw;
            v[i] = (v[i] - a->mean) * a->rstd * param(j->w, c, 1.0) + param(j->b, c, 0.0);
        }
        a->pos += m;
        etch_pk_store_row_f64(q + off * qs, qs, v, m, j->vout.dtype);
    }
}

static void gn_groups(void *arg, int64_t r0, int64_t r1) {
    const gn_job *j = (const gn_job *)arg;
    int64_t ies = (int64_t)etch_dtype_size(j->vin.dtype),
            oes = (int64_t)etch_dtype_size(j->vout.dtype);
    int64_t ms = (int64_t)etch_dtype_size(j->mean->dtype),
            rs = (int64_t)etch_dtype_size(j->rstd->dtype);
    int64_t idx[2];
    for (int64_t r = r0; r < r1; r++) {
        etch_nn_plan_index(&j->pl, r, idx); /* idx = {n, g} */
        char *ib = etch_nn_at(j->vin.data, etch_nn_plan_offset(&j->pl, idx, &j->vin, true) * ies);
        char *ob = etch_nn_at(j->vout.data, etch_nn_plan_offset(&j->pl, idx, &j->vout, true) * oes);
        double mean, var;
        etch_nn_moments(&j->pl, ib, j->vin.dtype, &mean, &var);
        gn_acc a = {j, mean, 1.0 / sqrt(var + j->eps), idx[1] * j->cg, 0};
        int64_t mo = idx[0] * j->mean->strides[0] + idx[1] * j->mean->strides[1];
        int64_t ro = idx[0] * j->rstd->strides[0] + idx[1] * j->rstd->strides[1];
        etch_pk_store_f64(etch_nn_at(j->mean->data, mo * ms), j->mean->dtype, mean);
        etch_pk_store_f64(etch_nn_at(j->rstd->data, ro * rs), j->rstd->dtype, a.rstd);
        etch_nn_plan_runs(&j->pl, ib, ies, ob, oes, gn_run, &a);
    }
}

/* [N, C, *] -> [N, G, C/G, *] without moving data */
static void group_view(etch_tensor *v, const etch_tensor *t, int64_t G) {
    *v = *t;
    v->dim = (uint8_t)(t->dim + 1);
    v->sizes[0] = t->sizes[0];
    v->strides[0] = t->strides[0];
    v->sizes[1] = G;
    v->strides[1] = t->strides[1] * (t->sizes[1] / G);
    v->sizes[2] = t->sizes[1] / G;
    v->strides[2] = t->strides[1];
    for (unsigned i = 2; i < t->dim; i++) {
        v->sizes[i + 1] = t->sizes[i];
        v->strides[i + 1] = t->strides[i];
    }
}

ETCH_PK_KERNEL(native_group_norm_out) {
    if (!etch_pk_nargs(ctx, nargs, 11))
        return;
    gn_job j;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[8], "out0") : NULL;
    etch_tensor *mean = out ? etch_pk_tensor(ctx, args[9], "out1") : NULL;
    etch_tensor *rstd = mean ? etch_pk_tensor(ctx, args[10], "out2") : NULL;
    int64_t N, C, HxW, G;
    if (!rstd || !etch_pk_int(ctx, args[3], "N", &N) || !etch_pk_int(ctx, args[4], "C", &C) ||
        !etch_pk_int(ctx, args[5], "HxW", &HxW) || !etch_pk_int(ctx, args[6], "group", &G) ||
        !etch_nn_double(ctx, args[7], "eps", &j.eps) || !etch_nn_check_float(ctx, in, "input"))
        return;
    char is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    if (in->dim < 2 || in->dim >= ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected an input [N, C, *] of rank 2 to %d, got %s", ETCH_MAX_DIMS - 1,
                         is);
        return;
    }
    int64_t hw = 1;
    for (unsigned i = 2; i < in->dim; i++)
        hw *= in->sizes[i];
    if (in->sizes[0] != N || in->sizes[1] != C || hw != HxW) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input %s does not match N = %lld, C = %lld, HxW = %lld", is, (long long)N,
                         (long long)C, (long long)HxW);
        return;
    }
    if (G <= 0 || C % G != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "group = %lld must be positive and divide the %lld channels", (long long)G,
                         (long long)C);
        return;
    }
    etch_tensor *w, *b;
    if (!etch_nn_norm_param(ctx, args[1], "weight", in, 1, NULL, C, false, &w) ||
        !etch_nn_norm_param(ctx, args[2], "bias", in, 1, NULL, C, false, &b) ||
        !etch_pk_check_same_dtype(ctx, in, "input", out, "out0") ||
        !etch_nn_check_stat_dtype(ctx, in, mean, "out1") ||
        !etch_nn_check_stat_dtype(ctx, in, rstd, "out2"))
        return;
    int64_t ssz[2] = {N, G};
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK ||
        etch_pk_resize(ctx, mean, 2, ssz) != ETCH_OK ||
        etch_pk_resize(ctx, rstd, 2, ssz) != ETCH_OK)
        return;
    if (N == 0 || C == 0)
        return;
    group_view(&j.vin, in, G);
    group_view(&j.vout, out, G);
    etch_nn_plan_init(&j.pl, &j.vin, &j.vout, (uint32_t)((1ull << j.vin.dim) - 1u) & ~3u);
    j.mean = mean;
    j.rstd = rstd;
    j.w = w;
    j.b = b;
    j.G = G;
    j.cg = C / G;
    j.hw = hw > 0 ? hw : 1;
    int64_t per = j.cg * hw;
    etch_kernel_parallel_for(ctx, N * G, per >= 4096 ? 1 : 4096 / (per + 1) + 1, gn_groups, &j);
}
