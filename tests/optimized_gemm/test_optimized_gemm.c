/* etch_opt_sgemm against a double-precision reference, and the optimized aten::mm / bmm /
 * addmm / linear kernels against the portable ones, under every instruction set this CPU
 * supports (the others are reported as "not run").
 *
 * Coverage: sizes 0..70 with every tail, M = 1 decode shapes (B unpacked and prepacked),
 * K = 0, K up to 2048, blocks larger than the cache blocking, transposed and strided A and B,
 * padded C rows, bias as a row, a column, a matrix (either order) or a scalar, alpha/beta,
 * every fused activation,
 * 1..4 threads (a test pool that runs the chunks serially in a shuffled order, and the real
 * pthread pool), and scratch that is ample, short (smaller blocks) or absent (direct path).
 *
 * Tolerance (stated once, used everywhere): with S = |alpha| * sum_k |a_ik| |b_kj| +
 * |beta * bias_ij| (the magnitude the result is accumulated from), an element passes when
 *     |got - ref| <= 2 * (K + 8) * FLT_EPSILON * S + 8 * FLT_EPSILON * |ref| + 1e-30
 * i.e. the classic bound for a K-term float sum, doubled for the activation (Lipschitz <= 1.2)
 * and the float rounding of alpha/beta products, plus a few ulps of the result for the
 * activation's own float math (expf/erff/tanhf). */
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
#include "kernels/optimized/gemm_isa.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

/* ---- random numbers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int rndi(int n) { return (int)(rnd() % (uint32_t)n); }
static float rndf(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

/* ---- contexts: threads (shuffled test pool or the real one) and scratch ------------------- */

enum { SCRATCH_AMPLE, SCRATCH_SHORT, SCRATCH_NONE };
#define AMPLE_BYTES (24u << 20)
#define SHORT_BYTES (96u << 10)

static uint8_t *scratch_mem;
static etch_threadpool *real_pools[5];
static kt_shuffle_pool spools[5]; /* chunks run serially in a shuffled order */

static void ctx_make(etch_kernel_context *ctx, int threads, bool real, int scratch) {
    const etch_threadpool_iface *tp = NULL;
    if (threads > 1)
        tp = real ? etch_threadpool_get_iface(real_pools[threads]) : &spools[threads].iface;
    size_t size = scratch == SCRATCH_AMPLE ? AMPLE_BYTES : scratch == SCRATCH_SHORT ? SHORT_BYTES : 0;
    etch_kernel_context_init(ctx, "test", size ? scratch_mem : NULL, size, tp);
}

/* ---- activations in double ---------------------------------------------------------------- */

static const etch_epilogue epilogues[] = {
    {ETCH_ACT_NONE, 0, 0},      {ETCH_ACT_RELU, 0, 0},      {ETCH_ACT_CLAMP, -0.5, 0.75},
    {ETCH_ACT_CLAMP, 0.0, 6.0}, {ETCH_ACT_GELU, 0, 0},      {ETCH_ACT_GELU_TANH, 0, 0},
    {ETCH_ACT_SILU, 0, 0},      {ETCH_ACT_SIGMOID, 0, 0},
};
#define NUM_EPI ((int)(sizeof epilogues / sizeof epilogues[0]))

static double tol_of(int64_t K, double mag, double ref) {
    return 2.0 * (double)(K + 8) * FLT_EPSILON * mag + 8.0 * FLT_EPSILON * fabs(ref) + 1e-30;
}

/* ---- etch_opt_sgemm against double --------------------------------------------------------- */

typedef struct sg_case {
    int64_t M, N, K;
    int a_lay, b_lay; /* 0 row-major, 1 transposed, 2 both strides > 1 */
    int pad;          /* extra floats per C row */
    int bias_mode;    /* 0 none, 1 row [N], 2 column [M], 3 [M,N], 4 [N,M] read transposed, 5 scalar */
    float alpha, beta;
    int epi;          /* index into epilogues */
    int threads;
    bool real_pool;
    int scratch;
    int prepack;      /* bit 0: B packed beforehand (etch_opt_sgemm_pack_b), bit 1: A */
    int nan_at;       /* > 0: a[0, nan_at - 1] is NaN (row 0 of C is NaN, through any tail) */
} sg_case;

static const char *isa_now;
static int sg_cases_run;
static const etch_sgemm_isa *isa_override; /* NULL: the active instruction set */

/* Scalar microkernels with the tile shapes of AVX-512 (12 x 32) and of an odd 5 x 24, so the
 * blocking, packing and edge logic is exercised with them on any CPU (the AVX-512 intrinsics
 * themselves only run where the CPU has them). */
#define EMU_UKR(name, MR_, NR_)                                                               \
    static void name(int64_t kc, const float *ap, const float *bp, int64_t ldb, float *c,      \
                     int64_t ldc, int accumulate, const etch_sgemm_tail *tail,                \
                     const char *pf) {                                                        \
        (void)pf;                                                                             \
        float acc[MR_][NR_];                                                                  \
        memset(acc, 0, sizeof acc);                                                           \
        for (int64_t k = 0; k < kc; k++)                                                      \
            for (int i = 0; i < MR_; i++)                                                     \
                for (int j = 0; j < NR_; j++)                                                 \
                    acc[i][j] += ap[k * MR_ + i] * bp[k * ldb + j];                           \
        for (int i = 0; i < MR_; i++)                                                         \
            for (int j = 0; j < NR_; j++) {                                                   \
                const float v = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];          \
                c[i * ldc + j] = tail ? etch_sgemm_tail_one(tail, v, i, j) : v;               \
            }                                                                                 \
    }
EMU_UKR(ukr_12x32, 12, 32)
EMU_UKR(ukr_5x24, 5, 24)

static void run_sgemm(etch_kernel_context *ctx, const etch_sgemm_desc *d) {
    if (isa_override)
        etch_opt_sgemm_isa(ctx, d, isa_override);
    else
        etch_opt_sgemm(ctx, d);
}

static void lay_strides(int lay, int64_t rows, int64_t cols, int64_t *rs, int64_t *cs,
                        int64_t *span) {
    if (lay == 0) {
        *rs = cols + 1;
        *cs = 1;
    } else if (lay == 1) {
        *rs = 1;
        *cs = rows + 2;
    } else {
        *cs = 2;
        *rs = 2 * cols + 3;
    }
    *span = (rows > 0 ? (rows - 1) * *rs : 0) + (cols > 0 ? (cols - 1) * *cs : 0) + 1;
}

static void sgemm_case(const sg_case *t) {
    int64_t a_rs, a_cs, a_span, b_rs, b_cs, b_span;
    lay_strides(t->a_lay, t->M, t->K, &a_rs, &a_cs, &a_span);
    lay_strides(t->b_lay, t->K, t->N, &b_rs, &b_cs, &b_span);
    const int64_t ldc = t->N + t->pad;
    float *a = malloc((size_t)a_span * sizeof(float));
    float *b = malloc((size_t)b_span * sizeof(float));
    float *c = malloc((size_t)(t->M * ldc + 1) * sizeof(float));
    const int64_t bias_n = t->M * t->N + 1;
    float *bias = malloc((size_t)bias_n * sizeof(float));
    for (int64_t i = 0; i < a_span; i++)
        a[i] = rndf();
    for (int64_t i = 0; i < b_span; i++)
        b[i] = rndf();
    for (int64_t i = 0; i < bias_n; i++)
        bias[i] = rndf();
    if (t->nan_at > 0 && t->M > 0 && t->K >= t->nan_at)
        a[(t->nan_at - 1) * a_cs] = NAN;
    const float sentinel = 12345.0f;
    for (int64_t i = 0; i < t->M * ldc + 1; i++)
        c[i] = sentinel;

    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = t->M;
    d.N = t->N;
    d.K = t->K;
    d.a = a;
    d.a_rs = a_rs;
    d.a_cs = a_cs;
    d.b = b;
    d.b_rs = b_rs;
    d.b_cs = b_cs;
    d.c = c;
    d.ldc = ldc;
    d.alpha = t->alpha;
    d.beta = t->beta;
    d.epilogue = t->epi ? &epilogues[t->epi] : NULL;
    if (t->bias_mode) {
        d.bias = bias;
        static const int64_t rs_of[] = {0, 0, 1, -1, 1, 0}, cs_of[] = {0, 1, 0, 1, -2, 0};
        d.bias_rs = rs_of[t->bias_mode] == -1 ? t->N : rs_of[t->bias_mode];
        d.bias_cs = cs_of[t->bias_mode] == -2 ? t->M : cs_of[t->bias_mode];
    }
    /* prepacked operands, for the instruction set the call runs with */
    const etch_sgemm_isa *pisa = isa_override ? isa_override : NULL;
    etch_sgemm_packed pka, pkb;
    float *pa_mem = NULL, *pb_mem = NULL;
    if (t->prepack & 1) {
        pb_mem = malloc(etch_opt_sgemm_packed_size(pisa, false, t->N, t->K) + sizeof(float));
        etch_opt_sgemm_pack_b(pisa, b, b_rs, b_cs, t->K, t->N, pb_mem, &pkb);
        d.b_packed = &pkb;
    }
    if (t->prepack & 2) {
        pa_mem = malloc(etch_opt_sgemm_packed_size(pisa, true, t->M, t->K) + sizeof(float));
        etch_opt_sgemm_pack_a(pisa, a, a_rs, a_cs, t->M, t->K, pa_mem, &pka);
        d.a_packed = &pka;
    }
    etch_kernel_context ctx;
    ctx_make(&ctx, t->threads, t->real_pool, t->scratch);
    run_sgemm(&ctx, &d);
    CHECK(ctx.temp_used == 0); /* scratch given back */
    CHECK(!etch_kernel_failed(&ctx));

    int bad = 0;
    for (int64_t i = 0; i < t->M; i++) {
        for (int64_t j = 0; j < t->N; j++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t k = 0; k < t->K; k++) {
                const double p = (double)a[i * a_rs + k * a_cs] * (double)b[k * b_rs + j * b_cs];
                acc += p;
                mag += fabs(p);
            }
            double v = (double)t->alpha * acc;
            mag *= fabs((double)t->alpha);
            if (d.bias) {
                const double bv = (double)t->beta * (double)bias[i * d.bias_rs + j * d.bias_cs];
                v += bv;
                mag += fabs(bv);
            }
            const double ref = kt_act_ref(d.epilogue, v);
            const double got = c[i * ldc + j];
            const bool nan_ok = isnan(ref) && isnan(got);
            if (!nan_ok && !(fabs(got - ref) <= tol_of(t->K, mag, ref)) && bad++ < 3)
                fprintf(stderr,
                        "[%s] sgemm %lldx%lldx%lld lay %d/%d bias %d alpha %g beta %g epi %d "
                        "threads %d%s scratch %d: c[%lld,%lld] = %.9g, want %.9g (tol %.3g)\n",
                        isa_now, (long long)t->M, (long long)t->N, (long long)t->K, t->a_lay,
                        t->b_lay, t->bias_mode, t->alpha, t->beta, t->epi, t->threads,
                        t->real_pool ? " (real pool)" : "", t->scratch, (long long)i,
                        (long long)j, got, ref, tol_of(t->K, mag, ref));
        }
        for (int64_t j = t->N; j < ldc; j++)
            if (c[i * ldc + j] != sentinel && bad++ < 3)
                fprintf(stderr, "[%s] sgemm wrote padding at row %lld\n", isa_now, (long long)i);
    }
    if (c[t->M * ldc] != sentinel && bad++ < 3)
        fprintf(stderr, "[%s] sgemm wrote past the end\n", isa_now);
    CHECK_MSG(bad == 0, "[%s] %d wrong elements (%lldx%lldx%lld)", isa_now, bad,
              (long long)t->M, (long long)t->N, (long long)t->K);
    sg_cases_run++;
    free(a);
    free(b);
    free(c);
    free(bias);
    free(pa_mem);
    free(pb_mem);
}

static sg_case base_case(int64_t M, int64_t N, int64_t K) {
    sg_case t;
    memset(&t, 0, sizeof t);
    t.M = M;
    t.N = N;
    t.K = K;
    t.alpha = 1.0f;
    t.beta = 1.0f;
    t.threads = 1;
    return t;
}

static void sgemm_tests(void) {
    static const int64_t dims[] = {1, 2, 3, 5, 6, 7, 8, 12, 13, 15, 16, 17, 24, 31, 32, 33, 47, 64, 70};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    /* every tail of M and N against the tile sizes, plain */
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nd; j += 2) {
            sg_case t = base_case(dims[i], dims[(i * 7 + j) % nd], dims[(j * 5 + i) % nd]);
            sgemm_case(&t);
        }
    /* every layout pair x bias mode */
    for (int al = 0; al < 3; al++)
        for (int bl = 0; bl < 3; bl++)
            for (int bm = 0; bm < 6; bm++) {
                sg_case t = base_case(13 + al, 37 + bl, 29 + bm);
                t.a_lay = al;
                t.b_lay = bl;
                t.bias_mode = bm;
                t.pad = bm % 2 ? 3 : 0;
                t.alpha = bm == 3 ? -1.5f : 1.0f;
                t.beta = bm == 4 ? 0.25f : bm == 5 ? -2.0f : 1.0f;
                sgemm_case(&t);
            }
    /* every epilogue, on the packed (M > 2 MR), direct and matrix-vector paths */
    for (int e = 0; e < NUM_EPI; e++) {
        static const int64_t ms[] = {40, 5, 1};
        for (int p = 0; p < 3; p++) {
            sg_case t = base_case(ms[p], 45, 67);
            t.epi = e;
            t.bias_mode = 1 + e % 5;
            t.alpha = 0.75f;
            sgemm_case(&t);
        }
    }
    /* threads x scratch, on shapes that split along M (B small: 70 x 190 x 90; N too narrow:
     * 260 x 20 x 70), along N (B over 1 MiB: 30 x 600 x 500; M too short: 9 x 150 x 40) and
     * M = 1 */
    static const int64_t split_shapes[][3] = {{70, 190, 90}, {260, 20, 70}, {1, 333, 120},
                                              {9, 150, 40}, {30, 600, 500}};
    for (int s = 0; s < 5; s++)
        for (int th = 1; th <= 4; th++)
            for (int sc = 0; sc < 3; sc++)
                for (int real = 0; real < (th > 1 ? 2 : 1); real++) {
                    sg_case t = base_case(split_shapes[s][0], split_shapes[s][1], split_shapes[s][2]);
                    t.threads = th;
                    t.real_pool = real;
                    t.scratch = sc;
                    t.bias_mode = 1;
                    t.epi = 1;
                    t.b_lay = s == 3 ? 1 : 0;
                    sgemm_case(&t);
                }
    /* K = 0 (beta * bias, then the activation), M or N = 0 (nothing written) */
    {
        sg_case t = base_case(5, 9, 0);
        t.bias_mode = 3;
        t.beta = 2.0f;
        t.epi = 1;
        sgemm_case(&t);
        t = base_case(0, 9, 4);
        sgemm_case(&t);
        t = base_case(4, 0, 4);
        sgemm_case(&t);
        t = base_case(3, 4, 0);
        sgemm_case(&t);
    }
    /* M = 1 decode shapes: weights row-major [K, N] and transposed [N, K] */
    static const int64_t decode[][2] = {{288, 288}, {288, 768}, {768, 768}, {2048, 300}, {33, 1030}};
    for (int s = 0; s < 5; s++)
        for (int bl = 0; bl < 3; bl++) {
            sg_case t = base_case(1, decode[s][1], decode[s][0]);
            t.b_lay = bl;
            t.a_lay = s % 2 ? 2 : 0;
            t.threads = 1 + s % 4;
            t.real_pool = s % 2;
            t.bias_mode = 1;
            sgemm_case(&t);
        }
    /* M = 1 with B prepacked (gemv_p: decode reads the packed copy): several depth blocks
     * (K > kc), N with partial panels and groups of panels, every B layout, strided A, bias,
     * alpha, beta and activations, 1-4 threads */
    static const int64_t decode_p[][2] = {{768, 200}, {2048, 97}, {300, 64}, {1100, 16},
                                          {33, 1030}, {5, 7}};
    for (int s = 0; s < 6; s++)
        for (int bl = 0; bl < 3; bl++) {
            sg_case t = base_case(1, decode_p[s][1], decode_p[s][0]);
            t.b_lay = bl;
            t.a_lay = (s + bl) % 3;
            t.prepack = 1 + 2 * (bl == 2);
            t.threads = 1 + (s + bl) % 4;
            t.real_pool = bl % 2;
            t.bias_mode = (s + bl) % 3;
            t.alpha = bl == 1 ? 0.5f : 1.0f;
            t.beta = s == 2 ? -0.75f : 1.0f;
            t.epi = (s * 3 + bl) % NUM_EPI;
            t.scratch = bl == 2 ? SCRATCH_SHORT : SCRATCH_AMPLE;
            sgemm_case(&t);
        }
    /* large K, and blocks larger than every cache block (mc, kc, nc) */
    {
        sg_case t = base_case(7, 37, 2048);
        sgemm_case(&t);
        t = base_case(200, 1100, 600);
        t.threads = 2;
        t.real_pool = true;
        t.bias_mode = 1;
        sgemm_case(&t);
        t = base_case(150, 1060, 530);
        t.b_lay = 1;
        t.a_lay = 1;
        t.threads = 3;
        t.scratch = SCRATCH_SHORT;
        sgemm_case(&t);
    }
    /* the transformer / llama shapes (64 tokens) with their weights prepacked: the depth
     * split into equal blocks (688, 1024, 600 > kc), the bottom panel's rows (64 = 10 x 6 + 4
     * with AVX2), the tail (bias of the columns or of the rows, alpha, relu / clamp in the
     * microkernel; gelu after it), the next-panel prefetch, 1-4 threads */
    {
        /* (K, N): the depths of the models; N cut to a few panels (plus tails) to keep the
         * double-precision reference cheap under ASan and qemu */
        static const int64_t kn[][2] = {{256, 200}, {1024, 112}, {688, 96}, {256, 128},
                                        {600, 72}, {256, 152}};
        for (int s = 0; s < 6; s++)
            for (int v = 0; v < 4; v++) {
                sg_case t = base_case(64 - (s == 4 ? 3 : 0), kn[s][1], kn[s][0]);
                t.prepack = v == 3 ? 3 : 1;
                t.bias_mode = (s + v) % 3;     /* none, row [N], column [M] */
                t.epi = (s * 4 + v) % NUM_EPI; /* all of them over the loop */
                t.alpha = v == 2 ? 0.5f : 1.0f;
                t.beta = v == 1 ? -0.75f : 1.0f;
                t.threads = 1 + v;
                t.real_pool = v % 2;
                t.scratch = v == 3 ? SCRATCH_SHORT : SCRATCH_AMPLE;
                t.pad = s % 2;
                sgemm_case(&t);
            }
    }
    /* NaN in A: its row of C is NaN through every tail and epilogue (relu and clamp pass it
     * as the element-wise kernels do), on the packed, direct and prepacked paths */
    for (int e = 0; e < NUM_EPI; e++)
        for (int p = 0; p < 3; p++) {
            sg_case t = base_case(p == 1 ? 5 : 40, 37, 300);
            t.epi = e;
            t.nan_at = 1 + e * 17;
            t.bias_mode = 1 + p;
            t.prepack = p == 2 ? 1 : 0;
            t.scratch = SCRATCH_AMPLE;
            sgemm_case(&t);
        }
    /* random mix */
    for (int r = 0; r < 60; r++) {
        sg_case t = base_case(1 + rndi(70), 1 + rndi(70), rndi(90));
        t.a_lay = rndi(3);
        t.b_lay = rndi(3);
        t.pad = rndi(3);
        t.bias_mode = rndi(6);
        t.alpha = rndi(2) ? 1.0f : rndf() * 3.0f;
        t.beta = rndi(2) ? 1.0f : rndf() * 3.0f;
        t.epi = rndi(NUM_EPI);
        t.threads = 1 + rndi(4);
        t.real_pool = rndi(2);
        t.scratch = rndi(3);
        t.prepack = rndi(4);
        sgemm_case(&t);
    }
}

/* The instruction set's A packing for row-major A (pack_a_rm) against the layout the
 * microkernel reads: every row count up to mr, depths around the 8-column vector blocks. */
static void pack_a_rm_tests(const etch_sgemm_isa *isa) {
    if (!isa->pack_a_rm)
        return;
    const int mr = isa->mr;
    const int64_t lda = 70;
    float a[16 * 70], got[16 * 70 + 16], want[16 * 70 + 16];
    for (int i = 0; i < 16 * 70; i++)
        a[i] = rndf();
    static const int64_t kbs[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 33, 64};
    for (int mm = 1; mm <= mr; mm++)
        for (int q = 0; q < (int)(sizeof kbs / sizeof kbs[0]); q++) {
            const int64_t kb = kbs[q];
            for (int i = 0; i < 16 * 70 + 16; i++)
                got[i] = want[i] = -7.0f; /* past the panel: must stay */
            for (int64_t k = 0; k < kb; k++)
                for (int r = 0; r < mr; r++)
                    want[k * mr + r] = r < mm ? a[r * lda + k] : 0.0f;
            isa->pack_a_rm(a, lda, mm, kb, got);
            CHECK_MSG(memcmp(got, want, sizeof got) == 0, "[%s] pack_a_rm mm %d kb %lld",
                      isa->name, mm, (long long)kb);
        }
}

/* Depth blocks of a packing: equal blocks of at most kc (K = 688 with kc 512: 2 x 344). */
static void kc_tests(const etch_sgemm_isa *isa) {
    static const int64_t Ks[] = {1, 100, 256, 511, 512, 513, 600, 688, 1024, 1100, 2048, 3000};
    for (int q = 0; q < (int)(sizeof Ks / sizeof Ks[0]); q++) {
        const int64_t K = Ks[q];
        etch_sgemm_packed pk;
        float dummy[1];
        etch_opt_sgemm_pack_b(isa, NULL, 1, 1, 0, 1, dummy, &pk); /* K = 0: nothing read */
        etch_opt_sgemm_pack_b(isa, NULL, 1, 1, K, 0, dummy, &pk); /* N = 0: kc described */
        const int64_t blocks = (K + isa->kc - 1) / isa->kc;
        CHECK_MSG(pk.kc <= isa->kc && pk.kc * blocks >= K && pk.kc * (blocks - 1) < K &&
                      (blocks == 1 || pk.kc - (K - pk.kc * (blocks - 1)) < 8 * blocks),
                  "[%s] K %lld: kc %lld (max %lld)", isa->name, (long long)K, (long long)pk.kc,
                  (long long)isa->kc);
    }
}

/* ---- kernels against the portable ones -------------------------------------------------- */

typedef struct tens {
    etch_tensor t;
    etch_value v;
    float *f;
} tens;

/* A Float tensor of the given shape and dim order (NULL: contiguous), random values. */
static void tens_make(tens *x, int dim, const int64_t *sizes, const uint8_t *order, int dtype) {
    int64_t n = 1;
    for (int i = 0; i < dim; i++)
        n *= sizes[i];
    const size_t es = etch_dtype_size(dtype);
    x->f = calloc((size_t)(n ? n : 1), es);
    etch_tensor_init(&x->t, (etch_dtype)dtype, (size_t)dim, sizes, x->f);
    if (order) {
        memcpy(x->t.dim_order, order, (size_t)dim);
        etch_tensor_update_strides(&x->t);
    }
    for (int64_t i = 0; i < n; i++) {
        if (dtype == ETCH_DTYPE_FLOAT)
            x->f[i] = rndf();
        else if (dtype == ETCH_DTYPE_DOUBLE)
            ((double *)x->f)[i] = rndf();
    }
    x->v.tag = ETCH_VALUE_TENSOR;
    x->v.u.tensor = &x->t;
}

static void tens_abs(tens *dst, const tens *src) {
    *dst = *src;
    const int64_t n = etch_tensor_numel(&src->t);
    dst->f = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        dst->f[i] = fabsf(src->f[i]);
    dst->t.data = dst->f;
    dst->v.u.tensor = &dst->t;
}

static void tens_free(tens *x) { free(x->f); }

/* Element i (in logical row-major order) of a tensor with any dim order. */
static double tens_at(const tens *x, int64_t i) {
    int64_t off = 0;
    for (int d = x->t.dim - 1; d >= 0; d--) {
        off += (i % x->t.sizes[d]) * x->t.strides[d];
        i /= x->t.sizes[d];
    }
    return x->t.dtype == ETCH_DTYPE_DOUBLE ? ((double *)x->f)[off] : (double)x->f[off];
}

typedef void (*kfn)(etch_kernel_context *, etch_value **, size_t);

/* Run the optimized kernel (fused epilogue e) and the portable one (activation applied
 * here in double) on the same arguments; the portable kernel on |operands| gives the
 * magnitude for the tolerance. out_slot: index of out in args; K: the depth. */
static void compare_kernel(const char *what, kfn opt, kfn port, etch_value **args,
                           etch_value **abs_args, size_t nargs, int out_slot, tens *out_opt,
                           tens *out_port, tens *out_mag, int64_t K, const etch_epilogue *e,
                           int threads, bool real, int scratch) {
    etch_kernel_context ctx;
    ctx_make(&ctx, threads, real, scratch);
    ctx.epilogue = e;
    args[out_slot] = &out_opt->v;
    args[nargs - 1] = &out_opt->v;
    opt(&ctx, args, nargs);
    CHECK_MSG(!etch_kernel_failed(&ctx), "[%s] %s: %s", isa_now, what, etch_last_error());
    etch_kernel_context pctx;
    etch_kernel_context_init(&pctx, "portable", NULL, 0, NULL);
    args[out_slot] = &out_port->v;
    args[nargs - 1] = &out_port->v;
    port(&pctx, args, nargs);
    CHECK(!etch_kernel_failed(&pctx));
    abs_args[out_slot] = &out_mag->v;
    abs_args[nargs - 1] = &out_mag->v;
    etch_kernel_context_init(&pctx, "portable", NULL, 0, NULL);
    port(&pctx, abs_args, nargs);
    CHECK(!etch_kernel_failed(&pctx));
    if (etch_kernel_failed(&ctx) || etch_kernel_failed(&pctx))
        return;
    CHECK(out_opt->t.dim == out_port->t.dim);
    int bad = 0;
    const int64_t n = etch_tensor_numel(&out_port->t);
    CHECK(etch_tensor_numel(&out_opt->t) == n);
    for (int64_t i = 0; i < n; i++) {
        const double v = tens_at(out_port, i);
        const double ref = kt_act_ref(e, v);
        const double got = tens_at(out_opt, i);
        /* the portable result is rounded to float once: one more ulp of it */
        const double tol = tol_of(K, tens_at(out_mag, i), ref) + 2.0 * FLT_EPSILON * fabs(v);
        if (!(fabs(got - ref) <= tol) && bad++ < 3)
            fprintf(stderr, "[%s] %s threads %d scratch %d: element %lld = %.9g, want %.9g\n",
                    isa_now, what, threads, scratch, (long long)i, got, ref);
    }
    CHECK_MSG(bad == 0, "[%s] %s: %d wrong elements", isa_now, what, bad);
}

static void mm_tests(void) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {17, 33, 65}, {1, 300, 70},
                                        {40, 64, 50}, {3, 0, 4}, {70, 13, 1}};
    static const uint8_t T2[2] = {1, 0};
    for (int s = 0; s < 7; s++)
        for (int v = 0; v < 8; v++) {
            const int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
            const int64_t as[2] = {M, K}, bs[2] = {K, N}, os[2] = {M, N};
            tens a, b, o1, o2, o3, aa, ab;
            tens_make(&a, 2, as, v & 1 ? T2 : NULL, ETCH_DTYPE_FLOAT);
            tens_make(&b, 2, bs, v & 2 ? T2 : NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o1, 2, os, v & 4 ? T2 : NULL, ETCH_DTYPE_FLOAT); /* transposed out: fallback */
            tens_make(&o2, 2, os, NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o3, 2, os, NULL, ETCH_DTYPE_FLOAT);
            tens_abs(&aa, &a);
            tens_abs(&ab, &b);
            etch_value *args[4] = {&a.v, &b.v, NULL, NULL};
            etch_value *abs_args[4] = {&aa.v, &ab.v, NULL, NULL};
            char what[96];
            snprintf(what, sizeof what, "mm %lldx%lldx%lld variant %d", (long long)M,
                     (long long)K, (long long)N, v);
            compare_kernel(what, etch_opt_mm_out, etch_portable_mm_out, args, abs_args, 4, 2, &o1,
                           &o2, &o3, K, v ? &epilogues[v % NUM_EPI] : NULL, 1 + (s + v) % 4,
                           v % 2, (s + v) % 3);
            tens_free(&a), tens_free(&b), tens_free(&o1), tens_free(&o2), tens_free(&o3);
            tens_free(&aa), tens_free(&ab);
        }
}

static void addmm_tests(void) {
    static const int64_t bshapes[][3] = {{1, 6, 0}, {2, 1, 6}, {2, 4, 1}, {2, 4, 6}, {0, 0, 0},
                                         {1, 1, 0}};
    static const double ab[][2] = {{1, 1}, {2, 3}, {0.5, -1.5}, {0, 1}};
    for (int bsi = 0; bsi < 6; bsi++)
        for (int abi = 0; abi < 4; abi++)
            for (int big = 0; big < 2; big++) {
                const int64_t M = big ? 37 : 4, K = big ? 90 : 5, N = big ? 70 : 6;
                int64_t bsz[2];
                const int bdim = (int)bshapes[bsi][0];
                for (int i = 0; i < bdim; i++) {
                    const int64_t want = bshapes[bsi][1 + i];
                    /* scale the broadcast shapes to the big case */
                    const int od = 2 - bdim + i;
                    bsz[i] = want == 1 ? 1 : od == 0 ? M : N;
                }
                const int64_t as[2] = {M, K}, bs[2] = {K, N}, os[2] = {M, N};
                tens bias, a, b, o1, o2, o3, abias, aa, abb;
                tens_make(&bias, bdim, bsz, NULL, ETCH_DTYPE_FLOAT);
                if (ab[abi][0] == 0) /* beta == 0 ignores self, NaN included */
                    for (int64_t i = 0; i < etch_tensor_numel(&bias.t); i++)
                        bias.f[i] = NAN;
                tens_make(&a, 2, as, NULL, ETCH_DTYPE_FLOAT);
                tens_make(&b, 2, bs, big ? (const uint8_t[]){1, 0} : NULL, ETCH_DTYPE_FLOAT);
                tens_make(&o1, 2, os, NULL, ETCH_DTYPE_FLOAT);
                tens_make(&o2, 2, os, NULL, ETCH_DTYPE_FLOAT);
                tens_make(&o3, 2, os, NULL, ETCH_DTYPE_FLOAT);
                tens_abs(&abias, &bias);
                tens_abs(&aa, &a);
                tens_abs(&abb, &b);
                etch_value beta = {ETCH_VALUE_DOUBLE, {.d = ab[abi][0]}};
                etch_value alpha = {ETCH_VALUE_DOUBLE, {.d = ab[abi][1]}};
                etch_value abeta = {ETCH_VALUE_DOUBLE, {.d = fabs(ab[abi][0])}};
                etch_value aalpha = {ETCH_VALUE_DOUBLE, {.d = fabs(ab[abi][1])}};
                etch_value *args[7] = {&bias.v, &a.v, &b.v, &beta, &alpha, NULL, NULL};
                etch_value *abs_args[7] = {&abias.v, &aa.v, &abb.v, &abeta, &aalpha, NULL, NULL};
                char what[96];
                snprintf(what, sizeof what, "addmm bias %d beta/alpha %d big %d", bsi, abi, big);
                compare_kernel(what, etch_opt_addmm_out, etch_portable_addmm_out, args, abs_args,
                               7, 5, &o1, &o2, &o3, K, &epilogues[(bsi + abi) % NUM_EPI],
                               1 + abi, big, bsi % 3);
                tens_free(&bias), tens_free(&a), tens_free(&b), tens_free(&o1), tens_free(&o2);
                tens_free(&o3), tens_free(&abias), tens_free(&aa), tens_free(&abb);
            }
}

static void bmm_tests(void) {
    /* ..., then attention's per-head products (8 heads, 64 tokens, head dim 32) and odd
     * batches against the thread counts */
    static const int64_t shapes[][4] = {{2, 3, 4, 5},    {1, 1, 1, 1},   {6, 1, 64, 40},
                                        {5, 7, 9, 70},   {3, 20, 16, 1}, {4, 2, 0, 3},
                                        {8, 1, 32, 17},  {8, 64, 32, 64}, {8, 64, 64, 32},
                                        {3, 64, 32, 16}, {5, 13, 20, 33}};
    static const uint8_t O1[3] = {0, 2, 1}, O2[3] = {1, 0, 2}, O3[3] = {2, 0, 1};
    const uint8_t *orders[] = {NULL, O1, O2, O3};
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (int v = 0; v < 6; v++) {
            const int64_t B = shapes[s][0], M = shapes[s][1], K = shapes[s][2], N = shapes[s][3];
            const int64_t as[3] = {B, M, K}, bs[3] = {K ? B : B, K, N}, os[3] = {B, M, N};
            tens a, b, o1, o2, o3, aa, ab;
            tens_make(&a, 3, as, orders[v % 4], ETCH_DTYPE_FLOAT);
            tens_make(&b, 3, bs, orders[(v + 1) % 4], ETCH_DTYPE_FLOAT);
            tens_make(&o1, 3, os, v == 5 ? O2 : NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o2, 3, os, NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o3, 3, os, NULL, ETCH_DTYPE_FLOAT);
            tens_abs(&aa, &a);
            tens_abs(&ab, &b);
            etch_value *args[4] = {&a.v, &b.v, NULL, NULL};
            etch_value *abs_args[4] = {&aa.v, &ab.v, NULL, NULL};
            char what[96];
            snprintf(what, sizeof what, "bmm %lld %lldx%lldx%lld variant %d", (long long)B,
                     (long long)M, (long long)K, (long long)N, v);
            compare_kernel(what, etch_opt_bmm_out, etch_portable_bmm_out, args, abs_args, 4, 2,
                           &o1, &o2, &o3, K, v % 2 ? &epilogues[(s + v) % NUM_EPI] : NULL,
                           1 + v % 4, v >= 3, v % 3);
            tens_free(&a), tens_free(&b), tens_free(&o1), tens_free(&o2), tens_free(&o3);
            tens_free(&aa), tens_free(&ab);
        }
}

static void linear_tests(void) {
    /* input shapes (rank 1..4) with K last */
    static const int64_t xshapes[][5] = {{1, 24, 0, 0, 0},  {2, 5, 24, 0, 0}, {3, 2, 3, 24, 0},
                                         {4, 2, 1, 3, 24},  {2, 1, 70, 0, 0}, {2, 33, 70, 0, 0},
                                         {3, 0, 4, 24, 0}};
    static const uint8_t T2[2] = {1, 0}, T3[3] = {1, 0, 2};
    for (int s = 0; s < 7; s++)
        for (int v = 0; v < 6; v++) {
            const int dim = (int)xshapes[s][0];
            int64_t xs[4], os[4];
            for (int i = 0; i < dim; i++)
                xs[i] = os[i] = xshapes[s][1 + i];
            const int64_t K = xs[dim - 1], N = v % 2 ? 45 : 7;
            os[dim - 1] = N;
            const int64_t ws[2] = {N, K}, bsz[1] = {v == 4 ? 1 : N};
            const uint8_t *xorder = v == 3 && dim == 2 ? T2 : v == 3 && dim == 3 ? T3 : NULL;
            tens x, w, bias, o1, o2, o3, ax, aw, abias;
            tens_make(&x, dim, xs, xorder, ETCH_DTYPE_FLOAT);
            tens_make(&w, 2, ws, v == 2 ? T2 : NULL, ETCH_DTYPE_FLOAT);
            tens_make(&bias, v == 5 ? 0 : 1, bsz, NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o1, dim, os, NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o2, dim, os, NULL, ETCH_DTYPE_FLOAT);
            tens_make(&o3, dim, os, NULL, ETCH_DTYPE_FLOAT);
            tens_abs(&ax, &x);
            tens_abs(&aw, &w);
            tens_abs(&abias, &bias);
            etch_value none = {ETCH_VALUE_NONE, {0}};
            const bool with_bias = v != 0;
            etch_value *args[5] = {&x.v, &w.v, with_bias ? &bias.v : &none, NULL, NULL};
            etch_value *abs_args[5] = {&ax.v, &aw.v, with_bias ? &abias.v : &none, NULL, NULL};
            char what[96];
            snprintf(what, sizeof what, "linear rank %d K %lld N %lld variant %d", dim,
                     (long long)K, (long long)N, v);
            compare_kernel(what, etch_opt_linear_out, etch_portable_linear_out, args, abs_args, 5,
                           3, &o1, &o2, &o3, K, &epilogues[(s * 3 + v) % NUM_EPI], 1 + s % 4,
                           v % 2, v % 3);
            tens_free(&x), tens_free(&w), tens_free(&bias), tens_free(&o1), tens_free(&o2);
            tens_free(&o3), tens_free(&ax), tens_free(&aw), tens_free(&abias);
        }
}

/* Other dtypes and bad arguments go to the portable kernel: same result, same failure. */
static void fallback_tests(void) {
    const int64_t as[2] = {3, 4}, bs[2] = {4, 5}, os[2] = {3, 5};
    tens a, b, o1, o2, af;
    tens_make(&a, 2, as, NULL, ETCH_DTYPE_DOUBLE);
    tens_make(&b, 2, bs, NULL, ETCH_DTYPE_DOUBLE);
    tens_make(&o1, 2, os, NULL, ETCH_DTYPE_DOUBLE);
    tens_make(&o2, 2, os, NULL, ETCH_DTYPE_DOUBLE);
    etch_kernel_context c1, c2;
    etch_kernel_context_init(&c1, "aten::mm.out", NULL, 0, NULL);
    etch_kernel_context_init(&c2, "aten::mm.out", NULL, 0, NULL);
    etch_value *args[4] = {&a.v, &b.v, &o1.v, &o1.v};
    etch_opt_mm_out(&c1, args, 4);
    args[2] = args[3] = &o2.v;
    etch_portable_mm_out(&c2, args, 4);
    CHECK(!etch_kernel_failed(&c1) && !etch_kernel_failed(&c2));
    CHECK(memcmp(o1.f, o2.f, 15 * sizeof(double)) == 0);
    /* float self with a double mat2: the portable kernel's error */
    tens_make(&af, 2, as, NULL, ETCH_DTYPE_FLOAT);
    args[0] = &af.v;
    etch_kernel_context_init(&c1, "aten::mm.out", NULL, 0, NULL);
    etch_opt_mm_out(&c1, args, 4);
    CHECK(etch_kernel_failed(&c1));
    CHECK_MSG(strstr(etch_last_error(), "mat2") != NULL, "%s", etch_last_error());
    /* inner dimension mismatch on Float */
    tens fa, fb, fo;
    const int64_t bad[2] = {5, 5};
    tens_make(&fa, 2, as, NULL, ETCH_DTYPE_FLOAT);
    tens_make(&fb, 2, bad, NULL, ETCH_DTYPE_FLOAT);
    tens_make(&fo, 2, os, NULL, ETCH_DTYPE_FLOAT);
    etch_value *fargs[4] = {&fa.v, &fb.v, &fo.v, &fo.v};
    etch_kernel_context_init(&c1, "aten::mm.out", NULL, 0, NULL);
    etch_opt_mm_out(&c1, fargs, 4);
    CHECK_STATUS(c1.status, ETCH_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(etch_last_error(), "cannot be multiplied") != NULL, "%s", etch_last_error());
    /* linear: weight of the wrong width, bias of the wrong length */
    const int64_t ws[2] = {5, 3}, xs[2] = {3, 4}, lo[2] = {3, 5}, bl[1] = {4};
    tens x, w, lb, lout;
    tens_make(&x, 2, xs, NULL, ETCH_DTYPE_FLOAT);
    tens_make(&w, 2, ws, NULL, ETCH_DTYPE_FLOAT);
    tens_make(&lb, 1, bl, NULL, ETCH_DTYPE_FLOAT);
    tens_make(&lout, 2, lo, NULL, ETCH_DTYPE_FLOAT);
    etch_value none = {ETCH_VALUE_NONE, {0}};
    etch_value *largs[5] = {&x.v, &w.v, &none, &lout.v, &lout.v};
    etch_kernel_context_init(&c1, "aten::linear.out", NULL, 0, NULL);
    etch_opt_linear_out(&c1, largs, 5);
    CHECK_STATUS(c1.status, ETCH_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(etch_last_error(), "weight") != NULL, "%s", etch_last_error());
    const int64_t ws2[2] = {5, 4};
    tens w2;
    tens_make(&w2, 2, ws2, NULL, ETCH_DTYPE_FLOAT);
    largs[1] = &w2.v;
    largs[2] = &lb.v;
    etch_kernel_context_init(&c1, "aten::linear.out", NULL, 0, NULL);
    etch_opt_linear_out(&c1, largs, 5);
    CHECK_STATUS(c1.status, ETCH_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(etch_last_error(), "bias") != NULL, "%s", etch_last_error());
    tens_free(&a), tens_free(&b), tens_free(&o1), tens_free(&o2), tens_free(&af);
    tens_free(&fa), tens_free(&fb), tens_free(&fo), tens_free(&x), tens_free(&w);
    tens_free(&lb), tens_free(&lout), tens_free(&w2);
}

/* The registry serves the optimized kernels, with the activation-fusing flag. */
static void registry_tests(void) {
    CHECK_OK(etch_kernels_register_optimized());
    static const char *const names[] = {"aten::mm.out", "aten::bmm.out", "aten::addmm.out",
                                        "aten::linear.out"};
    for (int i = 0; i < 4; i++) {
        const etch_kernel *k = etch_kernels_find(names[i], strlen(names[i]));
        CHECK_MSG(k != NULL, "%s", names[i]);
        if (!k)
            continue;
        CHECK_MSG(strcmp(etch_kernels_impl_of(k), "optimized") == 0, "%s: %s", names[i],
                  etch_kernels_impl_of(k));
        CHECK(etch_kernels_flags_of(k) & ETCH_KERNEL_FUSES_ACTIVATION);
    }
}

int main(void) {
    scratch_mem = aligned_alloc(64, AMPLE_BYTES);
    for (int t = 2; t <= 4; t++) {
        kt_shuffle_pool_init(&spools[t], t, KT_SPLIT_EVEN, rnd);
        CHECK_OK(etch_threadpool_create(t, &real_pools[t]));
    }
    etch_isa isas[KT_N_ISAS];
    const int n_isas = kt_pick_isas(isas);
    int run = 0;
    for (int i = 0; i < n_isas; i++) {
        const etch_isa isa = isas[i];
        isa_now = etch_isa_name(isa);
        CHECK_OK(etch_isa_set(isa));
        const int before = sg_cases_run, failed_before = etch_test_failed_;
        sgemm_tests();
        pack_a_rm_tests(etch_sgemm_isa_for(isa));
        kc_tests(etch_sgemm_isa_for(isa));
        mm_tests();
        addmm_tests();
        bmm_tests();
        linear_tests();
        fallback_tests();
        printf("isa %-7s run: %d sgemm cases + mm/addmm/bmm/linear kernels, %d failures "
               "(microkernel %dx%d)\n",
               isa_now, sg_cases_run - before, etch_test_failed_ - failed_before,
               etch_sgemm_isa_for(isa)->mr, etch_sgemm_isa_for(isa)->nr);
        run++;
    }
    CHECK(run >= 1);
    /* the driver with other tile shapes (scalar microkernels; with the scalar ISA, so not
     * when ETCH_TEST_ISAS leaves it out) */
    CHECK_OK(etch_isa_set(ETCH_ISA_SCALAR));
    const etch_sgemm_isa *sc = etch_sgemm_isa_for(ETCH_ISA_SCALAR);
    const etch_sgemm_isa emus[2] = {
        {"scalar 12x32 (avx512 shape)", 12, 32, 192, 256, 1024, ukr_12x32, sc->gemv_n, sc->gemv_t,
         NULL, 1, NULL, sc->gemv_p},
        {"scalar 5x24", 5, 24, 40, 96, 264, ukr_5x24, sc->gemv_n, sc->gemv_t, NULL, 1, NULL,
         sc->gemv_p}};
    for (int i = 0; i < 2 && kt_isa_wanted(ETCH_ISA_SCALAR); i++) {
        isa_override = &emus[i];
        isa_now = emus[i].name;
        const int before = sg_cases_run, failed_before = etch_test_failed_;
        sgemm_tests();
        printf("%s: %d sgemm cases, %d failures\n", isa_now, sg_cases_run - before,
               etch_test_failed_ - failed_before);
    }
    isa_override = NULL;
    for (int t = 2; t <= 4; t++)
        CHECK(spools[t].calls > 0); /* the shuffled pool was exercised */
    CHECK_OK(etch_isa_set(etch_isa_best()));
    registry_tests();
    for (int t = 2; t <= 4; t++)
        etch_threadpool_destroy(real_pools[t]);
    free(scratch_mem);
    return etch_test_finish();
}
