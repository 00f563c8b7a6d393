/* Channel-blocked (NCHW8c) depthwise convolution (opt_conv.h, etch_opt_conv_dw_nchwc): the
 * call's checks, its split over threads, and the plain-C instance of the blocked row
 * functions (nchwc_body.inc; the AVX2 and NEON ones are conv_dw_nchwc_avx2.c / _neon.c), used
 * when no SIMD instruction set is active.
 *
 * Each item of the parallel loop is one output row of one channel block of one image; a row
 * keeps several pixels in flight (3x3 stride 1 / 2: 8 accumulators per block of 8 pixels; other
 * kernels 4) and computes the border pixels in pairs (left with right), skipping the taps
 * outside the input from per-kernel-column pixel ranges computed once per call (no masks, no
 * per-channel scalar code). The weight [C][1][KH][KW] is read regrouped per channel block as
 * [KH*KW][8]: prepared so at load (conv.c, PREP_DW), else regrouped on the stack per channel
 * block (up to 7x7; larger kernels gather each tap's 8 weights per row), so the call needs no
 * scratch. */
#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/nchwc.h"
#include "kernels/optimized/opt_conv.h"

/* ---- the plain-C vocabulary of nchwc_body.inc ---------------------------------------------- */

typedef struct {
    float v[8];
} v8f;
typedef struct {
    int32_t v[8];
} v8i;
typedef struct {
    double v[8];
} v8d;

static inline v8f v8_load(const float *p) {
    v8f r;
    for (int l = 0; l < 8; l++)
        r.v[l] = p[l];
    return r;
}
static inline void v8_store(float *p, v8f x) {
    for (int l = 0; l < 8; l++)
        p[l] = x.v[l];
}
static inline v8f v8_set1(float x) {
    v8f r;
    for (int l = 0; l < 8; l++)
        r.v[l] = x;
    return r;
}
static inline v8f v8_fma(v8f a, v8f b, v8f c) {
    v8f r;
    for (int l = 0; l < 8; l++)
        r.v[l] = a.v[l] * b.v[l] + c.v[l];
    return r;
}
static inline v8f v8_add(v8f a, v8f b) {
    for (int l = 0; l < 8; l++)
        a.v[l] += b.v[l];
    return a;
}
static inline v8f v8_sub(v8f a, v8f b) {
    for (int l = 0; l < 8; l++)
        a.v[l] -= b.v[l];
    return a;
}
static inline v8f v8_maxn(v8f c, v8f x) {
    v8f r;
    for (int l = 0; l < 8; l++)
        r.v[l] = c.v[l] > x.v[l] ? c.v[l] : x.v[l];
    return r;
}
static inline v8f v8_minn(v8f c, v8f x) {
    v8f r;
    for (int l = 0; l < 8; l++)
        r.v[l] = c.v[l] < x.v[l] ? c.v[l] : x.v[l];
    return r;
}
static inline v8i v8i_set1(int32_t x) {
    v8i r;
    for (int l = 0; l < 8; l++)
        r.v[l] = x;
    return r;
}
static inline void v8_maxsel(v8f v, v8i pos, v8f *best, v8i *idx) {
    for (int l = 0; l < 8; l++) {
        const bool take = v.v[l] > best->v[l] || v.v[l] != v.v[l];
        best->v[l] = take ? v.v[l] : best->v[l];
        idx->v[l] = take ? pos.v[l] : idx->v[l];
    }
}
static inline void v8i_store64(int64_t *p, v8i x) {
    for (int l = 0; l < 8; l++)
        p[l] = x.v[l];
}
static inline v8d v8d_zero(void) {
    v8d r;
    for (int l = 0; l < 8; l++)
        r.v[l] = 0.0;
    return r;
}
static inline v8d v8d_addf(v8d a, v8f x) {
    for (int l = 0; l < 8; l++)
        a.v[l] += (double)x.v[l];
    return a;
}
static inline v8d v8d_add(v8d a, v8d b) {
    for (int l = 0; l < 8; l++)
        a.v[l] += b.v[l];
    return a;
}
static inline void v8d_store(double *p, v8d x) {
    for (int l = 0; l < 8; l++)
        p[l] = x.v[l];
}

#define NCHWC_FN(name) nchwc_##name##_scalar
#define NCHWC_TABLE etch_opt_nchwc_rows_scalar
#include "kernels/optimized/nchwc_body.inc"

/* ---- dispatch ----------------------------------------------------------------------------- */

const nchwc_rows *etch_opt_nchwc_rows(void) {
    switch (etch_isa_active()) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX512:
    case ETCH_ISA_AVX2:
        return &etch_opt_nchwc_rows_avx2;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return &etch_opt_nchwc_rows_neon;
#endif
    default:
        return &etch_opt_nchwc_rows_scalar;
    }
}

typedef struct dw_call {
    const nchwc_rows *rows;
    nchwc_dw_job job;
} dw_call;

static void dw_chunk(void *arg, int64_t r0, int64_t r1) {
    const dw_call *c = (const dw_call *)arg;
    c->rows->dw(&c->job, r0, r1);
}

void etch_opt_conv_dw_nchwc(etch_kernel_context *ctx, const conv_shape *s) {
    const uint64_t io = 1u | (1u << 9); /* input and output, both blocked (tied at load) */
    if ((etch_kernel_blocked_args(ctx) & io) != io) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked depthwise convolution: input and output must both be "
                         "channel-blocked");
        return;
    }
    etch_opt_conv_dw_nchwc_blocked(ctx, s);
}

void etch_opt_conv_dw_nchwc_blocked(etch_kernel_context *ctx, const conv_shape *s) {
    if (s->groups != s->C_in || s->C_out != s->C_in || s->cin_g != 1 ||
        s->C_in % ETCH_BLOCK_C != 0 || s->N < 1 || s->OH < 1 || s->OW < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked depthwise convolution: groups %lld, channels %lld -> "
                         "%lld (needs groups == channels, a multiple of %d)",
                         (long long)s->groups, (long long)s->C_in, (long long)s->C_out,
                         ETCH_BLOCK_C);
        return;
    }
    dw_call c;
    c.rows = etch_opt_nchwc_rows();
    c.job = (nchwc_dw_job){.CB = s->C_in / ETCH_BLOCK_C, .IH = s->IH, .IW = s->IW, .OH = s->OH,
                           .OW = s->OW, .KH = s->KH, .KW = s->KW, .sh = s->sh, .sw = s->sw,
                           .ph = s->ph, .pw = s->pw, .dh = s->dh, .dw = s->dw, .in = s->in,
                           .w = s->w, .wpk = etch_opt_conv_prep_dw(s), .bias = s->bias,
                           .out = s->out, .act = 0, .lo = 0.0f,
                           .hi = 0.0f, .post = NULL};
    const etch_epilogue *e = s->epi;
    if (e && e->act == ETCH_ACT_RELU) {
        c.job.act = 1;
    } else if (e && e->act == ETCH_ACT_CLAMP) {
        c.job.act = 2;
        c.job.lo = (float)e->lo;
        c.job.hi = (float)e->hi;
    } else if (e && e->act != ETCH_ACT_NONE) {
        c.job.post = e;
    }
    const int64_t rows = s->N * c.job.CB * s->OH;
    const double per = (double)s->OW * (double)(s->KH * s->KW) * 8.0; /* multiply-adds a row */
    const int64_t grain = per >= 16384.0 ? 1 : (int64_t)(16384.0 / per) + 1;
    etch_kernel_parallel_for(ctx, rows, grain, dw_chunk, &c);
}

/* ---- the blocked global average (pool.c, norm.c) ------------------------------------------- */

typedef struct mean_call {
    const nchwc_rows *rows;
    const nchwc_mean_job *job;
} mean_call;

static void mean_chunk(void *arg, int64_t p0, int64_t p1) {
    const mean_call *c = (const mean_call *)arg;
    c->rows->mean(c->job, p0, p1);
}

void etch_opt_nchwc_mean(etch_kernel_context *ctx, const nchwc_mean_job *j, int64_t planes) {
    mean_call c = {etch_opt_nchwc_rows(), j};
    const double per = (double)j->HW * 8.0;
    const int64_t grain = per >= 16384.0 ? 1 : (int64_t)(16384.0 / per) + 1;
    etch_kernel_parallel_for(ctx, planes, grain, mean_chunk, &c);
}
