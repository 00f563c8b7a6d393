/* Shared helpers of the kernel tests: see kernel_test_util.h. */
#include "kernel_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

etch_value kt_vtensor(etch_tensor *t) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_TENSOR;
    v.u.tensor = t;
    return v;
}

etch_value kt_vint(int64_t i) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_INT;
    v.u.i = i;
    return v;
}

etch_value kt_vdouble(double d) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_DOUBLE;
    v.u.d = d;
    return v;
}

etch_value kt_vbool(bool b) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_BOOL;
    v.u.b = b;
    return v;
}

etch_value kt_vnone(void) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_NONE;
    return v;
}

etch_value kt_vstr(const char *s) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_STRING;
    v.u.str.ptr = s;
    v.u.str.len = strlen(s);
    return v;
}

etch_value *kt_mklist(kt_ilist *l, const int64_t *vals, size_t n) {
    memset(l, 0, sizeof *l);
    for (size_t i = 0; i < n && i < ETCH_MAX_DIMS; i++) {
        l->items[i] = kt_vint(vals[i]);
        l->ptrs[i] = &l->items[i];
    }
    l->v.tag = ETCH_VALUE_INT_LIST;
    l->v.u.list.items = l->ptrs;
    l->v.u.list.scratch = l->scratch;
    l->v.u.list.len = n < ETCH_MAX_DIMS ? n : ETCH_MAX_DIMS;
    return &l->v;
}

#define KT_MAX_CHUNKS 64

static void shuffle_run(void *self, int64_t n, int64_t grain, etch_parallel_fn fn,
                        etch_parallel_thread_fn fnt, void *arg) {
    kt_shuffle_pool *p = (kt_shuffle_pool *)self;
    p->calls++;
    if (grain < 1)
        grain = 1;
    const int64_t threads = p->threads > 0 ? p->threads : 1;
    int64_t chunks = 0, step = 0;
    bool even = p->split == KT_SPLIT_EVEN;
    if (even) {
        chunks = (n + grain - 1) / grain;
        if (chunks > 4 * threads)
            chunks = 4 * threads;
    } else {
        int64_t parts = p->split == KT_SPLIT_RANDOM_PARTS ? threads * (int64_t)(1 + p->rnd() % 2)
                                                          : 2 * threads;
        step = (n + parts - 1) / parts;
        if (step < grain)
            step = grain;
        chunks = (n + step - 1) / step;
    }
    if (chunks > KT_MAX_CHUNKS) { /* only with many threads: fewer, larger chunks */
        chunks = KT_MAX_CHUNKS;
        step = (n + KT_MAX_CHUNKS - 1) / KT_MAX_CHUNKS;
        if (!even)
            chunks = (n + step - 1) / step;
    }
    int64_t order[KT_MAX_CHUNKS];
    for (int64_t i = 0; i < chunks; i++)
        order[i] = i;
    for (int64_t i = chunks - 1; i > 0; i--) {
        int64_t k = (int64_t)(p->rnd() % (uint32_t)(i + 1)), t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t i = order[c];
        int64_t b, e;
        if (even) {
            b = i * n / chunks;
            e = (i + 1) * n / chunks;
        } else {
            b = i * step;
            e = b + step < n ? b + step : n;
        }
        if (fnt) /* any thread index: the chunks run one at a time */
            fnt(arg, (int)(p->rnd() % (uint32_t)threads), b, e);
        else
            fn(arg, b, e);
    }
}

static void shuffle_parallel_for(void *self, int64_t n, int64_t grain, etch_parallel_fn fn,
                                 void *arg) {
    shuffle_run(self, n, grain, fn, NULL, arg);
}

static void shuffle_parallel_for_thread(void *self, int64_t n, int64_t grain,
                                        etch_parallel_thread_fn fn, void *arg) {
    shuffle_run(self, n, grain, NULL, fn, arg);
}

void kt_shuffle_pool_init(kt_shuffle_pool *p, int threads, kt_split split, uint32_t (*rnd)(void)) {
    memset(p, 0, sizeof *p);
    p->threads = threads;
    p->split = split;
    p->rnd = rnd;
    p->iface.self = p;
    p->iface.num_threads = threads;
    p->iface.parallel_for = shuffle_parallel_for;
    p->iface.parallel_for_thread = shuffle_parallel_for_thread;
}

const etch_isa kt_all_isas[KT_N_ISAS] = {ETCH_ISA_SCALAR, ETCH_ISA_AVX2, ETCH_ISA_AVX512,
                                         ETCH_ISA_NEON};

bool kt_isa_wanted(etch_isa isa) {
    const char *list = getenv("ETCH_TEST_ISAS");
    if (!list)
        return true;
    bool wanted = false;
    char buf[128];
    if (strlen(list) >= sizeof buf) {
        fprintf(stderr, "error: ETCH_TEST_ISAS is too long\n");
        exit(2);
    }
    strcpy(buf, list);
    for (char *name = strtok(buf, ","); name; name = strtok(NULL, ",")) {
        etch_isa e;
        if (etch_isa_parse(name, &e) != ETCH_OK) {
            fprintf(stderr, "error: ETCH_TEST_ISAS: %s\n", etch_last_error());
            exit(2);
        }
        if (!etch_isa_supported(e)) {
            fprintf(stderr,
                    "error: ETCH_TEST_ISAS asks for %s, which this build or CPU does not "
                    "support\n",
                    etch_isa_name(e));
            exit(2);
        }
        wanted = wanted || e == isa;
    }
    return wanted;
}

int kt_pick_isas(etch_isa isas[KT_N_ISAS]) {
    int n = 0;
    printf("instruction sets:");
    for (int i = 0; i < KT_N_ISAS; i++) {
        if (!etch_isa_supported(kt_all_isas[i])) {
            printf(" %s (NOT RUN: not built in or not supported by this CPU)",
                   etch_isa_name(kt_all_isas[i]));
        } else if (!kt_isa_wanted(kt_all_isas[i])) {
            printf(" %s (NOT RUN: not in ETCH_TEST_ISAS)", etch_isa_name(kt_all_isas[i]));
        } else {
            isas[n++] = kt_all_isas[i];
            printf(" %s (run)", etch_isa_name(kt_all_isas[i]));
        }
    }
    printf("\n");
    if (n == 0) {
        fprintf(stderr, "error: no instruction set to run\n");
        exit(2);
    }
    return n;
}

/* ---- channel-blocked layout -------------------------------------------------------------- */

static int64_t blocked_index(int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
                             int64_t W) {
    return ((n * (C / ETCH_BLOCK_C) + c / ETCH_BLOCK_C) * H * W + h * W + w) * ETCH_BLOCK_C +
           c % ETCH_BLOCK_C;
}

/* Copy between NCHW and blocked order, one way or the other. */
static void blocked_copy(const float *src, float *dst, int64_t N, int64_t C, int64_t H,
                         int64_t W, bool to_blocked) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    const int64_t b = blocked_index(n, c, h, w, C, H, W);
                    const int64_t p = ((n * C + c) * H + h) * W + w;
                    dst[to_blocked ? b : p] = src[to_blocked ? p : b];
                }
}

void kt_to_blocked(const float *nchw, float *blocked, int64_t N, int64_t C, int64_t H, int64_t W) {
    blocked_copy(nchw, blocked, N, C, H, W, true);
}

void kt_from_blocked(const float *blocked, float *nchw, int64_t N, int64_t C, int64_t H,
                     int64_t W) {
    blocked_copy(blocked, nchw, N, C, H, W, false);
}

/* ---- random data, memory, reference activations ------------------------------------------ */

uint32_t kt_rng_u32(kt_rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)(r->s >> 32);
}

float kt_rng_float(kt_rng *r) { return (float)kt_rng_u32(r) / 4294967296.0f * 2.0f - 1.0f; }

int kt_rng_int(kt_rng *r, int lo, int hi) {
    return lo + (int)(kt_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

void *kt_xmalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

double kt_act_ref(const etch_epilogue *e, double x) {
    if (!e)
        return x;
    switch (e->act) {
    case ETCH_ACT_RELU: return x > 0 ? x : (x != x ? x : 0);
    case ETCH_ACT_CLAMP: return x != x ? x : (x < e->lo ? e->lo : (x > e->hi ? e->hi : x));
    case ETCH_ACT_GELU: return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
    case ETCH_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    case ETCH_ACT_SILU: return x / (1.0 + exp(-x));
    case ETCH_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return x;
    }
}

kt_window kt_rand_window(kt_rng *r, const int *ks, int nks, int square_odds, int max_h,
                         int max_w) {
    kt_window g;
    g.KW = ks[kt_rng_int(r, 0, nks - 1)];
    g.KH = kt_rng_int(r, 0, square_odds - 1) ? g.KW : ks[kt_rng_int(r, 0, nks - 1)];
    g.sh = kt_rng_int(r, 1, 3);
    g.sw = kt_rng_int(r, 0, 2) ? g.sh : kt_rng_int(r, 1, 3);
    g.dh = kt_rng_int(r, 0, 3) ? 1 : 2;
    g.dw = kt_rng_int(r, 0, 3) ? 1 : 2;
    g.ph = kt_rng_int(r, 0, g.KH / 2 + 1);
    g.pw = kt_rng_int(r, 0, g.KW / 2 + 1);
    g.H = kt_rng_int(r, 1, max_h);
    g.W = kt_rng_int(r, 1, max_w);
    if (g.H + 2 * g.ph < g.dh * (g.KH - 1) + 1)
        g.H = g.dh * (g.KH - 1) + 1;
    if (g.W + 2 * g.pw < g.dw * (g.KW - 1) + 1)
        g.W = g.dw * (g.KW - 1) + 1;
    return g;
}
