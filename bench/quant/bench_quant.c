/* Integer kernel microbenchmark (src/kernels/optimized/quant.h).
 *
 * 1. int4 matrix-vector (decode, M = 1): etch_q4_linear_f32 and etch_q4_linear_8da4w_f32
 *    (per-token quantization of x included) over W [N, K] in ExecuTorch's embedding_4bit
 *    packing with float scales [N, K / G]; achieved bandwidth = (N * K / 2 + N * K / G * 4)
 *    bytes / time, against a streaming read (64-bit sums, 4 chains) of the same buffers in
 *    the same run: "hot" reads one weight again and again (it stays in the last-level
 *    cache when it fits), "cold" rotates over copies totalling --pool-mib (default 768 MiB,
 *    more than this machine's L3) so every call streams from memory.
 * 2. int8 GEMM (etch_q8_gemm, uint8 activations, per-channel requantization to uint8,
 *    weights packed beforehand): GOP/s = 2 M N K / time.
 * Each with 1 and 2 threads (etch's own pool, as a method gets it). Timing: one thread, the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID: waiting for a core on a shared machine does not
 * count); two threads, wall time; best of --reps runs (default 40; --quick 8).
 * --shape NxK: that int4 shape only (and no int8 GEMM).
 *
 * Usage: bench_quant [--quick] [--reps R] [--pool-mib MiB] [--isa scalar|avx2|avx512|neon]
 *                    [--no-vnni] [--threads 1|2] [--shape NxK] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernels/optimized/quant.h"
#include "runtime/context.h"

/* One thread: the calling thread's CPU time (the machine may be shared: time spent waiting
 * for a core does not count); two threads: wall time. */
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

/* ---- streaming read ------------------------------------------------------------------------ */

typedef struct stream_arg {
    const uint8_t *p;
    size_t bytes;
    uint64_t sums[64];
} stream_arg;

#define STREAM_CHUNK ((size_t)1 << 20)

static void stream_task(void *arg, int64_t b, int64_t e) {
    stream_arg *s = arg;
    for (int64_t c = b; c < e; c++) {
        const size_t off = (size_t)c * STREAM_CHUNK;
        const size_t len = s->bytes - off < STREAM_CHUNK ? s->bytes - off : STREAM_CHUNK;
        const uint64_t *q = (const uint64_t *)(s->p + off);
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (size_t i = 0; i + 4 <= len / 8; i += 4) {
            a0 += q[i];
            a1 += q[i + 1];
            a2 += q[i + 2];
            a3 += q[i + 3];
        }
        s->sums[c & 63] += a0 ^ a1 ^ a2 ^ a3;
    }
}

static void stream_read(etch_kernel_context *ctx, const uint8_t *p, size_t bytes,
                        uint64_t *sink) {
    static stream_arg s;
    s.p = p;
    s.bytes = bytes;
    const int64_t chunks = (int64_t)((bytes + STREAM_CHUNK - 1) / STREAM_CHUNK);
    etch_kernel_parallel_for(ctx, chunks, 1, stream_task, &s);
    *sink += s.sums[0];
}

/* ---- int4 ------------------------------------------------------------------------------------ */

typedef struct q4_copy {
    uint8_t *buf; /* packed weights, then the scales */
    etch_q4_weights w;
} q4_copy;

static int reps = 40;
static size_t pool_mib = 768;

/* Matrix-vector products against the streaming read of the same buffers; G > 0: int4 (the
 * f32 and 8da4w kernels), G == 0: int8 weights (the 8w kernel). */
static void bench_mv(etch_kernel_context *ctx, int threads, int64_t N, int64_t K, int64_t G) {
    const bool w8 = G == 0;
    const size_t wbytes = w8 ? (size_t)(N * K) : (size_t)(N * K / 2);
    const size_t sbytes = (size_t)(w8 ? N : N * (K / G)) * sizeof(float);
    const size_t bytes = wbytes + sbytes;
    int ncopies = (int)((pool_mib << 20) / bytes) + 1;
    if (ncopies > 256)
        ncopies = 256;
    q4_copy *cp = calloc((size_t)ncopies, sizeof *cp);
    etch_q8w_weights *w8s = calloc((size_t)ncopies, sizeof *w8s);
    for (int c = 0; c < ncopies; c++) {
        cp[c].buf = xalloc(bytes);
        for (size_t i = 0; i < wbytes; i++)
            cp[c].buf[i] = (uint8_t)rnd();
        float *sc = (float *)(cp[c].buf + wbytes);
        for (size_t i = 0; i < sbytes / 4; i++)
            sc[i] = rndf() * 0.01f;
        if (w8) {
            etch_q8w_weights w = {N, K, K, (const int8_t *)cp[c].buf, sc, NULL};
            w8s[c] = w;
        } else {
            etch_q4_weights w = {N, K, G, cp[c].buf, sc, NULL};
            cp[c].w = w;
        }
    }
    float *x = xalloc((size_t)K * 4), *y = xalloc((size_t)N * 4);
    for (int64_t k = 0; k < K; k++)
        x[k] = rndf();
    size_t ws = etch_q8w_linear_f32_work_size(1) + 64;
    if (!w8) {
        ws = etch_q4_linear_8da4w_f32_work_size(1, K, G);
        if (etch_q4_linear_f32_work_size(1, K, G) > ws)
            ws = etch_q4_linear_f32_work_size(1, K, G);
    }
    void *work = xalloc(ws);
    uint64_t sink = 0;
    const int nv = w8 ? 2 : 3; /* stream, then the kernels */
    for (int cold = 0; cold < 2; cold++) {
        double best[3] = {1e30, 1e30, 1e30};
        const int n = cold ? ncopies : 1;
        for (int r = 0; r < reps; r++) {
            for (int v = 0; v < nv; v++) {
                const int ci = (r * nv + v) % n;
                const q4_copy *c = &cp[ci];
                const double t0 = now();
                if (v == 0)
                    stream_read(ctx, c->buf, bytes, &sink);
                else if (w8)
                    etch_q8w_linear_f32(ctx, &w8s[ci], 1, x, K, NULL, y, N, work);
                else if (v == 1)
                    etch_q4_linear_f32(ctx, &c->w, 1, x, K, NULL, y, N, work);
                else
                    etch_q4_linear_8da4w_f32(ctx, &c->w, 1, x, K, NULL, y, N, work);
                const double t = now() - t0;
                if (t < best[v])
                    best[v] = t;
            }
        }
        const double gbs = (double)bytes / best[0] * 1e-9;
        for (int v = 1; v < nv; v++) {
            const double kg = (double)bytes / best[v] * 1e-9;
            char gs[16];
            snprintf(gs, sizeof gs, w8 ? "-" : "%lld", (long long)G);
            printf("| %lld x %lld | %s | %s | %s | %d | %.1f | %.3f | %.1f | %.1f | %.0f%% |\n",
                   (long long)N, (long long)K, gs, w8 ? "8w" : v == 1 ? "f32" : "8da4w",
                   cold ? "cold" : "hot", threads, (double)bytes / (1 << 20), best[v] * 1e3, kg,
                   gbs, 100.0 * kg / gbs);
        }
    }
    if (sink == 42)
        printf("(sink)\n");
    for (int c = 0; c < ncopies; c++)
        free(cp[c].buf);
    free(cp);
    free(w8s);
    free(x);
    free(y);
    free(work);
}

/* ---- int8 GEMM --------------------------------------------------------------------------------- */

static void bench_q8(etch_kernel_context *ctx, int threads, int64_t M, int64_t K, int64_t N) {
    uint8_t *a = xalloc((size_t)(M * K));
    int8_t *b = xalloc((size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++)
        a[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < N * K; i++)
        b[i] = (int8_t)rnd();
    float *mult = xalloc((size_t)N * 4);
    for (int64_t n = 0; n < N; n++)
        mult[n] = 1e-5f;
    etch_q8_packed pk;
    void *pd = xalloc(etch_q8_gemm_packed_size(-1, N, K));
    etch_q8_gemm_pack(-1, b, N, K, K, pd, &pk);
    uint8_t *c = xalloc((size_t)(M * N));
    void *work = xalloc(etch_q8_gemm_work_size(M, K));
    etch_q8_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M;
    d.a = a;
    d.lda = K;
    d.za = 128;
    d.b = &pk;
    d.mult = mult;
    d.mult_per_channel = true;
    d.out_type = ETCH_Q8_OUT_U8;
    d.zo = 128;
    d.qmin = 0;
    d.qmax = 255;
    d.c = c;
    d.ldc = N;
    d.work = work;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        if (etch_q8_gemm(ctx, &d) != ETCH_OK) {
            fprintf(stderr, "error: %s\n", etch_last_error());
            exit(1);
        }
        const double t = now() - t0;
        if (t < best)
            best = t;
    }
    printf("| %lld x %lld x %lld | %d | %.3f | %.1f |\n", (long long)M, (long long)K,
           (long long)N, threads, best * 1e3, 2.0 * (double)(M * N * K) / best * 1e-9);
    free(a);
    free(b);
    free(mult);
    free(pd);
    free(c);
    free(work);
}

/* --stream-mib: the streaming-read bandwidth alone over one buffer of that size read again
 * and again (as a decode reads its weights), 1 and 2 threads; one JSON line per count (for
 * bench/llm/run_bench.py's bandwidth fraction). */
static int stream_only(etch_threadpool *pool, size_t mib) {
    const size_t bytes = mib << 20;
    uint8_t *buf = xalloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (uint8_t)i;
    uint64_t sink = 0;
    for (int t = 1; t <= 2; t++) {
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "bench", NULL, 0,
                                 t > 1 ? etch_threadpool_get_iface(pool) : NULL);
        use_cpu_clock = 0; /* wall time, as the decode timings */
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            const double t0 = now();
            stream_read(&ctx, buf, bytes, &sink);
            const double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        printf("{\"threads\": %d, \"bytes\": %zu, \"stream_gb_s\": %.3f}\n", t, bytes,
               (double)bytes / best * 1e-9);
    }
    if (sink == 42)
        printf("(sink)\n");
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int only_threads = 0;
    int64_t shape_n = 0, shape_k = 0;
    long stream_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            reps = 8;
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pool-mib") == 0 && i + 1 < argc)
            pool_mib = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--stream-mib") == 0 && i + 1 < argc)
            stream_mib = atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only_threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            long long a, b;
            if (sscanf(argv[++i], "%lldx%lld", &a, &b) != 2 || a < 1 || b < 256 || b % 256) {
                fprintf(stderr, "error: --shape NxK (K a multiple of 256)\n");
                return 1;
            }
            shape_n = a;
            shape_k = b;
        } else if (strcmp(argv[i], "--no-vnni") == 0)
            etch_quant_features_allow(~(unsigned)ETCH_QF_VNNI);
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            etch_isa isa;
            if (etch_isa_parse(argv[++i], &isa) != ETCH_OK || etch_isa_set(isa) != ETCH_OK) {
                fprintf(stderr, "error: %s\n", etch_last_error());
                return 1;
            }
        } else {
            fprintf(stderr,
                    "usage: bench_quant [--quick] [--reps R] [--pool-mib MiB] [--isa NAME] "
                    "[--no-vnni] [--threads 1|2] [--shape NxK] [--stream-mib MiB]\n");
            return 1;
        }
    }
    if (reps < 1 || pool_mib < 1 || (only_threads != 0 && only_threads != 1 && only_threads != 2) ||
        stream_mib < 0 || stream_mib > 65536) {
        fprintf(stderr, "error: --reps, --pool-mib must be >= 1; --threads 1 or 2; --stream-mib "
                        "0..65536\n");
        return 1;
    }
    if (stream_mib > 0) {
        etch_threadpool *sp = NULL;
        if (etch_threadpool_create(2, &sp) != ETCH_OK) {
            fprintf(stderr, "error: %s\n", etch_last_error());
            return 1;
        }
        const int rc = stream_only(sp, (size_t)stream_mib);
        etch_threadpool_destroy(sp);
        return rc;
    }
    const unsigned f = etch_quant_features();
    printf("isa %s%s%s, best of %d runs, cold pool %zu MiB\n\n", etch_isa_name(etch_isa_active()),
           f & ETCH_QF_VNNI ? "+vnni" : "", f & ETCH_QF_DOTPROD ? "+dotprod" : "", reps,
           pool_mib);
    static const int64_t q4_shapes[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
    static const int64_t q8_shapes[][3] = {
        {1, 4096, 4096}, {16, 4096, 4096}, {64, 4096, 4096}, {64, 768, 768}, {128, 768, 2048}};
    etch_threadpool *pool = NULL;
    if (etch_threadpool_create(2, &pool) != ETCH_OK) {
        fprintf(stderr, "error: %s\n", etch_last_error());
        return 1;
    }
    printf("int4 and int8 (8w) matrix-vector (M = 1): kernel GB/s = (packed weights + scales) / "
           "time; stream GB/s: a plain read of the same buffers\n\n");
    printf("| N x K | G | kernel | cache | threads | MiB | ms | kernel GB/s | stream GB/s | kernel / stream |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int t = 1; t <= 2; t++) {
        if (only_threads && t != only_threads)
            continue;
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "bench", NULL, 0,
                                 t > 1 ? etch_threadpool_get_iface(pool) : NULL);
        use_cpu_clock = t == 1;
        for (size_t s = 0; s < sizeof q4_shapes / sizeof q4_shapes[0]; s++)
            for (int g = 0; g < 3; g++) { /* G = 32, 128, then the int8 weights */
                if (shape_n && s > 0)
                    break;
                bench_mv(&ctx, t, shape_n ? shape_n : q4_shapes[s][0],
                         shape_n ? shape_k : q4_shapes[s][1], g == 2 ? 0 : g ? 128 : 32);
            }
    }
    if (shape_n) {
        etch_threadpool_destroy(pool);
        return 0;
    }
    printf("\nint8 GEMM (uint8 activations, int8 weights packed beforehand, per-channel "
           "requantization to uint8): GOP/s = 2 M N K / time\n\n");
    printf("| M x K x N | threads | ms | GOP/s |\n|---|---|---|---|\n");
    for (int t = 1; t <= 2; t++) {
        if (only_threads && t != only_threads)
            continue;
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "bench", NULL, 0,
                                 t > 1 ? etch_threadpool_get_iface(pool) : NULL);
        use_cpu_clock = t == 1;
        for (size_t s = 0; s < sizeof q8_shapes / sizeof q8_shapes[0]; s++)
            bench_q8(&ctx, t, q8_shapes[s][0], q8_shapes[s][1], q8_shapes[s][2]);
    }
    etch_threadpool_destroy(pool);
    return 0;
}
