/* aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)
 * and the matrix-multiply core shared with bmm and addmm.
 *
 * Every dtype but Bool; self, mat2 and out share it. Floating accumulates in double (Half and
 * BFloat16 included), integral in int64 with wrap-around; any dim order works (strided). */
#include "kernels/portable/portable.h"

#define JC 64 /* output columns accumulated at once */

typedef struct gemm_job {
    int dtype;
    int64_t N, K;
    etch_pk_matrix a, b, bias;
    char *out;
    int64_t out_rs, out_cs;
    double alpha_d, beta_d;
    int64_t alpha_i, beta_i;
    bool use_bias;
} gemm_job;

static void gemm_rows(void *arg, int64_t i0, int64_t i1) {
    const gemm_job *g = (const gemm_job *)arg;
    int64_t es = (int64_t)etch_dtype_size(g->dtype);
    bool fdom = etch_pk_is_float(g->dtype);
    for (int64_t i = i0; i < i1; i++) {
        const char *arow = g->a.data + i * g->a.rs * es;
        for (int64_t j0 = 0; j0 < g->N; j0 += JC) {
            int64_t jn = g->N - j0 < JC ? g->N - j0 : JC;
            char *orow = g->out + (i * g->out_rs + j0 * g->out_cs) * es;
            const char *brow0 = g->b.data + j0 * g->b.cs * es;
            const char *bias = g->use_bias ? g->bias.data + (i * g->bias.rs + j0 * g->bias.cs) * es
                                           : NULL;
            if (fdom) {
                double acc[JC] = {0}, t[JC];
                for (int64_t k = 0; k < g->K; k++) {
                    double av = etch_pk_load_f64(arow + k * g->a.cs * es, g->dtype);
                    etch_pk_load_row_f64(t, brow0 + k * g->b.rs * es, g->b.cs * es, jn, g->dtype);
                    for (int64_t j = 0; j < jn; j++)
                        acc[j] += av * t[j];
                }
                for (int64_t j = 0; j < jn; j++)
                    acc[j] *= g->alpha_d;
                if (bias) {
                    etch_pk_load_row_f64(t, bias, g->bias.cs * es, jn, g->dtype);
                    for (int64_t j = 0; j < jn; j++)
                        acc[j] += g->beta_d * t[j];
                }
                etch_pk_store_row_f64(orow, g->out_cs * es, acc, jn, g->dtype);
            } else {
                int64_t acc[JC] = {0}, t[JC];
                for (int64_t k = 0; k < g->K; k++) {
                    int64_t av = etch_pk_load_i64(arow + k * g->a.cs * es, g->dtype);
                    etch_pk_load_row_i64(t, brow0 + k * g->b.rs * es, g->b.cs * es, jn, g->dtype);
                    for (int64_t j = 0; j < jn; j++)
                        acc[j] = etch_pk_wrap_add(acc[j], etch_pk_wrap_mul(av, t[j]));
                }
                for (int64_t j = 0; j < jn; j++)
                    acc[j] = etch_pk_wrap_mul(acc[j], g->alpha_i);
                if (bias) {
                    etch_pk_load_row_i64(t, bias, g->bias.cs * es, jn, g->dtype);
                    for (int64_t j = 0; j < jn; j++)
                        acc[j] = etch_pk_wrap_add(acc[j], etch_pk_wrap_mul(g->beta_i, t[j]));
                }
                etch_pk_store_row_i64(orow, g->out_cs * es, acc, jn, g->dtype);
            }
        }
    }
}

void etch_pk_gemm(etch_kernel_context *ctx, int dtype, int64_t M, int64_t N, int64_t K,
                  etch_pk_matrix a, etch_pk_matrix b, etch_pk_matrix bias, char *out,
                  int64_t out_rs, int64_t out_cs, const etch_value *alpha,
                  const etch_value *beta) {
    gemm_job g;
    g.dtype = dtype;
    g.N = N;
    g.K = K;
    g.a = a;
    g.b = b;
    g.bias = bias;
    g.out = out;
    g.out_rs = out_rs;
    g.out_cs = out_cs;
    g.alpha_d = g.beta_d = 1.0;
    g.alpha_i = g.beta_i = 1;
    if (alpha) {
        etch_value_scalar_to_double(alpha, &g.alpha_d);
        etch_value_scalar_to_int(alpha, &g.alpha_i);
    }
    if (beta) {
        etch_value_scalar_to_double(beta, &g.beta_d);
        etch_value_scalar_to_int(beta, &g.beta_i);
    }
    int opmath = dtype == ETCH_DTYPE_DOUBLE ? ETCH_DTYPE_DOUBLE : ETCH_DTYPE_FLOAT;
    etch_pk_round_row_f64(&g.alpha_d, 1, opmath);
    etch_pk_round_row_f64(&g.beta_d, 1, opmath);
    /* beta == 0 ignores the bias entirely (NaN/inf in it do not propagate), as torch */
    g.use_bias = bias.data != NULL &&
                 (etch_pk_is_float(dtype) ? g.beta_d != 0.0 : g.beta_i != 0);
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* a and b may have no data: never form pointers into them */
        static const char nothing[16];
        g.a.data = g.b.data = nothing;
        g.a.rs = g.a.cs = g.b.rs = g.b.cs = 0;
    }
    int64_t work = N * (K > 0 ? K : 1);
    int64_t grain = work >= 65536 ? 1 : 65536 / work;
    etch_kernel_parallel_for(ctx, M, grain, gemm_rows, &g);
}

ETCH_PK_KERNEL(mm_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    etch_tensor *a = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *b = a ? etch_pk_tensor(ctx, args[1], "mat2") : NULL;
    etch_tensor *out = b ? etch_pk_tensor(ctx, args[2], "out") : NULL;
    if (!out)
        return;
    if (a->dim != 2 || b->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self and mat2 must be matrices, got ranks %u and %u", (unsigned)a->dim,
                         (unsigned)b->dim);
        return;
    }
    if (!etch_pk_check_real(ctx, a, "self") || a->dtype == ETCH_DTYPE_BOOL) {
        if (!etch_kernel_failed(ctx))
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "mm does not support Bool");
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, a, "self", b, "mat2") ||
        !etch_pk_check_same_dtype(ctx, a, "self", out, "out"))
        return;
    if (a->sizes[1] != b->sizes[0]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "self [%lld, %lld] and mat2 [%lld, %lld] cannot be multiplied",
                         (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                         (long long)b->sizes[1]);
        return;
    }
    int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    if (etch_pk_resize(ctx, out, 2, sizes) != ETCH_OK)
        return;
    etch_pk_matrix ma = {(const char *)a->data, a->strides[0], a->strides[1]};
    etch_pk_matrix mb = {(const char *)b->data, b->strides[0], b->strides[1]};
    etch_pk_matrix none = {NULL, 0, 0};
    etch_pk_gemm(ctx, a->dtype, sizes[0], sizes[1], a->sizes[1], ma, mb, none, (char *)out->data,
                 out->strides[0], out->strides[1], NULL, NULL);
}
