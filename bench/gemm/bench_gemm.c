/* GEMM microbenchmark: etch_opt_sgemm against OpenBLAS cblas_sgemm, side by side.
 *
 * Shapes: 512^3 and the LLM shapes M x K x N for M in {1, 64} and (K, N) in
 * {(768,768), (768,2048), (2048,768), (768,32000), (288,288), (288,768)}; C = A[M,K] B[K,N],
 * all row-major float32. Each shape runs with 1 and 2 threads (etch through its own thread
 * pool, etch/threadpool.h, given to the kernel context as a method would; OpenBLAS through
 * openblas_set_num_threads), the two libraries alternating rep by rep; the best time of each
 * is reported.
 *
 * Usage: bench_gemm [--quick] [--isa scalar|avx2|avx512] [--shape MxKxN] [--threads 1|2]
 *                   [--temp KiB] [--mhz F] [--prepacked-b]
 *   --shape MxKxN: that shape only; --threads 1|2: that thread count only
 *   --prepacked-b: B packed once beforehand (etch_opt_sgemm_pack_b, as the runtime prepares
 *     a constant weight at load), so etch reads the packed copy: the packed path without
 *     packing B, and for M = 1 the matrix-vector kernel over packed panels (gemv_p)
 *   --temp KiB: kernel scratch handed to etch (default 16384; the module API's is 1024)
 *   --mhz: clock for the peak (default: the first "cpu MHz" of /proc/cpuinfo). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernels/optimized/opt_gemm.h"
#include "runtime/context.h"

void openblas_set_num_threads(int num_threads);

/* ---- timing ------------------------------------------------------------------------------- */

/* One thread: the calling thread's CPU time (the machine may be shared: time spent waiting
 * for a core does not count). Two threads: wall time. */
static int use_cpu_clock = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(use_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    double mhz = 0.0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *c = strchr(line, ':');
            if (c)
                mhz = atof(c + 1);
            break;
        }
    if (f)
        fclose(f);
    return mhz;
}

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
}

int main(int argc, char **argv) {
    int quick = 0, only_threads = 0, prepacked = 0;
    size_t temp_size = 16u << 20;
    int64_t only[3] = {0, 0, 0};
    double mhz = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--prepacked-b") == 0) {
            prepacked = 1;
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            etch_isa isa;
            if (etch_isa_parse(argv[++i], &isa) != ETCH_OK || etch_isa_set(isa) != ETCH_OK) {
                fprintf(stderr, "bench_gemm: %s\n", etch_last_error());
                return 2;
            }
        } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            long long m = 0, k = 0, n = 0;
            char tail = 0;
            if (sscanf(argv[++i], "%lldx%lldx%lld%c", &m, &k, &n, &tail) != 3 || m < 1 ||
                k < 1 || n < 1 || m * k > (1ll << 28) || k * n > (1ll << 28) ||
                m * n > (1ll << 28)) {
                fprintf(stderr, "bench_gemm: --shape wants MxKxN (positive, each matrix at "
                                "most 2^28 elements), got '%s'\n", argv[i]);
                return 2;
            }
            only[0] = m;
            only[1] = k;
            only[2] = n;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            only_threads = atoi(argv[++i]);
            if (only_threads < 1 || only_threads > 2) {
                fprintf(stderr, "bench_gemm: --threads wants 1 or 2\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--temp") == 0 && i + 1 < argc) {
            char *end = NULL;
            const long long kib = strtoll(argv[++i], &end, 10);
            if (!end || *end || kib < 0 || kib > (1ll << 22)) {
                fprintf(stderr, "bench_gemm: --temp wants KiB in [0, 4194304], got '%s'\n",
                        argv[i]);
                return 2;
            }
            temp_size = (size_t)kib << 10;
        } else if (strcmp(argv[i], "--mhz") == 0 && i + 1 < argc) {
            mhz = atof(argv[++i]);
            if (!(mhz > 0.0)) {
                fprintf(stderr, "bench_gemm: --mhz needs a positive number\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_gemm [--quick] [--isa scalar|avx2|avx512] "
                            "[--shape MxKxN] [--threads 1|2] [--temp KiB] [--mhz F] "
                            "[--prepacked-b]\n");
            return 2;
        }
    }
    if (mhz <= 0.0)
        mhz = cpu_mhz();
    const etch_isa isa = etch_isa_active();
    const double lanes = isa == ETCH_ISA_AVX512 ? 16 : isa == ETCH_ISA_SCALAR ? 1 : 8;
    const double peak = mhz * 1e-3 * lanes * 2 /* FMA units */ * 2 /* flops per FMA */;
    printf("isa %s, clock %.0f MHz (/proc/cpuinfo unless --mhz), one-core peak %.1f GFLOP/s "
           "(clock x %g lanes x 2 FMA units x 2 flops)%s\n\n",
           etch_isa_name(isa), mhz, peak, lanes,
           prepacked ? "; etch's B prepacked once (--prepacked-b)" : "");

    static const int64_t kn[][2] = {{768, 768},  {768, 2048}, {2048, 768},
                                    {768, 32000}, {288, 288},  {288, 768}};
    int64_t shapes[16][3];
    int ns = 0;
    shapes[ns][0] = shapes[ns][1] = shapes[ns][2] = 512;
    ns++;
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 6; s++) {
            shapes[ns][0] = m ? 64 : 1;
            shapes[ns][1] = kn[s][0];
            shapes[ns][2] = kn[s][1];
            ns++;
        }

    if (only[0]) {
        memcpy(shapes[0], only, sizeof only);
        ns = 1;
    }
    void *temp = temp_size ? aligned_alloc(64, temp_size) : NULL;
    printf("| M x K x N | threads | etch ms | OpenBLAS ms | etch GFLOP/s | OpenBLAS GFLOP/s | "
           "etch %% of 1-core peak | etch GB/s (B) | etch / OpenBLAS speed |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int threads = 1; threads <= 2; threads++) {
        if (only_threads && threads != only_threads)
            continue;
        etch_threadpool *pool = NULL;
        if (etch_threadpool_create(threads, &pool) != ETCH_OK) {
            fprintf(stderr, "bench_gemm: %s\n", etch_last_error());
            return 1;
        }
        use_cpu_clock = threads == 1;
        const etch_threadpool_iface *iface = etch_threadpool_get_iface(pool);
        openblas_set_num_threads(threads);
        for (int s = 0; s < ns; s++) {
            const int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
            float *a = aligned_alloc(64, (size_t)(M * K) * 4 + 64);
            float *b = aligned_alloc(64, (size_t)(K * N) * 4 + 64);
            float *c1 = aligned_alloc(64, (size_t)(M * N) * 4 + 64);
            float *c2 = aligned_alloc(64, (size_t)(M * N) * 4 + 64);
            fill(a, (size_t)(M * K), 1);
            fill(b, (size_t)(K * N), 2);
            etch_sgemm_desc d;
            memset(&d, 0, sizeof d);
            d.M = M;
            d.N = N;
            d.K = K;
            d.a = a;
            d.a_rs = K;
            d.a_cs = 1;
            d.b = b;
            d.b_rs = N;
            d.b_cs = 1;
            d.c = c1;
            d.ldc = N;
            d.alpha = 1.0f;
            d.beta = 0.0f;
            etch_sgemm_packed pk;
            float *bpack = NULL;
            if (prepacked) {
                bpack = aligned_alloc(64, etch_opt_sgemm_packed_size(NULL, false, N, K) + 64);
                etch_opt_sgemm_pack_b(NULL, b, N, 1, K, N, bpack, &pk);
                d.b_packed = &pk;
            }
            const double flops = 2.0 * (double)M * (double)N * (double)K;
            /* about 0.25 s (quick: 0.05 s) per library and shape */
            const double budget = quick ? 0.05 : 0.25;
            double best_e = 1e30, best_o = 1e30, spent = 0.0;
            int reps = 0;
            while ((spent < 2 * budget || reps < 3) && reps < 2000) {
                etch_kernel_context ctx;
                etch_kernel_context_init(&ctx, "bench", temp, temp_size,
                                         threads > 1 ? iface : NULL);
                double t0 = now();
                etch_opt_sgemm(&ctx, &d);
                double t1 = now();
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K,
                            1.0f, a, (int)K, b, (int)N, 0.0f, c2, (int)N);
                double t2 = now();
                best_e = t1 - t0 < best_e ? t1 - t0 : best_e;
                best_o = t2 - t1 < best_o ? t2 - t1 : best_o;
                spent += t2 - t0;
                reps++;
            }
            double maxdiff = 0.0;
            for (int64_t i = 0; i < M * N; i++) {
                double dd = (double)c1[i] - (double)c2[i];
                dd = dd < 0 ? -dd : dd;
                maxdiff = dd > maxdiff ? dd : maxdiff;
            }
            const double ge = flops / best_e * 1e-9, go = flops / best_o * 1e-9;
            char gbs[32] = "";
            if (M == 1)
                snprintf(gbs, sizeof gbs, "%.1f", (double)(K * N) * 4.0 / best_e * 1e-9);
            printf("| %lld x %lld x %lld | %d | %.3f | %.3f | %.1f | %.1f | %.0f%% | %s | %.2f |%s\n",
                   (long long)M, (long long)K, (long long)N, threads, best_e * 1e3,
                   best_o * 1e3, ge, go, 100.0 * ge / peak, gbs, best_o / best_e,
                   maxdiff > 1e-2 ? " RESULTS DIFFER" : "");
            fflush(stdout);
            free(a);
            free(b);
            free(c1);
            free(c2);
            free(bpack);
        }
        etch_threadpool_destroy(pool);
    }
    free(temp);
    return 0;
}
