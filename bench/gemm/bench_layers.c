/* The GEMMs of bench/cpu's transformer and llama rows, in model order, as the runtime runs
 * them: constant weights prepacked once (etch_opt_sgemm_pack_b), one distinct weight per
 * layer (so they come from L3 as in the model), a row-broadcast bias where the model has one
 * (addmm), activations 64 x K row-major.
 *
 * Usage: bench_layers [--model transformer|llama] [--threads 1|2] [--reps N] [--isa NAME]
 *                     [--kc N] [--pf N]
 * Prints per-shape and total time (best of reps): one thread in the thread's CPU time, two
 * threads in wall time (see bench_gemm.c). --kc N: also runs the active instruction set's
 * building blocks with depth block N (--pf N: prefetching prepacked B N panels ahead, 0:
 * not), alternating with the default rep by rep (a tuning aid: the same weights packed for
 * each), and prints both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernels/optimized/gemm_isa.h"
#include "kernels/optimized/opt_gemm.h"
#include "runtime/context.h"

static int use_cpu_clock = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
}

typedef struct layer_gemm {
    int64_t K, N;
    int bias;
} layer_gemm;

static const layer_gemm transformer[] = {{256, 768, 1}, {256, 256, 1}, {256, 1024, 1},
                                         {1024, 256, 1}};
static const layer_gemm llama[] = {{256, 256, 0}, {256, 128, 0}, {256, 128, 0}, {256, 256, 0},
                                   {256, 688, 0}, {256, 688, 0}, {688, 256, 0}};

#define LAYERS 4
#define ROWS 64

int main(int argc, char **argv) {
    const layer_gemm *g = transformer;
    int ng = 4, threads = 1, reps = 200;
    long kc2 = 0, pf2 = -1;
    const char *name = "transformer";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            name = argv[++i];
            if (strcmp(name, "llama") == 0) {
                g = llama;
                ng = 7;
            } else if (strcmp(name, "transformer") != 0) {
                fprintf(stderr, "bench_layers: --model transformer|llama\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
            if (threads < 1 || threads > 2) {
                fprintf(stderr, "bench_layers: --threads wants 1 or 2\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 100000) {
                fprintf(stderr, "bench_layers: --reps wants 1..100000\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--kc") == 0 && i + 1 < argc) {
            kc2 = atol(argv[++i]);
            if (kc2 < 8 || kc2 > 4096) {
                fprintf(stderr, "bench_layers: --kc wants 8..4096\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--pf") == 0 && i + 1 < argc) {
            pf2 = atol(argv[++i]);
            if (pf2 < 0 || pf2 > 64) {
                fprintf(stderr, "bench_layers: --pf wants 0..64\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            etch_isa isa;
            if (etch_isa_parse(argv[++i], &isa) != ETCH_OK || etch_isa_set(isa) != ETCH_OK) {
                fprintf(stderr, "bench_layers: %s\n", etch_last_error());
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_layers [--model transformer|llama] [--threads 1|2] "
                            "[--reps N] [--isa NAME] [--kc N] [--pf N]\n");
            return 2;
        }
    }
    use_cpu_clock = threads == 1;
    etch_threadpool *pool = NULL;
    if (etch_threadpool_create(threads, &pool) != ETCH_OK) {
        fprintf(stderr, "bench_layers: %s\n", etch_last_error());
        return 1;
    }
    const etch_threadpool_iface *iface = etch_threadpool_get_iface(pool);
    const size_t temp_size = 1 << 20;
    void *temp = aligned_alloc(64, temp_size);
    float *act = aligned_alloc(64, (size_t)ROWS * 2048 * 4);
    float *out = aligned_alloc(64, (size_t)ROWS * 2048 * 4);
    fill(act, (size_t)ROWS * 2048, 7);
    /* config 0: the active instruction set; 1: the same with depth block kc2 */
    etch_sgemm_isa isas[2];
    isas[0] = *etch_sgemm_isa_for((int)etch_isa_active());
    isas[1] = isas[0];
    if (kc2)
        isas[1].kc = kc2;
    if (pf2 >= 0)
        isas[1].pf_b = (int)pf2;
    const int nconf = kc2 || pf2 >= 0 ? 2 : 1;
    etch_sgemm_packed pk[2][LAYERS][8];
    float *bias[LAYERS][8];
    double best[2][8], flops[8], total_best[2] = {1e30, 1e30};
    for (int j = 0; j < ng; j++) {
        best[0][j] = best[1][j] = 1e30;
        flops[j] = 2.0 * ROWS * (double)g[j].K * (double)g[j].N;
    }
    for (int l = 0; l < LAYERS; l++)
        for (int j = 0; j < ng; j++) {
            const int64_t K = g[j].K, N = g[j].N;
            float *w = malloc((size_t)(K * N) * 4);
            fill(w, (size_t)(K * N), (unsigned)(l * 16 + j + 1));
            for (int cf = 0; cf < nconf; cf++) {
                float *dst =
                    aligned_alloc(64, etch_opt_sgemm_packed_size(&isas[cf], false, N, K) + 64);
                etch_opt_sgemm_pack_b(&isas[cf], w, N, 1, K, N, dst, &pk[cf][l][j]);
            }
            free(w);
            bias[l][j] = malloc((size_t)N * 4);
            fill(bias[l][j], (size_t)N, 99);
        }
    for (int r = 0; r < reps * nconf; r++) {
        const int cf = r % nconf;
        double tot = 0.0;
        for (int l = 0; l < LAYERS; l++)
            for (int j = 0; j < ng; j++) {
                etch_sgemm_desc d;
                memset(&d, 0, sizeof d);
                d.M = ROWS;
                d.K = g[j].K;
                d.N = g[j].N;
                d.a = act;
                d.a_rs = d.K;
                d.a_cs = 1;
                d.b = NULL;
                d.b_packed = &pk[cf][l][j];
                d.c = out;
                d.ldc = d.N;
                d.alpha = 1.0f;
                d.beta = 1.0f;
                if (g[j].bias) {
                    d.bias = bias[l][j];
                    d.bias_cs = 1;
                }
                etch_kernel_context ctx;
                etch_kernel_context_init(&ctx, "bench", temp, temp_size,
                                         threads > 1 ? iface : NULL);
                const double t0 = now();
                etch_opt_sgemm_isa(&ctx, &d, &isas[cf]);
                const double t = now() - t0;
                tot += t;
                if (t < best[cf][j])
                    best[cf][j] = t;
            }
        if (tot < total_best[cf])
            total_best[cf] = tot;
    }
    for (int cf = 0; cf < nconf; cf++) {
        double fl = 0.0, sum_best = 0.0;
        printf("%s, %d thread(s), %d reps, isa %s, kc %lld, pf_b %d\n", name, threads, reps,
               isas[cf].name, (long long)isas[cf].kc, isas[cf].pf_b);
        for (int j = 0; j < ng; j++) {
            printf("  64 x %4lld x %4lld%s: %.4f ms  %.1f GFLOP/s\n", (long long)g[j].K,
                   (long long)g[j].N, g[j].bias ? " +bias" : "      ", best[cf][j] * 1e3,
                   flops[j] / best[cf][j] * 1e-9);
            fl += flops[j] * LAYERS;
            sum_best += best[cf][j] * LAYERS;
        }
        printf("  all %d GEMMs (best pass): %.3f ms  %.1f GFLOP/s\n", ng * LAYERS,
               total_best[cf] * 1e3, fl / total_best[cf] * 1e-9);
        printf("  all %d GEMMs (sum of each shape's best): %.3f ms  %.1f GFLOP/s\n",
               ng * LAYERS, sum_best * 1e3, fl / sum_best * 1e-9);
    }
    etch_threadpool_destroy(pool);
    return 0;
}
