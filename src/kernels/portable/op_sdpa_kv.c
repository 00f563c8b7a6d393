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
 * and rounded once into out; no scratch memory. Serial.
 *
 * etch::sdpa_kv_q8.out (at the end of this file) is the same attention over an int8 cache:
 * Char caches with a Float scale and a Char zero point per (kv head, position), each row
 * read as (c - zero_point) * scale (rounded to float, as dequantize_per_token does) by the
 * same loop. The optimized kernel (src/kernels/optimized/attention.c)
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

/* A cache: float (s == NULL) or int8 with a Float scale and a Char zero point per (kv head,
 * position), dequantized as dequantize_per_token does: (c - z) * s, rounded to float. */
typedef struct sdpa_cache {
    const etch_tensor *c, *s, *z;
} sdpa_cache;

static double ldc(const sdpa_cache *k, int64_t kh, int64_t j, int64_t d) {
    const etch_tensor *c = k->c;
    const int64_t off = kh * c->strides[0] + j * c->strides[1] + d * c->strides[2];
    if (!k->s)
        return ld(c, off);
    const int64_t po = kh * k->s->strides[0] + j * k->s->strides[1];
    const int64_t zo = kh * k->z->strides[0] + j * k->z->strides[1];
    const int32_t diff = (int32_t)((const int8_t *)c->data)[off] -
                         (int32_t)((const int8_t *)k->z->data)[zo];
    return (double)((float)diff * ((const float *)k->s->data)[po]);
}

/* dot of q row (t, h) with key row (kh, j), times scale */
static double score(const etch_tensor *q, const sdpa_cache *k, int64_t t, int64_t h,
                    int64_t kh, int64_t j, int64_t hd, double scale) {
    double s = 0.0;
    const int64_t qo = t * q->strides[0] + h * q->strides[1];
    for (int64_t d = 0; d < hd; d++)
        s += ld(q, qo + d * q->strides[2]) * ldc(k, kh, j, d);
    return s * scale;
}

/* The attention itself (after the checks): q, out Float or Double, the caches as kc, vc. */
static void sdpa_run(const etch_tensor *q, const sdpa_cache *kc, const sdpa_cache *vc,
                     etch_tensor *out, int64_t p0, double scale) {
    const int64_t T = q->sizes[0], H = q->sizes[1], hd = q->sizes[2];
    const int64_t G = H / kc->c->sizes[0];
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = p0 + t + 1; /* keys 0 .. p */
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / G;
            double m = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                const double s = score(q, kc, t, h, kh, j, hd, scale);
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
                    const double e = exp(score(q, kc, t, h, kh, j, hd, scale) - m);
                    sum += e;
                    for (int64_t d = 0; d < nd; d++)
                        acc[d] += e * ldc(vc, kh, j, d0 + d);
                }
                const int64_t oo = t * out->strides[0];
                for (int64_t d = 0; d < nd; d++)
                    st(out, oo + (h * hd + d0 + d) * out->strides[1], acc[d] / sum);
            }
        }
    }
}

/* The checks of q [T, H, hd], caches k, v [KV, S, hd] (dtypes checked by the caller),
 * start_pos and out, shared by sdpa_kv and sdpa_kv_q8 (and through them the optimized
 * kernels, which call these for anything they do not take); resizes out to [T, H * hd]. */
int etch_pk_sdpa_kv_prepare(etch_kernel_context *ctx, const etch_tensor *q, const etch_tensor *k,
                            const etch_tensor *v, const etch_tensor *sp, etch_tensor *out,
                            int64_t *start) {
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
        return -1;
    }
    if ((sp->dtype != ETCH_DTYPE_LONG && sp->dtype != ETCH_DTYPE_INT) ||
        etch_tensor_numel(sp) != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos must be one Long or Int, got %s %s",
                         etch_dtype_name(sp->dtype),
                         etch_pk_shape_str(b1, sizeof b1, sp->dim, sp->sizes));
        return -1;
    }
    const int64_t T = q->sizes[0], H = q->sizes[1], hd = q->sizes[2], S = k->sizes[1];
    const int64_t p0 = sp->dtype == ETCH_DTYPE_LONG ? ((const int64_t *)sp->data)[0]
                                                    : ((const int32_t *)sp->data)[0];
    if (p0 < 0 || p0 > S - T) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos %lld with %lld new positions does not fit the cache's "
                         "%lld positions",
                         (long long)p0, (long long)T, (long long)S);
        return -1;
    }
    const int64_t osz[2] = {T, H * hd};
    if (etch_pk_resize(ctx, out, 2, osz) != ETCH_OK)
        return -1;
    *start = p0;
    return T == 0 || H * hd == 0 ? 0 : 1;
}

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
    int64_t p0 = 0;
    if (etch_pk_sdpa_kv_prepare(ctx, q, k, v, sp, out, &p0) <= 0)
        return;
    sdpa_cache kc = {k, NULL, NULL}, vc = {v, NULL, NULL};
    sdpa_run(q, &kc, &vc, out, p0, scale);
}

bool etch_pk_sdpa_q8_check_params(etch_kernel_context *ctx, const etch_tensor *c,
                                  const etch_tensor *s, const etch_tensor *z, const char *which,
                                  int64_t n) {
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF], b3[ETCH_PK_SHAPE_BUF];
    if (c->dtype != ETCH_DTYPE_CHAR || s->dtype != ETCH_DTYPE_FLOAT || z->dtype != ETCH_DTYPE_CHAR) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "%s_cache, %s_scales, %s_zero_points have dtypes %s, %s, %s; Char, "
                         "Float and Char needed",
                         which, which, which, etch_dtype_name(c->dtype), etch_dtype_name(s->dtype),
                         etch_dtype_name(z->dtype));
        return false;
    }
    for (int i = 0; i < 2; i++) {
        const etch_tensor *p = i ? z : s;
        if (p->dim != 3 || p->sizes[0] != c->sizes[0] || p->sizes[1] != c->sizes[1] ||
            p->sizes[2] != 1) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s_cache %s: %s_scales %s and %s_zero_points %s must be [KV, S, 1]",
                             which, etch_pk_shape_str(b1, sizeof b1, c->dim, c->sizes), which,
                             etch_pk_shape_str(b2, sizeof b2, s->dim, s->sizes), which,
                             etch_pk_shape_str(b3, sizeof b3, z->dim, z->sizes));
            return false;
        }
    }
    for (int64_t h = 0; h < c->sizes[0]; h++)
        for (int64_t j = 0; j < n; j++) {
            const float v = ((const float *)s->data)[h * s->strides[0] + j * s->strides[1]];
            if (!isfinite(v) || v < 0.0f) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "%s_scales[%lld, %lld] = %g must be finite and >= 0", which,
                                 (long long)h, (long long)j, (double)v);
                return false;
            }
        }
    return true;
}

/* etch::sdpa_kv_q8.out(Tensor q, Tensor k_cache, Tensor k_scales, Tensor k_zero_points,
 *                      Tensor v_cache, Tensor v_scales, Tensor v_zero_points,
 *                      Tensor start_pos, float scale, *, Tensor(a!) out) -> Tensor(a!)
 * sdpa_kv over an int8 cache: k_cache, v_cache Char [KV, S, hd], each position's row of each
 * kv head dequantized as (c - zero_point) * scale (Float scales, Char zero points, [KV, S, 1])
 * before the attention above; q and out Float or Double. Only the scales of positions
 * 0 .. start_pos + T - 1 are read (and checked: finite, >= 0). */
ETCH_PK_KERNEL(sdpa_kv_q8_out) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    static const char *const names[8] = {"q",       "k_cache",  "k_scales",      "k_zero_points",
                                         "v_cache", "v_scales", "v_zero_points", "start_pos"};
    etch_tensor *t[8];
    for (int i = 0; i < 8; i++)
        if (!(t[i] = etch_pk_tensor(ctx, args[i], names[i])))
            return;
    etch_tensor *out = etch_pk_tensor(ctx, args[9], "out");
    double scale = 0.0;
    if (!out || !etch_nn_double(ctx, args[8], "scale", &scale))
        return;
    etch_tensor *q = t[0];
    if (q->dtype != ETCH_DTYPE_FLOAT && q->dtype != ETCH_DTYPE_DOUBLE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "q has dtype %s; Float or Double needed",
                         etch_dtype_name(q->dtype));
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, q, "q", out, "out"))
        return;
    int64_t p0 = 0;
    const int r = etch_pk_sdpa_kv_prepare(ctx, q, t[1], t[4], t[7], out, &p0);
    if (r < 0 || !etch_pk_sdpa_q8_check_params(ctx, t[1], t[2], t[3], "k", p0 + q->sizes[0]) ||
        !etch_pk_sdpa_q8_check_params(ctx, t[4], t[5], t[6], "v", p0 + q->sizes[0]) || r == 0)
        return;
    sdpa_cache kc = {t[1], t[2], t[3]}, vc = {t[4], t[5], t[6]};
    sdpa_run(q, &kc, &vc, out, p0, scale);
}
