/*
 * Pooling over float32 contiguous [N, C, H, W] or [C, H, W] inputs, one thread-pool chunk per
 * range of channel planes:
 *   aten::max_pool2d_with_indices.out   (AVX2 / NEON rows for the interior columns at
 *                                        dilation 1)
 *   aten::avg_pool2d.out                (count_include_pad and divisor_override as torch)
 *   aten::_adaptive_avg_pool2d.out      (including the global average pool, output 1x1)
 * The results equal the portable kernels' bit for bit: the same choice of maximum (the first
 * one, or the last NaN) and the same double-precision sums in the same order. Other dtypes,
 * dim orders and argument errors go to the portable kernels.
 *
 * Channel-blocked (NCHW8c) tensors (etch/kernel.h; layout functions at the end): max pooling
 * with self, out and indices blocked, and the 1x1 adaptive average pool of a blocked self
 * (its output stays NCHW), through the row functions of nchwc.h; same values and indices as
 * the portable kernels, bit for bit. A blocked call whose arguments no longer fit fails (no
 * fallback can read a blocked tensor).
 */
#include <math.h>
#include <string.h>

#include "kernels/optimized/nchwc.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"

#define LIMIT ETCH_OPT_SIZE_LIMIT

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* A contiguous tensor of `dtype` with data for its elements; NULL otherwise. */
static etch_tensor *dense_tensor(etch_value *v, int dtype) {
    return etch_opt_fast_tensor(v, dtype, true);
}

/* 1 or 2 ints (0 allowed when allow_empty: *empty is set) in [min, LIMIT] into v[2]. */
static bool pair(etch_value *val, bool allow_empty, int64_t min, int64_t *v, bool *empty) {
    if (!val || val->tag != ETCH_VALUE_INT_LIST ||
        (val->u.list.len && (!val->u.list.items || !val->u.list.scratch)))
        return false;
    size_t len = 0;
    const int64_t *l = etch_value_int_list(val, &len);
    if (!l && len)
        return false;
    if (empty)
        *empty = len == 0;
    if ((len == 0 && !allow_empty) || len > 2)
        return false;
    for (size_t i = 0; len && i < 2; i++) {
        v[i] = l[len == 1 ? 0 : i];
        if (v[i] < min || v[i] > LIMIT)
            return false;
    }
    return true;
}

static bool overlaps(const etch_tensor *a, const etch_tensor *b) {
    if (!a || !b || !a->data || !b->data)
        return false;
    const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
    return a0 < b0 + etch_tensor_nbytes(b) && b0 < a0 + etch_tensor_nbytes(a);
}

/* Input [N?, C, H, W] with non-empty C, H, W: the plane count and sizes. */
static bool planes_of(const etch_tensor *in, int64_t *planes, int64_t *H, int64_t *W) {
    if (in->dim != 3 && in->dim != 4)
        return false;
    int64_t N = in->dim == 4 ? in->sizes[0] : 1, C = in->sizes[in->dim - 3];
    *H = in->sizes[in->dim - 2];
    *W = in->sizes[in->dim - 1];
    *planes = N * C;
    return C > 0 && *H > 0 && *W > 0 && N > 0;
}

static bool resize_like_in(etch_kernel_context *ctx, const etch_tensor *in, etch_tensor *t,
                           int64_t OH, int64_t OW) {
    int64_t osz[4];
    size_t od = 0;
    if (in->dim == 4)
        osz[od++] = in->sizes[0];
    osz[od++] = in->sizes[in->dim - 3];
    osz[od++] = OH;
    osz[od++] = OW;
    return etch_kernel_resize(ctx, t, od, osz) == ETCH_OK;
}

static int64_t pool_grain(double per) { return per >= 65536 ? 1 : (int64_t)(65536 / per); }

/* ---- max_pool2d_with_indices -------------------------------------------------------------- */

typedef struct maxpool_job {
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    const float *in;
    float *out;
    int64_t *idx;
    bool simd;
} maxpool_job;

static void maxpool_planes(void *arg, int64_t p0, int64_t p1) {
    const maxpool_job *j = (const maxpool_job *)arg;
    /* columns whose window lies inside the row (for the SIMD rows, dilation 1) */
    int64_t lo = ceil_div(j->pw, j->sw), hi = floor_div(j->W - j->kw + j->pw, j->sw) + 1;
    if (lo > j->OW)
        lo = j->OW;
    if (hi > j->OW)
        hi = j->OW;
    if (hi < lo)
        hi = lo;
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = j->in + p * j->H * j->W;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t h0 = oh * j->sh - j->ph, h1 = h0 + (j->kh - 1) * j->dh + 1;
            if (h1 > j->H)
                h1 = j->H;
            if (h0 < 0)
                h0 += ceil_div(-h0, j->dh) * j->dh;
            float *out = j->out + (p * j->OH + oh) * j->OW;
            int64_t *idx = j->idx + (p * j->OH + oh) * j->OW;
            int64_t skip_lo = j->OW, skip_hi = j->OW; /* columns done by SIMD */
#if ETCH_OPT_X86 || ETCH_OPT_NEON
            if (j->simd && hi > lo) {
                etch_maxpool_row r = {plane, j->W, h0, h1, j->kw, j->sw, j->pw, out, idx};
                skip_lo = lo;
#if ETCH_OPT_X86
                skip_hi = etch_opt_maxpool_cols_avx2(&r, lo, hi);
#else
                skip_hi = etch_opt_maxpool_cols_neon(&r, lo, hi);
#endif
            }
#endif
            for (int64_t ow = 0; ow < j->OW; ow++) {
                if (ow == skip_lo && skip_hi > skip_lo) {
                    ow = skip_hi - 1;
                    continue;
                }
                int64_t w0 = ow * j->sw - j->pw, w1 = w0 + (j->kw - 1) * j->dw + 1;
                if (w1 > j->W)
                    w1 = j->W;
                if (w0 < 0)
                    w0 += ceil_div(-w0, j->dw) * j->dw;
                int64_t best = h0 * j->W + w0;
                float bf = -INFINITY;
                for (int64_t ih = h0; ih < h1; ih += j->dh) {
                    const float *row = plane + ih * j->W;
                    for (int64_t iw = w0; iw < w1; iw += j->dw) {
                        /* branch-free: random data makes this choice unpredictable */
                        const float v = row[iw];
                        const bool take = (v > bf) | (v != v);
                        bf = take ? v : bf;
                        best = take ? ih * j->W + iw : best;
                    }
                }
                out[ow] = bf;
                idx[ow] = best;
            }
        }
    }
}

static int64_t pool_out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d,
                             bool ceil_mode) {
    int64_t o = floor_div(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) /* the last window must start inside */
        o--;
    return o;
}

/* ---- channel-blocked max pooling ---------------------------------------------------------- */

/* A tensor of `dtype` with 4 dims, each in [1, LIMIT] (data not looked at: layout time). */
static const etch_tensor *shape4(const etch_value *v, int dtype) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return NULL;
    const etch_tensor *t = v->u.tensor;
    if (t->dtype != dtype || t->dim != 4 || !etch_tensor_is_contiguous(t))
        return NULL;
    for (unsigned i = 0; i < 4; i++)
        if (t->sizes[i] < 1 || t->sizes[i] > LIMIT)
            return NULL;
    return t;
}

typedef struct maxpool_win {
    int64_t k[2], s[2], p[2], d[2], OH, OW;
} maxpool_win;

/* The window arguments args[1..5] of a max pooling over H x W planes, as the blocked kernel
 * takes them (those of the NCHW fast path, plus 32-bit plane indices to spare). */
static bool maxpool_window(etch_value **args, int64_t H, int64_t W, maxpool_win *m) {
    bool empty = false;
    for (int i = 0; i < 2; i++) {
        m->k[i] = m->s[i] = m->d[i] = 1;
        m->p[i] = 0;
    }
    if (!args[5] || args[5]->tag != ETCH_VALUE_BOOL || !pair(args[1], false, 1, m->k, NULL) ||
        !pair(args[2], true, 1, m->s, &empty))
        return false;
    if (empty) {
        m->s[0] = m->k[0];
        m->s[1] = m->k[1];
    }
    if (!pair(args[3], false, 0, m->p, NULL) || !pair(args[4], false, 1, m->d, NULL) ||
        m->p[0] > m->k[0] / 2 || m->p[1] > m->k[1] / 2)
        return false;
    const bool ceil_mode = args[5]->u.b;
    m->OH = pool_out_size(H, m->k[0], m->p[0], m->s[0], m->d[0], ceil_mode);
    m->OW = pool_out_size(W, m->k[1], m->p[1], m->s[1], m->d[1], ceil_mode);
    /* indices (and the first window position) as int32 lanes */
    const double span = ((double)H + (double)m->k[0] * (double)m->d[0]) *
                        ((double)W + (double)m->k[1] * (double)m->d[1]);
    return m->OH >= 1 && m->OW >= 1 && span < 2147483647.0;
}

void etch_opt_max_pool2d_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = 0;
    *tied = 0;
    if (nargs != 9)
        return;
    const etch_tensor *in = shape4(args[0], ETCH_DTYPE_FLOAT);
    const etch_tensor *out = shape4(args[6], ETCH_DTYPE_FLOAT);
    const etch_tensor *ix = shape4(args[7], ETCH_DTYPE_LONG);
    maxpool_win m;
    if (!in || !out || !ix || args[6] == args[0] || args[7] == args[0] || args[7] == args[6] ||
        in->sizes[1] % ETCH_BLOCK_C != 0 ||
        !maxpool_window(args, in->sizes[2], in->sizes[3], &m))
        return;
    const int64_t osz[4] = {in->sizes[0], in->sizes[1], m.OH, m.OW};
    for (unsigned i = 0; i < 4; i++)
        if (out->sizes[i] != osz[i] || ix->sizes[i] != osz[i])
            return;
    const uint64_t bits = (1u << 0) | (1u << 6) | (1u << 7);
    *tied = bits;
    *may = bits;
    if (args[8] && args[8]->tag == ETCH_VALUE_TENSOR_LIST)
        *may |= 1u << 8;
}

typedef struct maxpool_call {
    const nchwc_rows *rows;
    const nchwc_maxpool_job *job;
} maxpool_call;

static void maxpool_blocked_rows(void *arg, int64_t r0, int64_t r1) {
    const maxpool_call *c = (const maxpool_call *)arg;
    c->rows->maxpool(c->job, r0, r1);
}

void etch_opt_nchwc_maxpool(etch_kernel_context *ctx, const nchwc_maxpool_job *j, int64_t rows) {
    maxpool_call c = {etch_opt_nchwc_rows(), j};
    etch_kernel_parallel_for(ctx, rows,
                             pool_grain((double)j->OW * (double)j->kh * (double)j->kw * 8.0),
                             maxpool_blocked_rows, &c);
}

static void max_pool_blocked(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                             uint64_t blocked) {
    const uint64_t bits = (1u << 0) | (1u << 6) | (1u << 7);
    etch_tensor *in = nargs >= 8 ? dense_tensor(args[0], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *out = in ? etch_opt_fast_tensor(args[6], ETCH_DTYPE_FLOAT, true) : NULL;
    etch_tensor *idx = out ? etch_opt_fast_tensor(args[7], ETCH_DTYPE_LONG, true) : NULL;
    maxpool_win m;
    bool ok = idx && (blocked & bits) == bits && in->dim == 4 &&
              in->sizes[1] % ETCH_BLOCK_C == 0 && in->sizes[0] > 0 && in->sizes[1] > 0 &&
              in->sizes[2] > 0 && in->sizes[3] > 0 &&
              maxpool_window(args, in->sizes[2], in->sizes[3], &m);
    if (ok) {
        const int64_t osz[4] = {in->sizes[0], in->sizes[1], m.OH, m.OW};
        if (etch_kernel_resize(ctx, out, 4, osz) != ETCH_OK ||
            etch_kernel_resize(ctx, idx, 4, osz) != ETCH_OK)
            return;
        ok = out->data && idx->data && !overlaps(out, in) && !overlaps(idx, in) &&
             !overlaps(idx, out);
    }
    if (!ok) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked max pooling: arguments changed since load (a 4-D float "
                         "self with channels a multiple of %d, blocked out and indices, the "
                         "window of the load-time check, outputs apart from the input)",
                         ETCH_BLOCK_C);
        return;
    }
    const nchwc_maxpool_job job = {.H = in->sizes[2], .W = in->sizes[3], .OH = m.OH,
                                   .OW = m.OW, .kh = m.k[0], .kw = m.k[1], .sh = m.s[0],
                                   .sw = m.s[1], .ph = m.p[0], .pw = m.p[1], .dh = m.d[0],
                                   .dw = m.d[1], .in = (const float *)in->data,
                                   .out = (float *)out->data, .idx = (int64_t *)idx->data};
    etch_opt_nchwc_maxpool(ctx, &job, in->sizes[0] * (in->sizes[1] / ETCH_BLOCK_C) * m.OH);
}

ETCH_OPT_KERNEL(max_pool2d_with_indices_out) {
    const uint64_t blocked = etch_kernel_blocked_args(ctx);
    if (blocked) {
        max_pool_blocked(ctx, args, nargs, blocked);
        return;
    }
    etch_tensor *in = nargs >= 8 ? dense_tensor(args[0], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *out = in ? dense_tensor(args[6], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *idx = out ? dense_tensor(args[7], ETCH_DTYPE_LONG) : NULL;
    int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1}, planes = 0, H = 0, W = 0;
    bool empty = false;
    bool ok = idx && args[5] && args[5]->tag == ETCH_VALUE_BOOL &&
              pair(args[1], false, 1, k, NULL) && pair(args[2], true, 1, s, &empty);
    if (ok && empty) {
        s[0] = k[0];
        s[1] = k[1];
    }
    ok = ok && pair(args[3], false, 0, p, NULL) && pair(args[4], false, 1, d, NULL) &&
         p[0] <= k[0] / 2 && p[1] <= k[1] / 2 && planes_of(in, &planes, &H, &W);
    bool ceil_mode = ok && args[5]->u.b;
    int64_t OH = ok ? pool_out_size(H, k[0], p[0], s[0], d[0], ceil_mode) : 0;
    int64_t OW = ok ? pool_out_size(W, k[1], p[1], s[1], d[1], ceil_mode) : 0;
    ok = ok && OH >= 1 && OW >= 1 && !overlaps(out, in) && !overlaps(idx, in) &&
         !overlaps(idx, out);
    if (ok) {
        if (!resize_like_in(ctx, in, out, OH, OW) || !resize_like_in(ctx, in, idx, OH, OW))
            return;
        ok = out->data && idx->data && !overlaps(out, in) && !overlaps(idx, in) &&
             !overlaps(idx, out);
    }
    if (!ok) {
        etch_portable_max_pool2d_with_indices_out(ctx, args, nargs);
        return;
    }
    maxpool_job j = {H, W, OH, OW, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1],
                     (const float *)in->data, (float *)out->data, (int64_t *)idx->data, false};
    /* SIMD rows: dilation 1, stride 1 or 2, indices that fit 32-bit lanes */
    j.simd = (etch_isa_active() == ETCH_ISA_AVX2 || etch_isa_active() == ETCH_ISA_AVX512 ||
              etch_isa_active() == ETCH_ISA_NEON) &&
             d[0] == 1 && d[1] == 1 && (s[1] == 1 || s[1] == 2) && H * W < 0x7fffffffLL;
    etch_kernel_parallel_for(ctx, planes, pool_grain((double)OH * OW * k[0] * k[1]),
                             maxpool_planes, &j);
}

/* ---- avg_pool2d --------------------------------------------------------------------------- */

typedef struct avgpool_job {
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw;
    bool include_pad, has_div;
    int64_t divisor;
    const float *in;
    float *out;
} avgpool_job;

static void avgpool_planes(void *arg, int64_t p0, int64_t p1) {
    const avgpool_job *j = (const avgpool_job *)arg;
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = j->in + p * j->H * j->W;
        float *out = j->out + p * j->OH * j->OW;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t h0 = oh * j->sh - j->ph, h1 = h0 + j->kh;
            if (h1 > j->H + j->ph)
                h1 = j->H + j->ph;
            int64_t ph_size = h1 - h0;
            if (h0 < 0)
                h0 = 0;
            if (h1 > j->H)
                h1 = j->H;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                int64_t w0 = ow * j->sw - j->pw, w1 = w0 + j->kw;
                if (w1 > j->W + j->pw)
                    w1 = j->W + j->pw;
                int64_t pool = ph_size * (w1 - w0);
                if (w0 < 0)
                    w0 = 0;
                if (w1 > j->W)
                    w1 = j->W;
                if (h0 >= h1 || w0 >= w1) {
                    out[oh * j->OW + ow] = 0.0f;
                    continue;
                }
                int64_t div = j->has_div       ? j->divisor
                              : j->include_pad ? pool
                                               : (h1 - h0) * (w1 - w0);
                double sum = 0;
                for (int64_t ih = h0; ih < h1; ih++) {
                    const float *row = plane + ih * j->W;
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += row[iw];
                }
                out[oh * j->OW + ow] = (float)(sum / (double)div);
            }
        }
    }
}

ETCH_OPT_KERNEL(avg_pool2d_out) {
    etch_tensor *in = nargs >= 8 ? dense_tensor(args[0], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *out = in ? dense_tensor(args[7], ETCH_DTYPE_FLOAT) : NULL;
    int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, planes = 0, H = 0, W = 0, divisor = 0;
    bool empty = false;
    bool ok = out && args[4] && args[4]->tag == ETCH_VALUE_BOOL && args[5] &&
              args[5]->tag == ETCH_VALUE_BOOL && args[6] &&
              (args[6]->tag == ETCH_VALUE_NONE ||
               (args[6]->tag == ETCH_VALUE_INT && args[6]->u.i != 0)) &&
              pair(args[1], false, 1, k, NULL) && pair(args[2], true, 1, s, &empty);
    if (ok && empty) {
        s[0] = k[0];
        s[1] = k[1];
    }
    ok = ok && pair(args[3], false, 0, p, NULL) && p[0] <= k[0] / 2 && p[1] <= k[1] / 2 &&
         planes_of(in, &planes, &H, &W);
    bool ceil_mode = ok && args[4]->u.b;
    int64_t OH = ok ? pool_out_size(H, k[0], p[0], s[0], 1, ceil_mode) : 0;
    int64_t OW = ok ? pool_out_size(W, k[1], p[1], s[1], 1, ceil_mode) : 0;
    ok = ok && OH >= 1 && OW >= 1 && !overlaps(out, in);
    if (ok) {
        if (!resize_like_in(ctx, in, out, OH, OW))
            return;
        ok = out->data && !overlaps(out, in);
    }
    if (!ok) {
        etch_portable_avg_pool2d_out(ctx, args, nargs);
        return;
    }
    if (args[6]->tag == ETCH_VALUE_INT)
        divisor = args[6]->u.i;
    avgpool_job j = {.H = H, .W = W, .OH = OH, .OW = OW, .kh = k[0], .kw = k[1],
                     .sh = s[0], .sw = s[1], .ph = p[0], .pw = p[1],
                     .include_pad = args[5]->u.b, .has_div = args[6]->tag == ETCH_VALUE_INT,
                     .divisor = divisor, .in = (const float *)in->data,
                     .out = (float *)out->data};
    etch_kernel_parallel_for(ctx, planes, pool_grain((double)OH * OW * k[0] * k[1]),
                             avgpool_planes, &j);
}

/* ---- _adaptive_avg_pool2d ----------------------------------------------------------------- */

typedef struct adapool_job {
    int64_t H, W, OH, OW;
    const float *in;
    float *out;
} adapool_job;

static void adapool_planes(void *arg, int64_t p0, int64_t p1) {
    const adapool_job *j = (const adapool_job *)arg;
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = j->in + p * j->H * j->W;
        float *out = j->out + p * j->OH * j->OW;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t h0 = oh * j->H / j->OH, h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                int64_t w0 = ow * j->W / j->OW, w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
                double sum = 0;
                for (int64_t ih = h0; ih < h1; ih++) {
                    const float *row = plane + ih * j->W;
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += row[iw];
                }
                out[oh * j->OW + ow] = (float)(sum / (double)((h1 - h0) * (w1 - w0)));
            }
        }
    }
}

/* ---- channel-blocked global average pool (output 1x1) ----------------------------------- */

static bool unit_output_size(etch_value *v) {
    int64_t os[2] = {0, 0};
    return v && v->tag == ETCH_VALUE_INT_LIST && v->u.list.len == 2 &&
           pair(v, false, 1, os, NULL) && os[0] == 1 && os[1] == 1;
}

void etch_opt_adaptive_avg_pool2d_layout(etch_kernel_context *ctx, etch_value **args,
                                         size_t nargs, uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = 0;
    *tied = 0;
    if (nargs != 4)
        return;
    const etch_tensor *in = shape4(args[0], ETCH_DTYPE_FLOAT);
    const etch_tensor *out = shape4(args[2], ETCH_DTYPE_FLOAT);
    if (in && out && args[2] != args[0] && in->sizes[1] % ETCH_BLOCK_C == 0 &&
        unit_output_size(args[1]) && out->sizes[0] == in->sizes[0] &&
        out->sizes[1] == in->sizes[1] && out->sizes[2] == 1 && out->sizes[3] == 1)
        *may = 1u << 0;
}

static void adaptive_avg_blocked(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    etch_tensor *in = nargs >= 3 ? dense_tensor(args[0], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *out = in ? etch_opt_fast_tensor(args[2], ETCH_DTYPE_FLOAT, true) : NULL;
    bool ok = out && etch_kernel_blocked_args(ctx) == 1u && in->dim == 4 &&
              in->sizes[1] % ETCH_BLOCK_C == 0 && in->sizes[0] > 0 && in->sizes[1] > 0 &&
              in->sizes[2] > 0 && in->sizes[3] > 0 && unit_output_size(args[1]);
    if (ok) {
        const int64_t osz[4] = {in->sizes[0], in->sizes[1], 1, 1};
        if (etch_kernel_resize(ctx, out, 4, osz) != ETCH_OK)
            return;
        ok = out->data && !overlaps(out, in);
    }
    if (!ok) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked adaptive average pool: arguments changed since load "
                         "(a 4-D float self with channels a multiple of %d, output size 1x1, an "
                         "NCHW out apart from the input)",
                         ETCH_BLOCK_C);
        return;
    }
    /* the portable kernel's order: one double sum over the plane, h-major */
    nchwc_mean_job j = {in->sizes[2] * in->sizes[3], (const float *)in->data,
                        (float *)out->data, false};
    etch_opt_nchwc_mean(ctx, &j, in->sizes[0] * (in->sizes[1] / ETCH_BLOCK_C));
}

ETCH_OPT_KERNEL(adaptive_avg_pool2d_out) {
    if (etch_kernel_blocked_args(ctx)) {
        adaptive_avg_blocked(ctx, args, nargs);
        return;
    }
    etch_tensor *in = nargs >= 3 ? dense_tensor(args[0], ETCH_DTYPE_FLOAT) : NULL;
    etch_tensor *out = in ? dense_tensor(args[2], ETCH_DTYPE_FLOAT) : NULL;
    int64_t planes = 0, H = 0, W = 0, os[2] = {0, 0};
    bool ok = out && planes_of(in, &planes, &H, &W) && args[1] &&
              args[1]->tag == ETCH_VALUE_INT_LIST && args[1]->u.list.len == 2 &&
              pair(args[1], false, 1, os, NULL) && !overlaps(out, in);
    if (ok) {
        if (!resize_like_in(ctx, in, out, os[0], os[1]))
            return;
        ok = out->data && !overlaps(out, in);
    }
    if (!ok) {
        etch_portable_adaptive_avg_pool2d_out(ctx, args, nargs);
        return;
    }
    adapool_job j = {H, W, os[0], os[1], (const float *)in->data, (float *)out->data};
    etch_kernel_parallel_for(ctx, planes, pool_grain((double)H * W + (double)os[0] * os[1]),
                             adapool_planes, &j);
}
