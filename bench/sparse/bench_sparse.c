/* 2:4 sparse against dense float32 linear (src/kernels/optimized/sparse.h vs opt_gemm.h).
 *
 * y[M, N] = x[M, K] · W[K, N] with W 2:4 sparse along K (random values, 2 kept of every 4),
 * at M = 1 (decode), 2, 4, 8 and M = 64, 1 and 2 threads (etch's own pool, as a method gets it):
 *   dense:  etch_opt_sgemm over W prepacked for the active ISA (what the runtime does at load
 *           for a dense constant weight: etch_opt_sgemm_pack_b)
 *   sparse: etch_sp24_linear over W compressed at load (etch_sp24_compress)
 * Both run side by side in one loop (alternating), best of --reps (default 30). Timing: one
 * thread, the thread's CPU time (waiting for a core on a shared machine does not count); two
 * threads, wall time. The ratio dense/sparse > 1 means the sparse kernel is faster.
 *
 * Usage: bench_sparse [--reps R] [--isa scalar|avx2|avx512|neon] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/sparse.h"
#include "runtime/context.h"

static int use_cpu_clock = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "error: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}
static float rndf(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

#define TEMP_BYTES ((size_t)16 << 20)

int main(int argc, char **argv) {
    int reps = 30;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1) {
                fprintf(stderr, "error: --reps must be >= 1\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            etch_isa isa;
            if (etch_isa_parse(argv[++i], &isa) != ETCH_OK || etch_isa_set(isa) != ETCH_OK) {
                fprintf(stderr, "error: --isa %s: %s\n", argv[i], etch_last_error());
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_sparse [--reps R] [--isa scalar|avx2|avx512|neon]\n");
            return 2;
        }
    }
    static const int64_t shapes[][2] = {{768, 768}, {1024, 1024}, {3072, 768}, {768, 3072},
                                        {4096, 4096}}; /* N x K */
    static const int64_t Ms[] = {1, 2, 4, 8, 64};
    etch_threadpool *pool = NULL;
    if (etch_threadpool_create(2, &pool) != ETCH_OK) {
        fprintf(stderr, "error: %s\n", etch_last_error());
        return 1;
    }
    void *temp = xalloc(TEMP_BYTES);
    printf("isa %s, best of %d; ratio = dense / sparse time (> 1: sparse faster)\n",
           etch_isa_name(etch_isa_active()), reps);
    printf("%-11s %4s %7s %11s %11s %7s\n", "N x K", "M", "threads", "dense ms", "sparse ms",
           "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t N = shapes[s][0], K = shapes[s][1];
        float *w = xalloc((size_t)(K * N) * sizeof(float));
        for (int64_t j = 0; j < N; j++)
            for (int64_t g = 0; g < K; g += 4) {
                const int a = (int)(rnd() % 4), b = (a + 1 + (int)(rnd() % 3)) % 4;
                for (int i = 0; i < 4; i++)
                    w[(g + i) * N + j] = i == a || i == b ? rndf() : 0.0f;
            }
        float *packed = xalloc(etch_opt_sgemm_packed_size(NULL, false, N, K));
        etch_sgemm_packed pk;
        etch_opt_sgemm_pack_b(NULL, w, N, 1, K, N, packed, &pk);
        void *sbuf = xalloc(etch_sp24_size(K, N));
        etch_sp24 sp;
        etch_sp24_compress(w, N, 1, K, N, sbuf, &sp);
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int64_t M = Ms[mi];
            float *x = xalloc((size_t)(M * K) * sizeof(float));
            float *y = xalloc((size_t)(M * N) * sizeof(float));
            for (int64_t i = 0; i < M * K; i++)
                x[i] = rndf();
            for (int threads = 1; threads <= 2; threads++) {
                use_cpu_clock = threads == 1;
                etch_kernel_context ctx;
                etch_kernel_context_init(&ctx, "bench", temp, TEMP_BYTES,
                                         threads == 2 ? etch_threadpool_get_iface(pool) : NULL);
                etch_sgemm_desc d;
                memset(&d, 0, sizeof d);
                d.M = M, d.N = N, d.K = K;
                d.a = x, d.a_rs = K, d.a_cs = 1;
                d.b = w, d.b_rs = N, d.b_cs = 1;
                d.c = y, d.ldc = N;
                d.alpha = 1.0f;
                pk.data = packed;
                d.b_packed = &pk;
                double best_d = 1e30, best_s = 1e30;
                for (int r = 0; r < reps + 2; r++) { /* two warm-up rounds */
                    double t0 = now();
                    etch_opt_sgemm(&ctx, &d);
                    double t1 = now();
                    etch_sp24_linear(&ctx, &sp, x, K, M, y, N, 1.0f, 0.0f, NULL, 0, NULL);
                    double t2 = now();
                    if (r >= 2) {
                        best_d = t1 - t0 < best_d ? t1 - t0 : best_d;
                        best_s = t2 - t1 < best_s ? t2 - t1 : best_s;
                    }
                }
                char shape[32];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
                printf("%-11s %4lld %7d %11.4f %11.4f %7.2f\n", shape, (long long)M, threads,
                       best_d * 1e3, best_s * 1e3, best_d / best_s);
                fflush(stdout);
            }
            free(x);
            free(y);
        }
        free(w);
        free(packed);
        free(sbuf);
    }
    free(temp);
    etch_threadpool_destroy(pool);
    return 0;
}
