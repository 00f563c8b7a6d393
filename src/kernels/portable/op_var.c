/*
 * aten::var.correction_out(Tensor self, int[1]? dim, *, int? correction, bool keepdim=False,
 *                          Tensor(a!) out)
 * aten::var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *,
 *               Tensor(a!) out)
 *
 * Floating self and out (Float, Double, Half, BFloat16; they may differ). dim None or []
 * reduces every dim. var = sum((x - mean)^2) / max(0, N - correction), correction None = 1,
 * unbiased = correction 1 (else 0); computed in two passes in double, so N - correction <= 0
 * gives inf (or NaN for 0 / 0), and an empty reduction NaN, as torch. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct var_acc {
    int dtype;
    double mean, sum;
} var_acc;

static void sum_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    var_acc *a = (var_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->dtype);
        for (int64_t i = 0; i < m; i++)
            a->sum += v[i];
    }
}

static void sq_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    var_acc *a = (var_acc *)arg;
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

static void var_common(etch_kernel_context *ctx, etch_value *self_v, etch_value *dim_v,
                       double correction, bool keepdim, etch_value *out_v) {
    etch_tensor *in = etch_pk_tensor(ctx, self_v, "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, out_v, "out") : NULL;
    if (!out || !etch_nn_check_float(ctx, in, "self") || !etch_nn_check_float(ctx, out, "out"))
        return;
    uint32_t mask;
    if (!etch_nn_dim_mask(ctx, dim_v, in, &mask))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    int64_t ies = (int64_t)etch_dtype_size(in->dtype), oes = (int64_t)etch_dtype_size(out->dtype);
    double denom = (double)pl.inner - correction;
    if (denom < 0)
        denom = 0;
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        char *base = etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * ies);
        var_acc a = {in->dtype, 0.0, 0.0};
        etch_nn_plan_runs(&pl, base, ies, NULL, 0, sum_run, &a);
        a.mean = a.sum / (double)pl.inner;
        a.sum = 0;
        etch_nn_plan_runs(&pl, base, ies, NULL, 0, sq_run, &a);
        double r = pl.inner == 0 ? NAN : a.sum / denom;
        etch_pk_store_f64(etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, keepdim) * oes),
                          out->dtype, r);
    }
}

ETCH_PK_KERNEL(var_correction_out) {
    bool keepdim;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[3], "keepdim", &keepdim))
        return;
    int64_t c = 1;
    if (args[2]->tag != ETCH_VALUE_NONE && !etch_pk_int(ctx, args[2], "correction", &c))
        return;
    var_common(ctx, args[0], args[1], (double)c, keepdim, args[4]);
}

ETCH_PK_KERNEL(var_out) {
    bool unbiased, keepdim;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[2], "unbiased", &unbiased) ||
        !etch_pk_bool(ctx, args[3], "keepdim", &keepdim))
        return;
    var_common(ctx, args[0], args[1], unbiased ? 1.0 : 0.0, keepdim, args[4]);
}
