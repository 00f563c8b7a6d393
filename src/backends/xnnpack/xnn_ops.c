/*
 * XNNPACK node semantics on etch's kernels. Tensors are NHWC as XNNPACK's, except where the
 * layout plan (xnn_layout.c) keeps runs of convolutions channel-blocked, as etch's CPU path
 * does: those convolutions run the optimized blocked kernels (register-tiled direct, Winograd,
 * depthwise rows) on weights packed for them at load, and the element-wise nodes, pooling and
 * channel concatenations between them work on the blocked planes as they are. Every node
 * computes in float32: quantized and fp16 operands are converted to float (scratch) on the way
 * in, a quantized output is rounded back (to nearest even, clamped) on the way out, which is
 * what XNNPACK's fp32-requantizing integer kernels compute up to float rounding. Weights that
 * are not float32 are converted once at load. The other matrix products go through etch's
 * optimized SGEMM, element-wise rows through the optimized kernels' vector row functions.
 */
#include <math.h>
#include <string.h>

#include "backends/xnnpack/xnn_ops.h"
#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/nchwc.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/quant.h"
#include "kernels/portable/portable.h"
#include "runtime/context.h"
#include "runtime/error.h"

#define XNN_FLAG_TRANSPOSE_WEIGHTS 1u
#define XNN_FLAG_TRANSPOSE_B 1u
#define XNN_FLAG_TENSORFLOW_SAME_PADDING 4u
#define XNN_FLAG_ALIGN_CORNERS 8u
#define XNN_FLAG_TENSORFLOW_LEGACY_MODE 4u
/* im2col tiles hold at most this many floats */
#define XNN_TILE_FLOATS ((int64_t)1 << 20)

#define NODE_ERR(st, n, ...)                                                                 \
    etch_err(st, "XnnpackBackend: node %u (%s): " __VA_ARGS__)
#define NKN(n) (n)->index, xnn_node_kind_name((n)->kind)

static inline xnn_value *IN(xnn_graph *g, const xnn_node *n, uint32_t k) {
    return n->in[k] == XNN_INVALID_ID ? NULL : &g->values[n->in[k]];
}
static inline xnn_value *OUT(xnn_graph *g, const xnn_node *n, uint32_t k) {
    return &g->values[n->out[k]];
}

/* o clamped to [lo, hi] in place (NaN stays NaN), by the optimized kernels' row function */
static void clamp_floats(float *o, int64_t cnt, float lo, float hi) {
    if ((lo > -INFINITY || hi < INFINITY) && cnt > 0)
        etch_opt_vec_active()->unary(ETCH_OPT_UN_CLAMP, o, o, cnt, lo, hi);
}

/* ---- element conversion ----------------------------------------------------------------- */

/* Elements per channel-dim step and channel count, for per-channel scales. */
static void channel_layout(const xnn_value *v, int64_t *inner, int64_t *channels) {
    int64_t in = 1;
    for (uint32_t d = (uint32_t)v->q.channel_dim + 1; d < v->rank; d++)
        in *= v->dims[d];
    *inner = in;
    *channels = v->dims[v->q.channel_dim];
}

/* Elements per row of a per-token (qdint8) value. */
static int64_t token_row(const xnn_value *v) {
    int64_t r = 1;
    for (uint32_t d = v->rank - (uint32_t)v->q.num_nonbatch_dims; d < v->rank; d++)
        r *= v->dims[d];
    return r;
}

/* Value `v` (its current shape, bytes at src) as float32 into dst. */
static void to_float(const xnn_value *v, const void *src, float *dst) {
    int64_t n = xnn_numel(v->dims, v->rank);
    const xnn_quant *q = &v->q;
    switch (v->dtype) {
    case XDT_FP32:
        memcpy(dst, src, (size_t)n * 4);
        return;
    case XDT_FP16: {
        const uint8_t *s = (const uint8_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = etch_pk_half_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        return;
    }
    case XDT_QINT8: {
        const int8_t *s = (const int8_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)((int32_t)s[i] - q->zero_point) * q->scale;
        return;
    }
    case XDT_QUINT8: {
        const uint8_t *s = (const uint8_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)((int32_t)s[i] - q->zero_point) * q->scale;
        return;
    }
    case XDT_QINT32: {
        const uint8_t *s = (const uint8_t *)src;
        for (int64_t i = 0; i < n; i++) {
            int32_t x;
            memcpy(&x, s + 4 * i, 4);
            dst[i] = (float)((double)x - q->zero_point) * q->scale;
        }
        return;
    }
    case XDT_QCINT8: case XDT_QCINT32: {
        int64_t inner, ch;
        channel_layout(v, &inner, &ch);
        const uint8_t *s = (const uint8_t *)src;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = (i / inner) % ch;
            int32_t x;
            if (v->dtype == XDT_QCINT8)
                x = ((const int8_t *)src)[i];
            else
                memcpy(&x, s + 4 * i, 4);
            dst[i] = (float)x * q->scales[c];
        }
        return;
    }
    case XDT_QCINT4: case XDT_QBINT4: {
        /* 2-D [rows, cols], two per byte along cols (low nibble first), each row padded to a
         * whole byte, stored with zero point 8 */
        int64_t rows = v->dims[0], cols = v->dims[1], rb = (cols + 1) / 2;
        const uint8_t *s = (const uint8_t *)src;
        int64_t groups = v->dtype == XDT_QBINT4 ? cols / q->group_size : 1;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                uint8_t b = s[r * rb + c / 2];
                int32_t x = (int32_t)((c & 1) ? b >> 4 : b & 15) - 8;
                float sc;
                if (v->dtype == XDT_QBINT4)
                    sc = q->channel_dim == 0 ? q->scales[r * groups + c / q->group_size]
                                             : q->scales[c * (rows / q->group_size) +
                                                         r / q->group_size];
                else
                    sc = q->channel_dim == 0 ? q->scales[r] : q->scales[c];
                dst[r * cols + c] = (float)x * sc;
            }
        return;
    }
    case XDT_QDINT8: {
        int64_t row = token_row(v), rows = row ? n / row : 0;
        const int8_t *s = (const int8_t *)src;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < row; i++)
                dst[r * row + i] =
                    (float)((int32_t)s[r * row + i] - v->row_zp[r]) * v->row_scale[r];
        return;
    }
    default:
        memset(dst, 0, (size_t)n * 4);
    }
}

static inline int32_t q_round(float x, float inv_scale, int32_t zp, int32_t lo, int32_t hi) {
    float y = nearbyintf(x * inv_scale);
    if (!(y >= -2147483520.0f))
        y = -2147483520.0f;
    if (y > 2147483520.0f)
        y = 2147483520.0f;
    int64_t r = (int64_t)y + zp;
    return (int32_t)(r < lo ? lo : r > hi ? hi : r);
}

/* Per-token parameters as choose_qparams_per_token_asymmetric (int8, range including 0). */

/* float32 src (v's current shape) into v's bytes. */
static void from_float(xnn_value *v, const float *src, void *dst) {
    int64_t n = xnn_numel(v->dims, v->rank);
    const xnn_quant *q = &v->q;
    switch (v->dtype) {
    case XDT_FP32:
        if (dst != src)
            memcpy(dst, src, (size_t)n * 4);
        return;
    case XDT_FP16: {
        uint8_t *d = (uint8_t *)dst;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = etch_pk_f32_to_half(src[i]);
            d[2 * i] = (uint8_t)h;
            d[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    }
    case XDT_QINT8: case XDT_QUINT8: {
        float inv = 1.0f / q->scale;
        int32_t lo = v->dtype == XDT_QINT8 ? -128 : 0, hi = v->dtype == XDT_QINT8 ? 127 : 255;
        for (int64_t i = 0; i < n; i++) {
            int32_t r = q_round(src[i], inv, q->zero_point, lo, hi);
            if (v->dtype == XDT_QINT8)
                ((int8_t *)dst)[i] = (int8_t)r;
            else
                ((uint8_t *)dst)[i] = (uint8_t)r;
        }
        return;
    }
    case XDT_QINT32: {
        float inv = 1.0f / q->scale;
        for (int64_t i = 0; i < n; i++) {
            int32_t r = q_round(src[i], inv, q->zero_point, INT32_MIN, INT32_MAX);
            memcpy((uint8_t *)dst + 4 * i, &r, 4);
        }
        return;
    }
    case XDT_QDINT8: { /* per row: ExecuTorch's choose_qparams_per_token_asymmetric and
                          quantize_per_token, as etch's CPU path computes them */
        int64_t row = token_row(v), rows = row ? n / row : 0;
        if (rows > 0 && row > 0) {
            etch_q8_choose_qparams_per_token(src, rows, row, row, v->row_scale, v->row_zp);
            etch_q8_quantize_per_token(src, rows, row, row, v->row_scale, v->row_zp,
                                       (int8_t *)dst, row);
        }
        return;
    }
    default:
        return; /* weights-only types are never written (checked at load) */
    }
}

/* ---- shapes ----------------------------------------------------------------------------- */

static etch_status set_dims(xnn_node *n, xnn_value *o, uint32_t rank, const int64_t *dims,
                            bool at_load) {
    if (rank != o->rank)
        return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n,
                        "output has rank %u, the node computes rank %u", NKN(n), o->rank, rank);
    int64_t numel = 1;
    for (uint32_t d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > ((int64_t)1 << 40))
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "output dim %u is %lld", NKN(n), d,
                            (long long)dims[d]);
        numel *= dims[d];
        if (numel > ((int64_t)1 << 40))
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "output too large", NKN(n));
        o->dims[d] = dims[d];
    }
    size_t bytes = xnn_dtype_bytes(o->dtype, numel);
    if (at_load) {
        size_t bound = xnn_dtype_bytes(o->dtype, xnn_numel(o->bound, o->rank));
        if (bytes < bound)
            bytes = bound;
        if (bytes > o->capacity)
            o->capacity = bytes;
        if (o->dtype == XDT_QDINT8) {
            int64_t row = token_row(o), rows = row ? numel / row : 0;
            if (rows > o->max_rows)
                o->max_rows = rows;
        }
    } else if (o->flags & XNN_FLAG_EXTERNAL_OUTPUT) {
        /* checked by the caller against the output tensor */
    } else if (bytes > o->capacity ||
               (o->dtype == XDT_QDINT8 && token_row(o) && numel / token_row(o) > o->max_rows)) {
        return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                        "output needs %zu bytes at these input shapes, planned for %zu (the "
                        "inputs exceed the graph's bounds)",
                        NKN(n), bytes, o->capacity);
    }
    return ETCH_OK;
}

static etch_status conv_out(const xnn_node *n, int64_t in, uint32_t k, uint32_t s, uint32_t d,
                            uint32_t p0, uint32_t p1, int64_t *out) {
    int64_t eff = (int64_t)d * ((int64_t)k - 1) + 1, padded = in + p0 + p1;
    if (padded < eff) {
        *out = 0;
        return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                        "input extent %lld (+%u+%u padding) is smaller than the %lld-wide window",
                        NKN(n), (long long)in, p0, p1, (long long)eff);
    }
    *out = (padded - eff) / s + 1;
    return ETCH_OK;
}

static bool is_float_like(int dt) { return dt == XDT_FP32 || dt == XDT_FP16; }
static bool is_act_q(int dt) { return dt == XDT_QINT8 || dt == XDT_QUINT8; }

/* Operand checks and the output shape of node n from its inputs' current dims. */
static etch_status reshape_node(xnn_graph *g, xnn_node *n, bool at_load) {
    xnn_value *x = IN(g, n, 0), *o = OUT(g, n, 0);
    int64_t dims[XNN_MAX_DIMS];
    uint32_t rank = x->rank;
    memcpy(dims, x->dims, sizeof dims);
    switch (n->kind) {
    case XN_ADD: case XN_SUBTRACT: case XN_MULTIPLY: case XN_DIV: case XN_MINIMUM:
    case XN_MAXIMUM: case XN_PRELU: {
        xnn_value *y = IN(g, n, 1);
        rank = x->rank > y->rank ? x->rank : y->rank;
        for (uint32_t d = 0; d < rank; d++) {
            int64_t a = d + x->rank >= rank ? x->dims[d + x->rank - rank] : 1;
            int64_t b = d + y->rank >= rank ? y->dims[d + y->rank - rank] : 1;
            if (a != b && a != 1 && b != 1)
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                                "inputs of sizes %lld and %lld at dim %u do not broadcast",
                                NKN(n), (long long)a, (long long)b, d);
            dims[d] = a == 1 ? b : a;
        }
        if (n->kind == XN_PRELU && !xnn_same_dims(x, o) && o->rank == x->rank)
            memcpy(dims, x->dims, sizeof dims), rank = x->rank;
        break;
    }
    case XN_FULLY_CONNECTED: {
        xnn_value *w = IN(g, n, 1), *b = IN(g, n, 2);
        if (w->rank != 2)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "filter has rank %u, not 2", NKN(n),
                            w->rank);
        bool tw = n->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
        int64_t N = tw ? w->dims[1] : w->dims[0], K = tw ? w->dims[0] : w->dims[1];
        if (x->rank < 1)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "input is a scalar", NKN(n));
        int64_t numel = xnn_numel(x->dims, x->rank);
        if (K == 0 || numel % K != 0 || (o->rank != 2 && x->dims[x->rank - 1] != K))
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                            "input of %lld elements (last dim %lld) does not match the filter's "
                            "%lld input channels",
                            NKN(n), (long long)numel, (long long)x->dims[x->rank - 1],
                            (long long)K);
        if (b && xnn_numel(b->dims, b->rank) != N)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "bias has %lld elements for %lld outputs",
                            NKN(n), (long long)xnn_numel(b->dims, b->rank), (long long)N);
        if (o->rank == 2 && x->rank != 2) {
            rank = 2;
            dims[0] = numel / K;
        }
        dims[rank - 1] = N;
        break;
    }
    case XN_CONV2D: case XN_DEPTHWISE_CONV2D: case XN_CONV_TRANSPOSE2D: {
        xnn_value *w = IN(g, n, 1), *b = IN(g, n, 2);
        if (x->rank != 4 || w->rank != 4)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "input rank %u / filter rank %u, not 4",
                            NKN(n), x->rank, w->rank);
        if (n->flags & XNN_FLAG_TENSORFLOW_SAME_PADDING)
            return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "TensorFlow SAME padding", NKN(n));
        if (!n->kh || !n->kw || !n->sh || !n->sw || !n->dh || !n->dw || !n->groups ||
            !n->gic || !n->goc || n->kh > 1024 || n->kw > 1024 || n->dh > 1024 ||
            n->dw > 1024 || n->groups > (1u << 20) || n->gic > (1u << 20) || n->goc > (1u << 20))
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n,
                            "kernel %ux%u, stride %ux%u, dilation %ux%u, groups %u x %u -> %u",
                            NKN(n), n->kh, n->kw, n->sh, n->sw, n->dh, n->dw, n->groups, n->gic,
                            n->goc);
        int64_t O = (int64_t)n->groups * n->goc;
        bool dw = n->kind == XN_DEPTHWISE_CONV2D;
        int64_t cin = dw ? n->groups : (int64_t)n->groups * n->gic;
        bool wok = dw ? (w->dims[0] == 1 && w->dims[1] == n->kh && w->dims[2] == n->kw &&
                         w->dims[3] == O)
                      : (w->dims[0] == O && w->dims[1] == n->kh && w->dims[2] == n->kw &&
                         w->dims[3] == n->gic);
        if (!wok || x->dims[3] != cin || (dw && n->gic != 1))
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                            "input channels %lld / filter [%lld, %lld, %lld, %lld] do not match "
                            "%u groups of %u -> %u channels, kernel %ux%u",
                            NKN(n), (long long)x->dims[3], (long long)w->dims[0],
                            (long long)w->dims[1], (long long)w->dims[2], (long long)w->dims[3],
                            n->groups, n->gic, n->goc, n->kh, n->kw);
        if (b && xnn_numel(b->dims, b->rank) != O)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "bias has %lld elements for %lld outputs",
                            NKN(n), (long long)xnn_numel(b->dims, b->rank), (long long)O);
        etch_status st;
        if (n->kind == XN_CONV_TRANSPOSE2D) {
            int64_t eh = (int64_t)n->dh * (n->kh - 1) + 1, ew = (int64_t)n->dw * (n->kw - 1) + 1;
            dims[1] = (int64_t)n->sh * (x->dims[1] - 1) + n->adj_h + eh - n->pad[0] - n->pad[2];
            dims[2] = (int64_t)n->sw * (x->dims[2] - 1) + n->adj_w + ew - n->pad[3] - n->pad[1];
            if (x->dims[1] == 0 || x->dims[2] == 0 || dims[1] < 0 || dims[2] < 0)
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n, "empty output", NKN(n));
        } else if ((st = conv_out(n, x->dims[1], n->kh, n->sh, n->dh, n->pad[0], n->pad[2],
                                  &dims[1])) ||
                   (st = conv_out(n, x->dims[2], n->kw, n->sw, n->dw, n->pad[3], n->pad[1],
                                  &dims[2]))) {
            return st;
        }
        dims[3] = O;
        break;
    }
    case XN_AVG_POOL: case XN_MAX_POOL: {
        if (x->rank != 4)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "input rank %u, not 4", NKN(n), x->rank);
        if (n->flags & XNN_FLAG_TENSORFLOW_SAME_PADDING)
            return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "TensorFlow SAME padding", NKN(n));
        if (!n->kh || !n->kw || !n->sh || !n->sw || n->kh > 4096 || n->kw > 4096 ||
            n->dh > 4096 || n->dw > 4096)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "window %ux%u stride %ux%u", NKN(n),
                            n->kh, n->kw, n->sh, n->sw);
        etch_status st;
        if ((st = conv_out(n, x->dims[1], n->kh, n->sh, n->dh, n->pad[0], n->pad[2], &dims[1])) ||
            (st = conv_out(n, x->dims[2], n->kw, n->sw, n->dw, n->pad[3], n->pad[1], &dims[2])))
            return st;
        break;
    }
    case XN_GLOBAL_AVG_POOL:
        if (x->rank < 3)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "input rank %u below 3", NKN(n), x->rank);
        if (o->rank == x->rank) {
            dims[x->rank - 3] = 1;
            dims[x->rank - 2] = 1;
        } else {
            rank = x->rank - 2;
            dims[rank - 1] = x->dims[x->rank - 1];
        }
        break;
    case XN_STATIC_TRANSPOSE: {
        if (n->num_dims != x->rank)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "%u-entry perm for rank %u", NKN(n),
                            n->num_dims, x->rank);
        uint32_t seen = 0;
        for (uint32_t d = 0; d < rank; d++) {
            if (n->perm[d] >= rank || (seen >> n->perm[d] & 1))
                return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "perm is not a permutation",
                                NKN(n));
            seen |= 1u << n->perm[d];
            dims[d] = x->dims[n->perm[d]];
        }
        break;
    }
    case XN_STATIC_RESHAPE: {
        rank = n->num_dims;
        int64_t known = 1, total = xnn_numel(x->dims, x->rank);
        int infer = -1;
        for (uint32_t d = 0; d < rank; d++) {
            dims[d] = n->shape[d];
            if (dims[d] == 0) {
                if (infer >= 0)
                    return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "two inferred dims", NKN(n));
                infer = (int)d;
            } else {
                known *= dims[d];
                if (known > ((int64_t)1 << 40))
                    return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "shape too large", NKN(n));
            }
        }
        if (infer >= 0) {
            if (known == 0 || total % known)
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                                "%lld elements do not reshape with %lld per inferred step",
                                NKN(n), (long long)total, (long long)known);
            dims[infer] = total / known;
        } else if (known != total) {
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                            "input of %lld elements cannot take a shape of %lld", NKN(n),
                            (long long)total, (long long)known);
        }
        break;
    }
    case XN_STATIC_SLICE:
        if (n->num_dims != x->rank)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "%u offsets for rank %u", NKN(n),
                            n->num_dims, x->rank);
        for (uint32_t d = 0; d < rank; d++) {
            int64_t off = n->offsets[d], sz = n->shape[d] ? n->shape[d] : x->dims[d] - off;
            if (off > x->dims[d] || sz < 0 || off + sz > x->dims[d])
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                                "slice [%lld, +%lld) of dim %u outside its %lld", NKN(n),
                                (long long)off, (long long)sz, d, (long long)x->dims[d]);
            dims[d] = sz;
        }
        break;
    case XN_CONSTANT_PAD:
        if (n->num_dims != x->rank)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "%u paddings for rank %u", NKN(n),
                            n->num_dims, x->rank);
        for (uint32_t d = 0; d < rank; d++) {
            if (n->pre[d] > (1u << 24) || n->post[d] > (1u << 24))
                return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "padding too large", NKN(n));
            dims[d] = x->dims[d] + n->pre[d] + n->post[d];
        }
        break;
    case XN_RESIZE_BILINEAR:
        if (x->rank != 4 || !n->new_h || !n->new_w || n->new_h > (1u << 24) ||
            n->new_w > (1u << 24))
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "rank %u, new size %ux%u", NKN(n),
                            x->rank, n->new_h, n->new_w);
        /* every output pixel reads input pixels: an empty input has none to read */
        if ((x->dims[1] == 0 || x->dims[2] == 0) && x->dims[0] && x->dims[3])
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n, "input of %lldx%lld pixels to resize",
                            NKN(n), (long long)x->dims[1], (long long)x->dims[2]);
        dims[1] = n->new_h;
        dims[2] = n->new_w;
        break;
    case XN_CONCAT2: case XN_CONCAT3: case XN_CONCAT4: case XN_CONCAT5: {
        if (n->axis >= x->rank)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "axis %u for rank %u", NKN(n), n->axis,
                            x->rank);
        int64_t sum = 0;
        for (uint32_t k = 0; k < n->nin; k++) {
            xnn_value *y = IN(g, n, k);
            bool ok = y->rank == x->rank;
            for (uint32_t d = 0; ok && d < rank; d++)
                ok = d == n->axis || y->dims[d] == x->dims[d];
            if (!ok)
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                                "input %u's shape does not match input 1's off axis %u", NKN(n),
                                k + 1, n->axis);
            sum += y->dims[n->axis];
        }
        dims[n->axis] = sum;
        break;
    }
    case XN_BMM: {
        xnn_value *y = IN(g, n, 1);
        if (x->rank < 2 || y->rank < 2)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "inputs of rank %u and %u", NKN(n),
                            x->rank, y->rank);
        bool tb = n->flags & XNN_FLAG_TRANSPOSE_B;
        int64_t K = x->dims[x->rank - 1];
        int64_t yk = tb ? y->dims[y->rank - 1] : y->dims[y->rank - 2],
                yn = tb ? y->dims[y->rank - 2] : y->dims[y->rank - 1];
        if (yk != K)
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n, "inner sizes %lld and %lld differ",
                            NKN(n), (long long)K, (long long)yk);
        rank = x->rank > y->rank ? x->rank : y->rank;
        for (uint32_t d = 0; d + 2 < rank; d++) {
            int64_t a = d + x->rank >= rank ? x->dims[d + x->rank - rank] : 1;
            int64_t b = d + y->rank >= rank ? y->dims[d + y->rank - rank] : 1;
            if (a != b && a != 1 && b != 1)
                return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n, "batch dims do not broadcast",
                                NKN(n));
            dims[d] = a == 1 ? b : a;
        }
        dims[rank - 2] = x->dims[x->rank - 2];
        dims[rank - 1] = yn;
        break;
    }
    case XN_SDPA: {
        xnn_value *k = IN(g, n, 1), *v = IN(g, n, 2), *s = IN(g, n, 3), *m = IN(g, n, 4);
        if (x->rank < 2 || k->rank != x->rank || v->rank != x->rank)
            return NODE_ERR(ETCH_ERR_INVALID_PROGRAM, n, "query/key/value ranks differ", NKN(n));
        uint32_t r = x->rank;
        int64_t T = x->dims[r - 2], D = x->dims[r - 1], S = k->dims[r - 2];
        bool ok = k->dims[r - 1] == D && v->dims[r - 2] == S &&
                  xnn_numel(s->dims, s->rank) == D &&
                  (m->rank == 2 && m->dims[0] == T && m->dims[1] == S);
        for (uint32_t d = 0; ok && d + 2 < r; d++)
            ok = k->dims[d] == x->dims[d] && v->dims[d] == x->dims[d];
        if (!ok)
            return NODE_ERR(ETCH_ERR_INVALID_ARGUMENT, n,
                            "query [.., %lld, %lld], key, value, scale or mask do not match",
                            NKN(n), (long long)T, (long long)D);
        dims[r - 1] = v->dims[r - 1];
        break;
    }
    case XN_ARGMAX_POOL:
        return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "argmax pooling is not supported", NKN(n));
    default:
        break; /* unary: same shape */
    }
    return set_dims(n, o, rank, dims, at_load);
}

/* ---- load-time checks and preparation --------------------------------------------------- */

static etch_status check_types(xnn_graph *g, xnn_node *n) {
    for (uint32_t k = 0; k < n->nin; k++) {
        xnn_value *v = IN(g, n, k);
        if (!v)
            continue;
        bool weight = (n->kind == XN_FULLY_CONNECTED || n->kind == XN_CONV2D ||
                       n->kind == XN_DEPTHWISE_CONV2D || n->kind == XN_CONV_TRANSPOSE2D) &&
                      k >= 1;
        bool ok = is_float_like(v->dtype) || is_act_q(v->dtype) || v->dtype == XDT_QINT32 ||
                  (v->dtype == XDT_QDINT8 && k == 0) ||
                  (weight && (v->dtype == XDT_QCINT8 || v->dtype == XDT_QCINT32)) ||
                  (n->kind == XN_FULLY_CONNECTED && k == 1 &&
                   (v->dtype == XDT_QCINT4 || v->dtype == XDT_QBINT4));
        if (!ok)
            return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "input %u has datatype %s, not supported "
                            "there", NKN(n), k + 1, xnn_datatype_name(v->dtype));
        if ((v->dtype == XDT_QCINT8 || v->dtype == XDT_QCINT32 || v->dtype == XDT_QCINT4 ||
             v->dtype == XDT_QBINT4) && !v->is_constant)
            return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "input %u: %s must be a constant", NKN(n),
                            k + 1, xnn_datatype_name(v->dtype));
    }
    for (uint32_t k = 0; k < n->nout; k++) {
        xnn_value *o = OUT(g, n, k);
        if (!(is_float_like(o->dtype) || is_act_q(o->dtype) || o->dtype == XDT_QINT32 ||
              (o->dtype == XDT_QDINT8 && n->kind == XN_CONVERT)))
            return NODE_ERR(ETCH_ERR_NOT_SUPPORTED, n, "output has datatype %s", NKN(n),
                            xnn_datatype_name(o->dtype));
    }
    return ETCH_OK;
}

static bool needs_float_copy(const xnn_value *v) {
    return v && v->is_constant &&
           (v->dtype != XDT_FP32 || ((uintptr_t)v->constant & 3) != 0);
}

static etch_status prepare_weight(xnn_value *v, xnn_alloc *a, float **out) {
    *out = NULL;
    if (!needs_float_copy(v))
        return ETCH_OK;
    int64_t n = xnn_numel(v->bound, v->rank);
    float *f = (float *)xnn_alloc_bulk(a, (size_t)n * 4, 64);
    if (!f)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "XnnpackBackend: method pool too small for a %lld-element weight",
                        (long long)n);
    if (v->constant && !a->measure)
        to_float(v, v->constant, f);
    *out = f;
    return ETCH_OK;
}

/* The float filter of a fully connected or conv2d node packed once for the SGEMM's B operand
 * (one per group; the GEMM ignores a packing that does not match its call, e.g. after an ISA
 * switch). */
static etch_status prepack_filter(xnn_graph *g, xnn_node *n, xnn_alloc *a) {
    xnn_value *w = IN(g, n, 1);
    n->wp = NULL;
    if (!w || !w->is_constant || (!n->wf && w->dtype != XDT_FP32))
        return ETCH_OK;
    int64_t K, N, rs, cs, gstride = 0;
    uint32_t groups = 1;
    if (n->kind == XN_FULLY_CONNECTED) {
        bool tw = n->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
        N = tw ? w->bound[1] : w->bound[0];
        K = tw ? w->bound[0] : w->bound[1];
        rs = tw ? N : 1;
        cs = tw ? 1 : K;
    } else {
        groups = n->groups;
        N = n->goc;
        K = (int64_t)n->kh * n->kw * n->gic;
        rs = 1, cs = K, gstride = N * K;
    }
    size_t each = N > 0 && K > 0 ? etch_opt_sgemm_packed_size(NULL, false, N, K) : 0;
    if (!each)
        return ETCH_OK;
    each = (each + 63) & ~(size_t)63;
    if (each > SIZE_MAX / 2 / groups)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: node %u: packed "
                        "filter too large", n->index);
    etch_sgemm_packed *p =
        (etch_sgemm_packed *)xnn_alloc_bulk(a, groups * sizeof(etch_sgemm_packed), 16);
    uint8_t *data = (uint8_t *)xnn_alloc_bulk(a, groups * each, 64);
    if (!p || !data)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "XnnpackBackend: method pool too small for node %u's packed filter",
                        n->index);
    if (a->measure)
        return ETCH_OK;
    const float *src = n->wf ? n->wf : (const float *)w->constant;
    for (uint32_t gi = 0; gi < groups; gi++)
        etch_opt_sgemm_pack_b(NULL, src + gi * gstride, rs, cs, K, N,
                              (float *)(void *)(data + gi * each), &p[gi]);
    n->wp = p;
    return ETCH_OK;
}

static size_t fbytes(const xnn_value *v) {
    return v ? ((size_t)xnn_numel(v->dims, v->rank) * 4 + 63) & ~(size_t)63 : 0;
}

/* Whether max pooling node n runs the optimized blocked rows (symmetric padding). */
static bool maxpool_rows_fit(const xnn_node *n, const xnn_value *o) {
    return n->kind == XN_MAX_POOL && o->layout == XL_BLK && n->pad[0] == n->pad[2] &&
           n->pad[1] == n->pad[3];
}

/* Scratch bytes of node n at its current shapes (after reshape_node and the layout plan). */
static size_t node_scratch(xnn_graph *g, xnn_node *n) {
    size_t s = 0;
    if (n->qn) { /* the integer plan, plus float copies of what it reads and writes */
        const unsigned io = xnn_quant_io(n);
        xnn_value *x = IN(g, n, 0), *o = OUT(g, n, 0), *b = IN(g, n, 2);
        s = xnn_quant_scratch(g, n) + 64;
        if ((io & XQ_IO_FLOAT_IN) && (x->dtype != XDT_FP32 || x->layout != XL_NHWC))
            s += fbytes(x);
        if ((io & XQ_IO_FLOAT_OUT) && o->dtype != XDT_FP32)
            s += fbytes(o);
        if ((io & XQ_IO_FLOAT_BIAS) && b && !n->bf && b->dtype != XDT_FP32)
            s += fbytes(b);
        return s;
    }
    for (uint32_t k = 0; k < n->nin; k++) {
        xnn_value *v = IN(g, n, k);
        if (v && v->dtype == XDT_FP32 && xnn_layout_wanted(g, n, k) != v->layout) {
            s += fbytes(v); /* a copy in the layout n reads */
            continue;
        }
        if (!v || (v->dtype == XDT_FP32 && ((uintptr_t)v->constant & 3) == 0))
            continue;
        if (k == 1 && n->wf) continue;
        if (k == 2 && n->bf) continue;
        s += fbytes(v);
    }
    for (uint32_t k = 0; k < n->nout; k++)
        if (OUT(g, n, k)->dtype != XDT_FP32)
            s += fbytes(OUT(g, n, k));
    xnn_value *x = IN(g, n, 0), *o = OUT(g, n, 0);
    if (maxpool_rows_fit(n, o)) /* the indices of the optimized rows */
        s += (size_t)xnn_numel(o->dims, 4) * 8 + 64;
    if (n->blk && !n->wino)
        return s;
    if (n->wino) /* the NHWC path when scratch is short for the Winograd transforms */
        s += fbytes(x) + fbytes(o);
    switch (n->kind) {
    case XN_CONV2D: {
        int64_t K = (int64_t)n->kh * n->kw * n->gic;
        int64_t P = o->dims[0] * o->dims[1] * o->dims[2];
        int64_t rows = K ? XNN_TILE_FLOATS / K : 1;
        if (rows < 1) rows = 1;
        if (rows > P) rows = P;
        s += (size_t)(rows * K) * 4 + 64;
        break;
    }
    case XN_SDPA: {
        uint32_t r = x->rank;
        int64_t T = x->dims[r - 2], D = x->dims[r - 1], S = IN(g, n, 1)->dims[r - 2];
        s += (size_t)(T * D + T * S) * 4 + 128;
        break;
    }
    case XN_DEPTHWISE_CONV2D: case XN_CONV_TRANSPOSE2D:
        s += (size_t)o->dims[3] * 4 * 64 + 64; /* per-thread accumulators (64 threads max) */
        break;
    default:
        break;
    }
    return s;
}

etch_status xnn_ops_prepare(xnn_graph *g, xnn_alloc *a) {
    etch_status st;
    for (uint32_t i = 0; i < g->nvalues; i++)
        memcpy(g->values[i].dims, g->values[i].bound, sizeof g->values[i].dims);
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if ((st = check_types(g, n)) || (st = reshape_node(g, n, true)))
            return st;
        if ((st = xnn_quant_prepare(g, n, a)))
            return st;
        if (n->kind == XN_FULLY_CONNECTED || n->kind == XN_CONV2D ||
            n->kind == XN_DEPTHWISE_CONV2D || n->kind == XN_CONV_TRANSPOSE2D) {
            /* the integer plans read the weight as it is, the static int8 ones the bias too */
            if ((!n->qn && (st = prepare_weight(IN(g, n, 1), a, &n->wf))) ||
                ((!n->qn || (xnn_quant_io(n) & XQ_IO_FLOAT_BIAS)) &&
                 (st = prepare_weight(IN(g, n, 2), a, &n->bf))))
                return st;
        }
    }
    if ((st = xnn_layout_plan(g, a)))
        return st;
    size_t scratch = 0;
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if ((n->kind == XN_FULLY_CONNECTED || (n->kind == XN_CONV2D && !n->blk)) &&
            (st = prepack_filter(g, n, a)))
            return st;
        n->scratch = node_scratch(g, n);
        if (n->scratch > scratch)
            scratch = n->scratch;
    }
    for (uint32_t i = 0; i < g->nvalues; i++) {
        xnn_value *v = &g->values[i];
        if (v->dtype == XDT_QDINT8) {
            if (v->max_rows == 0) {
                int64_t row = token_row(v), n = xnn_numel(v->bound, v->rank);
                v->max_rows = row ? n / row : 0;
            }
            v->row_scale = (float *)xnn_alloc_bulk(a, (size_t)(v->max_rows + 1) * 4, 16);
            v->row_zp = (int32_t *)xnn_alloc_bulk(a, (size_t)(v->max_rows + 1) * 4, 16);
            if (!v->row_scale || !v->row_zp)
                return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                                "XnnpackBackend: method pool too small");
        }
        /* external values take their caller's shapes at execute; start from the bounds */
        memcpy(v->dims, v->bound, sizeof v->dims);
    }
    g->scratch_size = scratch + 64;
    return ETCH_OK;
}

/* ---- execution -------------------------------------------------------------------------- */

typedef struct run {
    xnn_graph *g;
    etch_kernel_context *ctx;
    uint8_t *sp;
    size_t left;
} run;

static float *scratch_floats(run *r, int64_t n) {
    size_t bytes = ((size_t)n * 4 + 63) & ~(size_t)63;
    if (bytes > r->left)
        return NULL; /* sized at load for the bounds: cannot happen within them */
    float *p = (float *)r->sp;
    r->sp += bytes;
    r->left -= bytes;
    return p;
}

/* ---- layouts (xnn_layout.c) ---------------------------------------------------------------- */

typedef struct relayout_args {
    const float *src;
    float *dst;
    int from, to;
    int64_t H, W, C;
} relayout_args;

/* Offset of element (n, h, w, c) of an [N, H, W, C] value stored in `layout`. */
static inline int64_t lay_off(int layout, int64_t n, int64_t h, int64_t w, int64_t c, int64_t H,
                              int64_t W, int64_t C) {
    switch (layout) {
    case XL_BLK: return (((n * (C / 8) + c / 8) * H + h) * W + w) * 8 + c % 8;
    case XL_NCHW: return ((n * C + c) * H + h) * W + w;
    default: return ((n * H + h) * W + w) * C + c;
    }
}

/* rows (n, h) of the value */
static void relayout_rows(void *arg, int64_t b, int64_t e) {
    const relayout_args *a = (const relayout_args *)arg;
    const int64_t H = a->H, W = a->W, C = a->C;
    for (int64_t row = b; row < e; row++) {
        const int64_t n = row / H, h = row % H;
        if (a->from == XL_NHWC && a->to == XL_BLK) {
            const float *src = a->src + row * W * C;
            for (int64_t cb = 0; cb < C / 8; cb++)
                for (int64_t w = 0; w < W; w++)
                    memcpy(a->dst + lay_off(XL_BLK, n, h, w, cb * 8, H, W, C), src + w * C + cb * 8,
                           32);
        } else if (a->from == XL_BLK && a->to == XL_NHWC) {
            float *dst = a->dst + row * W * C;
            for (int64_t cb = 0; cb < C / 8; cb++)
                for (int64_t w = 0; w < W; w++)
                    memcpy(dst + w * C + cb * 8, a->src + lay_off(XL_BLK, n, h, w, cb * 8, H, W, C),
                           32);
        } else {
            for (int64_t c = 0; c < C; c++)
                for (int64_t w = 0; w < W; w++)
                    a->dst[lay_off(a->to, n, h, w, c, H, W, C)] =
                        a->src[lay_off(a->from, n, h, w, c, H, W, C)];
        }
    }
}

/* dst = the rank-4 value v (dims [N, H, W, C]), stored `from`, stored `to` instead. */
static void relayout(etch_kernel_context *ctx, const xnn_value *v, int from, const float *src,
                     int to, float *dst) {
    relayout_args a = {src, dst, from, to, v->dims[1], v->dims[2], v->dims[3]};
    int64_t rows = v->dims[0] * v->dims[1];
    if (from == to) {
        memcpy(dst, src, (size_t)xnn_numel(v->dims, 4) * 4);
        return;
    }
    etch_kernel_parallel_for(ctx, rows, 4, relayout_rows, &a);
}

/* Input k as float32 (the data itself when already fp32, in the layout n reads it in). */
static const float *fin(run *r, xnn_node *n, uint32_t k) {
    xnn_value *v = IN(r->g, n, k);
    if (!v)
        return NULL;
    if (k == 1 && n->wf)
        return n->wf;
    if (k == 2 && n->bf)
        return n->bf;
    if (v->dtype == XDT_FP32 && v->rank == 4 && !v->is_constant) {
        int want = xnn_layout_wanted(r->g, n, k);
        if (want != v->layout) {
            float *f = scratch_floats(r, xnn_numel(v->dims, v->rank));
            if (f)
                relayout(r->ctx, v, v->layout, (const float *)v->data, want, f);
            return f;
        }
    }
    if (v->dtype == XDT_FP32 && ((uintptr_t)v->data & 3) == 0)
        return (const float *)v->data;
    float *f = scratch_floats(r, xnn_numel(v->dims, v->rank));
    if (f)
        to_float(v, v->data, f);
    return f;
}

static float *fout(run *r, xnn_node *n, uint32_t k) {
    xnn_value *o = OUT(r->g, n, k);
    if (o->dtype == XDT_FP32)
        return (float *)o->data;
    return scratch_floats(r, xnn_numel(o->dims, o->rank));
}

typedef struct span_args {
    const float *x, *y;
    float *o;
    int op;
    float a, lo, hi;
} span_args;

static inline float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

static void unary_span(void *arg, int64_t b, int64_t e) {
    const span_args *s = (const span_args *)arg;
    const float *x = s->x;
    float *o = s->o;
    int vop = s->op == XN_SIGMOID ? ETCH_OPT_UN_SIGMOID
              : s->op == XN_GELU ? ETCH_OPT_UN_GELU
              : s->op == XN_SQRT ? ETCH_OPT_UN_SQRT
              : s->op == XN_RSQRT ? ETCH_OPT_UN_RSQRT
              : s->op == XN_NEGATE ? ETCH_OPT_UN_NEG
              : s->op == XN_TANH ? ETCH_OPT_UN_TANH
              : s->op == XN_EXP ? ETCH_OPT_UN_EXP
              : -1;
    if (vop >= 0) /* the optimized kernels' row functions (opt_eltwise.h: their accuracy) */
        etch_opt_vec_active()->unary(vop, o + b, x + b, e - b, -INFINITY, INFINITY);
    else if (s->op == XN_SQUARE) /* x * x, correctly rounded either way */
        etch_opt_vec_active()->binary(ETCH_OPT_BIN_MUL, o + b, x + b, 0, x + b, 0, 1.0f, e - b);
    switch (vop >= 0 || s->op == XN_SQUARE ? -1 : s->op) {
    case XN_CLAMP: case XN_CONVERT: case XN_STATIC_RESHAPE:
        if (o != x)
            memcpy(o + b, x + b, (size_t)(e - b) * 4);
        break;
    case XN_FLOOR: for (int64_t i = b; i < e; i++) o[i] = floorf(x[i]); break;
    case XN_CEILING: for (int64_t i = b; i < e; i++) o[i] = ceilf(x[i]); break;
    case XN_SQRT: for (int64_t i = b; i < e; i++) o[i] = sqrtf(x[i]); break;
    case XN_RSQRT: for (int64_t i = b; i < e; i++) o[i] = 1.0f / sqrtf(x[i]); break;
    case XN_LOG: for (int64_t i = b; i < e; i++) o[i] = logf(x[i]); break;
    case XN_SIN: for (int64_t i = b; i < e; i++) o[i] = sinf(x[i]); break;
    case XN_ABS: for (int64_t i = b; i < e; i++) o[i] = fabsf(x[i]); break;
    case XN_NEGATE: for (int64_t i = b; i < e; i++) o[i] = -x[i]; break;
    case XN_GELU: for (int64_t i = b; i < e; i++) o[i] = gelu(x[i]); break;
    case XN_HARDSWISH:
        for (int64_t i = b; i < e; i++) {
            float t = x[i] + 3.0f;
            t = t < 0 ? 0 : t > 6 ? 6 : t;
            o[i] = x[i] * t * (1.0f / 6.0f);
        }
        break;
    case XN_LEAKY_RELU:
        for (int64_t i = b; i < e; i++) o[i] = x[i] >= 0 ? x[i] : x[i] * s->a;
        break;
    case XN_ELU:
        for (int64_t i = b; i < e; i++) o[i] = x[i] > 0 ? x[i] : s->a * expm1f(x[i]);
        break;
    default:
        break;
    }
    clamp_floats(o + b, e - b, s->lo, s->hi);
}

static inline float binop(int op, float a, float b) {
    switch (op) {
    case XN_ADD: return a + b;
    case XN_SUBTRACT: return a - b;
    case XN_MULTIPLY: return a * b;
    case XN_DIV: return a / b;
    case XN_MINIMUM: return a < b ? a : (b < a ? b : (isnan(a) ? a : b));
    case XN_MAXIMUM: return a > b ? a : (b > a ? b : (isnan(a) ? a : b));
    case XN_PRELU: return a >= 0 ? a : a * b;
    default: return 0;
    }
}

typedef struct bin_args {
    const float *x, *y;
    float *o;
    int op;
    int vop;     /* the etch_opt_binop of op (-1: none), with alpha */
    float alpha;
    float lo, hi;
    uint32_t rank;
    int64_t dims[XNN_MAX_DIMS], sx[XNN_MAX_DIMS], sy[XNN_MAX_DIMS];
} bin_args;

/* rows: every index but the last dim */
static void binary_rows(void *arg, int64_t b, int64_t e) {
    const bin_args *s = (const bin_args *)arg;
    uint32_t r = s->rank;
    int64_t inner = r ? s->dims[r - 1] : 1, ix = r ? s->sx[r - 1] : 0, iy = r ? s->sy[r - 1] : 0;
    for (int64_t row = b; row < e; row++) {
        int64_t rem = row, ox = 0, oy = 0;
        for (int32_t d = (int32_t)r - 2; d >= 0; d--) {
            int64_t c = rem % s->dims[d];
            rem /= s->dims[d];
            ox += c * s->sx[d];
            oy += c * s->sy[d];
        }
        const float *x = s->x + ox, *y = s->y + oy;
        float *o = s->o + row * inner;
        if (s->vop >= 0 && ix <= 1 && iy <= 1) {
            etch_opt_vec_active()->binary(s->vop, o, x, ix == 0, y, iy == 0, s->alpha, inner);
        } else if (ix == 1 && iy == 1) {
            for (int64_t i = 0; i < inner; i++)
                o[i] = binop(s->op, x[i], y[i]);
        } else {
            for (int64_t i = 0; i < inner; i++)
                o[i] = binop(s->op, x[i * ix], y[i * iy]);
        }
        clamp_floats(o, inner, s->lo, s->hi);
    }
}

/* elements [b, e) of same-shaped operands */
static void binary_flat(void *arg, int64_t b, int64_t e) {
    const bin_args *s = (const bin_args *)arg;
    const float *x = s->x, *y = s->y;
    float *o = s->o;
    const float lo = s->lo, hi = s->hi;
    const bool clamp = lo > -INFINITY || hi < INFINITY;
    if (s->vop >= 0)
        etch_opt_vec_active()->binary(s->vop, o + b, x + b, 0, y + b, 0, s->alpha, e - b);
    else
        for (int64_t i = b; i < e; i++)
            o[i] = binop(s->op, x[i], y[i]);
    if (clamp)
        clamp_floats(o + b, e - b, lo, hi);
}

static void run_binary(run *r, xnn_node *n, const float *x, const float *y, float *o) {
    xnn_value *vx = IN(r->g, n, 0), *vy = IN(r->g, n, 1), *vo = OUT(r->g, n, 0);
    bin_args s;
    memset(&s, 0, sizeof s);
    s.x = x, s.y = y, s.o = o, s.op = n->kind, s.lo = n->out_min, s.hi = n->out_max;
    s.alpha = n->kind == XN_SUBTRACT ? -1.0f : 1.0f; /* a - b as a + (-1) b: the same rounding */
    s.vop = n->kind == XN_ADD || n->kind == XN_SUBTRACT ? ETCH_OPT_BIN_ADD
            : n->kind == XN_MULTIPLY ? ETCH_OPT_BIN_MUL
            : n->kind == XN_DIV ? ETCH_OPT_BIN_DIV
            : n->kind == XN_MAXIMUM ? ETCH_OPT_BIN_MAX
            : -1;
    s.rank = vo->rank;
    int64_t stx = 1, sty = 1;
    for (int32_t d = (int32_t)vo->rank - 1; d >= 0; d--) {
        int32_t dx = d - (int32_t)(vo->rank - vx->rank), dy = d - (int32_t)(vo->rank - vy->rank);
        int64_t ex = dx >= 0 ? vx->dims[dx] : 1, ey = dy >= 0 ? vy->dims[dy] : 1;
        s.dims[d] = vo->dims[d];
        s.sx[d] = ex == 1 ? 0 : stx;
        s.sy[d] = ey == 1 ? 0 : sty;
        stx *= ex;
        sty *= ey;
    }
    /* merge each dim into the inner ones where both operands step through them as one
     * (contiguous, or both broadcast), dropping dims of 1: [.., T, D] * [T, D] becomes rows of
     * T * D */
    int64_t nd[XNN_MAX_DIMS], nx[XNN_MAX_DIMS], ny[XNN_MAX_DIMS];
    uint32_t k = 0;
    for (int32_t d = (int32_t)s.rank - 1; d >= 0; d--) {
        if (s.dims[d] == 1)
            continue;
        if (k > 0 && s.sx[d] == nx[k - 1] * nd[k - 1] && s.sy[d] == ny[k - 1] * nd[k - 1]) {
            nd[k - 1] *= s.dims[d];
        } else {
            nd[k] = s.dims[d], nx[k] = s.sx[d], ny[k] = s.sy[d];
            k++;
        }
    }
    if (vo->rank > 0) {
        if (k == 0)
            nd[0] = 1, nx[0] = ny[0] = 0, k = 1;
        s.rank = k;
        for (uint32_t i = 0; i < k; i++)
            s.dims[i] = nd[k - 1 - i], s.sx[i] = nx[k - 1 - i], s.sy[i] = ny[k - 1 - i];
    }
    int64_t inner = vo->rank ? s.dims[s.rank - 1] : 1;
    int64_t rows = inner ? xnn_numel(vo->dims, vo->rank) / inner : 0; /* (0 dims: none) */
    if (xnn_same_dims(vx, vo) && xnn_same_dims(vy, vo) && vo->rank > 0) {
        /* no broadcast: one flat run (any layout: the same elements line up) */
        s.dims[0] = xnn_numel(vo->dims, vo->rank);
        etch_kernel_parallel_for(r->ctx, s.dims[0], 16384, binary_flat, &s);
        return;
    }
    if (vo->rank == 0) {
        o[0] = binop(n->kind, x[0], y[0]);
        return;
    }
    etch_kernel_parallel_for(r->ctx, rows, inner >= 4096 ? 1 : 4096 / (inner ? inner : 1),
                             binary_rows, &s);
}

/* ---- matrix products -------------------------------------------------------------------- */

static etch_epilogue clamp_epi(const xnn_node *n, const xnn_value *o, bool *use) {
    etch_epilogue e = {ETCH_ACT_CLAMP, n->out_min, n->out_max};
    *use = o->dtype == XDT_FP32 && (n->out_min > -INFINITY || n->out_max < INFINITY);
    return e;
}


static void run_fc(run *r, xnn_node *n, const float *x, const float *w, const float *b,
                   float *o) {
    xnn_value *vw = IN(r->g, n, 1), *vo = OUT(r->g, n, 0);
    bool tw = n->flags & XNN_FLAG_TRANSPOSE_WEIGHTS;
    int64_t N = tw ? vw->dims[1] : vw->dims[0], K = tw ? vw->dims[0] : vw->dims[1];
    int64_t M = N ? xnn_numel(vo->dims, vo->rank) / N : 0;
    bool use;
    etch_epilogue epi = clamp_epi(n, vo, &use);
    etch_sgemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M, d.N = N, d.K = K;
    d.a = x, d.a_rs = K, d.a_cs = 1;
    d.b = w;
    d.b_rs = tw ? N : 1;
    d.b_cs = tw ? 1 : K;
    d.c = o, d.ldc = N;
    d.bias = b, d.bias_rs = 0, d.bias_cs = 1;
    d.alpha = 1.0f, d.beta = b ? 1.0f : 0.0f;
    d.epilogue = use ? &epi : NULL;
    d.b_packed = n->wp;
    etch_opt_sgemm(r->ctx, &d);
    if (!use)
        clamp_floats(o, M * N, n->out_min, n->out_max);
}

typedef struct im2col_args {
    const float *x;
    float *col;
    int64_t p0, H, W, C, OH, OW, K, rows;
    const xnn_node *n;
    uint32_t g;
} im2col_args;

static void im2col_rows(void *arg, int64_t b, int64_t e) {
    const im2col_args *s = (const im2col_args *)arg;
    const xnn_node *n = s->n;
    int64_t gic = n->gic;
    for (int64_t p = b; p < e; p++) {
        int64_t q = s->p0 + p, ox = q % s->OW, oy = (q / s->OW) % s->OH, bi = q / (s->OW * s->OH);
        float *dst = s->col + p * s->K;
        for (uint32_t ky = 0; ky < n->kh; ky++) {
            int64_t iy = oy * n->sh + (int64_t)ky * n->dh - n->pad[0];
            for (uint32_t kx = 0; kx < n->kw; kx++, dst += gic) {
                int64_t ix = ox * n->sw + (int64_t)kx * n->dw - n->pad[3];
                const bool pad = iy < 0 || iy >= s->H || ix < 0 || ix >= s->W;
                const float *src =
                    pad ? NULL : s->x + ((bi * s->H + iy) * s->W + ix) * s->C + s->g * gic;
                if (gic <= 8) /* a few channels a tap (first layers): no library call */
                    for (int64_t c = 0; c < gic; c++)
                        dst[c] = pad ? 0.0f : src[c];
                else if (pad)
                    memset(dst, 0, (size_t)gic * 4);
                else
                    memcpy(dst, src, (size_t)gic * 4);
            }
        }
    }
}

/* The same tile column by column, for few channels a group (gic <= IM2COL_T_MAX): col[k][p]
 * (stride `rows`), column k = (tap, channel), each output row's run of pixels one loop without
 * a branch inside the image. */
#define IM2COL_T_MAX 4
static void im2col_cols(void *arg, int64_t k0, int64_t k1) {
    const im2col_args *s = (const im2col_args *)arg;
    const xnn_node *n = s->n;
    const int64_t gic = n->gic, m = s->rows;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t c = k % gic, tap = k / gic, ky = tap / n->kw, kx = tap % n->kw;
        float *dst = s->col + k * m;
        /* ox with ix = ox * sw + kx * dw - left inside [0, W) */
        const int64_t off = kx * (int64_t)n->dw - (int64_t)n->pad[3];
        int64_t lo = off >= 0 ? 0 : (-off + n->sw - 1) / n->sw;
        int64_t hi = s->W - 1 - off < 0 ? 0 : (s->W - 1 - off) / n->sw + 1;
        if (lo > s->OW) lo = s->OW;
        if (hi > s->OW) hi = s->OW;
        if (hi < lo) hi = lo;
        for (int64_t p = 0; p < m;) {
            const int64_t q = s->p0 + p, ox0 = q % s->OW, oy = (q / s->OW) % s->OH,
                          bi = q / (s->OW * s->OH);
            const int64_t len = s->OW - ox0 < m - p ? s->OW - ox0 : m - p;
            const int64_t iy = oy * n->sh + ky * (int64_t)n->dh - (int64_t)n->pad[0];
            float *d = dst + p - ox0; /* d[ox] for ox in [ox0, ox0 + len) */
            if (iy < 0 || iy >= s->H) {
                for (int64_t ox = ox0; ox < ox0 + len; ox++)
                    d[ox] = 0.0f;
            } else {
                const float *src = s->x + (bi * s->H + iy) * s->W * s->C + s->g * gic + c;
                const int64_t a = lo > ox0 ? lo : ox0, z = hi < ox0 + len ? hi : ox0 + len;
                for (int64_t ox = ox0; ox < a && ox < ox0 + len; ox++)
                    d[ox] = 0.0f;
                for (int64_t ox = a; ox < z; ox++)
                    d[ox] = src[(ox * n->sw + off) * s->C];
                for (int64_t ox = z > a ? z : a; ox < ox0 + len; ox++)
                    d[ox] = 0.0f;
            }
            p += len;
        }
    }
}

static void run_conv(run *r, xnn_node *n, const float *x, const float *w, const float *b,
                     float *o) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    int64_t H = vx->dims[1], W = vx->dims[2], C = vx->dims[3];
    int64_t OH = vo->dims[1], OW = vo->dims[2], O = vo->dims[3];
    int64_t P = vo->dims[0] * OH * OW, K = (int64_t)n->kh * n->kw * n->gic;
    bool use;
    etch_epilogue epi = clamp_epi(n, vo, &use);
    bool pointwise = n->kh == 1 && n->kw == 1 && n->sh == 1 && n->sw == 1 && !n->pad[0] &&
                     !n->pad[1] && !n->pad[2] && !n->pad[3];
    int64_t rows = K ? XNN_TILE_FLOATS / K : 1;
    if (rows < 1) rows = 1;
    if (rows > P) rows = P;
    float *col = pointwise ? NULL : scratch_floats(r, rows * K);
    for (uint32_t g = 0; g < n->groups; g++) {
        for (int64_t p0 = 0; p0 < P; p0 += pointwise ? P : rows) {
            int64_t m = pointwise ? P : (P - p0 < rows ? P - p0 : rows);
            etch_sgemm_desc d;
            memset(&d, 0, sizeof d);
            if (pointwise) {
                d.a = x + g * n->gic, d.a_rs = C, d.a_cs = 1;
            } else {
                im2col_args ia = {x, col, p0, H, W, C, OH, OW, K, m, n, g};
                if (n->gic <= IM2COL_T_MAX) {
                    etch_kernel_parallel_for(r->ctx, K, 1, im2col_cols, &ia);
                    d.a = col, d.a_rs = 1, d.a_cs = m;
                } else {
                    etch_kernel_parallel_for(r->ctx, m, 16, im2col_rows, &ia);
                    d.a = col, d.a_rs = K, d.a_cs = 1;
                }
            }
            d.M = m, d.N = n->goc, d.K = K;
            d.b = w + (int64_t)g * n->goc * K, d.b_rs = 1, d.b_cs = K;
            d.c = o + p0 * O + (int64_t)g * n->goc, d.ldc = O;
            d.bias = b ? b + (int64_t)g * n->goc : NULL, d.bias_rs = 0, d.bias_cs = 1;
            d.alpha = 1.0f, d.beta = b ? 1.0f : 0.0f;
            d.epilogue = use ? &epi : NULL;
            d.b_packed = n->wp ? &n->wp[g] : NULL;
            etch_opt_sgemm(r->ctx, &d);
        }
    }
    if (!use)
        clamp_floats(o, P * O, n->out_min, n->out_max);
}

/* A convolution on the channel-blocked kernels (n->blk): x in the layout xnn_layout_wanted
 * gives, o in its value's. */
static void run_conv_blk(run *r, xnn_node *n, const float *x, const float *w, const float *b,
                         float *o) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    conv_shape s;
    xnn_layout_conv_shape(r->g, n, &s);
    s.in = x, s.bias = b, s.out = o, s.w = NULL; /* the prepared weight stands in for it */
    bool use;
    etch_epilogue epi = clamp_epi(n, vo, &use);
    s.epi = use ? &epi : NULL;
    if (n->kind == XN_DEPTHWISE_CONV2D) {
        etch_opt_conv_dw_nchwc_blocked(r->ctx, &s);
    } else if (n->wino) {
        bool act;
        float lo, hi;
        const etch_epilogue *post = etch_nchwc_tile_act(s.epi, &act, &lo, &hi) ? NULL : s.epi;
        const float *u = etch_opt_conv_prep_wino(&s);
        if (u && etch_wino_conv(r->ctx, &s, u, act ? 2 : 0, lo, hi, post))
            return;
        /* scratch too short for the transforms: the NHWC path (scratch sized at load) */
        float *xn = scratch_floats(r, xnn_numel(vx->dims, 4));
        float *on = scratch_floats(r, xnn_numel(vo->dims, 4));
        if (!xn || !on) {
            etch_kernel_fail(r->ctx, ETCH_ERR_MEMORY_ALLOCATION_FAILED, "scratch exhausted");
            return;
        }
        relayout(r->ctx, vx, XL_BLK, x, XL_NHWC, xn);
        run_conv(r, n, xn, w, b, on);
        relayout(r->ctx, vo, XL_NHWC, on, vo->layout, o);
    } else {
        etch_opt_conv_nchwc(r->ctx, &s, xnn_layout_wanted(r->g, n, 0) == XL_BLK,
                            vo->layout == XL_BLK);
    }
}

typedef struct spatial_args {
    const float *x, *w, *b;
    float *o;
    const xnn_node *n;
    int64_t H, W, C, OH, OW, O;
} spatial_args;

static void bias_init(float *acc, const float *b, int64_t n) {
    if (b)
        memcpy(acc, b, (size_t)n * 4);
    else
        memset(acc, 0, (size_t)n * 4);
}

/* depthwise: one output row (batch, oy) per item */
static void dw_rows(void *arg, int64_t b0, int64_t e0) {
    const spatial_args *s = (const spatial_args *)arg;
    const xnn_node *n = s->n;
    int64_t O = s->O, goc = n->goc;
    for (int64_t row = b0; row < e0; row++) {
        int64_t oy = row % s->OH, bi = row / s->OH;
        for (int64_t ox = 0; ox < s->OW; ox++) {
            float *acc = s->o + ((bi * s->OH + oy) * s->OW + ox) * O;
            bias_init(acc, s->b, O);
            for (uint32_t ky = 0; ky < n->kh; ky++) {
                int64_t iy = oy * n->sh + (int64_t)ky * n->dh - n->pad[0];
                if (iy < 0 || iy >= s->H)
                    continue;
                for (uint32_t kx = 0; kx < n->kw; kx++) {
                    int64_t ix = ox * n->sw + (int64_t)kx * n->dw - n->pad[3];
                    if (ix < 0 || ix >= s->W)
                        continue;
                    const float *in = s->x + ((bi * s->H + iy) * s->W + ix) * s->C;
                    const float *wt = s->w + ((int64_t)ky * n->kw + kx) * O;
                    if (goc == 1)
                        for (int64_t c = 0; c < O; c++)
                            acc[c] += in[c] * wt[c];
                    else
                        for (int64_t c = 0; c < O; c++)
                            acc[c] += in[c / goc] * wt[c];
                }
            }
            clamp_floats(acc, O, n->out_min, n->out_max);
        }
    }
}

/* transposed convolution, gathered per output pixel */
static void deconv_rows(void *arg, int64_t b0, int64_t e0) {
    const spatial_args *s = (const spatial_args *)arg;
    const xnn_node *n = s->n;
    int64_t O = s->O, gic = n->gic, goc = n->goc;
    for (int64_t row = b0; row < e0; row++) {
        int64_t oy = row % s->OH, bi = row / s->OH;
        for (int64_t ox = 0; ox < s->OW; ox++) {
            float *acc = s->o + ((bi * s->OH + oy) * s->OW + ox) * O;
            bias_init(acc, s->b, O);
            for (uint32_t ky = 0; ky < n->kh; ky++) {
                int64_t ty = oy + n->pad[0] - (int64_t)ky * n->dh;
                if (ty < 0 || ty % n->sh)
                    continue;
                int64_t iy = ty / n->sh;
                if (iy >= s->H)
                    continue;
                for (uint32_t kx = 0; kx < n->kw; kx++) {
                    int64_t tx = ox + n->pad[3] - (int64_t)kx * n->dw;
                    if (tx < 0 || tx % n->sw)
                        continue;
                    int64_t ix = tx / n->sw;
                    if (ix >= s->W)
                        continue;
                    const float *in = s->x + ((bi * s->H + iy) * s->W + ix) * s->C;
                    for (int64_t oc = 0; oc < O; oc++) {
                        int64_t g = oc / goc;
                        const float *wt = s->w + ((oc * n->kh + ky) * n->kw + kx) * gic;
                        const float *ig = in + g * gic;
                        float sum = 0;
                        for (int64_t c = 0; c < gic; c++)
                            sum += ig[c] * wt[c];
                        acc[oc] += sum;
                    }
                }
            }
            clamp_floats(acc, O, n->out_min, n->out_max);
        }
    }
}

static void pool_rows_c(const spatial_args *s, int64_t b0, int64_t e0, int64_t C) {
    const xnn_node *n = s->n;
    bool maxp = n->kind == XN_MAX_POOL;
    for (int64_t row = b0; row < e0; row++) {
        int64_t oy = row % s->OH, bi = row / s->OH;
        for (int64_t ox = 0; ox < s->OW; ox++) {
            float *acc = s->o + ((bi * s->OH + oy) * s->OW + ox) * C;
            for (int64_t c = 0; c < C; c++)
                acc[c] = maxp ? -INFINITY : 0.0f;
            int64_t count = 0;
            for (uint32_t ky = 0; ky < n->kh; ky++) {
                int64_t iy = oy * n->sh + (int64_t)ky * n->dh - n->pad[0];
                if (iy < 0 || iy >= s->H)
                    continue;
                for (uint32_t kx = 0; kx < n->kw; kx++) {
                    int64_t ix = ox * n->sw + (int64_t)kx * n->dw - n->pad[3];
                    if (ix < 0 || ix >= s->W)
                        continue;
                    const float *in = s->x + ((bi * s->H + iy) * s->W + ix) * C;
                    count++;
                    if (maxp)
                        for (int64_t c = 0; c < C; c++)
                            acc[c] = in[c] > acc[c] || isnan(in[c]) ? in[c] : acc[c];
                    else
                        for (int64_t c = 0; c < C; c++)
                            acc[c] += in[c];
                }
            }
            if (!maxp) {
                float inv = count ? 1.0f / (float)count : 0.0f;
                for (int64_t c = 0; c < C; c++)
                    acc[c] *= inv;
            }
            clamp_floats(acc, C, n->out_min, n->out_max);
        }
    }
}

static void pool_rows(void *arg, int64_t b0, int64_t e0) {
    pool_rows_c((const spatial_args *)arg, b0, e0, ((const spatial_args *)arg)->C);
}

static void resize_rows(void *arg, int64_t b0, int64_t e0) {
    const spatial_args *s = (const spatial_args *)arg;
    const xnn_node *n = s->n;
    int64_t C = s->C;
    bool ac = n->flags & XNN_FLAG_ALIGN_CORNERS, legacy = n->flags & XNN_FLAG_TENSORFLOW_LEGACY_MODE;
    float sy = ac ? (s->OH > 1 ? (float)(s->H - 1) / (float)(s->OH - 1) : 0.0f)
                  : (float)s->H / (float)s->OH;
    float sx = ac ? (s->OW > 1 ? (float)(s->W - 1) / (float)(s->OW - 1) : 0.0f)
                  : (float)s->W / (float)s->OW;
    for (int64_t row = b0; row < e0; row++) {
        int64_t oy = row % s->OH, bi = row / s->OH;
        float fy = ac || legacy ? (float)oy * sy : ((float)oy + 0.5f) * sy - 0.5f;
        if (fy < 0) fy = 0;
        int64_t y0 = (int64_t)fy;
        if (y0 > s->H - 1) y0 = s->H - 1;
        int64_t y1 = y0 + 1 < s->H ? y0 + 1 : s->H - 1;
        float ly = fy - (float)y0;
        for (int64_t ox = 0; ox < s->OW; ox++) {
            float fx = ac || legacy ? (float)ox * sx : ((float)ox + 0.5f) * sx - 0.5f;
            if (fx < 0) fx = 0;
            int64_t x0 = (int64_t)fx;
            if (x0 > s->W - 1) x0 = s->W - 1;
            int64_t x1 = x0 + 1 < s->W ? x0 + 1 : s->W - 1;
            float lx = fx - (float)x0;
            const float *p00 = s->x + ((bi * s->H + y0) * s->W + x0) * C,
                        *p01 = s->x + ((bi * s->H + y0) * s->W + x1) * C,
                        *p10 = s->x + ((bi * s->H + y1) * s->W + x0) * C,
                        *p11 = s->x + ((bi * s->H + y1) * s->W + x1) * C;
            float *dst = s->o + ((bi * s->OH + oy) * s->OW + ox) * C;
            for (int64_t c = 0; c < C; c++) {
                float top = p00[c] + (p01[c] - p00[c]) * lx;
                float bot = p10[c] + (p11[c] - p10[c]) * lx;
                dst[c] = top + (bot - top) * ly;
            }
        }
    }
}

static void run_spatial(run *r, xnn_node *n, const float *x, const float *w, const float *b,
                        float *o, etch_parallel_fn fn) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    spatial_args s = {x, w, b, o, n, vx->dims[1], vx->dims[2], vx->dims[3],
                      vo->dims[1], vo->dims[2], vo->dims[3]};
    etch_kernel_parallel_for(r->ctx, vo->dims[0] * vo->dims[1], 1, fn, &s);
}

/* A pooling over a channel-blocked x into a channel-blocked o: the planes [N][C/8] are the
 * images of an NHWC tensor [N * C/8, H, W, 8]. */
static void run_spatial_blk(run *r, xnn_node *n, const float *x, float *o, etch_parallel_fn fn) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    spatial_args s = {x, NULL, NULL, o, n, vx->dims[1], vx->dims[2], 8,
                      vo->dims[1], vo->dims[2], 8};
    etch_kernel_parallel_for(r->ctx, vo->dims[0] * (vo->dims[3] / 8) * vo->dims[1], 1, fn, &s);
}

/* Max pooling of blocked planes with the optimized kernels' rows (their indices go to
 * scratch); false when scratch is short (sized at load: cannot happen within the bounds). */
static bool run_maxpool_blk(run *r, xnn_node *n, const float *x, float *o) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    const int64_t rows = vo->dims[0] * (vo->dims[3] / 8) * vo->dims[1];
    int64_t *idx = (int64_t *)(void *)scratch_floats(r, rows * vo->dims[2] * 8 * 2);
    if (!idx)
        return false;
    const nchwc_maxpool_job job = {.H = vx->dims[1], .W = vx->dims[2], .OH = vo->dims[1],
                                   .OW = vo->dims[2], .kh = n->kh, .kw = n->kw, .sh = n->sh,
                                   .sw = n->sw, .ph = n->pad[0], .pw = n->pad[3],
                                   .dh = n->dh, .dw = n->dw, .in = x, .out = o, .idx = idx};
    etch_opt_nchwc_maxpool(r->ctx, &job, rows);
    clamp_floats(o, xnn_numel(vo->dims, 4), n->out_min, n->out_max);
    return true;
}

static void run_global_pool(run *r, xnn_node *n, const float *x, float *o) {
    xnn_value *vx = IN(r->g, n, 0);
    uint32_t k = vx->rank;
    int64_t C = vx->dims[k - 1], HW = vx->dims[k - 2] * vx->dims[k - 3];
    int64_t N = xnn_numel(vx->dims, k - 3);
    if (xnn_layout_wanted(r->g, n, 0) == XL_BLK) { /* [N][C/8][HW][8] */
        for (int64_t b = 0; b < N; b++) {
            float *dst = o + b * C;
            for (int64_t cb = 0; cb < C / 8; cb++) {
                float acc[8] = {0};
                const float *src = x + (b * C + cb * 8) * HW;
                for (int64_t p = 0; p < HW; p++)
                    for (int l = 0; l < 8; l++)
                        acc[l] += src[p * 8 + l];
                for (int l = 0; l < 8; l++)
                    dst[cb * 8 + l] = acc[l];
            }
            float inv = HW ? 1.0f / (float)HW : 0.0f;
            for (int64_t c = 0; c < C; c++)
                dst[c] *= inv;
            clamp_floats(dst, C, n->out_min, n->out_max);
        }
        return;
    }
    if (C == 1) { /* rows of HW values (a mean over the last dim): vector row sums */
        const etch_opt_vec *v = etch_opt_vec_active();
        float inv = HW ? 1.0f / (float)HW : 0.0f;
        for (int64_t b = 0; b < N; b++)
            o[b] = HW ? v->sum(x + b * HW, HW) * inv : 0.0f;
        clamp_floats(o, N, n->out_min, n->out_max);
        return;
    }
    for (int64_t b = 0; b < N; b++) {
        float *dst = o + b * C;
        memset(dst, 0, (size_t)C * 4);
        for (int64_t p = 0; p < HW; p++) {
            const float *src = x + (b * HW + p) * C;
            for (int64_t c = 0; c < C; c++)
                dst[c] += src[c];
        }
        float inv = HW ? 1.0f / (float)HW : 0.0f;
        for (int64_t c = 0; c < C; c++)
            dst[c] *= inv;
        clamp_floats(dst, C, n->out_min, n->out_max);
    }
}

static void softmax_rows(void *arg, int64_t b, int64_t e) {
    const span_args *s = (const span_args *)arg;
    const etch_opt_vec *v = etch_opt_vec_active(); /* the optimized kernels' row functions */
    int64_t C = (int64_t)s->a;
    for (int64_t row = b; row < e; row++) {
        const float *x = s->x + row * C;
        float *o = s->o + row * C;
        float inv = 1.0f / v->exp_sum(o, x, v->max(x, C), C);
        v->binary(ETCH_OPT_BIN_MUL, o, o, 0, &inv, 1, 1.0f, C);
        clamp_floats(o, C, s->lo, s->hi);
    }
}

/* Copy with an arbitrary index map: out[i0..] = in[map(i0..)], via strides. */
static void contiguous_strides(const int64_t *dims, uint32_t rank, int64_t *st) {
    int64_t s = 1;
    for (int32_t d = (int32_t)rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
}

typedef struct bmm_args {
    xnn_graph *g;
    const xnn_node *n;
    const float *x, *y;
    float *o;
    etch_kernel_context *ctx; /* NULL: each product on its thread's direct path */
} bmm_args;

/* products [b0, b1) of a batch matrix multiply */
static void bmm_range(void *arg, int64_t b0, int64_t b1) {
    const bmm_args *s = (const bmm_args *)arg;
    const xnn_node *n = s->n;
    xnn_value *vx = IN(s->g, n, 0), *vy = IN(s->g, n, 1), *vo = OUT(s->g, n, 0);
    const bool tb = n->flags & XNN_FLAG_TRANSPOSE_B;
    const uint32_t R = vo->rank;
    const int64_t M = vo->dims[R - 2], N = vo->dims[R - 1], K = vx->dims[vx->rank - 1];
    const float *x = s->x, *y = s->y;
    float *o = s->o;
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t rem = bi, ox = 0, oy = 0, sx = 1, sy = 1;
        for (int32_t d = (int32_t)R - 3; d >= 0; d--) {
            int64_t c = rem % vo->dims[d];
            rem /= vo->dims[d];
            int32_t dx = d - (int32_t)(R - vx->rank), dy = d - (int32_t)(R - vy->rank);
            int64_t ex = dx >= 0 ? vx->dims[dx] : 1, ey = dy >= 0 ? vy->dims[dy] : 1;
            if (ex != 1) ox += c * sx;
            if (ey != 1) oy += c * sy;
            sx *= ex;
            sy *= ey;
        }
        etch_sgemm_desc d;
        memset(&d, 0, sizeof d);
        d.M = M, d.N = N, d.K = K;
        d.a = x + ox * M * K, d.a_rs = K, d.a_cs = 1;
        d.b = y + oy * K * N;
        d.b_rs = tb ? 1 : N;
        d.b_cs = tb ? K : 1;
        d.c = o + bi * M * N, d.ldc = N;
        d.alpha = 1.0f;
        etch_opt_sgemm(s->ctx, &d);
    }
}

static void run_bmm(run *r, xnn_node *n, const float *x, const float *y, float *o) {
    xnn_value *vx = IN(r->g, n, 0), *vo = OUT(r->g, n, 0);
    const uint32_t R = vo->rank;
    const int64_t M = vo->dims[R - 2], N = vo->dims[R - 1], K = vx->dims[vx->rank - 1];
    const int64_t batches = xnn_numel(vo->dims, R - 2);
    const double per = (double)M * (double)N * (double)(K > 0 ? K : 1);
    bmm_args s = {r->g, n, x, y, o, NULL};
    if (batches > 1 && per < 4e6) {
        /* many small products (attention, a head each): one parallel loop over them, each
         * on one thread's direct path, as the CPU path's bmm; the same for any thread count */
        const int64_t grain = per >= 65536 ? 1 : (int64_t)(65536 / per) + 1;
        etch_kernel_parallel_for(r->ctx, batches, grain, bmm_range, &s);
    } else {
        s.ctx = r->ctx;
        bmm_range(&s, 0, batches);
    }
    clamp_floats(o, batches * M * N, n->out_min, n->out_max);
}

static void run_sdpa(run *r, xnn_node *n, const float *q, const float *k, const float *v,
                     const float *scale, const float *mask, float *o) {
    xnn_value *vq = IN(r->g, n, 0), *vk = IN(r->g, n, 1), *vv = IN(r->g, n, 2);
    uint32_t R = vq->rank;
    int64_t T = vq->dims[R - 2], D = vq->dims[R - 1], S = vk->dims[R - 2], DV = vv->dims[R - 1];
    int64_t B = xnn_numel(vq->dims, R - 2);
    float *qs = scratch_floats(r, T * D), *p = scratch_floats(r, T * S);
    if (!qs || !p)
        return;
    for (int64_t b = 0; b < B; b++) {
        const float *qb = q + b * T * D, *kb = k + b * S * D, *vb = v + b * S * DV;
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                qs[t * D + d] = qb[t * D + d] * scale[d];
        etch_sgemm_desc d;
        memset(&d, 0, sizeof d);
        d.M = T, d.N = S, d.K = D;
        d.a = qs, d.a_rs = D, d.a_cs = 1;
        d.b = kb, d.b_rs = 1, d.b_cs = D;
        d.c = p, d.ldc = S;
        d.bias = mask, d.bias_rs = S, d.bias_cs = 1;
        d.alpha = 1.0f, d.beta = 1.0f;
        etch_opt_sgemm(r->ctx, &d);
        span_args sa = {p, NULL, p, XN_SOFTMAX, (float)S, -INFINITY, INFINITY};
        softmax_rows(&sa, 0, T);
        memset(&d, 0, sizeof d);
        d.M = T, d.N = DV, d.K = S;
        d.a = p, d.a_rs = S, d.a_cs = 1;
        d.b = vb, d.b_rs = DV, d.b_cs = 1;
        d.c = o + b * T * DV, d.ldc = DV;
        d.alpha = 1.0f;
        etch_opt_sgemm(r->ctx, &d);
    }
    clamp_floats(o, B * T * DV, n->out_min, n->out_max);
}

/* A node with an integer plan (xnn_quant.c). */
static etch_status run_qnode(run *r, xnn_node *n) {
    const unsigned io = xnn_quant_io(n);
    xnn_value *vo = OUT(r->g, n, 0);
    const float *xf = io & XQ_IO_FLOAT_IN ? fin(r, n, 0) : NULL;
    const float *b = io & XQ_IO_FLOAT_BIAS ? fin(r, n, 2) : NULL;
    float *yf = io & XQ_IO_FLOAT_OUT ? fout(r, n, 0) : NULL;
    if (((io & XQ_IO_FLOAT_IN) && !xf) || ((io & XQ_IO_FLOAT_OUT) && !yf) ||
        ((io & XQ_IO_FLOAT_BIAS) && n->in[2] != XNN_INVALID_ID && !b))
        return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
    etch_status st = xnn_quant_run(r->g, n, r->ctx, xf, b, yf, r->sp);
    if (st == ETCH_OK && etch_kernel_failed(r->ctx))
        st = ETCH_ERR_INTERNAL;
    if (st == ETCH_OK && yf) {
        clamp_floats(yf, xnn_numel(vo->dims, vo->rank), n->out_min, n->out_max);
        if (vo->dtype != XDT_FP32)
            from_float(vo, yf, vo->data);
    }
    return st;
}

static etch_status run_node(run *r, xnn_node *n) {
    xnn_graph *g = r->g;
    if (n->qn)
        return run_qnode(r, n);
    xnn_value *vx = IN(g, n, 0), *vo = OUT(g, n, 0);
    const float *x = fin(r, n, 0);
    float *o = fout(r, n, 0);
    int64_t on = xnn_numel(vo->dims, vo->rank);
    if (!o || !x)
        return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
    switch (n->kind) {
    case XN_ADD: case XN_SUBTRACT: case XN_MULTIPLY: case XN_DIV: case XN_MINIMUM:
    case XN_MAXIMUM: case XN_PRELU: {
        const float *y = fin(r, n, 1);
        if (!y)
            return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
        run_binary(r, n, x, y, o);
        break;
    }
    case XN_FULLY_CONNECTED: case XN_CONV2D: case XN_DEPTHWISE_CONV2D:
    case XN_CONV_TRANSPOSE2D: {
        const float *w = fin(r, n, 1), *b = fin(r, n, 2);
        if (!w || (n->in[2] != XNN_INVALID_ID && !b))
            return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
        if (n->kind == XN_FULLY_CONNECTED)
            run_fc(r, n, x, w, b, o);
        else if (n->blk)
            run_conv_blk(r, n, x, w, b, o);
        else if (n->kind == XN_CONV2D)
            run_conv(r, n, x, w, b, o);
        else
            run_spatial(r, n, x, w, b, o,
                        n->kind == XN_DEPTHWISE_CONV2D ? dw_rows : deconv_rows);
        break;
    }
    case XN_AVG_POOL: case XN_MAX_POOL:
        if (maxpool_rows_fit(n, vo)) {
            if (!run_maxpool_blk(r, n, x, o))
                return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted",
                                NKN(n));
        } else if (vo->layout == XL_BLK)
            run_spatial_blk(r, n, x, o, pool_rows);
        else
            run_spatial(r, n, x, NULL, NULL, o, pool_rows);
        break;
    case XN_RESIZE_BILINEAR:
        run_spatial(r, n, x, NULL, NULL, o, resize_rows);
        break;
    case XN_GLOBAL_AVG_POOL:
        run_global_pool(r, n, x, o);
        break;
    case XN_SOFTMAX: {
        int64_t C = vx->rank ? vx->dims[vx->rank - 1] : 1;
        span_args s = {x, NULL, o, n->kind, (float)C, n->out_min, n->out_max};
        if (C > 0)
            etch_kernel_parallel_for(r->ctx, on / C, 8, softmax_rows, &s);
        break;
    }
    case XN_STATIC_TRANSPOSE: {
        if (vo->layout == XL_NCHW) { /* NCHW -> NHWC kept NCHW: the data as it is */
            memcpy(o, x, (size_t)on * 4);
            break;
        }
        int wx = xnn_layout_wanted(g, n, 0);
        if (wx != XL_NHWC && vx->rank == 4) { /* blocked / NCHW -> NCHW (perm 0, 3, 1, 2) */
            relayout(r->ctx, vx, wx, x, XL_NCHW, o);
            clamp_floats(o, on, n->out_min, n->out_max);
            break;
        }
        int64_t ist[XNN_MAX_DIMS] = {0}, st[XNN_MAX_DIMS] = {0};
        contiguous_strides(vx->dims, vx->rank, ist);
        for (uint32_t d = 0; d < vo->rank; d++)
            st[d] = ist[n->perm[d]];
        etch_opt_gather(r->ctx, o, x, 4, (int)vo->rank, vo->dims, st);
        clamp_floats(o, on, n->out_min, n->out_max);
        break;
    }
    case XN_STATIC_SLICE: {
        int64_t st[XNN_MAX_DIMS] = {0}, base = 0;
        contiguous_strides(vx->dims, vx->rank, st);
        for (uint32_t d = 0; d < vx->rank; d++)
            base += n->offsets[d] * st[d];
        etch_opt_gather(r->ctx, o, x + base, 4, (int)vo->rank, vo->dims, st);
        clamp_floats(o, on, n->out_min, n->out_max);
        break;
    }
    case XN_CONSTANT_PAD: {
        for (int64_t i = 0; i < on; i++)
            o[i] = n->alpha;
        int64_t ost[XNN_MAX_DIMS] = {0}, base = 0;
        contiguous_strides(vo->dims, vo->rank, ost);
        for (uint32_t d = 0; d < vo->rank; d++)
            base += (int64_t)n->pre[d] * ost[d];
        /* scatter the input rows into the padded output */
        int64_t inner = vx->rank ? vx->dims[vx->rank - 1] : 1;
        int64_t rows = inner ? xnn_numel(vx->dims, vx->rank) / inner : 0;
        for (int64_t row = 0; row < rows; row++) {
            int64_t rem = row, off = base;
            for (int32_t d = (int32_t)vx->rank - 2; d >= 0; d--) {
                off += (rem % vx->dims[d]) * ost[d];
                rem /= vx->dims[d];
            }
            memcpy(o + off, x + row * inner, (size_t)inner * 4);
        }
        clamp_floats(o, on, n->out_min, n->out_max);
        break;
    }
    case XN_CONCAT2: case XN_CONCAT3: case XN_CONCAT4: case XN_CONCAT5: {
        int64_t outer = xnn_numel(vo->dims, n->axis);
        int64_t inner = xnn_numel(vo->dims + n->axis + 1, vo->rank - n->axis - 1);
        if (vo->layout == XL_BLK) /* over channels, blocked: [N][C/8][H][W][8] */
            outer = vo->dims[0], inner = vo->dims[1] * vo->dims[2];
        int64_t orow = vo->dims[n->axis] * inner, at = 0;
        for (uint32_t k = 0; k < n->nin; k++) {
            xnn_value *vk = IN(g, n, k);
            const float *xk = k == 0 ? x : fin(r, n, k);
            if (!xk)
                return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted",
                                NKN(n));
            int64_t chunk = vk->dims[n->axis] * inner;
            etch_opt_copy_blocks(r->ctx, (char *)(o + at), orow * 4, (const char *)xk, chunk * 4,
                                 chunk * 4, outer);
            at += chunk;
        }
        clamp_floats(o, on, n->out_min, n->out_max);
        break;
    }
    case XN_BMM: {
        const float *y = fin(r, n, 1);
        if (!y)
            return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
        run_bmm(r, n, x, y, o);
        break;
    }
    case XN_SDPA: {
        const float *k = fin(r, n, 1), *v = fin(r, n, 2), *s = fin(r, n, 3), *m = fin(r, n, 4);
        if (!k || !v || !s || !m)
            return NODE_ERR(ETCH_ERR_MEMORY_ALLOCATION_FAILED, n, "scratch exhausted", NKN(n));
        run_sdpa(r, n, x, k, v, s, m, o);
        break;
    }
    default: {
        span_args s = {x, NULL, o, n->kind, n->alpha, n->out_min, n->out_max};
        etch_kernel_parallel_for(r->ctx, on, 16384, unary_span, &s);
        break;
    }
    }
    if (etch_kernel_failed(r->ctx))
        return ETCH_ERR_INTERNAL;
    if (vo->dtype != XDT_FP32)
        from_float(vo, o, vo->data);
    return ETCH_OK;
}

etch_status xnn_ops_reshape(xnn_graph *g) {
    etch_status st;
    for (uint32_t i = 0; i < g->nnodes; i++)
        if ((st = reshape_node(g, &g->nodes[i], false)))
            return st;
    return ETCH_OK;
}

etch_status xnn_ops_execute(xnn_graph *g, etch_kernel_context *ctx) {
    etch_status st;
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if (n->in_block)
            continue; /* its block runs at the block's last node */
        const size_t mark = ctx->temp_used; /* the kernels' scratch, given back per node */
        st = ETCH_OK;
        bool done = false;
        if (n->block_len) {
            etch_conv_block b;
            xnn_layout_block(g, n, &b);
            done = etch_opt_conv_block_run(ctx, &b);
            ctx->temp_used = mark;
            if (done && etch_kernel_failed(ctx))
                return ETCH_ERR_INTERNAL;
        }
        /* the node, or a block whose scratch was short, one node at a time */
        for (uint32_t k = n->block_len ? n->block_first : i; !done && k <= i && !st; k++) {
            run r = {g, ctx, g->scratch, g->scratch_size};
            st = run_node(&r, &g->nodes[k]);
            ctx->temp_used = mark;
        }
        if (st)
            return st;
    }
    return ETCH_OK;
}
