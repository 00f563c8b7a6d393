/* The 2:4 sparse float32 linear (src/kernels/optimized/sparse.h): detection, compression and
 * the product against a double-precision reference over the plain weight and against the
 * dense GEMM (etch_opt_sgemm), under every instruction set this CPU supports, with no
 * context, one thread, the harness's shuffling pools (three split policies, 2..4 threads)
 * and the real pthread pool.
 *
 * Shapes: K and N from 1 up, not multiples of the group (4) nor of the tile (8) or a vector;
 * M = 1, 2, 3 (odd rows after the AVX2 row pairs), 16, 64; weights with rows and groups that
 * are all zero, fewer than 2 nonzeros in a group, -0.0; alpha, beta, a bias and an epilogue.
 * Tolerance (summation order: the sparse kernel sums the kept terms of a column in group
 * order, two partial sums in the AVX2 path; the dense GEMM and the reference in others):
 *     |got - ref| <= (K/2 + 4) * FLT_EPSILON * (|alpha| * sum_k |x_k w_kj| + |beta * bias_j|)
 * Threads split the column tiles, each computed whole by one thread: results are bitwise
 * equal for every thread split of one ISA. Weights that are not 2:4 are refused by
 * etch_sp24_check. The registered aten::linear / aten::mm kernels with their prepare
 * functions: a 2:4 constant weight at <= ETCH_SP24_ROWS_MAX rows is compressed and agrees with
 * the portable kernel; a weight that is not 2:4, or more rows, gets the dense prepare's very
 * bytes and the dense kernel's output bit for bit (kernel_tests). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/sparse.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

static kt_rng rng = {0x9e3779b97f4a7c15ull};
static uint32_t rnd(void) { return kt_rng_u32(&rng); }
static int rndi(int lo, int hi) { return kt_rng_int(&rng, lo, hi); }
static float rndf(void) { return (float)rndi(-1000, 1000) / 250.0f; }

static kt_shuffle_pool spools[3][5];
static etch_threadpool *real_pool;
static int cases_run;

static etch_kernel_context *ctx_pick(etch_kernel_context *ctx, int variant) {
    if (variant == 0)
        return NULL;
    const etch_threadpool_iface *tp = NULL;
    if (variant >= 2 && variant <= 4)
        tp = &spools[rndi(0, 2)][variant].iface;
    else if (variant == 5)
        tp = etch_threadpool_get_iface(real_pool);
    etch_kernel_context_init(ctx, "test", NULL, 0, tp);
    return ctx;
}

/* a random 2:4 weight b(k, j) = w[k * N + j] (zero: kind 0 random, 1 with zero columns and
 * groups, 2 at most one nonzero per group, 3 all zero) */
static void make_weight(float *w, int64_t K, int64_t N, int kind) {
    for (int64_t j = 0; j < N; j++) {
        const bool zero_col = kind == 3 || (kind == 1 && rndi(0, 3) == 0);
        for (int64_t g = 0; g < K; g += 4) {
            const int len = (int)(K - g < 4 ? K - g : 4);
            int keep[4] = {0, 0, 0, 0};
            const int nkeep = zero_col ? 0 : kind == 2 ? rndi(0, 1) : rndi(kind == 1 ? 0 : 1, 2);
            for (int s = 0; s < nkeep && s < len; s++)
                keep[rndi(0, len - 1)] = 1; /* may repeat: then fewer nonzeros */
            for (int i = 0; i < len; i++)
                w[(g + i) * N + j] = keep[i] ? rndf() : (rndi(0, 5) == 0 ? -0.0f : 0.0f);
        }
    }
}

static void one_case(int64_t M, int64_t K, int64_t N, int kind) {
    float *w = malloc((size_t)(K * N) * sizeof(float));
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float *bias = malloc((size_t)N * sizeof(float));
    float *got = malloc((size_t)(M * N) * sizeof(float));
    float *first = malloc((size_t)(M * N) * sizeof(float));
    float *dense = malloc((size_t)(M * N) * sizeof(float));
    const size_t bytes = etch_sp24_size(K, N);
    void *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    CHECK(w && x && bias && got && first && dense && buf);
    make_weight(w, K, N, kind);
    for (int64_t i = 0; i < M * K; i++)
        x[i] = rndf();
    for (int64_t j = 0; j < N; j++)
        bias[j] = rndf();
    CHECK(etch_sp24_check(w, N, 1, K, N));
    etch_sp24 sp;
    etch_sp24_compress(w, N, 1, K, N, buf, &sp);
    const int variant_bias = rndi(0, 2); /* 0 none, 1 alpha/beta + bias, 2 + relu */
    const float alpha = variant_bias ? 0.5f * (float)rndi(1, 4) : 1.0f;
    const float beta = variant_bias ? (float)rndi(-2, 2) : 0.0f;
    const etch_epilogue relu = {ETCH_ACT_RELU, 0, 0};
    const etch_epilogue *e = variant_bias == 2 ? &relu : NULL;
    for (int v = 0; v <= 5; v++) {
        etch_kernel_context ctx;
        memset(got, 0x7f, (size_t)(M * N) * sizeof(float)); /* NaN-free garbage */
        etch_sp24_linear(ctx_pick(&ctx, v), &sp, x, K, M, got, N, alpha, beta,
                         variant_bias ? bias : NULL, 1, e);
        if (v == 0)
            memcpy(first, got, (size_t)(M * N) * sizeof(float));
        else
            CHECK_MSG(memcmp(first, got, (size_t)(M * N) * sizeof(float)) == 0,
                      "M=%lld K=%lld N=%lld: thread variant %d differs bitwise", (long long)M,
                      (long long)K, (long long)N, v);
    }
    /* the dense GEMM on the same operands */
    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M, d.N = N, d.K = K;
    d.a = x, d.a_rs = K, d.a_cs = 1;
    d.b = w, d.b_rs = N, d.b_cs = 1;
    d.c = dense, d.ldc = N;
    d.alpha = alpha, d.beta = beta;
    d.bias = variant_bias ? bias : NULL, d.bias_rs = 0, d.bias_cs = 1;
    d.epilogue = e;
    etch_opt_sgemm(NULL, &d);
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)x[m * K + k] * w[k * N + j];
                mag += fabs((double)x[m * K + k] * w[k * N + j]);
            }
            ref *= alpha;
            mag *= fabs(alpha);
            if (variant_bias) {
                ref += (double)beta * bias[j];
                mag += fabs((double)beta * bias[j]);
            }
            if (e && ref < 0)
                ref = 0;
            const double tol = ((double)K / 2 + 4) * FLT_EPSILON * mag;
            const double g = first[m * N + j], dn = dense[m * N + j];
            if (!(fabs(g - ref) <= tol) || !(fabs(g - dn) <= 2 * tol)) {
                if (bad++ < 3)
                    CHECK_MSG(0, "%s M=%lld K=%lld N=%lld kind %d: y(%lld,%lld) = %.9g, ref %.9g, "
                              "dense %.9g (tol %.3g)", etch_isa_name(etch_isa_active()),
                              (long long)M, (long long)K, (long long)N, kind, (long long)m,
                              (long long)j, g, ref, dn, tol);
            }
        }
    cases_run++;
    free(w), free(x), free(bias), free(got), free(first), free(dense), free(buf);
}

static void sparse_tests(void) {
    static const int64_t Ms[] = {1, 2, 3, 16, 64};
    static const int64_t Ks[] = {1, 2, 3, 4, 5, 7, 8, 13, 36, 67, 130};
    static const int64_t Ns[] = {1, 3, 8, 9, 17, 40};
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof Ks[0]; b++)
            for (size_t c = 0; c < sizeof Ns / sizeof Ns[0]; c++)
                one_case(Ms[a], Ks[b], Ns[c], rndi(0, 3));
    one_case(5, 512, 200, 1); /* wider: several tiles a thread */
}

/* a weight with 3 nonzeros in one group (anywhere, the last partial group too) is not 2:4 */
static void check_tests(void) {
    for (int64_t K = 3; K <= 11; K++) {
        const int64_t N = 5;
        float *w = malloc((size_t)(K * N) * sizeof(float));
        CHECK(w != NULL);
        make_weight(w, K, N, 0);
        CHECK(etch_sp24_check(w, N, 1, K, N));
        const int64_t g = (K - 1) / 4 * 4, j = rndi(0, (int)N - 1);
        if (K - g >= 3) {
            for (int i = 0; i < 3; i++)
                w[(g + i) * N + j] = 1.0f + (float)i;
            CHECK_MSG(!etch_sp24_check(w, N, 1, K, N), "K=%lld: 3 nonzeros accepted",
                      (long long)K);
        }
        w[j] = NAN, w[N + j] = NAN, w[2 * N + j] = 1.0f; /* NaN counts as nonzero */
        CHECK(!etch_sp24_check(w, N, 1, K, N));
        free(w);
    }
    CHECK(etch_sp24_size(0, 4) == 0 && etch_sp24_size(4, 0) == 0);
}


/* ---- the registered kernels and their prepare functions ------------------------------------
 * aten::linear.out (w [N, K]) and aten::mm.out (w [K, N]) with a constant weight, x of M rows:
 * a 2:4 weight with M <= ETCH_SP24_ROWS_MAX is compressed (prepared size = header + the
 * compressed form) and the call agrees with the portable kernel; a weight that is not 2:4, or
 * more rows, gets exactly the dense prepare's bytes and the call's output is bit for bit the
 * dense kernel's (etch_opt_linear_out / mm_out on the same prepared data). */
static void kernel_case(bool linear, int64_t M, int64_t K, int64_t N, bool not24) {
    float *wkn = malloc((size_t)(K * N) * sizeof(float)); /* b(k, j) = wkn[k * N + j] */
    float *w = malloc((size_t)(K * N) * sizeof(float));
    float *x = malloc((size_t)(M * K) * sizeof(float));
    float *y = malloc((size_t)(M * N) * sizeof(float)), *yr = malloc((size_t)(M * N) * 4);
    CHECK(wkn && w && x && y && yr);
    make_weight(wkn, K, N, 0);
    if (not24)
        for (int i = 0; i < 3 && i < K; i++)
            wkn[i * N + N - 1] = 1.0f + (float)i;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++)
            w[linear ? j * K + k : k * N + j] = wkn[k * N + j];
    for (int64_t i = 0; i < M * K; i++)
        x[i] = rndf();
    etch_tensor tx, tw, ty;
    const int64_t xs[2] = {M, K}, ws[2] = {linear ? N : K, linear ? K : N}, ys[2] = {M, N};
    CHECK_OK(etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 2, xs, x));
    CHECK_OK(etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 2, ws, w));
    CHECK_OK(etch_tensor_init(&ty, ETCH_DTYPE_FLOAT, 2, ys, y));
    tw.flags |= ETCH_TENSOR_CONSTANT;
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), vy = kt_vtensor(&ty), vn = kt_vnone();
    etch_value *la[5] = {&vx, &vw, &vn, &vy, &vy}, *ma[4] = {&vx, &vw, &vy, &vy};
    etch_value **args = linear ? la : ma;
    const size_t nargs = linear ? 5 : 4;
    etch_kernel_prepare_fn sp_prep = linear ? etch_opt_sparse_linear_prepare
                                            : etch_opt_sparse_mm_prepare;
    etch_kernel_prepare_fn dn_prep = linear ? etch_opt_linear_prepare : etch_opt_mm_prepare;
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "test", NULL, 0, NULL);
    const size_t need = sp_prep(&ctx, args, nargs, NULL, 0);
    const size_t dneed = dn_prep(&ctx, args, nargs, NULL, 0);
    const bool sparse = !not24 && M <= ETCH_SP24_ROWS_MAX;
    CHECK_MSG(sparse ? need == 128 + etch_sp24_size(K, N) : need == dneed,
              "%s M=%lld K=%lld N=%lld%s: prepared size %zu (dense %zu)",
              linear ? "linear" : "mm", (long long)M, (long long)K, (long long)N,
              not24 ? " (not 2:4)" : "", need, dneed);
    void *buf = need ? aligned_alloc(64, (need + 63) & ~(size_t)63) : NULL;
    void *dbuf = dneed ? aligned_alloc(64, (dneed + 63) & ~(size_t)63) : NULL;
    size_t got = need ? sp_prep(&ctx, args, nargs, buf, need) : 0;
    size_t dgot = dneed ? dn_prep(&ctx, args, nargs, dbuf, dneed) : 0;
    CHECK(got == need && dgot == dneed);
    if (!sparse)
        CHECK_MSG(got == dgot && (got == 0 || memcmp(buf, dbuf, got) == 0),
                  "M=%lld K=%lld N=%lld: not the dense prepared bytes", (long long)M,
                  (long long)K, (long long)N);
    ctx.prepared = buf;
    ctx.prepared_size = got;
    (linear ? etch_opt_sparse_linear_out : etch_opt_sparse_mm_out)(&ctx, args, nargs);
    CHECK(!etch_kernel_failed(&ctx));
    if (sparse) {
        etch_kernel_context pc;
        etch_kernel_context_init(&pc, "test", NULL, 0, NULL);
        ty.data = yr;
        (linear ? etch_portable_linear_out : etch_portable_mm_out)(&pc, args, nargs);
        for (int64_t i = 0; i < M * N; i++) {
            const int64_t m = i / N, j = i % N;
            double mag = 0;
            for (int64_t k = 0; k < K; k++)
                mag += fabs((double)x[m * K + k] * wkn[k * N + j]);
            CHECK_MSG(fabs((double)y[i] - yr[i]) <= ((double)K + 8) * FLT_EPSILON * mag,
                      "M=%lld K=%lld N=%lld: %g vs portable %g", (long long)M, (long long)K,
                      (long long)N, y[i], yr[i]);
        }
    } else {
        etch_kernel_context dc;
        etch_kernel_context_init(&dc, "test", NULL, 0, NULL);
        dc.prepared = dbuf;
        dc.prepared_size = dgot;
        ty.data = yr;
        (linear ? etch_opt_linear_out : etch_opt_mm_out)(&dc, args, nargs);
        CHECK_MSG(memcmp(y, yr, (size_t)(M * N) * sizeof(float)) == 0,
                  "M=%lld K=%lld N=%lld: dense path not bit for bit", (long long)M,
                  (long long)K, (long long)N);
    }
    free(buf), free(dbuf), free(wkn), free(w), free(x), free(y), free(yr);
}

static void kernel_tests(void) {
    for (int lin = 0; lin < 2; lin++)
        for (int not24 = 0; not24 < 2; not24++) {
            kernel_case(lin, 1, 68, 44, not24);
            kernel_case(lin, 3, 13, 9, not24);
            kernel_case(lin, ETCH_SP24_ROWS_MAX, 256, 40, not24);
            kernel_case(lin, ETCH_SP24_ROWS_MAX + 1, 64, 17, not24);
            kernel_case(lin, 40, 36, 24, not24);
        }
}

int main(void) {
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            kt_shuffle_pool_init(&spools[s][t], t, (kt_split)s, rnd);
    CHECK_OK(etch_threadpool_create(2, &real_pool));
    check_tests();
    etch_isa isas[KT_N_ISAS];
    const int n = kt_pick_isas(isas);
    for (int i = 0; i < n; i++) {
        CHECK_OK(etch_isa_set(isas[i]));
        const int before = cases_run, failed = etch_test_failed_;
        sparse_tests();
        kernel_tests();
        printf("isa %-8s %d cases, %d failures\n", etch_isa_name(isas[i]), cases_run - before,
               etch_test_failed_ - failed);
    }
    CHECK(n >= 1);
    for (int s = 0; s < 3; s++)
        for (int t = 2; t <= 4; t++)
            CHECK(spools[s][t].calls > 0);
    CHECK_OK(etch_isa_set(etch_isa_best()));
    etch_threadpool_destroy(real_pool);
    return etch_test_finish();
}
