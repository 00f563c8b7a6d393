/*
 * Quantized fully connected and convolution nodes on etch's integer kernels
 * (kernels/optimized/quant.h), instead of dequantizing their weights to float at load:
 *   - 4-bit weights (qcint4 per channel, qbint4 blockwise; ExecuTorch's 4w / 8da4w linears):
 *     etch_q4_linear_8da4w on the int8 rows a dynamic-quantization Convert wrote (qdint8: per
 *     row scale and zero point), or etch_q4_linear_f32 on float rows. The weight is repacked
 *     once to etch's nibble order; 0.5 byte a weight stays 0.5 byte.
 *   - 8-bit per-channel weights (qcint8) with float or dynamically quantized rows:
 *     etch_q8w_linear_f32 from the int8 bytes as they are in the payload.
 *   - static int8 (qint8 / quint8 per tensor in and out, qcint8 weights, int32 bias): the
 *     int8 GEMM with the requantization fused (XNNPACK's fp32 requantization: the int32 sum
 *     times in_scale * w_scale / out_scale, rounded half to even, plus the output zero point,
 *     clamped to the node's output range); a convolution through an int8 im2col of NHWC rows
 *     (padding taps are the input zero point, i.e. the float 0); depthwise by a direct loop.
 * A node that fits none of these keeps the float path of xnn_ops.c (weights converted at load).
 */
#include <math.h>
#include <string.h>

#include "backends/xnnpack/xnn_ops.h"
#include "kernels/optimized/quant.h"
#include "runtime/error.h"

#define XNN_FLAG_TRANSPOSE_WEIGHTS 1u
#define XNN_FLAG_TENSORFLOW_SAME_PADDING 4u
#define QCOL_ROWS 256 /* output pixels a convolution's int8 im2col tile holds */

enum { XQK_Q4_F32 = 1, XQK_Q4_DQ8, XQK_Q8W_F32, XQK_Q8_STATIC, XQK_Q8_DW };

struct xnn_qnode {
    int kind;
    etch_q4_weights q4;
    etch_q8w_weights q8w;
    etch_q8_packed pk;
    const int8_t *w;        /* depthwise: [KH * KW][O] as stored */
    const int32_t *bias32;  /* static int8: the payload's int32 bias (NULL: none) */
    float *mult;            /* static int8: [O] in_scale * w_scale / out_scale */
    int32_t za, zo, qmin, qmax;
    bool a_signed;
    int out_type;
    int64_t K;
};

static xnn_value *in_v(xnn_graph *g, const xnn_node *n, uint32_t k) {
    return k < n->nin && n->in[k] != XNN_INVALID_ID ? &g->values[n->in[k]] : NULL;
}

static bool per_tensor_q8(const xnn_value *v) {
    return v && (v->dtype == XDT_QINT8 || v->dtype == XDT_QUINT8) && v->q.kind == XQ_PER_TENSOR;
}

/* The quantized output range of node n's clamp on output o (its type's range when absent). */
static void out_range(const xnn_node *n, const xnn_value *o, int32_t *lo, int32_t *hi) {
    const int32_t tlo = o->dtype == XDT_QINT8 ? -128 : 0, thi = o->dtype == XDT_QINT8 ? 127 : 255;
    *lo = tlo, *hi = thi;
    if (n->out_min > -INFINITY) {
        float q = nearbyintf(n->out_min / o->q.scale) + (float)o->q.zero_point;
        *lo = q > (float)thi ? thi : q < (float)tlo ? tlo : (int32_t)q;
    }
    if (n->out_max < INFINITY) {
        float q = nearbyintf(n->out_max / o->q.scale) + (float)o->q.zero_point;
        *hi = q > (float)thi ? thi : q < (float)tlo ? tlo : (int32_t)q;
    }
    if (*hi < *lo)
        *hi = *lo;
}

/* The static int8 parameters of node n (weights w per channel along wdim with O channels). */
static bool static_params(xnn_graph *g, xnn_node *n, const xnn_value *w, uint32_t wdim,
                          int64_t O, xnn_alloc *a, struct xnn_qnode *q) {
    const xnn_value *x = in_v(g, n, 0), *b = in_v(g, n, 2), *o = &g->values[n->out[0]];
    if (!per_tensor_q8(x) || !per_tensor_q8(o) || w->dtype != XDT_QCINT8 ||
        w->q.kind != XQ_PER_CHANNEL || (uint32_t)w->q.channel_dim != wdim ||
        w->q.num_scales != (uint32_t)O)
        return false;
    if (b && (!b->is_constant || (b->dtype != XDT_QINT32 && b->dtype != XDT_QCINT32) ||
              ((uintptr_t)b->constant & 3)))
        return false;
    q->mult = (float *)xnn_alloc_bytes(a, (size_t)O * sizeof(float), 16);
    if (!q->mult)
        return false;
    for (int64_t c = 0; c < O; c++) {
        const float bs = w->q.scales[c] * x->q.scale; /* the bias scale XNNPACK assumes */
        if (b) {
            const float have = b->dtype == XDT_QINT32 ? b->q.scale : b->q.scales[c];
            if (b->q.zero_point != 0 || fabsf(have - bs) > 1e-4f * bs)
                return false; /* a bias on another scale: the float path */
        }
        q->mult[c] = bs / o->q.scale;
    }
    q->bias32 = b ? (const int32_t *)(const void *)b->constant : NULL;
    q->za = x->q.zero_point;
    q->zo = o->q.zero_point;
    q->a_signed = x->dtype == XDT_QINT8;
    q->out_type = o->dtype == XDT_QINT8 ? ETCH_Q8_OUT_S8 : ETCH_Q8_OUT_U8;
    out_range(n, o, &q->qmin, &q->qmax);
    return true;
}

/* Pack b [N, K] int8 (constant) for the int8 GEMM. */
static bool pack_q8(const int8_t *b, int64_t N, int64_t K, xnn_alloc *a, struct xnn_qnode *q) {
    if (K > ETCH_Q8_MAX_K)
        return false;
    size_t bytes = etch_q8_gemm_packed_size(-1, N, K);
    void *dst = bytes ? xnn_alloc_bulk(a, bytes, 64) : NULL;
    if (!dst)
        return false;
    if (!a->measure && b)
        etch_q8_gemm_pack(-1, b, N, K, K, dst, &q->pk);
    return true;
}

static bool fc_plan(xnn_graph *g, xnn_node *n, xnn_alloc *a, struct xnn_qnode *q) {
    xnn_value *x = in_v(g, n, 0), *w = in_v(g, n, 1), *b = in_v(g, n, 2);
    const xnn_value *o = &g->values[n->out[0]];
    if (!w->is_constant || w->rank != 2 || (n->flags & XNN_FLAG_TRANSPOSE_WEIGHTS))
        return false;
    const int64_t N = w->bound[0], K = w->bound[1];
    const bool float_out = o->dtype == XDT_FP32 || o->dtype == XDT_FP16;
    const bool float_bias = !b || b->dtype == XDT_FP32 || b->dtype == XDT_FP16;
    q->K = K;
    if ((w->dtype == XDT_QCINT4 || w->dtype == XDT_QBINT4) && w->q.channel_dim == 0 &&
        float_out && float_bias && K % 2 == 0 && (x->dtype == XDT_QDINT8 || x->dtype == XDT_FP32)) {
        const int64_t G = w->dtype == XDT_QBINT4 ? w->q.group_size : K;
        if (x->dtype == XDT_QDINT8 && (x->q.num_nonbatch_dims != 1 || x->bound[x->rank - 1] != K))
            return false;
        q->q4 = (etch_q4_weights){N, K, G, NULL, w->q.scales, NULL};
        uint8_t *d = (uint8_t *)xnn_alloc_bulk(a, (size_t)(N * K / 2), 64);
        if (!d)
            return false;
        q->q4.data = d;
        if (a->measure || !w->constant) {
            q->kind = x->dtype == XDT_QDINT8 ? XQK_Q4_DQ8 : XQK_Q4_F32;
            return true;
        }
        /* XNNPACK: element k of a row in byte k / 2, even k in the low nibble; etch: in the
         * high one (both store q + 8) */
        const uint8_t *s = (const uint8_t *)w->constant;
        for (int64_t i = 0; i < N * K / 2; i++)
            d[i] = (uint8_t)((s[i] << 4) | (s[i] >> 4));
        if (etch_q4_check(&q->q4) != ETCH_OK)
            return false;
        q->kind = x->dtype == XDT_QDINT8 ? XQK_Q4_DQ8 : XQK_Q4_F32;
        return true;
    }
    if (w->dtype == XDT_QCINT8 && w->q.channel_dim == 0 && float_out && float_bias &&
        (x->dtype == XDT_FP32 || x->dtype == XDT_FP16 || x->dtype == XDT_QDINT8)) {
        q->q8w = (etch_q8w_weights){N, K, K, (const int8_t *)w->constant, w->q.scales, NULL};
        if (!a->measure && w->constant && etch_q8w_check(&q->q8w) != ETCH_OK)
            return false;
        q->kind = XQK_Q8W_F32;
        return true;
    }
    if (static_params(g, n, w, 0, N, a, q) && pack_q8((const int8_t *)w->constant, N, K, a, q)) {
        q->kind = XQK_Q8_STATIC;
        return true;
    }
    return false;
}

static bool conv_plan(xnn_graph *g, xnn_node *n, xnn_alloc *a, struct xnn_qnode *q) {
    xnn_value *w = in_v(g, n, 1);
    if (!w->is_constant || (n->flags & XNN_FLAG_TENSORFLOW_SAME_PADDING))
        return false;
    const int64_t O = (int64_t)n->groups * n->goc;
    if (n->kind == XN_DEPTHWISE_CONV2D) { /* filter [1, KH, KW, O] */
        if (!static_params(g, n, w, 3, O, a, q))
            return false;
        q->w = (const int8_t *)w->constant;
        q->kind = XQK_Q8_DW;
        return true;
    }
    if (n->groups != 1) /* filter [O, KH, KW, I] */
        return false;
    q->K = (int64_t)n->kh * n->kw * n->gic;
    if (!static_params(g, n, w, 0, O, a, q) ||
        !pack_q8((const int8_t *)w->constant, O, q->K, a, q))
        return false;
    q->kind = XQK_Q8_STATIC;
    return true;
}

etch_status xnn_quant_prepare(xnn_graph *g, xnn_node *n, xnn_alloc *a) {
    n->qn = NULL;
    if (n->kind != XN_FULLY_CONNECTED && n->kind != XN_CONV2D && n->kind != XN_DEPTHWISE_CONV2D)
        return ETCH_OK;
    const xnn_value *w = in_v(g, n, 1);
    if (!w || w->dtype == XDT_FP32 || w->dtype == XDT_FP16)
        return ETCH_OK;
    struct xnn_qnode *q = (struct xnn_qnode *)xnn_alloc_bytes(a, sizeof *q, 16);
    if (!q)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: method pool too small");
    memset(q, 0, sizeof *q);
    bool ok = n->kind == XN_FULLY_CONNECTED ? fc_plan(g, n, a, q) : conv_plan(g, n, a, q);
    if (ok)
        n->qn = q;
    return ETCH_OK;
}

/* Rows of the node's matrix product at the value's current dims. */
static int64_t fc_rows(const xnn_graph *g, const xnn_node *n, int64_t K) {
    const xnn_value *x = &g->values[n->in[0]];
    return K ? xnn_numel(x->dims, x->rank) / K : 0;
}

size_t xnn_quant_scratch(const xnn_graph *g, const xnn_node *n) {
    const struct xnn_qnode *q = n->qn;
    const xnn_value *o = &g->values[n->out[0]];
    switch (q->kind) {
    case XQK_Q4_F32:
        return etch_q4_linear_f32_work_size(fc_rows(g, n, q->K), q->K, q->q4.G) + 64;
    case XQK_Q4_DQ8:
        return etch_q4_linear_8da4w_work_size(fc_rows(g, n, q->K), q->K, q->q4.G) + 64;
    case XQK_Q8W_F32:
        return etch_q8w_linear_f32_work_size(fc_rows(g, n, q->K)) + 64;
    case XQK_Q8_STATIC: {
        const int64_t rows = n->kind == XN_FULLY_CONNECTED ? fc_rows(g, n, q->K) : QCOL_ROWS;
        return (size_t)(rows * q->K) + etch_q8_gemm_work_size(rows, q->K) + 192;
    }
    case XQK_Q8_DW:
        return (size_t)o->dims[3] * sizeof(int32_t) * 64 + 64; /* per-thread accumulators */
    default:
        return 0;
    }
}

static void *align_up(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

typedef struct qcol_args {
    const uint8_t *x;
    uint8_t *col;
    const xnn_node *n;
    int64_t p0, H, W, C, OH, OW, K;
    uint8_t pad;
} qcol_args;

/* int8 im2col of output pixels [p0 + b, p0 + e): row p, tap (ky, kx), channels at
 * col[p * K + (ky * kw + kx) * C] (NHWC: each tap's channels one copy) */
static void qcol_rows(void *arg, int64_t b, int64_t e) {
    const qcol_args *s = (const qcol_args *)arg;
    const xnn_node *n = s->n;
    for (int64_t p = b; p < e; p++) {
        const int64_t q = s->p0 + p, ox = q % s->OW, oy = (q / s->OW) % s->OH,
                      bi = q / (s->OW * s->OH);
        uint8_t *dst = s->col + p * s->K;
        for (uint32_t ky = 0; ky < n->kh; ky++) {
            const int64_t iy = oy * n->sh + (int64_t)ky * n->dh - n->pad[0];
            for (uint32_t kx = 0; kx < n->kw; kx++, dst += s->C) {
                const int64_t ix = ox * n->sw + (int64_t)kx * n->dw - n->pad[3];
                if (iy < 0 || iy >= s->H || ix < 0 || ix >= s->W)
                    memset(dst, s->pad, (size_t)s->C);
                else
                    memcpy(dst, s->x + ((bi * s->H + iy) * s->W + ix) * s->C, (size_t)s->C);
            }
        }
    }
}

typedef struct qdw_args {
    const struct xnn_qnode *q;
    const xnn_node *n;
    const uint8_t *x;
    uint8_t *y;
    int32_t *acc; /* [threads][O] */
    int64_t H, W, C, OH, OW, O;
} qdw_args;

/* depthwise static int8: output rows (image, oy) [b, e) */
static void qdw_rows(void *arg, int thread, int64_t b, int64_t e) {
    const qdw_args *s = (const qdw_args *)arg;
    const struct xnn_qnode *q = s->q;
    const xnn_node *n = s->n;
    const int64_t O = s->O, mul = n->goc, C = s->C;
    int32_t *acc = s->acc + (size_t)thread * (size_t)O;
    const bool sgn = q->a_signed;
    for (int64_t row = b; row < e; row++) {
        const int64_t oy = row % s->OH, bi = row / s->OH;
        for (int64_t ox = 0; ox < s->OW; ox++) {
            for (int64_t c = 0; c < O; c++)
                acc[c] = q->bias32 ? q->bias32[c] : 0;
            for (uint32_t ky = 0; ky < n->kh; ky++) {
                const int64_t iy = oy * n->sh + (int64_t)ky * n->dh - n->pad[0];
                if (iy < 0 || iy >= s->H)
                    continue;
                for (uint32_t kx = 0; kx < n->kw; kx++) {
                    const int64_t ix = ox * n->sw + (int64_t)kx * n->dw - n->pad[3];
                    if (ix < 0 || ix >= s->W)
                        continue;
                    const uint8_t *in = s->x + ((bi * s->H + iy) * s->W + ix) * C;
                    const int8_t *wt = q->w + ((int64_t)ky * n->kw + kx) * O;
                    for (int64_t c = 0; c < O; c++) {
                        const int64_t ci = mul == 1 ? c : c / mul;
                        const int32_t xv = sgn ? (int32_t)(int8_t)in[ci] : (int32_t)in[ci];
                        acc[c] += (xv - q->za) * (int32_t)wt[c];
                    }
                }
            }
            uint8_t *out = s->y + ((bi * s->OH + oy) * s->OW + ox) * O;
            for (int64_t c = 0; c < O; c++) {
                float v = etch_q8_round((float)acc[c] * q->mult[c]) + (float)q->zo;
                int32_t r = v < (float)q->qmin ? q->qmin : v > (float)q->qmax ? q->qmax : (int32_t)v;
                out[c] = (uint8_t)r; /* int8 stored as its two's-complement byte */
            }
        }
    }
}

unsigned xnn_quant_io(const xnn_node *n) {
    switch (n->qn ? n->qn->kind : 0) {
    case XQK_Q4_F32: case XQK_Q8W_F32: return XQ_IO_FLOAT_IN | XQ_IO_FLOAT_OUT | XQ_IO_FLOAT_BIAS;
    case XQK_Q4_DQ8: return XQ_IO_FLOAT_OUT | XQ_IO_FLOAT_BIAS;
    default: return 0;
    }
}

etch_status xnn_quant_run(xnn_graph *g, xnn_node *n, etch_kernel_context *ctx, const float *xf,
                          const float *bias, float *yf, void *scratch) {
    const struct xnn_qnode *q = n->qn;
    xnn_value *x = &g->values[n->in[0]], *o = &g->values[n->out[0]];
    void *work = align_up(scratch);
    switch (q->kind) {
    case XQK_Q4_F32:
        etch_q4_linear_f32(ctx, &q->q4, fc_rows(g, n, q->K), xf, q->K, bias, yf, q->q4.N, work);
        return ETCH_OK;
    case XQK_Q4_DQ8:
        etch_q4_linear_8da4w(ctx, &q->q4, fc_rows(g, n, q->K), (const int8_t *)x->data, q->K,
                             x->row_scale, x->row_zp, bias, yf, q->q4.N, work);
        return ETCH_OK;
    case XQK_Q8W_F32:
        etch_q8w_linear_f32(ctx, &q->q8w, fc_rows(g, n, q->K), xf, q->K, bias, yf, q->q8w.N,
                            work);
        return ETCH_OK;
    case XQK_Q8_DW: {
        qdw_args s = {q, n, (const uint8_t *)x->data, (uint8_t *)o->data, (int32_t *)work,
                      x->dims[1], x->dims[2], x->dims[3], o->dims[1], o->dims[2], o->dims[3]};
        const int threads = etch_kernel_num_threads(ctx);
        if ((size_t)threads > 64)
            return etch_err(ETCH_ERR_NOT_SUPPORTED, "XnnpackBackend: node %u: more than 64 "
                            "threads", n->index);
        etch_kernel_parallel_for_thread(ctx, o->dims[0] * o->dims[1], 1, qdw_rows, &s);
        return ETCH_OK;
    }
    case XQK_Q8_STATIC: {
        etch_q8_gemm_desc d;
        memset(&d, 0, sizeof d);
        d.lda = q->K, d.a_signed = q->a_signed, d.za = q->za, d.b = &q->pk;
        d.bias32 = q->bias32, d.mult = q->mult, d.mult_per_channel = true;
        d.out_type = q->out_type, d.zo = q->zo, d.qmin = q->qmin, d.qmax = q->qmax;
        const int64_t O = o->dims[o->rank - 1];
        d.ldc = O;
        etch_status st = ETCH_OK;
        if (n->kind == XN_FULLY_CONNECTED) {
            d.M = fc_rows(g, n, q->K), d.a = x->data, d.c = o->data, d.work = work;
            st = etch_q8_gemm(ctx, &d);
        } else {
            const int64_t P = o->dims[0] * o->dims[1] * o->dims[2];
            const bool pointwise = n->kh == 1 && n->kw == 1 && n->sh == 1 && n->sw == 1 &&
                                   !n->pad[0] && !n->pad[1] && !n->pad[2] && !n->pad[3];
            uint8_t *col = (uint8_t *)work;
            d.work = align_up(col + (size_t)(QCOL_ROWS * q->K));
            for (int64_t p0 = 0; p0 < P && st == ETCH_OK; p0 += QCOL_ROWS) {
                const int64_t m = P - p0 < QCOL_ROWS ? P - p0 : QCOL_ROWS;
                if (pointwise) { /* the input rows themselves */
                    d.a = (const uint8_t *)x->data + p0 * q->K;
                } else {
                    qcol_args ca = {(const uint8_t *)x->data, col, n, p0, x->dims[1],
                                    x->dims[2], x->dims[3], o->dims[1], o->dims[2], q->K,
                                    (uint8_t)q->za};
                    etch_kernel_parallel_for(ctx, m, 16, qcol_rows, &ca);
                    d.a = col;
                }
                d.M = m;
                d.c = (uint8_t *)o->data + p0 * O;
                st = etch_q8_gemm(ctx, &d);
            }
        }
        return st == ETCH_OK ? ETCH_OK
                             : etch_err(st, "XnnpackBackend: node %u (%s): %s", n->index,
                                        xnn_node_kind_name(n->kind), etch_last_error());
    }
    default:
        return etch_err(ETCH_ERR_INTERNAL, "XnnpackBackend: node %u: no integer plan", n->index);
    }
}
