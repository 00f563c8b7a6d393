/*
 * aten::convolution.out, float32 NCHW (or NCL) contiguous fast paths; everything else
 * (transposed, other dtypes, other dim orders, malformed arguments) goes to the portable
 * kernel, followed by the fused activation.
 *
 *   depthwise 3x3, padding 1, stride 1 or 2     direct SIMD rows (conv_dw*.c)
 *   1x1, stride 1, no padding                   one GEMM per image and group, straight on
 *                                               the input: out[Cout, HW] = w[Cout, Cin] x[Cin, HW]
 *   C_in/groups == 1, C_out/groups <= 4         direct loop
 *   (other depthwise shapes)
 *   anything else                               im2col of a tile of output pixels into scratch,
 *                                               then a GEMM per tile (at most 4 MiB of columns,
 *                                               smaller when scratch is short; the direct loop
 *                                               when there is none)
 *
 * Bias and the fused activation are applied by the row kernels, or after the GEMMs in one pass
 * over each output row. Work is split over channel planes, im2col rows or GEMM columns by the
 * thread pool; no value depends on the split.
 */
#include <string.h>

#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/portable/portable.h"

#define LIMIT ETCH_OPT_SIZE_LIMIT
#define IM2COL_TARGET_FLOATS (1024 * 1024) /* 4 MiB of columns per tile at most */
#define IM2COL_MIN_COLS 8
#define OWC 64 /* output columns the direct loop accumulates at once */

/* Prepared weight (etch_opt_convolution_prepare): this header, then from PREP_DATA on
 *   kind PREP_GEMM:  for the NCHW paths, per group the packed [cout_g, K] A operand, `gstride`
 *                    floats apart;
 *   kind PREP_NCHWC: for the channel-blocked path (a call site given blocked arguments at
 *                    load), the NCHWc pack of conv_nchwc.h;
 *   kind PREP_WINO:  for a blocked call etch_wino_eligible takes, the Winograd pack
 *                    (conv_nchwc.h);
 *   kind PREP_DW:    for a channel-blocked depthwise call (groups == C_in == C_out, a multiple
 *                    of 8), the weight as [C/8][KH*KW][8]: each channel block's taps as the
 *                    8-lane vectors the blocked rows multiply by (nchwc.h). */
#define PREP_MAGIC 0x65504357u
#define PREP_DATA 192
enum { PREP_GEMM = 0, PREP_NCHWC = 1, PREP_WINO = 2, PREP_DW = 3 };
typedef struct conv_prep {
    uint32_t magic;
    uint32_t kind;
    const void *w;
    int64_t sizes[4];
    int64_t dim, groups, gstride;
    etch_sgemm_packed pk; /* group 0 */
} conv_prep;
_Static_assert(sizeof(conv_prep) <= PREP_DATA, "conv_prep header larger than PREP_DATA");

/* The packed A of group g (NULL without a prepared weight). */
static const etch_sgemm_packed *group_packed(const conv_shape *s, int64_t g,
                                             etch_sgemm_packed *tmp) {
    if (!s->prep || ((const conv_prep *)s->prep)->kind != PREP_GEMM)
        return NULL;
    const conv_prep *pr = (const conv_prep *)s->prep;
    *tmp = pr->pk;
    tmp->data = (const float *)(const void *)((const uint8_t *)pr + PREP_DATA) + g * pr->gstride;
    return tmp;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* The tensor in v when it is a Float tensor with data for its elements; NULL otherwise. */
static etch_tensor *float_tensor(etch_value *v) {
    return etch_opt_fast_tensor(v, ETCH_DTYPE_FLOAT, false);
}

/* A list of 1 or `spatial` ints in [min, LIMIT], expanded to `spatial` values. */
static bool int_list(etch_value *v, size_t spatial, int64_t min, int64_t *out) {
    if (!v || v->tag != ETCH_VALUE_INT_LIST ||
        (v->u.list.len && (!v->u.list.items || !v->u.list.scratch)))
        return false;
    size_t len = 0;
    const int64_t *l = etch_value_int_list(v, &len);
    if (!l || (len != 1 && len != spatial))
        return false;
    for (size_t i = 0; i < spatial; i++) {
        int64_t x = l[len == 1 ? 0 : i];
        if (x < min || x > LIMIT)
            return false;
        out[i] = x;
    }
    return true;
}

static bool overlaps(const etch_tensor *a, const etch_tensor *b) {
    if (!a || !b || !a->data || !b->data)
        return false;
    const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
    return a0 < b0 + etch_tensor_nbytes(b) && b0 < a0 + etch_tensor_nbytes(a);
}

static void fallback(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    etch_portable_convolution_out(ctx, args, nargs);
    if (etch_kernel_failed(ctx) || nargs < 10 || !args[9] || args[9]->tag != ETCH_VALUE_TENSOR)
        return;
    etch_tensor *out = args[9]->u.tensor;
    const etch_epilogue *e = etch_kernel_epilogue(ctx);
    if (e && out && out->dtype == ETCH_DTYPE_FLOAT && out->data)
        etch_opt_apply_epilogue(e, (float *)out->data, etch_tensor_numel(out));
}

/* ---- direct loop (any kernel, stride, padding, dilation, groups) ------------------------- */

static void direct_planes(void *arg, int64_t p0, int64_t p1) {
    const conv_shape *s = (const conv_shape *)arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / s->C_out, oc = p % s->C_out, g = oc / s->cout_g;
        const float *wo = s->w + oc * s->cin_g * s->KH * s->KW;
        float b = s->bias ? s->bias[oc] : 0.0f;
        float *op = s->out + p * s->OH * s->OW;
        for (int64_t oh = 0; oh < s->OH; oh++) {
            for (int64_t ow0 = 0; ow0 < s->OW; ow0 += OWC) {
                int64_t own = s->OW - ow0 < OWC ? s->OW - ow0 : OWC;
                float acc[OWC];
                for (int64_t i = 0; i < own; i++)
                    acc[i] = b;
                for (int64_t icl = 0; icl < s->cin_g; icl++) {
                    const float *ip = s->in + (n * s->C_in + g * s->cin_g + icl) * s->IH * s->IW;
                    for (int64_t kh = 0; kh < s->KH; kh++) {
                        int64_t ih = oh * s->sh - s->ph + kh * s->dh;
                        if (ih < 0 || ih >= s->IH)
                            continue;
                        const float *row = ip + ih * s->IW;
                        const float *wr = wo + (icl * s->KH + kh) * s->KW;
                        for (int64_t kw = 0; kw < s->KW; kw++) {
                            int64_t off = kw * s->dw - s->pw;
                            int64_t lo = ceil_div(-off, s->sw), hi = ceil_div(s->IW - off, s->sw);
                            if (lo < ow0)
                                lo = ow0;
                            if (hi > ow0 + own)
                                hi = ow0 + own;
                            const float wv = wr[kw];
                            if (s->sw == 1)
                                for (int64_t ow = lo; ow < hi; ow++)
                                    acc[ow - ow0] += wv * row[ow + off];
                            else
                                for (int64_t ow = lo; ow < hi; ow++)
                                    acc[ow - ow0] += wv * row[ow * s->sw + off];
                        }
                    }
                }
                float *o = op + oh * s->OW + ow0;
                memcpy(o, acc, (size_t)own * sizeof(float));
                etch_opt_apply_epilogue(s->epi, o, own);
            }
        }
    }
}

static int64_t plane_grain(double per_plane) {
    return per_plane >= 32768 ? 1 : (int64_t)(32768 / (per_plane > 1 ? per_plane : 1));
}

static void run_direct(etch_kernel_context *ctx, conv_shape *s) {
    double per = (double)s->OH * (double)s->OW * (double)s->cin_g * (double)s->KH * (double)s->KW;
    etch_kernel_parallel_for(ctx, s->N * s->C_out, plane_grain(per), direct_planes, s);
}

/* ---- depthwise 3x3 ------------------------------------------------------------------------ */

typedef int64_t (*dw_cols_fn)(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1);

static dw_cols_fn dw_simd(void) {
    switch (etch_isa_active()) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX512:
        return etch_opt_dw3x3_cols_avx512;
    case ETCH_ISA_AVX2:
        return etch_opt_dw3x3_cols_avx2;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return etch_opt_dw3x3_cols_neon;
#endif
    default:
        return NULL;
    }
}

typedef struct dw_job {
    const conv_shape *s;
    dw_cols_fn simd;
} dw_job;

static void dw_planes(void *arg, int64_t p0, int64_t p1) {
    const dw_job *j = (const dw_job *)arg;
    const conv_shape *s = j->s;
    const int64_t H = s->IH, W = s->IW, st = s->sh;
    /* columns whose whole window lies inside the row */
    int64_t lo = 1, hi = W >= 2 ? (W - 2) / st + 1 : 0;
    if (lo > s->OW)
        lo = s->OW;
    if (hi > s->OW)
        hi = s->OW;
    if (hi < lo)
        hi = lo;
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % s->C_out;
        etch_dw3x3_row a;
        a.w = s->w + c * 9;
        a.bias = s->bias ? s->bias[c] : 0.0f;
        a.W = W;
        a.stride = (int)st;
        const float *ip = s->in + p * H * W;
        for (int64_t oh = 0; oh < s->OH; oh++) {
            for (int kh = 0; kh < 3; kh++) {
                int64_t ih = oh * st - 1 + kh;
                a.r[kh] = ih >= 0 && ih < H ? ip + ih * W : NULL;
            }
            a.out = s->out + (p * s->OH + oh) * s->OW;
            etch_opt_dw3x3_cols_scalar(&a, 0, lo);
            int64_t done = j->simd ? j->simd(&a, lo, hi) : lo;
            etch_opt_dw3x3_cols_scalar(&a, done, s->OW);
        }
        etch_opt_apply_epilogue(s->epi, s->out + p * s->OH * s->OW, s->OH * s->OW);
    }
}

static void run_dw3x3(etch_kernel_context *ctx, conv_shape *s) {
    dw_job j = {s, dw_simd()};
    etch_kernel_parallel_for(ctx, s->N * s->C_out, plane_grain((double)s->OH * s->OW * 9.0),
                             dw_planes, &j);
}

/* ---- bias and activation after the GEMMs --------------------------------------------------
 * One pass over each output channel's row of OH*OW values, in L1-sized pieces: the same
 * arithmetic as handing them to etch_opt_sgemm (c + bias, then the activation), but on long
 * contiguous rows rather than per register tile, which costs less. */

#define POST_CHUNK 2048

static void post_rows(void *arg, int64_t r0, int64_t r1) {
    const conv_shape *s = (const conv_shape *)arg;
    const int64_t P = s->OH * s->OW;
    for (int64_t r = r0; r < r1; r++) {
        float *o = s->out + r * P;
        const float b = s->bias ? s->bias[r % s->C_out] : 0.0f;
        for (int64_t j0 = 0; j0 < P; j0 += POST_CHUNK) {
            int64_t n = P - j0 < POST_CHUNK ? P - j0 : POST_CHUNK;
            if (s->bias)
                for (int64_t j = j0; j < j0 + n; j++)
                    o[j] += b;
            etch_opt_apply_epilogue(s->epi, o + j0, n);
        }
    }
}

static void run_post(etch_kernel_context *ctx, conv_shape *s) {
    if (!s->bias && !s->epi)
        return;
    int64_t P = s->OH * s->OW, grain = 32768 / (P > 0 ? P : 1);
    etch_kernel_parallel_for(ctx, s->N * s->C_out, grain > 0 ? grain : 1, post_rows, s);
}

/* ---- 1x1 stride 1: GEMM on the input itself ------------------------------------------------ */

static void run_pointwise(etch_kernel_context *ctx, conv_shape *s) {
    const int64_t HW = s->IH * s->IW;
    for (int64_t n = 0; n < s->N; n++) {
        for (int64_t g = 0; g < s->groups; g++) {
            etch_sgemm_desc d;
            memset(&d, 0, sizeof d);
            d.M = s->cout_g;
            d.N = HW;
            d.K = s->cin_g;
            d.a = s->w + g * s->cout_g * s->cin_g;
            d.a_rs = s->cin_g;
            d.a_cs = 1;
            d.b = s->in + (n * s->C_in + g * s->cin_g) * HW;
            d.b_rs = HW;
            d.b_cs = 1;
            d.c = s->out + (n * s->C_out + g * s->cout_g) * HW;
            d.ldc = HW;
            d.alpha = 1.0f; /* bias and activation: post_rows */
            etch_sgemm_packed pk;
            d.a_packed = group_packed(s, g, &pk);
            etch_opt_sgemm(ctx, &d);
        }
    }
}

/* ---- im2col + GEMM ------------------------------------------------------------------------ */

typedef struct im2col_job {
    const conv_shape *s;
    const float *in_g; /* first input channel of the group, image n */
    float *col;        /* [K][nt] */
    int64_t p0, nt;
} im2col_job;

static void im2col_rows(void *arg, int64_t k0, int64_t k1) {
    const im2col_job *j = (const im2col_job *)arg;
    const conv_shape *s = j->s;
    const int64_t kk = s->KH * s->KW;
    for (int64_t k = k0; k < k1; k++) {
        int64_t ic = k / kk, r = k % kk, kh = r / s->KW, kw = r % s->KW;
        const float *src = j->in_g + ic * s->IH * s->IW;
        float *dst = j->col + k * j->nt;
        const int64_t off = kw * s->dw - s->pw;
        int64_t lo_all = ceil_div(-off, s->sw), hi_all = ceil_div(s->IW - off, s->sw);
        for (int64_t p = j->p0, left = j->nt; left > 0;) {
            int64_t oh = p / s->OW, ow = p % s->OW;
            int64_t seg = s->OW - ow < left ? s->OW - ow : left;
            int64_t ih = oh * s->sh - s->ph + kh * s->dh;
            if (ih < 0 || ih >= s->IH) {
                memset(dst, 0, (size_t)seg * sizeof(float));
            } else {
                const float *row = src + ih * s->IW;
                int64_t lo = lo_all < ow ? ow : lo_all, hi = hi_all > ow + seg ? ow + seg : hi_all;
                if (hi < lo)
                    hi = lo = ow;
                int64_t i = 0;
                for (; ow + i < lo; i++)
                    dst[i] = 0.0f;
                if (s->sw == 1) {
                    memcpy(dst + i, row + lo + off, (size_t)(hi - lo) * sizeof(float));
                    i += hi - lo;
                } else {
                    for (; ow + i < hi; i++)
                        dst[i] = row[(ow + i) * s->sw + off];
                }
                for (; i < seg; i++)
                    dst[i] = 0.0f;
            }
            dst += seg;
            p += seg;
            left -= seg;
        }
    }
}

/* false: no scratch at all (the caller uses the direct loop) */
static bool run_im2col(etch_kernel_context *ctx, conv_shape *s) {
    const int64_t K = s->cin_g * s->KH * s->KW, P = s->OH * s->OW;
    int64_t nt_max = IM2COL_TARGET_FLOATS / K;
    if (nt_max < IM2COL_MIN_COLS)
        nt_max = IM2COL_MIN_COLS;
    if (nt_max > P)
        nt_max = P;
    float *col = NULL;
    int64_t nt = 0;
    for (;;) {
        int64_t tiles = ceil_div(P, nt_max);
        nt = ceil_div(P, tiles); /* balanced tiles */
        col = (float *)etch_kernel_temp_try(ctx, (size_t)(nt * K) * sizeof(float), 64);
        if (col || nt_max == 1)
            break;
        nt_max /= 2;
    }
    if (!col)
        return false;
    for (int64_t n = 0; n < s->N; n++) {
        for (int64_t g = 0; g < s->groups; g++) {
            for (int64_t p0 = 0; p0 < P; p0 += nt) {
                im2col_job j = {s, s->in + (n * s->C_in + g * s->cin_g) * s->IH * s->IW, col, p0,
                                P - p0 < nt ? P - p0 : nt};
                int64_t grain = 16384 / j.nt;
                etch_kernel_parallel_for(ctx, K, grain > 0 ? grain : 1, im2col_rows, &j);
                etch_sgemm_desc d;
                memset(&d, 0, sizeof d);
                d.M = s->cout_g;
                d.N = j.nt;
                d.K = K;
                d.a = s->w + g * s->cout_g * K;
                d.a_rs = K;
                d.a_cs = 1;
                d.b = col;
                d.b_rs = j.nt;
                d.b_cs = 1;
                d.c = s->out + (n * s->C_out + g * s->cout_g) * P + p0;
                d.ldc = P;
                d.alpha = 1.0f; /* bias and activation: post_rows */
                etch_sgemm_packed pk;
                d.a_packed = group_packed(s, g, &pk);
                etch_opt_sgemm(ctx, &d);
            }
        }
    }
    return true;
}

/* ---- load-time prepare --------------------------------------------------------------------- */

/* The data of a channel-blocked prepared weight of this kind, when it fits the call. */
static const float *prep_blocked(const conv_shape *s, uint32_t kind) {
    const conv_prep *pr = (const conv_prep *)s->prep;
    if (!pr || pr->kind != kind || pr->groups != 1 || pr->dim != 4 ||
        pr->sizes[0] != s->C_out || pr->sizes[1] != s->C_in || pr->sizes[2] != s->KH ||
        pr->sizes[3] != s->KW)
        return NULL;
    return (const float *)(const void *)((const uint8_t *)pr + PREP_DATA);
}

const float *etch_opt_conv_prep_nchwc(const conv_shape *s) { return prep_blocked(s, PREP_NCHWC); }

const float *etch_opt_conv_prep_wino(const conv_shape *s) { return prep_blocked(s, PREP_WINO); }

const float *etch_opt_conv_prep_dw(const conv_shape *s) {
    const conv_prep *pr = (const conv_prep *)s->prep;
    if (!pr || pr->kind != PREP_DW || pr->groups != s->groups || s->groups != s->C_out ||
        s->cin_g != 1 || pr->dim != 4 || pr->sizes[0] != s->C_out || pr->sizes[1] != 1 ||
        pr->sizes[2] != s->KH || pr->sizes[3] != s->KW)
        return NULL;
    return (const float *)(const void *)((const uint8_t *)pr + PREP_DATA);
}

/* Whether a call with this weight may run the channel-blocked depthwise path. */
static bool dw_blockable(const etch_tensor *w, int64_t groups) {
    return w->dim == 4 && w->sizes[1] == 1 && groups == w->sizes[0] && w->sizes[0] % 8 == 0;
}

/* The header of a prepared weight at buf (zeroed up to PREP_DATA: buffers compare bytewise);
 * returns where its data goes. */
static float *prep_header(void *buf, uint32_t kind, const void *w, const int64_t *sizes,
                          unsigned dim, int64_t groups) {
    conv_prep *h = (conv_prep *)buf;
    memset(buf, 0, PREP_DATA);
    h->magic = PREP_MAGIC;
    h->kind = kind;
    h->w = w;
    for (unsigned i = 0; i < dim; i++)
        h->sizes[i] = sizes[i];
    h->dim = dim;
    h->groups = groups;
    return (float *)(void *)((uint8_t *)buf + PREP_DATA);
}

/* Whether a call site takes the Winograd path: its geometry (etch_wino_eligible) from the
 * bound arguments, input and output blocked. At measuring time (blocked unknown, the lists
 * None) whether it may: the output's size and a 3x3 kernel. */
static bool wino_site(etch_value **args, const etch_tensor *w, bool measuring) {
    const etch_tensor *in = args[0] && args[0]->tag == ETCH_VALUE_TENSOR ? args[0]->u.tensor
                                                                         : NULL;
    const etch_tensor *out = args[9] && args[9]->tag == ETCH_VALUE_TENSOR ? args[9]->u.tensor
                                                                          : NULL;
    if (!in || !out || in->dim != 4 || out->dim != 4 || w->dim != 4 || !args[8] ||
        args[8]->tag != ETCH_VALUE_INT || args[8]->u.i != 1 || in->sizes[1] != w->sizes[1] ||
        out->sizes[1] != w->sizes[0])
        return false;
    int64_t stride[2] = {1, 1}, dil[2] = {1, 1};
    if (!measuring && (!int_list(args[3], 2, 1, stride) || !int_list(args[5], 2, 1, dil)))
        return false;
    return etch_wino_eligible(w->sizes[1], w->sizes[0], w->sizes[2], w->sizes[3],
                              out->sizes[2], out->sizes[3], stride[0], stride[1], dil[0], dil[1]);
}

typedef struct wino_pack_job {
    const float *w;
    const int64_t *ws;
    int64_t C_out, C_in;
    float *dst;
} wino_pack_job;

static void wino_pack_range(void *arg, int64_t oc0, int64_t oc1) {
    const wino_pack_job *j = (const wino_pack_job *)arg;
    etch_wino_pack_strided(j->w, j->ws, j->C_out, j->C_in, oc0, oc1, j->dst);
}

/* A channel-blocked pack (PREP_WINO, PREP_NCHWC or PREP_DW) of the 4-D weight w(o, i, k) =
 * w[o * ws[0] + i * ws[1] + k * ws[2]] of sizes {C_out, cin_g, KH, KW}, into buf behind its
 * header: the bytes it needs (buf NULL) or wrote; 0 when it cannot (too large, cap short,
 * buf not 64-aligned, or PREP_DW of a weight that is not depthwise with C % 8 == 0). */
static size_t pack_blocked(etch_kernel_context *ctx, uint32_t kind, const float *w,
                           const int64_t ws[3], const int64_t sz[4], int64_t groups, void *buf,
                           size_t cap) {
    const int64_t C_out = sz[0], cin_g = sz[1], KK = sz[2] * sz[3];
    size_t floats;
    if (kind == PREP_WINO)
        floats = etch_wino_packed_floats(C_out, cin_g);
    else if (kind == PREP_NCHWC)
        floats = etch_nchwc_packed_floats(C_out, cin_g, sz[2], sz[3]);
    else if (cin_g == 1 && groups == C_out && C_out % 8 == 0)
        floats = (size_t)(C_out * KK);
    else
        floats = 0;
    const size_t bytes = floats ? PREP_DATA + floats * sizeof(float) : 0;
    if (!buf || !bytes)
        return bytes;
    if (cap < bytes || ((uintptr_t)buf & 63))
        return 0;
    float *dst = prep_header(buf, kind, w, sz, 4, groups);
    if (kind == PREP_WINO) {
        wino_pack_job pj = {w, ws, C_out, cin_g, dst};
        if (ctx)
            etch_kernel_parallel_for(ctx, (C_out + 7) / 8 * 8, 8, wino_pack_range, &pj);
        else
            wino_pack_range(&pj, 0, (C_out + 7) / 8 * 8);
    } else if (kind == PREP_NCHWC) {
        etch_nchwc_pack_strided(w, ws, C_out, cin_g, sz[2], sz[3], 0,
                                ((C_out + 7) / 8 * 8 + NCHWC_OCT - 1) / NCHWC_OCT, dst);
    } else { /* the depthwise weight as [C/8][KH*KW][8] */
        for (int64_t c = 0; c < C_out; c++)
            for (int64_t k = 0; k < KK; k++)
                dst[(c / 8 * KK + k) * 8 + c % 8] = w[c * ws[0] + k * ws[2]];
    }
    return bytes;
}

size_t etch_opt_conv_prepare_blocked(etch_kernel_context *ctx, const conv_shape *s,
                                     const float *w, const int64_t ws[3], bool *wino,
                                     void *buf, size_t cap) {
    const int64_t sz[4] = {s->C_out, s->cin_g, s->KH, s->KW};
    *wino = false;
    if (s->KH <= 0 || s->KW <= 0 || s->C_out <= 0 || s->cin_g <= 0 || s->C_out > LIMIT ||
        s->cin_g > LIMIT || s->KH > LIMIT || s->KW > LIMIT)
        return 0;
    if (s->groups != 1)
        return s->groups == s->C_in && s->C_out == s->C_in
                   ? pack_blocked(ctx, PREP_DW, w, ws, sz, s->groups, buf, cap)
                   : 0;
    if (s->C_in != s->cin_g || (s->C_in % 8 && s->C_out % 8))
        return 0;
    if (etch_wino_eligible(s->C_in, s->C_out, s->KH, s->KW, s->OH, s->OW, s->sh, s->sw, s->dh,
                           s->dw)) {
        const size_t b = pack_blocked(ctx, PREP_WINO, w, ws, sz, 1, buf, cap);
        *wino = b != 0;
        if (b || buf)
            return b;
    }
    return pack_blocked(ctx, PREP_NCHWC, w, ws, sz, 1, buf, cap);
}

/* The weight is packed for the channel-blocked path (etch_opt_conv_nchwc) when the call site
 * has blocked arguments (the runtime says so at load) and groups == 1, else as the GEMM's A
 * operand. When the runtime measures (blocked == 0, nothing bound), the size asked for covers
 * the larger of the two for a call that may be blocked (groups == 1, 4-D, C_in or C_out a
 * multiple of 8). */
size_t etch_opt_convolution_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                    void *buf, size_t cap) {
    const uint64_t blocked = ctx ? etch_kernel_blocked_args(ctx) : 0;
    if (nargs < 10)
        return 0;
    /* at measuring time the weight has no data: check it by hand, not with float_tensor */
    etch_tensor *w = args[1] && args[1]->tag == ETCH_VALUE_TENSOR ? args[1]->u.tensor : NULL;
    if (!w || w->dtype != ETCH_DTYPE_FLOAT || (w->dim != 3 && w->dim != 4) ||
        !(w->flags & ETCH_TENSOR_CONSTANT) || w->dynamism != ETCH_SHAPE_STATIC ||
        !etch_tensor_is_contiguous(w) || (buf && !w->data))
        return 0;
    for (unsigned i = 0; i < w->dim; i++)
        if (w->sizes[i] <= 0 || w->sizes[i] > LIMIT)
            return 0;
    if (args[6] && args[6]->tag == ETCH_VALUE_BOOL && args[6]->u.b)
        return 0; /* transposed: the portable kernel */
    if (!args[8] || args[8]->tag != ETCH_VALUE_INT || args[8]->u.i < 1 || args[8]->u.i > LIMIT)
        return 0;
    const int64_t groups = args[8]->u.i, C_out = w->sizes[0], cin_g = w->sizes[1];
    const int64_t KH = w->dim == 4 ? w->sizes[2] : 1, KW = w->sizes[w->dim - 1];
    if (C_out <= 0 || C_out % groups || cin_g <= 0)
        return 0;
    const int64_t cout_g = C_out / groups, K = cin_g * KH * KW;
    const bool may_block = groups == 1 && w->dim == 4 && (C_out % 8 == 0 || cin_g % 8 == 0);
    const size_t nchwc = may_block ? etch_nchwc_packed_floats(C_out, cin_g, KH, KW) : 0;
    const int64_t ws[3] = {cin_g * KH * KW, KH * KW, 1}; /* OIHW */
    const int64_t sz[4] = {C_out, cin_g, KH, KW};
    uint32_t kind = PREP_GEMM;
    if (blocked && groups == 1 && (blocked & 1u) && ((blocked >> 9) & 1u) &&
        wino_site(args, w, false))
        kind = PREP_WINO; /* the Winograd path */
    else if (blocked && groups == 1) /* the channel-blocked path */
        kind = nchwc && w->dim == 4 ? PREP_NCHWC : UINT32_MAX;
    else if (blocked) /* the channel-blocked depthwise path */
        kind = dw_blockable(w, groups) && (blocked & 1u) && ((blocked >> 9) & 1u) ? PREP_DW
                                                                                : UINT32_MAX;
    if (kind == UINT32_MAX)
        return 0;
    if (kind != PREP_GEMM) {
        const size_t bytes =
            pack_blocked(ctx, kind, (const float *)w->data, ws, sz, groups, buf, cap);
        if (buf && bytes)
            etch_kernel_prepared_replaces(ctx, 1u << 1);
        return bytes;
    }
    if (cin_g == 1 && cout_g <= 4 && !(KH == 1 && KW == 1))
        /* depthwise / direct loop: no GEMM; when measuring, the blocked depthwise pack */
        return !buf && !w->data && dw_blockable(w, groups)
                   ? PREP_DATA + (size_t)(C_out * KH * KW) * sizeof(float)
                   : 0;
    const size_t per = etch_opt_sgemm_packed_size(NULL, true, cout_g, K);
    size_t bytes = per == 0 || (double)per * (double)groups > 0x1p40
                       ? 0
                       : PREP_DATA + per * (size_t)groups;
    if (!buf) {
        /* measuring (the weight unbound): the call may turn out blocked */
        if (!w->data && nchwc && PREP_DATA + nchwc * sizeof(float) > bytes)
            bytes = PREP_DATA + nchwc * sizeof(float);
        const size_t wino = !w->data && may_block && wino_site(args, w, true)
                                ? etch_wino_packed_floats(C_out, cin_g)
                                : 0;
        if (wino && PREP_DATA + wino * sizeof(float) > bytes)
            bytes = PREP_DATA + wino * sizeof(float);
        return bytes;
    }
    if (!bytes || cap < bytes || ((uintptr_t)buf & 63))
        return 0;
    float *dst = prep_header(buf, PREP_GEMM, w->data, w->sizes, w->dim, groups);
    conv_prep *h = (conv_prep *)buf;
    h->gstride = (int64_t)(per / sizeof(float));
    const float *wd = (const float *)w->data;
    for (int64_t g = 0; g < groups; g++) {
        etch_sgemm_packed pk;
        etch_opt_sgemm_pack_a(NULL, wd + g * cout_g * K, K, 1, cout_g, K, dst + g * h->gstride,
                              &pk);
        if (g == 0)
            h->pk = pk;
    }
    h->pk.data = NULL; /* position-independent: equal buffers can be shared */
    etch_kernel_prepared_replaces(ctx, 1u << 1); /* the NCHW paths read the packed copy */
    return bytes;
}

/* ---- layout function (etch_kernels_register_layout) ------------------------------------------ */

/* A 4-D Float tensor argument, bound or not. */
static const etch_tensor *tensor4(const etch_value *v) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return NULL;
    const etch_tensor *t = v->u.tensor;
    if (t->dtype != ETCH_DTYPE_FLOAT || t->dim != 4)
        return NULL;
    for (unsigned i = 0; i < 4; i++)
        if (t->sizes[i] <= 0 || t->sizes[i] > LIMIT)
            return NULL;
    return t;
}

void etch_opt_convolution_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                 uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = 0;
    *tied = 0;
    if (nargs != 11)
        return;
    const etch_tensor *in = tensor4(args[0]), *w = tensor4(args[1]), *out = tensor4(args[9]);
    if (!in || !w || !out || args[10] != args[9] || !args[6] ||
        args[6]->tag != ETCH_VALUE_BOOL || args[6]->u.b || !args[8] ||
        args[8]->tag != ETCH_VALUE_INT || args[8]->u.i < 1)
        return;
    if (args[2] && args[2]->tag != ETCH_VALUE_NONE) {
        const etch_value *b = args[2];
        if (b->tag != ETCH_VALUE_TENSOR || !b->u.tensor || b->u.tensor->dtype != ETCH_DTYPE_FLOAT ||
            b->u.tensor->dim != 1 || b->u.tensor->sizes[0] != w->sizes[0])
            return;
    }
    int64_t stride[2], pad[2], dil[2], opad[2];
    if (!int_list(args[3], 2, 1, stride) || !int_list(args[4], 2, 0, pad) ||
        !int_list(args[5], 2, 1, dil) || !int_list(args[7], 2, 0, opad))
        return;
    const int64_t groups = args[8]->u.i, C_in = in->sizes[1], C_out = w->sizes[0];
    if (C_in != w->sizes[1] * groups || C_out % groups || out->sizes[1] != C_out ||
        out->sizes[0] != in->sizes[0])
        return;
    for (int d = 0; d < 2; d++) { /* the output shape the kernel will give */
        int64_t eff = dil[d] * (w->sizes[2 + d] - 1) + 1, ext = in->sizes[2 + d] + 2 * pad[d];
        if (ext < eff || out->sizes[2 + d] != (ext - eff) / stride[d] + 1)
            return;
    }
    const uint64_t in_bit = 1u << 0, out_bits = (1u << 9) | (1u << 10);
    if (groups == 1) {
        if (C_out % ETCH_BLOCK_C == 0)
            *may |= out_bits;
        if (C_in % ETCH_BLOCK_C == 0)
            *may |= in_bit;
    } else if (groups == C_in && C_out == C_in && C_in % ETCH_BLOCK_C == 0) {
        *may = *tied = in_bit | out_bits;
    }
}

/* ---- the kernel --------------------------------------------------------------------------- */

/* The call's shape from its arguments (not the pointers); ok false when the arguments are
 * not a convolution the paths here take. t: input, weight, bias (NULL: none), output. */
static bool parse_call(etch_value **args, size_t nargs, conv_shape *s, etch_tensor *t[4],
                       int64_t osz[4]) {
    memset(s, 0, sizeof *s);
    memset(osz, 0, 4 * sizeof *osz);
    t[0] = t[1] = t[2] = t[3] = NULL;
    if (nargs < 10)
        return false;
    etch_tensor *in = float_tensor(args[0]), *w = float_tensor(args[1]);
    etch_tensor *out = float_tensor(args[9]), *bias = NULL;
    bool ok = in && w && out && (in->dim == 3 || in->dim == 4) && w->dim == in->dim &&
              etch_tensor_is_contiguous(in) && etch_tensor_is_contiguous(w) &&
              args[6] && args[6]->tag == ETCH_VALUE_BOOL && !args[6]->u.b && args[8] &&
              args[8]->tag == ETCH_VALUE_INT && args[8]->u.i >= 1 && args[8]->u.i <= LIMIT;
    if (ok && args[2] && args[2]->tag != ETCH_VALUE_NONE) {
        bias = float_tensor(args[2]);
        ok = bias && bias->dim == 1 && bias->sizes[0] == w->sizes[0];
    }
    t[0] = in;
    t[1] = w;
    t[2] = bias;
    t[3] = out;
    size_t spatial = ok ? in->dim - 2u : 1;
    int64_t stride[2], pad[2], dil[2], opad[2];
    ok = ok && int_list(args[3], spatial, 1, stride) && int_list(args[4], spatial, 0, pad) &&
         int_list(args[5], spatial, 1, dil) && int_list(args[7], spatial, 0, opad);
    if (ok) {
        s->groups = args[8]->u.i;
        s->N = in->sizes[0];
        s->C_in = in->sizes[1];
        s->C_out = w->sizes[0];
        s->cin_g = w->sizes[1];
        ok = s->C_in == s->cin_g * s->groups && s->C_out % s->groups == 0 && s->cin_g > 0 &&
             s->N > 0 && s->C_out > 0;
    }
    if (ok) {
        bool two = in->dim == 4;
        s->cout_g = s->C_out / s->groups;
        s->IH = two ? in->sizes[2] : 1;
        s->IW = in->sizes[in->dim - 1];
        s->KH = two ? w->sizes[2] : 1;
        s->KW = w->sizes[w->dim - 1];
        s->sh = two ? stride[0] : 1;
        s->sw = stride[spatial - 1];
        s->ph = two ? pad[0] : 0;
        s->pw = pad[spatial - 1];
        s->dh = two ? dil[0] : 1;
        s->dw = dil[spatial - 1];
        int64_t effh = s->dh * (s->KH - 1) + 1, effw = s->dw * (s->KW - 1) + 1;
        ok = s->IH >= 1 && s->IW >= 1 && s->KH >= 1 && s->KW >= 1 &&
             s->IH + 2 * s->ph >= effh && s->IW + 2 * s->pw >= effw;
        s->OH = ok ? (s->IH + 2 * s->ph - effh) / s->sh + 1 : 0;
        s->OW = ok ? (s->IW + 2 * s->pw - effw) / s->sw + 1 : 0;
        osz[0] = s->N;
        osz[1] = s->C_out;
        osz[2] = two ? s->OH : s->OW;
        osz[3] = s->OW;
    }
    return ok;
}

/* The call's prepared weight (s->prep) when it was made for this weight, else NULL. */
static const void *prep_of(const void *prepared, size_t psize, const conv_shape *s,
                           const etch_tensor *w) {
    const conv_prep *pr = (const conv_prep *)prepared;
    if (!pr || psize < PREP_DATA || pr->magic != PREP_MAGIC || pr->w != w->data ||
        pr->dim != (int64_t)w->dim || pr->groups != s->groups)
        return NULL;
    for (unsigned i = 0; i < w->dim; i++)
        if (pr->sizes[i] != w->sizes[i])
            return NULL;
    return pr;
}

bool etch_opt_conv_call_shape(const etch_kernel_call *c, conv_shape *s) {
    etch_tensor *t[4];
    int64_t osz[4];
    if (!parse_call(c->args, c->nargs, s, t, osz) || t[0]->dim != 4 || !t[3]->data ||
        t[3]->dim != 4 || !etch_tensor_is_contiguous(t[3]) || overlaps(t[3], t[0]) ||
        overlaps(t[3], t[1]) || overlaps(t[3], t[2]))
        return false;
    for (unsigned d = 0; d < 4; d++)
        if (t[3]->sizes[d] != osz[d])
            return false;
    s->in = (const float *)t[0]->data;
    s->w = (const float *)t[1]->data;
    s->bias = t[2] ? (const float *)t[2]->data : NULL;
    s->out = (float *)t[3]->data;
    s->epi = c->epilogue && c->epilogue->act != ETCH_ACT_NONE ? c->epilogue : NULL;
    s->prep = prep_of(c->prepared, c->prepared_size, s, t[1]);
    return true;
}

ETCH_OPT_KERNEL(convolution_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        etch_opt_conv_chain_run(ctx);
        return;
    }
    if (nargs < 10) {
        fallback(ctx, args, nargs);
        return;
    }
    conv_shape s;
    etch_tensor *t[4];
    int64_t osz[4];
    bool ok = parse_call(args, nargs, &s, t, osz);
    etch_tensor *in = t[0], *w = t[1], *bias = t[2], *out = t[3];
    const uint64_t blocked = etch_kernel_blocked_args(ctx);
    const bool in_blocked = blocked & 1u, out_blocked = (blocked >> 9) & 1u;
    if (blocked && (!ok || in->dim != 4)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked convolution: arguments its fast path cannot take "
                         "(dtype, shape, alignment or options differ from load)");
        return;
    }
    if (!ok || overlaps(out, in) || overlaps(out, w) || overlaps(out, bias)) {
        if (blocked) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "channel-blocked convolution: output overlaps an input");
            return;
        }
        fallback(ctx, args, nargs);
        return;
    }
    if (etch_kernel_resize(ctx, out, in->dim, osz) != ETCH_OK)
        return;
    if (!out->data || !etch_tensor_is_contiguous(out) || overlaps(out, in) ||
        overlaps(out, w) || overlaps(out, bias)) {
        if (blocked) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "channel-blocked convolution: output overlaps an input");
            return;
        }
        fallback(ctx, args, nargs);
        return;
    }
    s.in = (const float *)in->data;
    s.w = (const float *)w->data;
    s.bias = bias ? (const float *)bias->data : NULL;
    s.out = (float *)out->data;
    s.epi = etch_kernel_epilogue(ctx);
    size_t psize = 0;
    const void *prepared = etch_kernel_prepared(ctx, &psize);
    s.prep = prep_of(prepared, psize, &s, w);

    if (blocked) {
        if (s.groups == 1)
            etch_opt_conv_nchwc(ctx, &s, in_blocked, out_blocked);
        else
            etch_opt_conv_dw_nchwc(ctx, &s);
        return;
    }
    if (s.cin_g == 1 && s.cout_g == 1 && in->dim == 4 && s.KH == 3 && s.KW == 3 &&
        s.sh == s.sw && (s.sh == 1 || s.sh == 2) && s.ph == 1 && s.pw == 1 && s.dh == 1 &&
        s.dw == 1) {
        run_dw3x3(ctx, &s);
    } else if (s.KH == 1 && s.KW == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0) {
        run_pointwise(ctx, &s);
        run_post(ctx, &s);
    } else if ((s.cin_g == 1 && s.cout_g <= 4) || !run_im2col(ctx, &s)) {
        run_direct(ctx, &s);
    } else {
        run_post(ctx, &s);
    }
}
