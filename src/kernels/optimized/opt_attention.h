/* Optimized etch::sdpa_kv.out (attention.c; semantics in src/kernels/portable/op_sdpa_kv.c)
 * and its per-instruction-set block functions. */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_ATTENTION_H
#define ETCH_KERNELS_OPTIMIZED_OPT_ATTENTION_H

#include <stdint.h>

#include "kernels/optimized/opt.h"

ETCH_OPT_KERNEL(sdpa_kv_out);
ETCH_OPT_KERNEL(sdpa_kv_q8_out);
ETCH_OPT_KERNEL(llama_custom_sdpa_out);        /* ExecuTorch's, batch 1, causal, contiguous */
ETCH_OPT_KERNEL(llama_sdpa_with_kv_cache_out);

/* The two inner loops of the streaming softmax, over a block of n keys (rows of hd floats,
 * row stride rs >= hd floats: hd for etch's [KV, S, hd] caches, KV * hd for ExecuTorch's
 * [1, S, KV, hd] ones):
 *   scores: s[j] = scale * dot(q, k + j*rs)            for j < n
 *   accum:  acc[d] += sum_j p[j] * v[j*rs + d]         for d < hd (j in order 0 .. n-1)
 * and optionally the same for two query rows at once, sharing every load of a key or value
 * (NULL when the ISA has none):
 *   scores2: s0[j] = scale * dot(q0, k + j*rs), s1[j] = scale * dot(q1, k + j*rs)
 *   accum2:  acc0[d] += sum_j p0[j] * v[j*rs + d], acc1[d] += sum_j p1[j] * v[j*rs + d]
 * and the int8 cache's two (etch::sdpa_kv_q8: rows of hd int8 values, a float scale ks[j] /
 * vs[j] and an int8 zero point kz[j] / vz[j] per key):
 *   scores_q8: s[j] = scale * ks[j] * dot(q, k + j*hd - kz[j])
 *   accum_q8:  acc[d] += sum_j p[j] * vs[j] * (v[j*hd + d] - vz[j])
 * (each difference exact in int32, then float).
 * Each ISA's results depend only on the operands, never on the thread split. */
typedef struct etch_attn_isa {
    void (*scores)(float *s, const float *q, const float *k, int64_t n, int64_t hd, int64_t rs,
                   float scale);
    void (*accum)(float *acc, const float *p, const float *v, int64_t n, int64_t hd, int64_t rs);
    void (*scores2)(float *s0, float *s1, const float *q0, const float *q1, const float *k,
                    int64_t n, int64_t hd, int64_t rs, float scale);
    void (*accum2)(float *acc0, float *acc1, const float *p0, const float *p1, const float *v,
                   int64_t n, int64_t hd, int64_t rs);
    void (*scores_q8)(float *s, const float *q, const int8_t *k, const float *ks,
                      const int8_t *kz, int64_t n, int64_t hd, float scale);
    void (*accum_q8)(float *acc, const float *p, const int8_t *v, const float *vs,
                     const int8_t *vz, int64_t n, int64_t hd);
} etch_attn_isa;

extern const etch_attn_isa etch_attn_scalar;
#if ETCH_OPT_X86
extern const etch_attn_isa etch_attn_avx2; /* also what AVX-512 uses */
#endif
#if ETCH_OPT_NEON
extern const etch_attn_isa etch_attn_neon;
#endif

#endif
