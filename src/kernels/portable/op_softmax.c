/*
 * aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
 * aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)
 *
 * Float, Double, Half, BFloat16; out has self's dtype (half_to_float must be false, as on
 * torch's CPU). Numerically stable: per slice along dim, m = max, s = sum(exp(x - m)) in
 * double, softmax = exp(x - m) / s, log_softmax = x - m - log(s). A slice holding NaN gives
 * NaN; one whose max is +-inf gives NaN (inf - inf), as torch. A 0-dim self is one slice of
 * one element. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct sm_job {
    etch_nn_plan pl;
    const etch_tensor *in, *out;
    bool log, keep;
} sm_job;

typedef struct sm_acc {
    int in_dt, out_dt;
    bool log, keep; /* keep: the sum pass leaves exp(x - max) in out (Float/Double outs) */
    double max, sum;
} sm_acc;

static void max_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    sm_acc *a = (sm_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->in_dt);
        for (int64_t k = 0; k < m; k++)
            if (v[k] > a->max || isnan(v[k]))
                a->max = isnan(a->max) ? a->max : v[k];
    }
}

static void sum_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    sm_acc *a = (sm_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->in_dt);
        for (int64_t k = 0; k < m; k++) {
            v[k] = exp(v[k] - a->max);
            a->sum += v[k];
        }
        if (a->keep)
            etch_pk_store_row_f64(q + off * qs, qs, v, m, a->out_dt);
    }
}

static void write_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    sm_acc *a = (sm_acc *)arg;
    double v[ETCH_NN_CHUNK];
    double ls = a->log ? log(a->sum) : 0.0;
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        if (a->keep) {
            etch_pk_load_row_f64(v, q + off * qs, qs, m, a->out_dt);
            for (int64_t k = 0; k < m; k++)
                v[k] /= a->sum;
        } else {
            etch_pk_load_row_f64(v, p + off * s, s, m, a->in_dt);
            if (a->log) {
                for (int64_t k = 0; k < m; k++)
                    v[k] = (v[k] - a->max) - ls;
            } else {
                for (int64_t k = 0; k < m; k++)
                    v[k] = exp(v[k] - a->max) / a->sum;
            }
        }
        etch_pk_store_row_f64(q + off * qs, qs, v, m, a->out_dt);
    }
}

static void sm_rows(void *arg, int64_t b, int64_t e) {
    const sm_job *j = (const sm_job *)arg;
    int64_t es = (int64_t)etch_dtype_size(j->in->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = b; o < e; o++) {
        etch_nn_plan_index(&j->pl, o, idx);
        char *ib = etch_nn_at(j->in->data, etch_nn_plan_offset(&j->pl, idx, j->in, true) * es);
        char *ob = etch_nn_at(j->out->data, etch_nn_plan_offset(&j->pl, idx, j->out, true) * es);
        sm_acc a = {j->in->dtype, j->out->dtype, j->log, j->keep, -INFINITY, 0.0};
        etch_nn_plan_runs(&j->pl, ib, es, NULL, 0, max_run, &a);
        etch_nn_plan_runs(&j->pl, ib, es, ob, es, sum_run, &a);
        etch_nn_plan_runs(&j->pl, ib, es, ob, es, write_run, &a);
    }
}

static void softmax_common(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool log_) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    int64_t d;
    bool h2f;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &d) ||
        !etch_pk_bool(ctx, args[2], "half_to_float", &h2f) ||
        !etch_pk_wrap_dim(ctx, d, in->dim, &d) || !etch_nn_check_float(ctx, in, "self") ||
        !etch_pk_check_same_dtype(ctx, in, "self", out, "out"))
        return;
    if (h2f) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "half_to_float is not supported (torch supports it on CUDA only)");
        return;
    }
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    sm_job j;
    etch_nn_plan_init(&j.pl, in, out, in->dim == 0 ? 0u : 1u << d);
    j.in = in;
    j.out = out;
    j.log = log_;
    /* softmax into a Float/Double out keeps exp(x - max) there between passes (one exp per
     * element; Half/BFloat16 would lose precision, so they compute it twice) */
    j.keep = !log_ && (out->dtype == ETCH_DTYPE_FLOAT || out->dtype == ETCH_DTYPE_DOUBLE) &&
             in->data != out->data;
    if (j.pl.inner == 0)
        return;
    int64_t grain = j.pl.inner >= 2048 ? 1 : 2048 / j.pl.inner + 1;
    etch_kernel_parallel_for(ctx, j.pl.outer, grain, sm_rows, &j);
}

ETCH_PK_KERNEL(softmax_out) { softmax_common(ctx, args, nargs, false); }

ETCH_PK_KERNEL(log_softmax_out) { softmax_common(ctx, args, nargs, true); }
