/*
 * aten::prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None,
 *                    Tensor(a!) out)
 * aten::prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)
 *
 * Every real dtype in and out. The product is taken in out's dtype (a dtype argument must
 * equal it): each element is converted to that dtype first (floating -> integral truncates,
 * anything -> Bool is "!= 0"), floating products accumulate in double, integral ones in int64
 * with wrap-around, Bool is a logical and. An empty product is 1. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

typedef struct prod_acc {
    int in_dt, out_dt;
    double f;
    int64_t i;
} prod_acc;

static void prod_run(void *arg, char *p, int64_t s, char *p1, int64_t s1, int64_t n) {
    prod_acc *a = (prod_acc *)arg;
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        const char *q = p + off * s;
        if (etch_pk_is_float(a->out_dt)) {
            double v[ETCH_NN_CHUNK];
            etch_pk_load_row_f64(v, q, s, m, a->in_dt);
            if (a->in_dt != a->out_dt)
                etch_pk_round_row_f64(v, m, a->out_dt);
            for (int64_t k = 0; k < m; k++)
                a->f *= v[k];
        } else if (a->out_dt == ETCH_DTYPE_BOOL) {
            double v[ETCH_NN_CHUNK];
            etch_pk_load_row_f64(v, q, s, m, a->in_dt);
            for (int64_t k = 0; k < m; k++)
                a->i &= v[k] != 0;
        } else {
            int64_t v[ETCH_NN_CHUNK];
            etch_pk_load_row_i64(v, q, s, m, a->in_dt);
            for (int64_t k = 0; k < m; k++)
                a->i = etch_pk_wrap_mul(a->i, v[k]);
        }
    }
}

static void prod_common(etch_kernel_context *ctx, etch_tensor *in, uint32_t mask, bool keepdim,
                        etch_value *dtype_v, etch_tensor *out) {
    if (!etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    bool given;
    if (!etch_nn_dtype_arg(ctx, dtype_v, out, &given))
        return;
    int64_t osz[ETCH_MAX_DIMS];
    size_t od;
    etch_nn_reduced_shape(in, mask, keepdim, &od, osz);
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK)
        return;
    etch_nn_plan pl;
    etch_nn_plan_init(&pl, in, NULL, mask);
    int64_t ies = (int64_t)etch_dtype_size(in->dtype), oes = (int64_t)etch_dtype_size(out->dtype);
    int64_t idx[ETCH_MAX_DIMS];
    for (int64_t o = 0; o < pl.outer; o++) {
        etch_nn_plan_index(&pl, o, idx);
        char *base = etch_nn_at(in->data, etch_nn_plan_offset(&pl, idx, in, true) * ies);
        prod_acc a = {in->dtype, out->dtype, 1.0, 1};
        etch_nn_plan_runs(&pl, base, ies, NULL, 0, prod_run, &a);
        char *dst = etch_nn_at(out->data, etch_nn_plan_offset(&pl, idx, out, keepdim) * oes);
        if (etch_pk_is_float(out->dtype))
            etch_pk_store_f64(dst, out->dtype, a.f);
        else
            etch_pk_store_i64(dst, out->dtype, a.i);
    }
}

ETCH_PK_KERNEL(prod_int_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    bool keepdim;
    int64_t d;
    if (!out || !etch_pk_bool(ctx, args[2], "keepdim", &keepdim) ||
        !etch_pk_int(ctx, args[1], "dim", &d) || !etch_pk_wrap_dim(ctx, d, in->dim, &d))
        return;
    prod_common(ctx, in, in->dim == 0 ? 0u : 1u << d, keepdim, args[3], out);
}

ETCH_PK_KERNEL(prod_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out)
        return;
    prod_common(ctx, in, in->dim == 0 ? 0u : (uint32_t)((1ull << in->dim) - 1u), false, args[1],
                out);
}
