/*
 * etch::sdpa_kv.out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor start_pos, float scale,
 *                   *, Tensor(a!) out) -> Tensor(a!)
 *
 * An etch-only operator (files using it do not load in ExecuTorch): causal grouped-query
 * attention of T new queries over the filled part of a KV cache, what the LLM exporter emits
 * with --fused-attention (python/etch/llm/attention.py defines it for tracing).
 *
 *   q        [T, H, hd]     the rotated queries of positions start_pos .. start_pos + T - 1
 *   k_cache  [KV, S, hd]    keys of positions 0 .. S - 1 (already written for the new ones)
 *   v_cache  [KV, S, hd]    values, same layout
 *   start_pos Long or Int, one element
 *   scale    the factor applied to every dot product (1/sqrt(hd) for llama)
 *   out      [T, H * hd]    resized
 *
 * With G = H / KV (H must be a multiple of KV), query t of head h, at position
 * p = start_pos + t, reads kv head h / G:
 *
 *   s_j = scale * sum_d q[t,h,d] * k_cache[h/G, j, d]            for j = 0 .. p
 *   out[t, h*hd + d] = sum_j exp(s_j - max s) v_cache[h/G, j, d] / sum_j exp(s_j - max s)
 *
 * which is the masked softmax over the whole cache (keys after p at -inf) without the keys it
 * masks: no key after start_pos + T - 1 is read. start_pos < 0 or start_pos + T > S fails with
 * ETCH_ERR_INVALID_ARGUMENT before anything is read.
 *
 * This reference: Float or Double (q, caches and out of one dtype), any dim order through
 * strides, two passes over the keys per query (the max, then the exponentials and the weighted
 * sum of values; one more per further 64 columns of hd), accumulated in double on the stack
 * and rounded once into out; no scratch memory. Serial. The optimized kernel (src/kernels/optimized/attention.c)
 * streams the softmax instead.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

#define SDPA_CHUNK 64 /* output columns accumulated at once (on the stack) */

static double ld(const etch_tensor *t, int64_t off) {
    return t->dtype == ETCH_DTYPE_FLOAT ? (double)((const float *)t->data)[off]
                                        : ((const double *)t->data)[off];
}

static void st(etch_tensor *t, int64_t off, double v) {
    if (t->dtype == ETCH_DTYPE_FLOAT)
        ((float *)t->data)[off] = (float)v;
    else
        ((double *)t->data)[off] = v;
}

/* dot of q row (t, h) with key row (kh, j), times scale */
static double score(const etch_tensor *q, const etch_tensor *k, int64_t t, int64_t h,
                    int64_t kh, int64_t j, int64_t hd, double scale) {
    double s = 0.0;
    const int64_t qo = t * q->strides[0] + h * q->strides[1];
    const int64_t ko = kh * k->strides[0] + j * k->strides[1];
    for (int64_t d = 0; d < hd; d++)
        s += ld(q, qo + d * q->strides[2]) * ld(k, ko + d * k->strides[2]);
    return s * scale;
}

/* Argument checks shared with the optimized kernel (via the portable entry point, which it
 * calls for anything it does not take). */
ETCH_PK_KERNEL(sdpa_kv_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    etch_tensor *q = etch_pk_tensor(ctx, args[0], "q");
    etch_tensor *k = q ? etch_pk_tensor(ctx, args[1], "k_cache") : NULL;
    etch_tensor *v = k ? etch_pk_tensor(ctx, args[2], "v_cache") : NULL;
    etch_tensor *sp = v ? etch_pk_tensor(ctx, args[3], "start_pos") : NULL;
    etch_tensor *out = sp ? etch_pk_tensor(ctx, args[5], "out") : NULL;
    double scale = 0.0;
    if (!out || !etch_nn_double(ctx, args[4], "scale", &scale))
        return;
    if (q->dtype != ETCH_DTYPE_FLOAT && q->dtype != ETCH_DTYPE_DOUBLE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "q has dtype %s; Float or Double needed",
                         etch_dtype_name(q->dtype));
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, q, "q", k, "k_cache") ||
        !etch_pk_check_same_dtype(ctx, q, "q", v, "v_cache") ||
        !etch_pk_check_same_dtype(ctx, q, "q", out, "out"))
        return;
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF], b3[ETCH_PK_SHAPE_BUF];
    if (q->dim != 3 || k->dim != 3 || v->dim != 3 || k->sizes[0] != v->sizes[0] ||
        k->sizes[1] != v->sizes[1] || k->sizes[2] != v->sizes[2] ||
        q->sizes[2] != k->sizes[2] || k->sizes[0] == 0 || q->sizes[1] % k->sizes[0] != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "q %s, k_cache %s, v_cache %s: expected q [T, H, hd] and both caches "
                         "[KV, S, hd] with H a multiple of KV >= 1",
                         etch_pk_shape_str(b1, sizeof b1, q->dim, q->sizes),
                         etch_pk_shape_str(b2, sizeof b2, k->dim, k->sizes),
                         etch_pk_shape_str(b3, sizeof b3, v->dim, v->sizes));
        return;
    }
    if ((sp->dtype != ETCH_DTYPE_LONG && sp->dtype != ETCH_DTYPE_INT) ||
        etch_tensor_numel(sp) != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos must be one Long or Int, got %s %s",
                         etch_dtype_name(sp->dtype),
                         etch_pk_shape_str(b1, sizeof b1, sp->dim, sp->sizes));
        return;
    }
    const int64_t T = q->sizes[0], H = q->sizes[1], hd = q->sizes[2];
    const int64_t KV = k->sizes[0], S = k->sizes[1], G = H / KV;
    const int64_t p0 = sp->dtype == ETCH_DTYPE_LONG ? ((const int64_t *)sp->data)[0]
                                                    : ((const int32_t *)sp->data)[0];
    if (p0 < 0 || p0 > S - T) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos %lld with %lld new positions does not fit the cache's "
                         "%lld positions",
                         (long long)p0, (long long)T, (long long)S);
        return;
    }
    const int64_t osz[2] = {T, H * hd};
    if (etch_pk_resize(ctx, out, 2, osz) != ETCH_OK || T == 0 || H * hd == 0)
        return;
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = p0 + t + 1; /* keys 0 .. p */
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / G;
            double m = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                const double s = score(q, k, t, h, kh, j, hd, scale);
                if (s > m || isnan(s))
                    m = isnan(m) ? m : s;
            }
            /* the weighted sum of values, SDPA_CHUNK columns per pass over the keys (scores
             * recomputed: the same values each pass) */
            for (int64_t d0 = 0; d0 < hd; d0 += SDPA_CHUNK) {
                const int64_t nd = hd - d0 < SDPA_CHUNK ? hd - d0 : SDPA_CHUNK;
                double acc[SDPA_CHUNK] = {0.0};
                double sum = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    const double e = exp(score(q, k, t, h, kh, j, hd, scale) - m);
                    sum += e;
                    const int64_t vo = kh * v->strides[0] + j * v->strides[1];
                    for (int64_t d = 0; d < nd; d++)
                        acc[d] += e * ld(v, vo + (d0 + d) * v->strides[2]);
                }
                const int64_t oo = t * out->strides[0];
                for (int64_t d = 0; d < nd; d++)
                    st(out, oo + (h * hd + d0 + d) * out->strides[1], acc[d] / sum);
            }
        }
    }
}
