/* Optimized etch::sdpa_kv.out (the semantics are in src/kernels/portable/op_sdpa_kv.c):
 * Float q, caches and out, all contiguous, head_dim <= ETCH_ATTN_MAX_HD; anything else (and
 * every error) goes to the portable kernel, which reports it.
 *
 * Each query row (t, h) runs a streaming softmax over its keys 0 .. start_pos + t in blocks of
 * ETCH_ATTN_BLOCK: the block's scores (one dot product per key) and their max m_b; when m_b
 * exceeds the running max m, the running sum l and the accumulated row acc are scaled by
 * exp(m - m_b); then p_j = exp(s_j - m) (the vector table's exp), l += sum p_j and
 * acc += sum p_j v_j; finally out = acc / l. The rows of the query heads sharing a kv head go
 * through each key block together, so a block comes from memory once for all of them. No
 * [T, S] matrix exists: one block of scores and one row of hd floats per head of the group
 * (at most ETCH_ATTN_MAX_ACC floats) per thread, on the stack. Keys after start_pos + T - 1
 * are never read. Rounding differs from the masked softmax over the whole cache by float
 * accumulation only (tests/llm_attention: within 1e-5 of PyTorch's float64 result for values
 * of order 1; 3e-6 measured).
 *
 * Prefill (T > 1) under AVX2: the rows of positions t and t + 1 of one head share the key and
 * value loads (attn_pair). Threads split items (block of ETCH_ATTN_QBLOCK query positions, kv
 * head, group of up to ETCH_ATTN_MAX_GROUP of its query heads); each row is computed by one thread in the same
 * order whatever the split, so results do not depend on the thread count. Instruction sets:
 * scalar C, AVX2+FMA (also under AVX-512), NEON.
 *
 * etch::sdpa_kv_q8.out (int8 caches, Float scales, Char zero points [KV, S, 1], contiguous)
 * runs the same streaming softmax and split with the ISA's q8 block functions, which
 * dequantize each key and value row in registers (no pair path: one query row at a time);
 * the scales of the positions read are checked first, as the portable kernel does. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/opt_attention.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/portable/portable_nn.h"

#if defined(__GNUC__)
#define ATTN_PREFETCH(p) __builtin_prefetch(p)
#else
#define ATTN_PREFETCH(p) ((void)(p))
#endif

#define ETCH_ATTN_MAX_HD 512
#define ETCH_ATTN_BLOCK 64
#define ETCH_ATTN_QBLOCK 8
#define ETCH_ATTN_MAX_GROUP 16 /* query heads of one kv head computed together */
#define ETCH_ATTN_MAX_ACC 4096 /* floats of their accumulators (>= ETCH_ATTN_MAX_HD) */

/* ---- scalar block functions ------------------------------------------------------------- */

static void scores_scalar(float *s, const float *q, const float *k, int64_t n, int64_t hd,
                          int64_t rs, float scale) {
    for (int64_t j = 0; j < n; j++) {
        const float *kr = k + j * rs;
        float a = 0.0f;
        for (int64_t d = 0; d < hd; d++)
            a += q[d] * kr[d];
        s[j] = a * scale;
    }
}

static void accum_scalar(float *acc, const float *p, const float *v, int64_t n, int64_t hd,
                         int64_t rs) {
    for (int64_t j = 0; j < n; j++) {
        const float pj = p[j];
        const float *vr = v + j * rs;
        for (int64_t d = 0; d < hd; d++)
            acc[d] += pj * vr[d];
    }
}

static void scores_q8_scalar(float *s, const float *q, const int8_t *k, const float *ks,
                             const int8_t *kz, int64_t n, int64_t hd, float scale) {
    for (int64_t j = 0; j < n; j++) {
        const int8_t *kr = k + j * hd;
        const int32_t z = kz[j];
        float a = 0.0f;
        for (int64_t d = 0; d < hd; d++)
            a += q[d] * (float)((int32_t)kr[d] - z);
        s[j] = a * (ks[j] * scale);
    }
}

static void accum_q8_scalar(float *acc, const float *p, const int8_t *v, const float *vs,
                            const int8_t *vz, int64_t n, int64_t hd) {
    for (int64_t j = 0; j < n; j++) {
        const float w = p[j] * vs[j];
        const int8_t *vr = v + j * hd;
        const int32_t z = vz[j];
        for (int64_t d = 0; d < hd; d++)
            acc[d] += w * (float)((int32_t)vr[d] - z);
    }
}

const etch_attn_isa etch_attn_scalar = {scores_scalar,    accum_scalar, NULL, NULL,
                                        scores_q8_scalar, accum_q8_scalar};

static const etch_attn_isa *attn_isa_active(void) {
    switch (etch_isa_active()) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX2:
    case ETCH_ISA_AVX512:
        return &etch_attn_avx2;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return &etch_attn_neon;
#endif
    default:
        return &etch_attn_scalar;
    }
}

/* ---- the kernel ------------------------------------------------------------------------- */

typedef struct attn_job {
    const etch_attn_isa *isa;
    const etch_opt_vec *vec;
    const float *q, *k, *v;
    float *out;
    /* sdpa_kv_q8 (k, v NULL): the int8 caches, their scales and zero points [KV, S] */
    const int8_t *k8, *v8, *kz, *vz;
    const float *ks, *vs;
    int64_t T, H, hd, S, G, p0;
    int64_t rs, hs; /* float caches: floats from one key row to the next, and from one kv head
                     * to the next (hd and S * hd for [KV, S, hd]; KV * hd and hd for
                     * ExecuTorch's [1, S, KV, hd]) */
    int64_t gc, ngc; /* heads of one kv head computed together, and groups of them per kv head */
    float scale;
} attn_job;

/* One block of nb scores s of a row whose running max, sum and accumulated values are m, l,
 * acc: rescale when the block raises the max, then s = exp(s - m) and l += their sum. */
static inline void row_update(const attn_job *jb, float *s, int64_t nb, float *m, float *l,
                              float *acc) {
    float bm = s[0];
    for (int64_t i = 1; i < nb; i++)
        if (s[i] > bm)
            bm = s[i];
    if (bm > *m) {
        const float c = expf(*m - bm); /* 0 for the first block */
        *l *= c;
        for (int64_t d = 0; d < jb->hd; d++)
            acc[d] *= c;
        *m = bm;
    }
    *l += jb->vec->exp_sum(s, s, *m, nb);
}

/* K, V: the kv head's rows, rs elements of esz bytes apart (the bytes between them too) */
static void prefetch_block(const void *K, const void *V, int64_t esz, int64_t j1, int64_t n,
                           int64_t hd) {
    if (j1 >= n)
        return;
    const int64_t nn = n - j1 < ETCH_ATTN_BLOCK ? n - j1 : ETCH_ATTN_BLOCK;
    const char *pk = (const char *)K + j1 * hd * esz, *pv = (const char *)V + j1 * hd * esz;
    for (int64_t off = 0; off < nn * hd * esz; off += 64) {
        ATTN_PREFETCH(pk + off);
        ATTN_PREFETCH(pv + off);
    }
}

/* Query positions t and t + 1 of head h (prefill, when the ISA has the two-row functions):
 * every key of position t is read once for both rows (one load of a key or value feeds two
 * multiply-adds); position t + 1's last key (itself) follows alone. */
static void attn_pair(const attn_job *jb, int64_t t, int64_t h, float *acc, float *s) {
    const int64_t hd = jb->hd, n = jb->p0 + t + 1, kh = h / jb->G;
    const int64_t rs = jb->rs;
    const float *K = jb->k + kh * jb->hs, *V = jb->v + kh * jb->hs;
    const float *q0 = jb->q + (t * jb->H + h) * hd, *q1 = q0 + jb->H * hd;
    float *a0 = acc, *a1 = acc + hd, *s0 = s, *s1 = s + ETCH_ATTN_BLOCK;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    memset(acc, 0, (size_t)(2 * hd) * sizeof(float));
    for (int64_t j0 = 0; j0 < n; j0 += ETCH_ATTN_BLOCK) {
        const int64_t nb = n - j0 < ETCH_ATTN_BLOCK ? n - j0 : ETCH_ATTN_BLOCK;
        prefetch_block(K, V, (int64_t)sizeof(float), j0 + ETCH_ATTN_BLOCK, n, rs);
        jb->isa->scores2(s0, s1, q0, q1, K + j0 * rs, nb, hd, rs, jb->scale);
        row_update(jb, s0, nb, &m0, &l0, a0);
        row_update(jb, s1, nb, &m1, &l1, a1);
        jb->isa->accum2(a0, a1, s0, s1, V + j0 * rs, nb, hd, rs);
    }
    jb->isa->scores(s1, q1, K + n * rs, 1, hd, rs, jb->scale);
    row_update(jb, s1, 1, &m1, &l1, a1);
    jb->isa->accum(a1, s1, V + n * rs, 1, hd, rs);
    float *o0 = jb->out + t * jb->H * hd + h * hd, *o1 = o0 + jb->H * hd;
    for (int64_t d = 0; d < hd; d++) {
        o0[d] = a0[d] / l0;
        o1[d] = a1[d] / l1;
    }
}

/* The scores of keys j0 .. j0 + nb - 1 of kv head kh for query row q, and their values
 * weighted by p added to acc: the float cache or the int8 one. */
static inline void blk_scores(const attn_job *jb, float *s, const float *q, int64_t kh,
                              int64_t j0, int64_t nb) {
    const int64_t r = kh * jb->S + j0;
    if (jb->k8)
        jb->isa->scores_q8(s, q, jb->k8 + r * jb->hd, jb->ks + r, jb->kz + r, nb, jb->hd,
                           jb->scale);
    else
        jb->isa->scores(s, q, jb->k + kh * jb->hs + j0 * jb->rs, nb, jb->hd, jb->rs, jb->scale);
}

static inline void blk_accum(const attn_job *jb, float *acc, const float *p, int64_t kh,
                             int64_t j0, int64_t nb) {
    const int64_t r = kh * jb->S + j0;
    if (jb->v8)
        jb->isa->accum_q8(acc, p, jb->v8 + r * jb->hd, jb->vs + r, jb->vz + r, nb, jb->hd);
    else
        jb->isa->accum(acc, p, jb->v + kh * jb->hs + j0 * jb->rs, nb, jb->hd, jb->rs);
}

/* Query position t of heads h0 .. h0 + ng - 1 (all reading kv head kh): the key blocks are
 * visited once, each for every head of the group while it is in cache. acc: ng * hd floats. */
static void attn_group(const attn_job *jb, int64_t t, int64_t kh, int64_t h0, int64_t ng,
                       float *acc, float *m, float *l, float *s) {
    const int64_t hd = jb->hd, n = jb->p0 + t + 1;
    const int64_t esz = jb->k8 ? 1 : (int64_t)sizeof(float);
    const char *K = jb->k8 ? (const char *)(jb->k8 + kh * jb->S * hd)
                           : (const char *)(jb->k + kh * jb->hs);
    const char *V = jb->v8 ? (const char *)(jb->v8 + kh * jb->S * hd)
                           : (const char *)(jb->v + kh * jb->hs);
    const int64_t rs = jb->k8 ? hd : jb->rs;
    for (int64_t g = 0; g < ng; g++)
        m[g] = -INFINITY, l[g] = 0.0f;
    memset(acc, 0, (size_t)(ng * hd) * sizeof(float));
    for (int64_t j0 = 0; j0 < n; j0 += ETCH_ATTN_BLOCK) {
        const int64_t nb = n - j0 < ETCH_ATTN_BLOCK ? n - j0 : ETCH_ATTN_BLOCK;
        /* the next block's keys and values, from memory while this one is computed (the
         * cache of a long context is rarely still in cache between decode steps) */
        prefetch_block(K, V, esz, j0 + ETCH_ATTN_BLOCK, n, rs);
        for (int64_t g = 0; g < ng; g++) {
            float *a = acc + g * hd;
            blk_scores(jb, s, jb->q + (t * jb->H + h0 + g) * hd, kh, j0, nb);
            row_update(jb, s, nb, &m[g], &l[g], a);
            blk_accum(jb, a, s, kh, j0, nb);
        }
    }
    for (int64_t g = 0; g < ng; g++) {
        float *o = jb->out + t * jb->H * hd + (h0 + g) * hd;
        for (int64_t d = 0; d < hd; d++)
            o[d] = acc[g * hd + d] / l[g];
    }
}

/* item = (query block, kv head, group of its heads) */
static void attn_items(void *arg, int64_t b, int64_t e) {
    const attn_job *jb = (const attn_job *)arg;
    float acc[ETCH_ATTN_MAX_ACC], m[ETCH_ATTN_MAX_GROUP], l[ETCH_ATTN_MAX_GROUP];
    float s[2 * ETCH_ATTN_BLOCK];
    const int64_t KV = jb->H / jb->G, per_qb = KV * jb->ngc;
    for (int64_t i = b; i < e; i++) {
        const int64_t qb = i / per_qb, kh = (i % per_qb) / jb->ngc, gi = i % jb->ngc;
        const int64_t h0 = kh * jb->G + gi * jb->gc;
        const int64_t ng = jb->G - gi * jb->gc < jb->gc ? jb->G - gi * jb->gc : jb->gc;
        const int64_t t1 = (qb + 1) * ETCH_ATTN_QBLOCK < jb->T ? (qb + 1) * ETCH_ATTN_QBLOCK
                                                                : jb->T;
        int64_t t = qb * ETCH_ATTN_QBLOCK;
        if (jb->isa->scores2 && !jb->k8)
            for (; t + 1 < t1; t += 2)
                for (int64_t g = 0; g < ng; g++)
                    attn_pair(jb, t, h0 + g, acc, s);
        for (; t < t1; t++)
            attn_group(jb, t, kh, h0, ng, acc, m, l, s);
    }
}

static void attn_launch(etch_kernel_context *ctx, attn_job *jb, int64_t KV, double scale);

/* The shared part of both fast paths: q, out, start_pos checked for the fast path, caches of
 * [KV, S, hd] (kdims / vdims); fills jb and runs it. false: not taken (the portable kernel
 * decides, errors included). */
static bool sdpa_fast_run(etch_kernel_context *ctx, attn_job *jb, etch_value *qa,
                          etch_value *spa, etch_value *outa, const etch_tensor *k,
                          const etch_tensor *v, double scale) {
    etch_tensor *q = etch_opt_fast_tensor(qa, ETCH_DTYPE_FLOAT, true);
    etch_tensor *out = etch_opt_fast_tensor(outa, ETCH_DTYPE_FLOAT, true);
    etch_tensor *sp = etch_opt_fast_tensor(spa, ETCH_DTYPE_LONG, true);
    if (!q || !out || !sp || q->dim != 3 || k->dim != 3 || v->dim != 3 ||
        etch_tensor_numel(sp) != 1)
        return false;
    const int64_t T = q->sizes[0], H = q->sizes[1], hd = q->sizes[2];
    const int64_t KV = k->sizes[0], S = k->sizes[1];
    if (KV < 1 || H % KV != 0 || k->sizes[2] != hd || v->sizes[0] != KV || v->sizes[1] != S ||
        v->sizes[2] != hd || hd < 1 || hd > ETCH_ATTN_MAX_HD)
        return false;
    const int64_t p0 = ((const int64_t *)sp->data)[0];
    if (p0 < 0 || p0 > S - T)
        return false; /* the portable kernel reports it */
    if (!out->data && T * H * hd > 0)
        return false;
    const int64_t osz[2] = {T, H * hd};
    if (etch_kernel_resize(ctx, out, 2, osz) != ETCH_OK)
        return true; /* failure recorded */
    if (T == 0 || H == 0)
        return true;
    jb->q = (const float *)q->data;
    jb->out = (float *)out->data;
    jb->T = T, jb->H = H, jb->hd = hd, jb->S = S, jb->p0 = p0;
    jb->rs = hd, jb->hs = S * hd;
    attn_launch(ctx, jb, KV, scale);
    return true;
}

/* Runs a filled job (q, out, caches, T, H, hd, S, p0, rs, hs) for KV kv heads. */
static void attn_launch(etch_kernel_context *ctx, attn_job *jb, int64_t KV, double scale) {
    const int64_t H = jb->H, hd = jb->hd, T = jb->T;
    const int64_t G = H / KV;
    int64_t gc = ETCH_ATTN_MAX_ACC / hd;
    if (gc > ETCH_ATTN_MAX_GROUP)
        gc = ETCH_ATTN_MAX_GROUP;
    if (gc > G)
        gc = G;
    jb->isa = attn_isa_active();
    jb->vec = etch_opt_vec_active();
    jb->G = G;
    jb->gc = gc, jb->ngc = (G + gc - 1) / gc;
    jb->scale = (float)scale;
    const int64_t nqb = (T + ETCH_ATTN_QBLOCK - 1) / ETCH_ATTN_QBLOCK;
    etch_kernel_parallel_for(ctx, nqb * KV * jb->ngc, 1, attn_items, jb);
}

static bool sdpa_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 6 || args[4]->tag != ETCH_VALUE_DOUBLE)
        return false;
    etch_tensor *k = etch_opt_fast_tensor(args[1], ETCH_DTYPE_FLOAT, true);
    etch_tensor *v = etch_opt_fast_tensor(args[2], ETCH_DTYPE_FLOAT, true);
    if (!k || !v)
        return false;
    attn_job jb;
    memset(&jb, 0, sizeof jb);
    jb.k = (const float *)k->data;
    jb.v = (const float *)v->data;
    return sdpa_fast_run(ctx, &jb, args[0], args[3], args[5], k, v, args[4]->u.d);
}

ETCH_OPT_KERNEL(sdpa_kv_out) {
    if (!sdpa_fast(ctx, args, nargs))
        etch_portable_sdpa_kv_out(ctx, args, nargs);
}

/* etch::sdpa_kv_q8.out: Char caches, Float scales and Char zero points [KV, S, 1], contiguous;
 * the scales of the positions read are checked first (as the portable kernel does). */
static bool sdpa_q8_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 10 || args[8]->tag != ETCH_VALUE_DOUBLE)
        return false;
    etch_tensor *t[6];
    static const int dt[6] = {ETCH_DTYPE_CHAR, ETCH_DTYPE_FLOAT, ETCH_DTYPE_CHAR,
                              ETCH_DTYPE_CHAR, ETCH_DTYPE_FLOAT, ETCH_DTYPE_CHAR};
    for (int i = 0; i < 6; i++)
        if (!(t[i] = etch_opt_fast_tensor(args[1 + i], dt[i], true)))
            return false;
    etch_tensor *k = t[0], *v = t[3];
    etch_tensor *q = etch_opt_fast_tensor(args[0], ETCH_DTYPE_FLOAT, true);
    etch_tensor *sp = etch_opt_fast_tensor(args[7], ETCH_DTYPE_LONG, true);
    if (!q || !sp || q->dim != 3 || k->dim != 3 || etch_tensor_numel(sp) != 1)
        return false;
    for (int i = 0; i < 6; i++)
        if (i != 0 && i != 3 &&
            (t[i]->dim != 3 || t[i]->sizes[0] != k->sizes[0] || t[i]->sizes[1] != k->sizes[1] ||
             t[i]->sizes[2] != 1))
            return false;
    const int64_t p0 = ((const int64_t *)sp->data)[0];
    if (p0 < 0 || p0 > k->sizes[1] - q->sizes[0])
        return false; /* the portable kernel reports it */
    const int64_t n = p0 + q->sizes[0];
    if (!etch_pk_sdpa_q8_check_params(ctx, k, t[1], t[2], "k", n) ||
        !etch_pk_sdpa_q8_check_params(ctx, v, t[4], t[5], "v", n))
        return true; /* failure recorded */
    attn_job jb;
    memset(&jb, 0, sizeof jb);
    jb.k8 = (const int8_t *)k->data, jb.ks = (const float *)t[1]->data;
    jb.kz = (const int8_t *)t[2]->data;
    jb.v8 = (const int8_t *)v->data, jb.vs = (const float *)t[4]->data;
    jb.vz = (const int8_t *)t[5]->data;
    return sdpa_fast_run(ctx, &jb, args[0], args[7], args[9], k, v, args[8]->u.d);
}

ETCH_OPT_KERNEL(sdpa_kv_q8_out) {
    if (!sdpa_q8_fast(ctx, args, nargs))
        etch_portable_sdpa_kv_q8_out(ctx, args, nargs);
}

/* ---- ExecuTorch's llama::custom_sdpa.out / sdpa_with_kv_cache.out --------------------------
 * The portable kernels' checks (op_custom_sdpa.c), then the streaming softmax above over the
 * caches [1, S_max, KV, hd] (key rows KV * hd floats apart) for the calls it takes: batch 1,
 * causal, no mask, everything contiguous, hd <= ETCH_ATTN_MAX_HD; the rest runs the portable
 * loop. */

static bool contiguous4(const etch_tensor *t) {
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) {
        if (t->sizes[d] != 1 && t->strides[d] != st)
            return false;
        st *= t->sizes[d];
    }
    return true;
}

static void llama_attend(etch_kernel_context *ctx, const etch_llama_sdpa *a) {
    const etch_tensor *q = a->q, *k = a->k, *v = a->v;
    if (a->mask || !a->causal || q->sizes[0] != 1 || q->sizes[3] > ETCH_ATTN_MAX_HD ||
        !contiguous4(q) || !contiguous4(k) || !contiguous4(v) || !contiguous4(a->out) ||
        !a->out->data) {
        etch_pk_llama_sdpa_run(a);
        return;
    }
    attn_job jb;
    memset(&jb, 0, sizeof jb);
    const int64_t KV = k->sizes[2], hd = q->sizes[3];
    jb.q = (const float *)q->data;
    jb.k = (const float *)k->data;
    jb.v = (const float *)v->data;
    jb.out = (float *)a->out->data;
    jb.T = q->sizes[1], jb.H = q->sizes[2], jb.hd = hd, jb.S = k->sizes[1], jb.p0 = a->start;
    jb.rs = KV * hd, jb.hs = hd;
    attn_launch(ctx, &jb, KV, a->scale);
}

ETCH_OPT_KERNEL(llama_custom_sdpa_out) {
    etch_llama_sdpa a;
    if (etch_pk_llama_custom_sdpa_args(ctx, &a, args, nargs) > 0)
        llama_attend(ctx, &a);
}

ETCH_OPT_KERNEL(llama_sdpa_with_kv_cache_out) {
    etch_llama_sdpa a;
    if (etch_pk_llama_sdpa_kv_prepare(ctx, &a, args, nargs) > 0)
        llama_attend(ctx, &a);
}
