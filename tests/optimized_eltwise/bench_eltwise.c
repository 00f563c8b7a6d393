/* Timing of the optimized element-wise / softmax / norm / copy kernels against the portable
 * ones on the shapes of the benchmarked models (a benchmark, not a test: nothing here decides
 * pass or fail). Usage: bench_eltwise [min_ms_per_measurement]
 * Columns: microseconds per call for portable (1 thread), optimized under each supported ISA
 * with 1 thread (thread CPU time), and the best ISA with an etch_threadpool of 2 threads (wall
 * clock: meaningless on a loaded machine); then speedups of the best ISA over portable. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_math.h"
#include "kernels/portable/portable_nn.h"
#include "kernels/portable/portable_shape.h"
#include "runtime/context.h"
#include "kernel_test_util.h"

typedef void (*kfn)(etch_kernel_context *, etch_value **, size_t);

static double min_ms = 60.0;
static unsigned char temp_mem[1 << 22];

/* 1-thread timings use this thread's CPU time (the machine may be shared: wall clock would
 * count other processes' time slices); pool timings need the wall clock. */
static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double time_us(kfn f, etch_value **args, size_t nargs, const etch_threadpool_iface *p) {
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "bench", temp_mem, sizeof temp_mem, p);
    f(&ctx, args, nargs); /* warm */
    if (ctx.status != ETCH_OK) {
        fprintf(stderr, "kernel failed: %s\n", etch_last_error());
        exit(1);
    }
    /* calls per clock read: reading the thread CPU clock costs about a microsecond */
    double c0 = now_s();
    for (int i = 0; i < 10; i++) {
        etch_kernel_context_init(&ctx, "bench", temp_mem, sizeof temp_mem, p);
        f(&ctx, args, nargs);
    }
    double one = (now_s() - c0) / 10;
    long batch = one > 100e-6 ? 1 : (long)(100e-6 / (one > 1e-9 ? one : 1e-9)) + 1;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        long iters = 0;
        double t0 = now_s(), t1 = t0;
        while ((t1 - t0) * 1e3 < min_ms / 3) {
            for (long b = 0; b < batch; b++) {
                etch_kernel_context_init(&ctx, "bench", temp_mem, sizeof temp_mem, p);
                f(&ctx, args, nargs);
            }
            iters += batch;
            t1 = now_s();
        }
        double us = (t1 - t0) * 1e6 / (double)iters;
        best = us < best ? us : best;
    }
    return best;
}

static etch_threadpool *pool2;

static void row(const char *name, kfn opt, kfn ref, etch_value **args, size_t nargs) {
    double tp = time_us(ref, args, nargs, NULL);
    printf("%-44s %10.2f", name, tp);
    double t_best = 0;
    for (int i = 0; i < KT_N_ISAS; i++) {
        if (etch_isa_set(kt_all_isas[i]) != ETCH_OK) {
            printf(" %10s", "-");
            continue;
        }
        double t = time_us(opt, args, nargs, NULL);
        printf(" %10.2f", t);
        t_best = t;
    }
    etch_isa_set(etch_isa_best());
    clock_id = CLOCK_MONOTONIC;
    double t2 = time_us(opt, args, nargs, etch_threadpool_get_iface(pool2));
    clock_id = CLOCK_THREAD_CPUTIME_ID;
    printf(" %10.2f   x%-6.1f x%-6.1f\n", t2, tp / t_best, tp / t2);
}

static etch_tensor *mk(int dtype, int dim, const int64_t *sizes) {
    etch_tensor *t = (etch_tensor *)calloc(1, sizeof *t);
    int64_t n = 1;
    for (int i = 0; i < dim; i++)
        n *= sizes[i];
    void *d = calloc((size_t)(n > 0 ? n : 1), etch_dtype_size(dtype));
    etch_tensor_init(t, (etch_dtype)dtype, (size_t)dim, sizes, d);
    if (dtype == ETCH_DTYPE_FLOAT)
        for (int64_t i = 0; i < n; i++)
            ((float *)d)[i] = (float)((i * 7919) % 2001) / 500.0f - 2.0f;
    return t;
}

static void bench_binary(const char *name, kfn opt, kfn ref, bool alpha, int ad,
                         const int64_t *as, int bd, const int64_t *bs) {
    etch_tensor *a = mk(ETCH_DTYPE_FLOAT, ad, as), *b = mk(ETCH_DTYPE_FLOAT, bd, bs),
                *o = mk(ETCH_DTYPE_FLOAT, ad, as);
    etch_value va = kt_vtensor(a), vbb = kt_vtensor(b), vo = kt_vtensor(o), al = kt_vint(1);
    etch_value *args[5] = {&va, &vbb, alpha ? &al : &vo, &vo, &vo};
    row(name, opt, ref, args, alpha ? 5 : 4);
}

static void bench_unary(const char *name, kfn opt, kfn ref, int d, const int64_t *s) {
    etch_tensor *a = mk(ETCH_DTYPE_FLOAT, d, s), *o = mk(ETCH_DTYPE_FLOAT, d, s);
    etch_value va = kt_vtensor(a), vo = kt_vtensor(o);
    etch_value *args[3] = {&va, &vo, &vo};
    row(name, opt, ref, args, 3);
}

int main(int argc, char **argv) {
    if (argc > 1)
        min_ms = atof(argv[1]);
    if (etch_threadpool_create(2, &pool2) != ETCH_OK)
        return 1;
    printf("%-44s %10s %10s %10s %10s %10s %10s   %-7s %-7s\n", "op [shape] (us per call)",
           "portable", "scalar", "avx2", "avx512", "neon", "best/2thr", "1thr", "2thr");
    int64_t enc[3] = {1, 64, 256}, big[4] = {1, 64, 56, 56}, hid[3] = {1, 64, 768},
            tok[3] = {1, 1, 288}, r256[1] = {256};
    bench_binary("add.out [1,64,256]+same", etch_opt_add_out, etch_portable_add_out, true, 3,
                 enc, 3, enc);
    bench_binary("add.out [1,64,56,56]+same", etch_opt_add_out, etch_portable_add_out, true, 4,
                 big, 4, big);
    bench_binary("mul.out [1,64,768]*same", etch_opt_mul_out, etch_portable_mul_out, false, 3,
                 hid, 3, hid);
    bench_binary("mul.out [1,64,256]*[256]", etch_opt_mul_out, etch_portable_mul_out, false, 3,
                 enc, 1, r256);
    int64_t col[3] = {1, 64, 1};
    bench_binary("mul.out [1,64,256]*[1,64,1]", etch_opt_mul_out, etch_portable_mul_out, false,
                 3, enc, 3, col);
    bench_binary("mul.out [1,1,288]*same (decode)", etch_opt_mul_out, etch_portable_mul_out,
                 false, 3, tok, 3, tok);
    {
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, enc), *o = mk(ETCH_DTYPE_FLOAT, 3, enc);
        etch_value va = kt_vtensor(a), vo = kt_vtensor(o), s = kt_vdouble(0.125);
        etch_value *args[4] = {&va, &s, &vo, &vo};
        row("mul.Scalar_out [1,64,256]", etch_opt_mul_scalar_out, etch_portable_mul_scalar_out,
            args, 4);
    }
    bench_unary("relu.out [1,64,56,56]", etch_opt_relu_out, etch_portable_relu_out, 4, big);
    bench_unary("sigmoid.out [1,64,768]", etch_opt_sigmoid_out, etch_portable_sigmoid_out, 3, hid);
    bench_unary("exp.out [1,64,768]", etch_opt_exp_out, etch_portable_exp_out, 3, hid);
    bench_unary("tanh.out [1,64,768]", etch_opt_tanh_out, etch_portable_tanh_out, 3, hid);
    bench_unary("rsqrt.out [1,64,768]", etch_opt_rsqrt_out, etch_portable_rsqrt_out, 3, hid);
    {
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, hid), *o = mk(ETCH_DTYPE_FLOAT, 3, hid);
        etch_value va = kt_vtensor(a), vo = kt_vtensor(o), ap = {ETCH_VALUE_STRING, {0}};
        ap.u.str.ptr = "none";
        ap.u.str.len = 4;
        etch_value *args[4] = {&va, &ap, &vo, &vo};
        row("gelu.out [1,64,768]", etch_opt_gelu_out, etch_portable_gelu_out, args, 4);
    }
    {
        int64_t s[4] = {1, 8, 64, 64}, m[2] = {64, 64};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 4, s), *mask = mk(ETCH_DTYPE_BOOL, 2, m),
                    *o = mk(ETCH_DTYPE_FLOAT, 4, s);
        for (int i = 0; i < 64 * 64; i++)
            ((uint8_t *)mask->data)[i] = (i % 64) > (i / 64);
        etch_value va = kt_vtensor(a), vm = kt_vtensor(mask), v = kt_vdouble(-INFINITY), vo = kt_vtensor(o);
        etch_value *args[5] = {&va, &vm, &v, &vo, &vo};
        row("masked_fill [1,8,64,64] mask [64,64]", etch_opt_masked_fill_scalar_out,
            etch_portable_masked_fill_scalar_out, args, 5);
    }
    const int64_t sm_shapes[4][4] = {{1, 8, 64, 64}, {1, 4, 64, 256}, {1, 6, 1, 256},
                                     {4, 2, 512, 512}};
    for (int k = 0; k < 4; k++) {
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 4, sm_shapes[k]), *o = mk(ETCH_DTYPE_FLOAT, 4, sm_shapes[k]);
        etch_value va = kt_vtensor(a), d = kt_vint(-1), h = kt_vbool(false), vo = kt_vtensor(o);
        etch_value *args[5] = {&va, &d, &h, &vo, &vo};
        char name[64];
        snprintf(name, sizeof name, "_softmax.out [%lld,%lld,%lld,%lld]", (long long)sm_shapes[k][0],
                 (long long)sm_shapes[k][1],
                 (long long)sm_shapes[k][2], (long long)sm_shapes[k][3]);
        row(name, etch_opt_softmax_out, etch_portable_softmax_out, args, 5);
    }
    {
        int64_t ss[3] = {1, 64, 1}, ns[1] = {256};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, enc), *o = mk(ETCH_DTYPE_FLOAT, 3, enc),
                    *mean = mk(ETCH_DTYPE_FLOAT, 3, ss), *rstd = mk(ETCH_DTYPE_FLOAT, 3, ss),
                    *w = mk(ETCH_DTYPE_FLOAT, 1, r256), *b = mk(ETCH_DTYPE_FLOAT, 1, r256);
        kt_ilist l;
        etch_value va = kt_vtensor(a), vw = kt_vtensor(w), vbb = kt_vtensor(b), eps = kt_vdouble(1e-5), vo = kt_vtensor(o),
                   vm = kt_vtensor(mean), vr = kt_vtensor(rstd);
        etch_value *args[9] = {&va, kt_mklist(&l, ns, 1), &vw, &vbb, &eps, &vo, &vm, &vr, &vo};
        row("native_layer_norm [1,64,256]", etch_opt_native_layer_norm_out,
            etch_portable_native_layer_norm_out, args, 9);
    }
    {
        int64_t s[3] = {1, 64, 288}, os[3] = {1, 64, 1}, dims[1] = {-1};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, s), *o = mk(ETCH_DTYPE_FLOAT, 3, os);
        kt_ilist l;
        etch_value va = kt_vtensor(a), k = kt_vbool(true), dt = {ETCH_VALUE_NONE, {0}}, vo = kt_vtensor(o);
        etch_value *args[6] = {&va, kt_mklist(&l, dims, 1), &k, &dt, &vo, &vo};
        row("mean.out [1,64,288] dim -1", etch_opt_mean_out, etch_portable_mean_out, args, 6);
    }
    const int64_t pshape[2][4] = {{1, 64, 8, 32}, {1, 64, 256, 1}};
    const int64_t perms[2][4] = {{0, 2, 1, 3}, {0, 2, 1, 3}};
    for (int k = 0; k < 2; k++) {
        int64_t os[4];
        for (int i = 0; i < 4; i++)
            os[i] = pshape[k][perms[k][i]];
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 4, pshape[k]), *o = mk(ETCH_DTYPE_FLOAT, 4, os);
        kt_ilist l;
        etch_value va = kt_vtensor(a), vo = kt_vtensor(o);
        etch_value *args[4] = {&va, kt_mklist(&l, perms[k], 4), &vo, &vo};
        char name[64];
        snprintf(name, sizeof name, "permute_copy [1,64,%lld,%lld] (0,2,1,3)",
                 (long long)pshape[k][2], (long long)pshape[k][3]);
        row(name, etch_opt_permute_copy_out, etch_portable_permute_copy_out, args, 4);
    }
    {
        int64_t s[3] = {1, 64, 768}, os[2] = {1, 768};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, s), *o = mk(ETCH_DTYPE_FLOAT, 2, os);
        etch_value va = kt_vtensor(a), d = kt_vint(1), ix = kt_vint(-1), vo = kt_vtensor(o);
        etch_value *args[5] = {&va, &d, &ix, &vo, &vo};
        row("select_copy [1,64,768] dim 1", etch_opt_select_copy_int_out,
            etch_portable_select_copy_int_out, args, 5);
    }
    {
        int64_t s[4] = {512, 8, 4, 2}, os[3] = {512, 8, 4};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 4, s), *o = mk(ETCH_DTYPE_FLOAT, 3, os);
        etch_value va = kt_vtensor(a), d = kt_vint(-1), ix = kt_vint(1), vo = kt_vtensor(o);
        etch_value *args[5] = {&va, &d, &ix, &vo, &vo};
        row("select_copy [512,8,4,2] dim -1 (RoPE)", etch_opt_select_copy_int_out,
            etch_portable_select_copy_int_out, args, 5);
    }
    {
        int64_t s[3] = {64, 8, 16}, os[4] = {64, 8, 16, 2};
        etch_tensor *a = mk(ETCH_DTYPE_FLOAT, 3, s), *b = mk(ETCH_DTYPE_FLOAT, 3, s),
                    *o = mk(ETCH_DTYPE_FLOAT, 4, os);
        etch_value va = kt_vtensor(a), vbb = kt_vtensor(b), *items[2] = {&va, &vbb}, list = {ETCH_VALUE_TENSOR_LIST, {0}},
                   d = kt_vint(-1), vo = kt_vtensor(o);
        list.u.list.items = items;
        list.u.list.len = 2;
        etch_value *args[4] = {&list, &d, &vo, &vo};
        row("stack 2x[64,8,16] dim -1 (RoPE)", etch_opt_stack_out, etch_portable_stack_out, args,
            4);
    }
    {
        int64_t cs[3] = {4, 32, 512}, vs[3] = {4, 32, 1}, ps[1] = {1};
        etch_tensor *c = mk(ETCH_DTYPE_FLOAT, 3, cs), *v = mk(ETCH_DTYPE_FLOAT, 3, vs),
                    *p = mk(ETCH_DTYPE_LONG, 1, ps);
        ((int64_t *)p->data)[0] = 17;
        etch_value vc = kt_vtensor(c), vv = kt_vtensor(v), vp = kt_vtensor(p), none = {ETCH_VALUE_NONE, {0}},
                   acc = kt_vbool(false), *items[3] = {&none, &none, &vp},
                   list = {ETCH_VALUE_OPTIONAL_TENSOR_LIST, {0}};
        list.u.list.items = items;
        list.u.list.len = 3;
        etch_value *args[5] = {&vc, &list, &vv, &acc, &vc};
        row("index_put_ k cache [4,32,512] col 17", etch_opt_index_put_, etch_portable_index_put_,
            args, 5);
    }
    {
        int64_t ws[2] = {32000, 288}, is[2] = {1, 64}, os[3] = {1, 64, 288};
        etch_tensor *w = mk(ETCH_DTYPE_FLOAT, 2, ws), *ix = mk(ETCH_DTYPE_LONG, 2, is),
                    *o = mk(ETCH_DTYPE_FLOAT, 3, os);
        for (int i = 0; i < 64; i++)
            ((int64_t *)ix->data)[i] = (i * 977) % 32000;
        etch_value vw = kt_vtensor(w), vix = kt_vtensor(ix), pad = kt_vint(-1), f = kt_vbool(false), vo = kt_vtensor(o);
        etch_value *args[7] = {&vw, &vix, &pad, &f, &f, &vo, &vo};
        row("embedding [32000,288] x 64", etch_opt_embedding_out, etch_portable_embedding_out,
            args, 7);
    }
    etch_threadpool_destroy(pool2);
    return 0;
}
