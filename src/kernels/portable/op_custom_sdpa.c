/*
 * ExecuTorch's LLM attention operators (extension/llm/custom_ops/op_sdpa.cpp, the ones its
 * llama export emits with --use_sdpa_with_kv_cache; python/etch/llm/et_ops.py defines them
 * for torch):
 *
 * llama::custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos,
 *                        Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False,
 *                        float? scale=None, *, Tensor(a!) out) -> Tensor(a!)
 *
 *   query    [B, S, H, D]       the new tokens' queries (sequence at dim 1, as the caches)
 *   key      [B, S_max, KV, D]  the key cache, already holding positions 0 .. start_pos + S - 1
 *   value    [B, S_max, KV, D]  the value cache
 *   out      [B, S, H, D]       resized to query's shape
 *
 * H must be a multiple of KV (grouped-query attention: head h reads kv head h / (H / KV)).
 * scale: the factor of every dot product, 1/sqrt(D) when None. Row (b, t, h) attends:
 *   no mask, is_causal:   keys 0 .. start_pos + t
 *   no mask, not causal:  keys 0 .. start_pos + S - 1
 *   attn_mask [S, M]:     keys 0 .. M - 1, each score scale * q.k + attn_mask[t, j]; M is
 *                         S_max (ExecuTorch's current kernel attends over the whole cache when
 *                         a mask is given) or start_pos + S (its earlier kernel, which sliced
 *                         the cache first); the mask is Float, like the query
 * and out = sum_j softmax(s)_j value[b, j, h / G]. A mask together with is_causal is refused
 * (as ExecuTorch does), and so is a dropout probability other than 0 (ExecuTorch ignores it;
 * inference has none). Bounds: 0 <= start_pos and start_pos + S <= S_max, else
 * ETCH_ERR_INVALID_ARGUMENT before anything is read; keys past the last one a row attends are
 * never read. A row whose every key the mask sets to -inf gives NaN, as softmax does.
 *
 * llama::sdpa_with_kv_cache.out(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache,
 *                               Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len,
 *                               Tensor? attn_mask=None, float drpout_p=0.0,
 *                               bool is_causal=False, float? scale=None, *, Tensor(c!) out)
 *                               -> Tensor(c!)
 *   writes key and value [B, S, KV, D] into the caches at start_pos (llama::update_cache,
 *   op_update_cache.c), then custom_sdpa over the caches. seq_len must equal S.
 *
 * This reference: Float only (ExecuTorch's kernel takes Float), any dim order through strides,
 * one pass over the keys per row with a running max (online softmax) accumulated in double,
 * 64 output columns per pass, rounded once into out; no scratch memory; serial. The optimized
 * kernel (src/kernels/optimized/attention.c) takes contiguous Float calls.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

#define CSDPA_CHUNK 64

static double dotq(const float *q, int64_t qs, const float *k, int64_t ks, int64_t n) {
    double a = 0.0;
    for (int64_t d = 0; d < n; d++)
        a += (double)q[d * qs] * (double)k[d * ks];
    return a;
}

static void csdpa_run(const etch_llama_sdpa *a) {
    const etch_tensor *q = a->q, *k = a->k, *v = a->v, *mk = a->mask;
    etch_tensor *out = a->out;
    const int64_t B = q->sizes[0], S = q->sizes[1], H = q->sizes[2], D = q->sizes[3];
    const int64_t G = H / k->sizes[2];
    const float *qd = (const float *)q->data, *kd = (const float *)k->data;
    const float *vd = (const float *)v->data, *md = mk ? (const float *)mk->data : NULL;
    float *od = (float *)out->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t kh = h / G;
                const int64_t n = mk ? mk->sizes[1] : a->causal ? a->start + t + 1 : a->start + S;
                const float *qr = qd + b * q->strides[0] + t * q->strides[1] + h * q->strides[2];
                for (int64_t d0 = 0; d0 < D; d0 += CSDPA_CHUNK) {
                    const int64_t nd = D - d0 < CSDPA_CHUNK ? D - d0 : CSDPA_CHUNK;
                    double acc[CSDPA_CHUNK] = {0.0};
                    double m = -INFINITY, l = 0.0;
                    for (int64_t j = 0; j < n; j++) {
                        const float *kr = kd + b * k->strides[0] + j * k->strides[1] +
                                          kh * k->strides[2];
                        double s = a->scale * dotq(qr, q->strides[3], kr, k->strides[3], D);
                        if (md)
                            s += (double)md[t * mk->strides[0] + j * mk->strides[1]];
                        if (s == -INFINITY)
                            continue; /* weight 0 (a row of only these ends as 0/0: NaN) */
                        double p = 1.0;
                        if (s > m) {
                            const double c = exp(m - s); /* 0 for the first key */
                            l *= c;
                            for (int64_t d = 0; d < nd; d++)
                                acc[d] *= c;
                            m = s;
                        } else {
                            p = exp(s - m);
                        }
                        l += p;
                        const float *vr = vd + b * v->strides[0] + j * v->strides[1] +
                                          kh * v->strides[2] + d0 * v->strides[3];
                        for (int64_t d = 0; d < nd; d++)
                            acc[d] += p * (double)vr[d * v->strides[3]];
                    }
                    float *orow = od + b * out->strides[0] + t * out->strides[1] +
                                  h * out->strides[2];
                    for (int64_t d = 0; d < nd; d++)
                        orow[(d0 + d) * out->strides[3]] = (float)(acc[d] / l);
                }
            }
}

/* The checks of custom_sdpa's arguments args[first .. first + 4] (attn_mask, drpout_p,
 * is_causal, scale) and of q, k, v, out; fills a. -1: failed (recorded); 0: nothing to compute;
 * 1: compute. */
int etch_pk_llama_sdpa_prepare(etch_kernel_context *ctx, etch_llama_sdpa *a, etch_tensor *q,
                               etch_tensor *k, etch_tensor *v, int64_t start_pos,
                               etch_value **opt, etch_tensor *out) {
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF], b3[ETCH_PK_SHAPE_BUF];
    bool has_mask = false, causal = false; /* has_mask: a tensor came (not None) */
    double drop = 0.0;
    etch_tensor *mask = etch_pk_opt_tensor(ctx, opt[0], "attn_mask", &has_mask);
    if ((!mask && opt[0] && opt[0]->tag != ETCH_VALUE_NONE) ||
        !etch_nn_double(ctx, opt[1], "drpout_p", &drop) ||
        !etch_pk_bool(ctx, opt[2], "is_causal", &causal))
        return -1;
    double scale = 0.0;
    const bool has_scale = opt[3] && opt[3]->tag != ETCH_VALUE_NONE;
    if (has_scale && !etch_nn_double(ctx, opt[3], "scale", &scale))
        return -1;
    if (q->dtype != ETCH_DTYPE_FLOAT || k->dtype != ETCH_DTYPE_FLOAT ||
        v->dtype != ETCH_DTYPE_FLOAT || out->dtype != ETCH_DTYPE_FLOAT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "query, key, value, out have dtypes %s, %s, %s, %s; Float needed",
                         etch_dtype_name(q->dtype), etch_dtype_name(k->dtype),
                         etch_dtype_name(v->dtype), etch_dtype_name(out->dtype));
        return -1;
    }
    if (q->dim != 4 || k->dim != 4 || v->dim != 4 || k->sizes[0] != q->sizes[0] ||
        v->sizes[0] != q->sizes[0] || k->sizes[1] != v->sizes[1] || k->sizes[2] != v->sizes[2] ||
        k->sizes[3] != q->sizes[3] || v->sizes[3] != q->sizes[3] || k->sizes[2] == 0 ||
        q->sizes[2] % k->sizes[2] != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "query %s, key %s, value %s: expected [B, S, H, D] and caches "
                         "[B, S_max, KV, D] alike, H a multiple of KV >= 1",
                         etch_pk_shape_str(b1, sizeof b1, q->dim, q->sizes),
                         etch_pk_shape_str(b2, sizeof b2, k->dim, k->sizes),
                         etch_pk_shape_str(b3, sizeof b3, v->dim, v->sizes));
        return -1;
    }
    const int64_t S = q->sizes[1], Smax = k->sizes[1];
    if (start_pos < 0 || S > Smax - start_pos) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos %lld with %lld new positions does not fit the cache's %lld "
                         "positions",
                         (long long)start_pos, (long long)S, (long long)Smax);
        return -1;
    }
    if (drop != 0.0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "drpout_p %g: dropout is not supported (0 needed)", drop);
        return -1;
    }
    if (mask) {
        if (causal) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "attn_mask and is_causal cannot be set at the same time");
            return -1;
        }
        if (mask->dtype != ETCH_DTYPE_FLOAT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                             "attn_mask has dtype %s; Float needed (an additive mask)",
                             etch_dtype_name(mask->dtype));
            return -1;
        }
        if (mask->dim != 2 || mask->sizes[0] != S ||
            (mask->sizes[1] != Smax && mask->sizes[1] != start_pos + S)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "attn_mask %s: expected [%lld, %lld] (S, S_max) or [%lld, %lld] "
                             "(S, start_pos + S)",
                             etch_pk_shape_str(b1, sizeof b1, mask->dim, mask->sizes),
                             (long long)S, (long long)Smax, (long long)S,
                             (long long)(start_pos + S));
            return -1;
        }
    }
    if (etch_pk_resize(ctx, out, 4, q->sizes) != ETCH_OK)
        return -1;
    a->q = q, a->k = k, a->v = v, a->mask = mask, a->out = out;
    a->start = start_pos;
    a->causal = causal;
    a->scale = has_scale ? scale : 1.0 / sqrt((double)q->sizes[3]);
    return etch_tensor_numel(out) == 0 ? 0 : 1;
}

void etch_pk_llama_sdpa_run(const etch_llama_sdpa *a) {
    csdpa_run(a);
}

int etch_pk_llama_custom_sdpa_args(etch_kernel_context *ctx, etch_llama_sdpa *a,
                                   etch_value **args, size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 9))
        return -1;
    etch_tensor *q = etch_pk_tensor(ctx, args[0], "query");
    etch_tensor *k = q ? etch_pk_tensor(ctx, args[1], "key") : NULL;
    etch_tensor *v = k ? etch_pk_tensor(ctx, args[2], "value") : NULL;
    etch_tensor *out = v ? etch_pk_tensor(ctx, args[8], "out") : NULL;
    int64_t sp = 0;
    if (!out || !etch_pk_int(ctx, args[3], "start_pos", &sp))
        return -1;
    return etch_pk_llama_sdpa_prepare(ctx, a, q, k, v, sp, args + 4, out);
}

ETCH_PK_KERNEL(llama_custom_sdpa_out) {
    etch_llama_sdpa a;
    if (etch_pk_llama_custom_sdpa_args(ctx, &a, args, nargs) > 0)
        csdpa_run(&a);
}

int etch_pk_llama_sdpa_kv_prepare(etch_kernel_context *ctx, etch_llama_sdpa *a,
                                  etch_value **args, size_t nargs) {
    if (!etch_pk_nargs(ctx, nargs, 12))
        return -1;
    static const char *const names[5] = {"query", "key", "value", "key_cache", "value_cache"};
    etch_tensor *t[5];
    for (int i = 0; i < 5; i++)
        if (!(t[i] = etch_pk_tensor(ctx, args[i], names[i])))
            return -1;
    etch_tensor *out = etch_pk_tensor(ctx, args[11], "out");
    int64_t sp = 0, seq_len = 0;
    if (!out || !etch_pk_int(ctx, args[5], "start_pos", &sp) ||
        !etch_pk_int(ctx, args[6], "seq_len", &seq_len))
        return -1;
    if (t[0]->dim != 4 || seq_len != t[0]->sizes[1]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "seq_len %lld differs from the query's sequence length (dim 1)",
                         (long long)seq_len);
        return -1;
    }
    /* every check first, so a refused call writes nothing into the caches */
    const int r = etch_pk_llama_sdpa_prepare(ctx, a, t[0], t[3], t[4], sp, args + 7, out);
    if (r < 0)
        return -1;
    if (t[1]->dim != 4 || t[2]->dim != 4 || t[1]->sizes[1] != seq_len ||
        t[1]->dtype != t[2]->dtype || t[1]->sizes[0] != t[2]->sizes[0] ||
        t[1]->sizes[1] != t[2]->sizes[1] || t[1]->sizes[2] != t[2]->sizes[2] ||
        t[1]->sizes[3] != t[2]->sizes[3]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "key and value must both be [B, seq_len, KV, D] of one dtype, "
                         "seq_len %lld",
                         (long long)seq_len);
        return -1;
    }
    if (!etch_pk_update_cache(ctx, t[1], "key", t[3], "key_cache", sp) ||
        !etch_pk_update_cache(ctx, t[2], "value", t[4], "value_cache", sp))
        return -1;
    return r;
}

ETCH_PK_KERNEL(llama_sdpa_with_kv_cache_out) {
    etch_llama_sdpa a;
    if (etch_pk_llama_sdpa_kv_prepare(ctx, &a, args, nargs) > 0)
        csdpa_run(&a);
}
