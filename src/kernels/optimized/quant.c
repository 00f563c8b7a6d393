/* Integer compute cores (see quant.h): the drivers (activation preparation, threading,
 * requantization), the scalar inner loops, per-token quantization and the int8 weight
 * packing. The per-ISA inner loops are in quant_<isa>.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/optimized/opt.h"
#include "kernels/optimized/quant.h"
#include "runtime/error.h"

#if ETCH_OPT_NEON && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1ul << 20)
#endif
#endif

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

/* ---- features ------------------------------------------------------------------------------ */

static unsigned allowed = ~0u;

unsigned etch_quant_features_cpu(void) {
    unsigned f = 0;
#if ETCH_OPT_X86
    if (__builtin_cpu_supports("avx512vnni"))
        f |= ETCH_QF_VNNI;
#endif
#if ETCH_OPT_NEON && defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP)
        f |= ETCH_QF_DOTPROD;
#endif
    return f;
}

unsigned etch_quant_features(void) { return etch_quant_features_cpu() & allowed; }
void etch_quant_features_allow(unsigned mask) { allowed = mask; }

static void quant_isa_for(int isa, etch_quant_isa *q) {
    const unsigned f = etch_quant_features();
    switch (isa) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX2:
        etch_quant_isa_avx2(q);
        return;
    case ETCH_ISA_AVX512:
        etch_quant_isa_avx512(q, f);
        return;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        etch_quant_isa_neon(q, f);
        return;
#endif
    default:
        (void)f;
        etch_quant_isa_scalar(q);
    }
}

/* ---- scalar inner loops ---------------------------------------------------------------------- */

static void q4_f32_scalar(const etch_q4_job *j, int64_t n0, int64_t n1) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        for (int i = 0; i < j->mm; i++) {
            const float *xd = j->xd + i * K;
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *b = row + g * G / 2;
                const float *x = xd + g * G;
                float d = 0.0f;
                int64_t c = 0;
                for (; c < full; c += 32)
                    for (int t = 0; t < 16; t++)
                        d += (float)(b[c / 2 + t] >> 4) * x[c + t] +
                             (float)(b[c / 2 + t] & 15) * x[c + 16 + t];
                for (; c < G; c += 2)
                    d += (float)(b[c / 2] >> 4) * x[c] + (float)(b[c / 2] & 15) * x[c + 1];
                const float s = w->scales[n * ng + g];
                const float z = w->zeros ? w->zeros[n * ng + g] : 0.0f;
                acc += s * (d - (8.0f + z) * j->xsum[i * ng + g]);
            }
            j->out[i * j->ldo + (n - n0)] = acc;
        }
    }
}

static void q4_8da4w_scalar(const etch_q4_job *j, int64_t n0, int64_t n1) {
    const etch_q4_weights *w = j->w;
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + n * (K / 2);
        for (int i = 0; i < j->mm; i++) {
            const int16_t *xa = j->xa + i * K;
            float acc = 0.0f;
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *b = row + g * G / 2;
                const int16_t *x = xa + g * G;
                int32_t d = 0;
                int64_t c = 0;
                for (; c < full; c += 32)
                    for (int t = 0; t < 16; t++)
                        d += (b[c / 2 + t] >> 4) * x[c + t] + (b[c / 2 + t] & 15) * x[c + 16 + t];
                for (; c < G; c += 2)
                    d += (b[c / 2] >> 4) * x[c] + (b[c / 2] & 15) * x[c + 1];
                const float s = w->scales[n * ng + g];
                const int32_t sa = j->sa[i * ng + g];
                if (w->zeros)
                    acc += s * ((float)d - (8.0f + w->zeros[n * ng + g]) * (float)sa);
                else
                    acc += s * (float)(d - 8 * sa);
            }
            j->out[i * j->ldo + (n - n0)] = acc;
        }
    }
}

static void q8_ukr_scalar(int mm, int64_t kb, const uint8_t *a, int64_t lda,
                          const int8_t *panel, int32_t *acc) {
    enum { NR = 8 };
    for (int i = 0; i < mm; i++)
        for (int j = 0; j < NR; j++) {
            int32_t s = 0;
            for (int64_t k = 0; k < kb; k++)
                for (int t = 0; t < 4; t++)
                    s += (int32_t)a[i * lda + 4 * k + t] * panel[(k * NR + j) * 4 + t];
            acc[i * NR + j] = s;
        }
}

static void q8w_f32_scalar(const etch_q8w_job *j, int64_t n0, int64_t n1) {
    const etch_q8w_weights *w = j->w;
    for (int64_t n = n0; n < n1; n++) {
        const int8_t *row = w->data + n * w->ldw;
        for (int i = 0; i < j->mm; i++) {
            const float *x = j->x + i * j->ldx;
            float d = 0.0f;
            for (int64_t k = 0; k < w->K; k++)
                d += x[k] * (float)row[k];
            j->out[i * j->ldo + (n - n0)] = d;
        }
    }
}

void etch_quant_isa_scalar(etch_quant_isa *q) {
    q->q8w_f32 = q8w_f32_scalar;
    q->q4_f32 = q4_f32_scalar;
    q->q4_8da4w = q4_8da4w_scalar;
    q->q4_act_i8 = false;
    q->q8_mr = 4;
    q->q8_nr = 8;
    q->q8_a_signed = false;
    q->q8_ukr = q8_ukr_scalar;
}

/* ---- int4 drivers ----------------------------------------------------------------------------- */

etch_status etch_q4_check(const etch_q4_weights *w) {
    if (!w || !w->data || !w->scales)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int4 weights: data or scales missing");
    if (w->N < 0 || w->K <= 0 || w->K % 2 != 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int4 weights: N = %lld, K = %lld (K must be even and > 0)",
                        (long long)w->N, (long long)w->K);
    if (w->G <= 0 || w->G % 2 != 0 || w->K % w->G != 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int4 weights: group size %lld must be even and divide K = %lld",
                        (long long)w->G, (long long)w->K);
    if (w->K > ETCH_OPT_SIZE_LIMIT || w->N > ETCH_OPT_SIZE_LIMIT)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int4 weights: sizes too large");
    return ETCH_OK;
}

size_t etch_q4_linear_f32_work_size(int64_t M, int64_t K, int64_t G) {
    if (M <= 0 || K <= 0 || G <= 0)
        return 0;
    return align64((size_t)(M * K) * sizeof(float)) + align64((size_t)(M * (K / G)) * sizeof(float));
}

size_t etch_q4_linear_8da4w_work_size(int64_t M, int64_t K, int64_t G) {
    if (M <= 0 || K <= 0 || G <= 0)
        return 0;
    return align64((size_t)(M * K) * sizeof(int16_t)) + align64((size_t)(M * K)) +
           2 * align64((size_t)(M * (K / G)) * sizeof(int32_t));
}

size_t etch_q4_linear_8da4w_f32_work_size(int64_t M, int64_t K, int64_t G) {
    if (M <= 0 || K <= 0 || G <= 0)
        return 0;
    return etch_q4_linear_8da4w_work_size(M, K, G) + align64((size_t)(M * K)) +
           align64((size_t)M * sizeof(float)) + align64((size_t)M * sizeof(int32_t));
}

#define Q4_NB 16 /* weight rows per task unit */

typedef struct q4_plan {
    const etch_q4_weights *w;
    etch_q4_rows_fn fn;
    int64_t M;
    const float *xd, *xsum;
    const int16_t *xa;
    const int8_t *xq;
    const int32_t *xzp;
    const int32_t *sa;
    const float *xscale; /* 8da4w: per-row activation scale; NULL for f32 */
    const float *bias;
    float *y;
    int64_t ldy;
} q4_plan;

static void q4_task(void *arg, int64_t b, int64_t e) {
    const q4_plan *p = arg;
    const int64_t N = p->w->N, K = p->w->K, ng = K / p->w->G;
    float out[ETCH_Q4_MR * Q4_NB];
    for (int64_t n0 = b * Q4_NB; n0 < e * Q4_NB && n0 < N; n0 += Q4_NB) {
        const int64_t n1 = n0 + Q4_NB < N ? n0 + Q4_NB : N;
        for (int64_t m0 = 0; m0 < p->M; m0 += ETCH_Q4_MR) {
            etch_q4_job j;
            j.w = p->w;
            j.mm = (int)(p->M - m0 < ETCH_Q4_MR ? p->M - m0 : ETCH_Q4_MR);
            j.xd = p->xd ? p->xd + m0 * K : NULL;
            j.xsum = p->xsum ? p->xsum + m0 * ng : NULL;
            j.xa = p->xa ? p->xa + m0 * K : NULL;
            j.xq = p->xq ? p->xq + m0 * K : NULL;
            j.xzp = p->xzp ? p->xzp + m0 : NULL;
            j.sa = p->sa ? p->sa + m0 * ng : NULL;
            j.out = out;
            j.ldo = Q4_NB;
            p->fn(&j, n0, n1);
            for (int i = 0; i < j.mm; i++) {
                float *y = p->y + (m0 + i) * p->ldy;
                const float xs = p->xscale ? p->xscale[m0 + i] : 1.0f;
                for (int64_t n = n0; n < n1; n++) {
                    float v = out[i * Q4_NB + (n - n0)];
                    if (p->xscale)
                        v *= xs;
                    y[n] = p->bias ? v + p->bias[n] : v;
                }
            }
        }
    }
}

static void q4_run(etch_kernel_context *ctx, q4_plan *p) {
    const int64_t units = (p->w->N + Q4_NB - 1) / Q4_NB;
    if (units <= 0 || p->M <= 0)
        return;
    if (ctx)
        etch_kernel_parallel_for(ctx, units, 1, q4_task, p);
    else
        q4_task(p, 0, units);
}

void etch_q4_linear_f32(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                        const float *x, int64_t ldx, const float *bias, float *y, int64_t ldy,
                        void *work) {
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    float *xd = work;
    float *xsum = (float *)((char *)work + align64((size_t)(M * K) * sizeof(float)));
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * ldx;
        float *d = xd + m * K;
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = xr + g * G;
            float *dg = d + g * G, s = 0.0f;
            int64_t c = 0;
            for (; c < full; c += 32)
                for (int t = 0; t < 16; t++) {
                    dg[c + t] = xg[c + 2 * t];
                    dg[c + 16 + t] = xg[c + 2 * t + 1];
                }
            for (; c < G; c++)
                dg[c] = xg[c];
            for (c = 0; c < G; c++)
                s += xg[c];
            xsum[m * ng + g] = s;
        }
    }
    etch_quant_isa q;
    quant_isa_for((int)etch_isa_active(), &q);
    q4_plan p = {w, q.q4_f32, M, xd, xsum, NULL, NULL, NULL, NULL, NULL, bias, y, ldy};
    q4_run(ctx, &p);
}

void etch_q4_linear_8da4w(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                          const int8_t *xq, int64_t ldx, const float *xscale,
                          const int32_t *xzp, const float *bias, float *y, int64_t ldy,
                          void *work) {
    const int64_t K = w->K, G = w->G, ng = K / G, full = G - G % 32;
    etch_quant_isa q;
    quant_isa_for((int)etch_isa_active(), &q);
    int16_t *xa = work;
    int8_t *xd8 = (int8_t *)((char *)work + align64((size_t)(M * K) * sizeof(int16_t)));
    int32_t *sa = (int32_t *)((char *)xd8 + align64((size_t)(M * K)));
    float *saf = (float *)((char *)sa + align64((size_t)(M * ng) * sizeof(int32_t)));
    for (int64_t m = 0; m < M; m++) {
        const int8_t *xr = xq + m * ldx;
        const int32_t z = xzp[m];
        int16_t *d = xa + m * K;
        int8_t *d8 = xd8 + m * K;
        for (int64_t g = 0; g < ng; g++) {
            const int8_t *xg = xr + g * G;
            int32_t s = 0;
            int64_t c = 0;
            if (q.q4_act_i8) {
                int8_t *dg = d8 + g * G;
                for (; c < full; c += 32)
                    for (int t = 0; t < 16; t++) {
                        dg[c + t] = xg[c + 2 * t];
                        dg[c + 16 + t] = xg[c + 2 * t + 1];
                    }
                for (; c < G; c++)
                    dg[c] = xg[c];
            } else {
                int16_t *dg = d + g * G;
                for (; c < full; c += 32)
                    for (int t = 0; t < 16; t++) {
                        dg[c + t] = (int16_t)(xg[c + 2 * t] - z);
                        dg[c + 16 + t] = (int16_t)(xg[c + 2 * t + 1] - z);
                    }
                for (; c < G; c++)
                    dg[c] = (int16_t)(xg[c] - z);
            }
            for (c = 0; c < G; c++)
                s += xg[c] - z;
            sa[m * ng + g] = s;
            saf[m * ng + g] = (float)s;
        }
    }
    q4_plan p = {w, q.q4_8da4w, M, NULL, saf, q.q4_act_i8 ? NULL : xa, q.q4_act_i8 ? xd8 : NULL,
                 xzp, sa, xscale, bias, y, ldy};
    q4_run(ctx, &p);
}

void etch_q4_linear_8da4w_f32(etch_kernel_context *ctx, const etch_q4_weights *w, int64_t M,
                              const float *x, int64_t ldx, const float *bias, float *y,
                              int64_t ldy, void *work) {
    const int64_t K = w->K;
    char *base = (char *)work + etch_q4_linear_8da4w_work_size(M, K, w->G);
    int8_t *xq = (int8_t *)base;
    float *scale = (float *)(base + align64((size_t)(M * K)));
    int32_t *zp = (int32_t *)((char *)scale + align64((size_t)M * sizeof(float)));
    etch_q8_choose_qparams_per_token(x, M, K, ldx, scale, zp);
    etch_q8_quantize_per_token(x, M, K, ldx, scale, zp, xq, K);
    etch_q4_linear_8da4w(ctx, w, M, xq, K, scale, zp, bias, y, ldy, work);
}

/* ---- int8 per-channel weights, float activations ---------------------------------------- */

etch_status etch_q8w_check(const etch_q8w_weights *w) {
    if (!w || !w->data || !w->scales)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 weights: data or scales missing");
    if (w->N < 0 || w->K <= 0 || w->ldw < w->K || w->K > ETCH_OPT_SIZE_LIMIT ||
        w->N > ETCH_OPT_SIZE_LIMIT)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 weights: N = %lld, K = %lld, row stride %lld",
                        (long long)w->N, (long long)w->K, (long long)w->ldw);
    return ETCH_OK;
}

size_t etch_q8w_linear_f32_work_size(int64_t M) {
    return M > 0 ? align64((size_t)M * sizeof(float)) : 0;
}

typedef struct q8w_plan {
    const etch_q8w_weights *w;
    etch_q8w_rows_fn fn;
    int64_t M, ldx, ldy;
    const float *x, *xsum, *bias;
    float *y;
} q8w_plan;

static void q8w_task(void *arg, int64_t b, int64_t e) {
    const q8w_plan *p = arg;
    const etch_q8w_weights *w = p->w;
    float out[ETCH_Q4_MR * Q4_NB];
    for (int64_t n0 = b * Q4_NB; n0 < e * Q4_NB && n0 < w->N; n0 += Q4_NB) {
        const int64_t n1 = n0 + Q4_NB < w->N ? n0 + Q4_NB : w->N;
        for (int64_t m0 = 0; m0 < p->M; m0 += ETCH_Q4_MR) {
            etch_q8w_job j = {w, (int)(p->M - m0 < ETCH_Q4_MR ? p->M - m0 : ETCH_Q4_MR),
                              p->x + m0 * p->ldx, p->ldx, out, Q4_NB};
            p->fn(&j, n0, n1);
            for (int i = 0; i < j.mm; i++) {
                float *y = p->y + (m0 + i) * p->ldy;
                for (int64_t n = n0; n < n1; n++) {
                    float d = out[i * Q4_NB + (n - n0)];
                    if (w->zeros)
                        d -= w->zeros[n] * p->xsum[m0 + i];
                    const float v = w->scales[n] * d;
                    y[n] = p->bias ? v + p->bias[n] : v;
                }
            }
        }
    }
}

void etch_q8w_linear_f32(etch_kernel_context *ctx, const etch_q8w_weights *w, int64_t M,
                         const float *x, int64_t ldx, const float *bias, float *y, int64_t ldy,
                         void *work) {
    float *xsum = work;
    if (w->zeros)
        for (int64_t m = 0; m < M; m++) {
            float s = 0.0f;
            for (int64_t k = 0; k < w->K; k++)
                s += x[m * ldx + k];
            xsum[m] = s;
        }
    etch_quant_isa q;
    quant_isa_for((int)etch_isa_active(), &q);
    q8w_plan p = {w, q.q8w_f32, M, ldx, ldy, x, xsum, bias, y};
    const int64_t units = (w->N + Q4_NB - 1) / Q4_NB;
    if (units <= 0 || M <= 0)
        return;
    if (ctx)
        etch_kernel_parallel_for(ctx, units, 1, q8w_task, &p);
    else
        q8w_task(&p, 0, units);
}

/* ---- per-token quantization (ExecuTorch's choose_qparams_per_token_asymmetric) ------------- */

#define SMALL_SCALE_THRESHOLD 6.1e-5f

void etch_q8_choose_qparams_per_token(const float *x, int64_t M, int64_t K, int64_t ldx,
                                      float *scale_out, int32_t *zp_out) {
    const int32_t qmin = -128, qmax = 127;
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * ldx;
        float mn = r[0], mx = r[0];
        for (int64_t k = 1; k < K; k++) {
            mn = r[k] < mn ? r[k] : mn;
            mx = r[k] > mx ? r[k] : mx;
        }
        mn = mn < 0.0f ? mn : 0.0f;
        mx = mx > 0.0f ? mx : 0.0f;
        double scale = ((double)mx - mn) / (qmax - qmin);
        if ((float)scale == 0.0f || isinf(1.0f / (float)scale))
            scale = 0.1;
        if (scale < SMALL_SCALE_THRESHOLD) {
            const float org = (float)scale;
            scale = SMALL_SCALE_THRESHOLD;
            if (mn == 0.0f)
                mx = SMALL_SCALE_THRESHOLD * (qmax - qmin);
            else if (mx == 0.0f)
                mn = -SMALL_SCALE_THRESHOLD * (qmax - qmin);
            else {
                const float amp = SMALL_SCALE_THRESHOLD / org;
                mn *= amp;
                mx *= amp;
            }
        }
        const double zmin = qmin - mn / scale, zmax = qmax - mx / scale;
        const double emin = abs(qmin) - fabs(mn / scale), emax = abs(qmax) - fabs(mx / scale);
        const double z0 = emin < emax ? zmin : zmax;
        int32_t zp;
        if (z0 < qmin)
            zp = qmin;
        else if (z0 > qmax)
            zp = qmax;
        else
            zp = (int32_t)nearbyintf((float)z0);
        scale_out[m] = (float)scale;
        zp_out[m] = zp;
    }
}

void etch_q8_quantize_per_token(const float *x, int64_t M, int64_t K, int64_t ldx,
                                const float *scale, const int32_t *zp, int8_t *q, int64_t ldq) {
    for (int64_t m = 0; m < M; m++) {
        const float inv = 1.0f / scale[m];
        const float *r = x + m * ldx;
        int8_t *o = q + m * ldq;
        for (int64_t k = 0; k < K; k++) {
            const float v = nearbyintf(inv * r[k]) + (float)zp[m];
            o[k] = (int8_t)(v >= 127.0f ? 127 : !(v > -128.0f) ? -128 : (int)v);
        }
    }
}

/* ---- int8 GEMM ------------------------------------------------------------------------------- */

size_t etch_q8_gemm_packed_size(int isa, int64_t N, int64_t K) {
    etch_quant_isa q;
    quant_isa_for(isa < 0 ? (int)etch_isa_active() : isa, &q);
    if (N <= 0 || K <= 0)
        return 0;
    return align64((size_t)(round_up(N, q.q8_nr) * round_up(K, 4))) +
           align64((size_t)N * sizeof(int32_t));
}

void etch_q8_gemm_pack(int isa, const int8_t *b, int64_t N, int64_t K, int64_t ldb, void *dst,
                       etch_q8_packed *out) {
    if (isa < 0)
        isa = (int)etch_isa_active();
    etch_quant_isa q;
    quant_isa_for(isa, &q);
    const int nr = q.q8_nr;
    const int64_t kp = round_up(K, 4), npad = round_up(N, nr);
    int8_t *pan = dst;
    int32_t *cs = (int32_t *)((char *)dst + align64((size_t)(npad * kp)));
    for (int64_t p = 0; p < npad / nr; p++)
        for (int64_t kb = 0; kb < kp / 4; kb++)
            for (int j = 0; j < nr; j++)
                for (int t = 0; t < 4; t++) {
                    const int64_t n = p * nr + j, k = kb * 4 + t;
                    pan[((p * (kp / 4) + kb) * nr + j) * 4 + t] =
                        n < N && k < K ? b[n * ldb + k] : 0;
                }
    for (int64_t n = 0; n < N; n++) {
        int32_t s = 0;
        for (int64_t k = 0; k < K; k++)
            s += b[n * ldb + k];
        cs[n] = s;
    }
    out->isa = isa;
    out->nr = nr;
    out->N = N;
    out->K = K;
    out->kp = kp;
    out->panels = pan;
    out->colsum = cs;
}

size_t etch_q8_gemm_work_size(int64_t M, int64_t K) {
    if (M <= 0 || K <= 0)
        return 0;
    return align64((size_t)(round_up(M, 16) * round_up(K, 4))) +
           align64((size_t)round_up(M, 16) * sizeof(int32_t));
}

typedef struct q8_plan {
    const etch_q8_gemm_desc *d;
    etch_quant_isa q;
    const uint8_t *a; /* converted copy, [mpad][kp] */
    const int32_t *rowsum;
    int32_t za;       /* zero point of the converted copy */
} q8_plan;

static void q8_store(const q8_plan *p, int64_t m, int64_t n, int32_t acc) {
    const etch_q8_gemm_desc *d = p->d;
    const etch_q8_packed *b = d->b;
    int64_t v = (int64_t)acc - (int64_t)p->za * b->colsum[n];
    if (d->zb && d->zb[n])
        v += (int64_t)d->zb[n] * ((int64_t)p->za * b->K - p->rowsum[m]);
    if (d->bias32)
        v += d->bias32[n];
    const int32_t v32 = (int32_t)v;
    if (d->out_type == ETCH_Q8_OUT_S32) {
        ((int32_t *)d->c)[m * d->ldc + n] = v32;
        return;
    }
    const float mult = d->mult[d->mult_per_channel ? n : 0];
    const float f = (float)v32 * mult;
    if (d->out_type == ETCH_Q8_OUT_F32) {
        ((float *)d->c)[m * d->ldc + n] = d->fbias ? f + d->fbias[n] : f;
        return;
    }
    const float t = etch_q8_round(f) + (float)d->zo;
    const int32_t r = !(t > (float)d->qmin) ? d->qmin : t >= (float)d->qmax ? d->qmax : (int32_t)t;
    if (d->out_type == ETCH_Q8_OUT_S8)
        ((int8_t *)d->c)[m * d->ldc + n] = (int8_t)r;
    else
        ((uint8_t *)d->c)[m * d->ldc + n] = (uint8_t)r;
}

/* q8_store's int8 / uint8 result from acc and the column's hoisted terms. */
static inline int32_t q8_requant(int32_t acc, uint32_t off, float mult, float zo, float lo,
                                 float hi) {
    const int32_t v = (int32_t)((uint32_t)acc + off);
    float t = etch_q8_round((float)v * mult) + zo;
    t = t > lo ? t : lo;
    t = t < hi ? t : hi;
    return (int32_t)t;
}

static void q8_task(void *arg, int64_t pb, int64_t pe) {
    const q8_plan *p = arg;
    const etch_q8_gemm_desc *d = p->d;
    const etch_q8_packed *b = d->b;
    const int mr = p->q.q8_mr, nr = p->q.q8_nr;
    const int64_t kb = b->kp / 4;
    int32_t acc[16 * 32];
    /* int8 / uint8 out without weight zero points: per column off = bias - za * colsum (as
     * q8_store's int64 sum, wrapped to int32 at the end alike) and the multiplier */
    const bool fast = !(d->zb) && (d->out_type == ETCH_Q8_OUT_U8 || d->out_type == ETCH_Q8_OUT_S8);
    uint32_t off[32];
    float mj[32];
    const float zo = (float)d->zo, lo = (float)d->qmin, hi = (float)d->qmax;
    for (int64_t pn = pb; pn < pe; pn++) {
        const int8_t *panel = b->panels + pn * kb * nr * 4;
        const int64_t n0 = pn * nr, nn = b->N - n0 < nr ? b->N - n0 : nr;
        if (fast)
            for (int64_t j = 0; j < nn; j++) {
                const int64_t n = n0 + j;
                off[j] = (uint32_t)((d->bias32 ? d->bias32[n] : 0) - (int64_t)p->za * b->colsum[n]);
                mj[j] = d->mult[d->mult_per_channel ? n : 0];
            }
        for (int64_t m0 = 0; m0 < d->M; m0 += mr) {
            const int mm = (int)(d->M - m0 < mr ? d->M - m0 : mr);
            p->q.q8_ukr(mr, kb, p->a + m0 * b->kp, b->kp, panel, acc);
            if (fast) { /* q8_store's arithmetic, the per-column terms hoisted (vectorizes) */
                for (int i = 0; i < mm; i++) {
                    const int32_t *ar = acc + i * nr;
                    if (d->out_type == ETCH_Q8_OUT_U8) {
                        uint8_t *cr = (uint8_t *)d->c + (m0 + i) * d->ldc + n0;
                        for (int64_t j = 0; j < nn; j++)
                            cr[j] = (uint8_t)q8_requant(ar[j], off[j], mj[j], zo, lo, hi);
                    } else {
                        int8_t *cr = (int8_t *)d->c + (m0 + i) * d->ldc + n0;
                        for (int64_t j = 0; j < nn; j++)
                            cr[j] = (int8_t)q8_requant(ar[j], off[j], mj[j], zo, lo, hi);
                    }
                }
                continue;
            }
            for (int i = 0; i < mm; i++)
                for (int64_t j = 0; j < nn; j++)
                    q8_store(p, m0 + i, n0 + j, acc[i * nr + j]);
        }
    }
}

etch_status etch_q8_gemm(etch_kernel_context *ctx, const etch_q8_gemm_desc *d) {
    const etch_q8_packed *b = d->b;
    q8_plan p;
    quant_isa_for((int)etch_isa_active(), &p.q);
    if (b->isa != (int)etch_isa_active() || b->nr != p.q.q8_nr)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 GEMM: weights packed for %s, the active instruction set is %s",
                        etch_isa_name((etch_isa)b->isa), etch_isa_name(etch_isa_active()));
    if (b->K > ETCH_Q8_MAX_K)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 GEMM: K = %lld exceeds %d",
                        (long long)b->K, ETCH_Q8_MAX_K);
    if (d->za < (d->a_signed ? -128 : 0) || d->za > (d->a_signed ? 127 : 255))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 GEMM: activation zero point %d is outside the %s range",
                        (int)d->za, d->a_signed ? "int8" : "uint8");
    if (d->out_type < ETCH_Q8_OUT_F32 || d->out_type > ETCH_Q8_OUT_S32 ||
        (d->out_type != ETCH_Q8_OUT_S32 && !d->mult))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 GEMM: output type %d needs a requantization multiplier",
                        d->out_type);
    if ((d->out_type == ETCH_Q8_OUT_S8 || d->out_type == ETCH_Q8_OUT_U8) &&
        (d->qmin > d->qmax || d->qmin < (d->out_type == ETCH_Q8_OUT_S8 ? -128 : 0) ||
         d->qmax > (d->out_type == ETCH_Q8_OUT_S8 ? 127 : 255)))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 GEMM: output clamp [%d, %d] is empty or outside the output type",
                        (int)d->qmin, (int)d->qmax);
    if (d->M <= 0 || b->N <= 0)
        return ETCH_OK;
    const int64_t K = b->K, kp = b->kp, mpad = round_up(d->M, 16);
    uint8_t *a = d->work;
    int32_t *rowsum = (int32_t *)((char *)d->work + align64((size_t)(mpad * kp)));
    /* the converted copy: x86 kernels take uint8 (int8 inputs flipped: a + 128), arm ones
     * int8 (uint8 inputs flipped: a - 128); the zero point moves with them */
    const bool flip = d->a_signed != p.q.q8_a_signed;
    p.za = d->za + (flip ? (d->a_signed ? 128 : -128) : 0);
    memset(a, 0, (size_t)(mpad * kp));
    for (int64_t m = 0; m < d->M; m++) {
        const uint8_t *src = (const uint8_t *)d->a + m * d->lda;
        uint8_t *dst = a + m * kp;
        int32_t s = 0;
        for (int64_t k = 0; k < K; k++) {
            const uint8_t v = flip ? (uint8_t)(src[k] ^ 0x80) : src[k];
            dst[k] = v;
            s += p.q.q8_a_signed ? (int32_t)(int8_t)v : (int32_t)v;
        }
        rowsum[m] = s;
    }
    p.d = d;
    p.a = a;
    p.rowsum = rowsum;
    const int64_t panels = round_up(b->N, p.q.q8_nr) / p.q.q8_nr;
    if (ctx)
        etch_kernel_parallel_for(ctx, panels, 1, q8_task, &p);
    else
        q8_task(&p, 0, panels);
    return ETCH_OK;
}
