/*
 * bench_dw_nchwc [threads] [reps] [layer]: time of mobilenet_v2's 17 depthwise convolutions (3x3,
 * padding 1, ReLU6 fused, input 224x224) through etch_opt_convolution_out on NCHW tensors
 * (the direct SIMD rows of conv_dw*.c) and on channel-blocked ones (conv_dw_nchwc*.c), under
 * the active instruction set (ETCH_ISA to choose). Prints each layer's best time of `reps`
 * runs (default 20) and the sums weighted by how often the layer occurs. Not a test: timings
 * decide nothing; both outputs are compared only loosely (max difference printed). Then
 * resnet18's max pooling (64x112x112, 3x3 stride 2 padding 1) the same two ways.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernel_test_util.h"
#include "kernels/optimized/opt_conv.h"
#include "runtime/context.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double run(etch_value **args, uint64_t blocked, const etch_threadpool_iface *tp,
                  int reps) {
    static const etch_epilogue relu6 = {ETCH_ACT_CLAMP, 0, 6};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "dw", NULL, 0, tp);
        ctx.epilogue = &relu6;
        ctx.blocked = blocked;
        double t0 = now();
        etch_opt_convolution_out(&ctx, args, 11);
        double t = now() - t0;
        if (ctx.status != ETCH_OK) {
            fprintf(stderr, "kernel failed: %s\n", etch_last_error());
            exit(1);
        }
        if (t < best)
            best = t;
    }
    return best;
}

static double run_pool(etch_value **args, uint64_t blocked, const etch_threadpool_iface *tp,
                       int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "pool", NULL, 0, tp);
        ctx.blocked = blocked;
        double t0 = now();
        etch_opt_max_pool2d_with_indices_out(&ctx, args, 9);
        double t = now() - t0;
        if (ctx.status != ETCH_OK) {
            fprintf(stderr, "kernel failed: %s\n", etch_last_error());
            exit(1);
        }
        if (t < best)
            best = t;
    }
    return best;
}

static void bench_maxpool(const etch_threadpool_iface *tp, int reps) {
    const int C = 64, H = 112, OH = 56;
    const size_t nx = (size_t)C * H * H, no = (size_t)C * OH * OH;
    float *x = malloc(nx * 4), *xb = malloc(nx * 4), *o = malloc(no * 4), *ob = malloc(no * 4);
    int64_t *oi = malloc(no * 8), *oib = malloc(no * 8);
    if (!x || !xb || !o || !ob || !oi || !oib)
        exit(1);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)rand() / (float)RAND_MAX;
    kt_to_blocked(x, xb, 1, C, H, H);
    int64_t xs[4] = {1, C, H, H}, os[4] = {1, C, OH, OH};
    etch_tensor tx, txb, to, tob, ti, tib;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
    etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, os, o);
    etch_tensor_init(&tob, ETCH_DTYPE_FLOAT, 4, os, ob);
    etch_tensor_init(&ti, ETCH_DTYPE_LONG, 4, os, oi);
    etch_tensor_init(&tib, ETCH_DTYPE_LONG, 4, os, oib);
    const int64_t k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1}, d[2] = {1, 1};
    kt_ilist lk, ls, lp, ld;
    etch_value vx = kt_vtensor(&tx), vxb = kt_vtensor(&txb), vo = kt_vtensor(&to),
               vob = kt_vtensor(&tob), vi = kt_vtensor(&ti), vib = kt_vtensor(&tib),
               cm = kt_vbool(false), ret = kt_vnone();
    etch_value *args[9] = {&vx, kt_mklist(&lk, k, 2), kt_mklist(&ls, s, 2), kt_mklist(&lp, p, 2),
                           kt_mklist(&ld, d, 2), &cm, &vo, &vi, &ret};
    etch_value *bargs[9] = {&vxb, args[1], args[2], args[3], args[4], &cm, &vob, &vib, &ret};
    const double a = run_pool(args, 0, tp, reps);
    const double b = run_pool(bargs, 1u | (1u << 6) | (1u << 7), tp, reps);
    printf("%-22s %10.1f %10.1f %6.2fx\n", "maxpool 112x112x64 s2", a * 1e6, b * 1e6, a / b);
    free(x), free(xb), free(o), free(ob), free(oi), free(oib);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1, reps = argc > 2 ? atoi(argv[2]) : 20;
    const int only = argc > 3 ? atoi(argv[3]) : -1; /* one layer (0..9) only */
    if (threads < 1 || threads > 64 || reps < 1) {
        fprintf(stderr, "usage: bench_dw_nchwc [threads 1..64] [reps >= 1]\n");
        return 2;
    }
    if (etch_kernels_register_optimized() != ETCH_OK)
        return 1;
    etch_threadpool *pool = NULL;
    if (threads > 1 && etch_threadpool_create(threads, &pool) != ETCH_OK)
        return 1;
    const etch_threadpool_iface *tp = pool ? etch_threadpool_get_iface(pool) : NULL;
    /* H (= W), channels, stride, occurrences in mobilenet_v2 */
    static const int layers[][4] = {
        {112, 32, 1, 1}, {112, 96, 2, 1}, {56, 144, 1, 1}, {56, 144, 2, 1}, {28, 192, 1, 2},
        {28, 192, 2, 1}, {14, 384, 1, 4}, {14, 576, 1, 2}, {14, 576, 2, 1}, {7, 960, 1, 3},
    };
    printf("isa %s, %d thread(s), best of %d\n", etch_isa_name(etch_isa_active()), threads, reps);
    printf("%-22s %10s %10s %7s %9s\n", "layer", "NCHW us", "NCHW8c us", "speedup", "max diff");
    double tn = 0, tb = 0;
    for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
        if (only >= 0 && (size_t)only != l)
            continue;
        const int H = layers[l][0], C = layers[l][1], st = layers[l][2], times = layers[l][3];
        const int OH = (H + 2 - 3) / st + 1;
        const size_t nx = (size_t)C * H * H, no = (size_t)C * OH * OH;
        float *x = malloc(nx * 4), *xb = malloc(nx * 4), *w = malloc((size_t)C * 36);
        float *b = malloc((size_t)C * 4), *o = malloc(no * 4), *ob = malloc(no * 4),
              *o2 = malloc(no * 4);
        if (!x || !xb || !w || !b || !o || !ob || !o2)
            return 1;
        srand(7);
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
        for (int i = 0; i < C * 9; i++)
            w[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int i = 0; i < C; i++)
            b[i] = 0.1f;
        kt_to_blocked(x, xb, 1, C, H, H);
        int64_t xs[4] = {1, C, H, H}, ws[4] = {C, 1, 3, 3}, os[4] = {1, C, OH, OH}, bs[1] = {C};
        etch_tensor tx, txb, tw, tb_, to, tob;
        etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
        etch_tensor_init(&txb, ETCH_DTYPE_FLOAT, 4, xs, xb);
        etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
        etch_tensor_init(&tb_, ETCH_DTYPE_FLOAT, 1, bs, b);
        etch_tensor_init(&to, ETCH_DTYPE_FLOAT, 4, os, o);
        etch_tensor_init(&tob, ETCH_DTYPE_FLOAT, 4, os, ob);
        const int64_t sv[2] = {st, st}, pv[2] = {1, 1}, dv[2] = {1, 1}, ov[2] = {0, 0};
        kt_ilist ls, lp, ld, lo;
        etch_value vx = kt_vtensor(&tx), vxb = kt_vtensor(&txb), vw = kt_vtensor(&tw),
                   vb = kt_vtensor(&tb_), vo = kt_vtensor(&to), vob = kt_vtensor(&tob),
                   tr = kt_vbool(false), g = kt_vint(C);
        etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, sv, 2), kt_mklist(&lp, pv, 2),
                                kt_mklist(&ld, dv, 2), &tr, kt_mklist(&lo, ov, 2), &g, &vo, &vo};
        etch_value *bargs[11] = {&vxb, &vw, &vb, args[3], args[4], args[5], &tr, args[7], &g,
                                 &vob, &vob};
        const double a = run(args, 0, tp, reps);
        const double bt = run(bargs, 1u | (1u << 9) | (1u << 10), tp, reps);
        kt_from_blocked(ob, o2, 1, C, OH, OH);
        double md = 0;
        for (size_t i = 0; i < no; i++)
            md = fmax(md, fabs((double)o[i] - (double)o2[i]));
        char name[40];
        snprintf(name, sizeof name, "%dx%dx%d s%d (x%d)", H, H, C, st, times);
        printf("%-22s %10.1f %10.1f %6.2fx %9.2g\n", name, a * 1e6, bt * 1e6, a / bt, md);
        tn += a * times;
        tb += bt * times;
        free(x), free(xb), free(w), free(b), free(o), free(ob), free(o2);
    }
    printf("%-22s %10.1f %10.1f %6.2fx\n", "all 17 layers", tn * 1e6, tb * 1e6, tn / tb);
    if (only < 0)
        bench_maxpool(tp, reps);
    etch_threadpool_destroy(pool);
    return 0;
}
