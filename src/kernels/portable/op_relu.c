/* aten::relu.out(Tensor self, *, Tensor(a!) out): max(x, 0); NaN stays NaN. Every real dtype
 * but Bool; out may have another dtype (converted like copy_, as torch's relu.out). Any dim
 * order. */
#include "kernels/portable/portable.h"

#define CHUNK 128

typedef struct relu_state {
    int in_dt, out_dt;
} relu_state;

static void relu_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const relu_state *st = (const relu_state *)arg;
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t m = n - off < CHUNK ? n - off : CHUNK;
        if (etch_pk_is_float(st->in_dt)) {
            double v[CHUNK];
            etch_pk_load_row_f64(v, p[1] + off * s[1], s[1], m, st->in_dt);
            for (int64_t i = 0; i < m; i++)
                v[i] = v[i] < 0 ? 0.0 : v[i];
            etch_pk_store_row_f64(p[0] + off * s[0], s[0], v, m, st->out_dt);
        } else {
            int64_t v[CHUNK];
            etch_pk_load_row_i64(v, p[1] + off * s[1], s[1], m, st->in_dt);
            for (int64_t i = 0; i < m; i++)
                v[i] = v[i] < 0 ? 0 : v[i];
            etch_pk_store_row_i64(p[0] + off * s[0], s[0], v, m, st->out_dt);
        }
    }
}

ETCH_PK_KERNEL(relu_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[1], "out") : NULL;
    if (!out || !etch_pk_check_real(ctx, in, "self") || !etch_pk_check_real(ctx, out, "out"))
        return;
    if (in->dtype == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "relu does not support Bool inputs");
        return;
    }
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    relu_state st = {in->dtype, out->dtype};
    etch_pk_iter it;
    etch_pk_iter_init(&it, in->dim, in->sizes);
    etch_pk_iter_add(&it, out);
    etch_pk_iter_add(&it, in);
    etch_pk_iter_run(&it, relu_inner, &st);
}
