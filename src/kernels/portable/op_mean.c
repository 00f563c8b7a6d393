/*
 * aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
 *                Tensor(a!) out)
 * aten::mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)
 *
 * dim None or [] reduces every dim. The mean is taken in out's dtype, which must be floating:
 * without a dtype argument self must be floating too (torch cannot infer a dtype otherwise);
 * a dtype argument must equal out's dtype and self's elements are first converted to it.
 * Sums accumulate in double; an empty reduction gives NaN. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

typedef struct mean_job {
    etch_nn_plan pl;
    const etch_tensor *in, *out;
    bool full_rank;
    int round_dt; /* -1: no conversion of the inputs; else round each one to this dtype */
} mean_job;

typedef struct mean_acc {
    int dtype, round_dt;
    double sum;
} mean_acc;

static void mean_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    mean_acc *a = (mean_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->dtype);
        if (a->round_dt >= 0)
            etch_pk_round_row_f64(v, m, a->round_dt);
        double t = 0;
        for (int64_t i = 0; i < m; i++)
            t += v[i];
        a->sum += t;
    }
}

static void mean_rows(void *arg, int64_t b, int64_t e) {
    const mean_job *j = (const mean_job *)arg;
    int64_t ies = (int64_t)etch_dtype_size(j->in->dtype);
    int64_t oes = (int64_t)etch_dtype_size(j->out->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = b; o < e; o++) {
        etch_nn_plan_index(&j->pl, o, idx);
        int64_t io = etch_nn_plan_offset(&j->pl, idx, j->in, true);
        int64_t oo = etch_nn_plan_offset(&j->pl, idx, j->out, j->full_rank);
        mean_acc a = {j->in->dtype, j->round_dt, 0.0};
        etch_nn_plan_runs(&j->pl, etch_nn_at(j->in->data, io * ies), ies, NULL, 0, mean_run, &a);
        etch_pk_store_f64(etch_nn_at(j->out->data, oo * oes), j->out->dtype,
                          a.sum / (double)j->pl.inner);
    }
}

static void mean_common(etch_kernel_context *ctx, etch_value *self_v, etch_value *dim_v,
                        bool keepdim, etch_value *dtype_v, etch_value *out_v) {
    etch_tensor *in = etch_pk_tensor(ctx, self_v, "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, out_v, "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    bool given;
    if (!etch_nn_dtype_arg(ctx, dtype_v, out, &given))
        return;
    if (!etch_pk_is_float(out->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "mean is computed in a floating dtype; out has dtype %s",
                         etch_dtype_name(out->dtype));
        return;
    }
    if (!given && !etch_pk_is_float(in->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "mean of a %s tensor needs a floating dtype argument",
                         etch_dtype_name(in->dtype));
        return;
    }
    uint32_t mask;
    if (!etch_nn_dim_mask(ctx, dim_v, in, &mask))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    mean_job j;
    etch_nn_plan_init(&j.pl, in, NULL, mask);
    j.in = in;
    j.out = out;
    j.full_rank = keepdim;
    j.round_dt = given && out->dtype != in->dtype ? out->dtype : -1;
    int64_t grain = j.pl.inner >= 4096 ? 1 : 4096 / (j.pl.inner + 1) + 1;
    etch_kernel_parallel_for(ctx, j.pl.outer, grain, mean_rows, &j);
}

ETCH_PK_KERNEL(mean_out) {
    bool keepdim;
    if (!etch_pk_nargs(ctx, nargs, 5) || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim))
        return;
    mean_common(ctx, args[0], args[1], keepdim, args[3], args[4]);
}

ETCH_PK_KERNEL(mean_dtype_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    mean_common(ctx, args[0], NULL, false, args[1], args[2]);
}
