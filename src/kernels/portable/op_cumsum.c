/*
 * aten::cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)
 *
 * Every real dtype in; out any real dtype but Bool (a dtype argument must equal it). Elements
 * are converted to out's dtype, then summed along dim: floating in double (each partial sum
 * rounded to out's dtype when stored, as torch's double accumulator), integral in int64 with
 * wrap-around. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

typedef struct cumsum_acc {
    int in_dt, out_dt;
    double f;
    int64_t i;
} cumsum_acc;

static void cumsum_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    cumsum_acc *a = (cumsum_acc *)arg;
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        if (etch_pk_is_float(a->out_dt)) {
            double v[ETCH_NN_CHUNK];
            etch_pk_load_row_f64(v, p + off * s, s, m, a->in_dt);
            if (a->in_dt != a->out_dt)
                etch_pk_round_row_f64(v, m, a->out_dt);
            for (int64_t k = 0; k < m; k++) {
                a->f += v[k];
                v[k] = a->f;
            }
            etch_pk_store_row_f64(q + off * qs, qs, v, m, a->out_dt);
        } else {
            int64_t v[ETCH_NN_CHUNK];
            etch_pk_load_row_i64(v, p + off * s, s, m, a->in_dt);
            for (int64_t k = 0; k < m; k++) {
                a->i = etch_pk_wrap_add(a->i, v[k]);
                v[k] = a->i;
            }
            etch_pk_store_row_i64(q + off * qs, qs, v, m, a->out_dt);
        }
    }
}

ETCH_PK_KERNEL(cumsum_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    int64_t d;
    bool given;
    if (!out || !etch_pk_int(ctx, args[1], "dim", &d) || !etch_pk_wrap_dim(ctx, d, in->dim, &d) ||
        !etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out") ||
        !etch_nn_dtype_arg(ctx, args[2], out, &given))
        return;
    if (out->dtype == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "cumsum does not support a Bool out");
        return;
    }
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, out, in->dim == 0 ? 0u : 1u << d);
    int64_t ies = (int64_t)etch_dtype_size(in->dtype), oes = (int64_t)etch_dtype_size(out->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        char *ib = etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * ies);
        char *ob = etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, true) * oes);
        cumsum_acc a = {in->dtype, out->dtype, 0.0, 0};
        etch_nn_plan_runs(&pl, ib, ies, ob, oes, cumsum_run, &a);
    }
}
