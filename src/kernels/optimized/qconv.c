/* int8 convolution with fused requantization (quant.h, "int8 convolution"): an int8 im2col
 * through the int8 GEMM (quant.c) for ordinary and grouped convolutions, a direct loop for
 * depthwise ones. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/opt.h"
#include "kernels/optimized/quant.h"
#include "runtime/error.h"

#define QC_PB 64 /* output pixels per im2col block */

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static bool depthwise(const etch_q8_conv_desc *d) { return d->C / d->groups == 1; }

etch_status etch_q8_conv_check(const etch_q8_conv_desc *d) {
    if (d->N < 0 || d->C <= 0 || d->H <= 0 || d->W <= 0 || d->OC <= 0 || d->KH <= 0 ||
        d->KW <= 0 || d->groups <= 0 || d->C % d->groups || d->OC % d->groups || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->ph < 0 || d->pw < 0 || d->OH <= 0 ||
        d->OW <= 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 conv: bad sizes");
    if (d->OH != (d->H + 2 * d->ph - d->dh * (d->KH - 1) - 1) / d->sh + 1 ||
        d->OW != (d->W + 2 * d->pw - d->dw * (d->KW - 1) - 1) / d->sw + 1)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 conv: output %lldx%lld does not fit",
                        (long long)d->OH, (long long)d->OW);
    if ((d->C / d->groups) * d->KH * d->KW > ETCH_Q8_MAX_K)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 conv: reduction longer than %d",
                        ETCH_Q8_MAX_K);
    if (d->zx < 0 || d->zx > 255 || d->zo < 0 || d->zo > 255 || d->qmin < 0 ||
        d->qmax > 255 || d->qmin > d->qmax)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "int8 conv: zero points or clamp outside 0..255");
    if (!d->mult || !d->w || !d->x || !d->y)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 conv: missing operand");
    if (d->packed && (d->groups != 1 || d->packed->N != d->OC ||
                      d->packed->K != d->C * d->KH * d->KW ||
                      d->packed->isa != (int)etch_isa_active()))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "int8 conv: packed weights do not fit");
    return ETCH_OK;
}

/* Per-thread scratch of the GEMM path: im2col block, GEMM work, result block. */
static size_t thread_bytes(const etch_q8_conv_desc *d) {
    const int64_t K = (d->C / d->groups) * d->KH * d->KW, Ng = d->OC / d->groups;
    if (depthwise(d))
        return align64((size_t)d->OW * sizeof(int32_t));
    return align64((size_t)(QC_PB * K)) + etch_q8_gemm_work_size(QC_PB, K) +
           align64((size_t)(QC_PB * Ng));
}

static bool packs_here(const etch_q8_conv_desc *d) { return !depthwise(d) && !d->packed; }

static size_t packed_bytes(const etch_q8_conv_desc *d) {
    const int64_t K = (d->C / d->groups) * d->KH * d->KW, Ng = d->OC / d->groups;
    return packs_here(d) ? (size_t)d->groups * etch_q8_gemm_packed_size(-1, Ng, K) : 0;
}

size_t etch_q8_conv_work_size(const etch_q8_conv_desc *d, int threads) {
    return packed_bytes(d) + (size_t)(threads < 1 ? 1 : threads) * thread_bytes(d) +
           align64((size_t)d->groups * sizeof(etch_q8_packed));
}

static inline uint8_t requant(int32_t acc, float mult, int32_t zo, int32_t qmin, int32_t qmax) {
    const float t = etch_q8_round((float)acc * mult) + (float)zo;
    return (uint8_t)(!(t > (float)qmin) ? qmin : t >= (float)qmax ? qmax : (int32_t)t);
}

typedef struct qc_plan {
    const etch_q8_conv_desc *d;
    const etch_q8_packed *pk; /* [groups] */
    char *scratch;            /* per thread: thread_bytes each */
    size_t tb;
    int64_t nblk;
} qc_plan;

/* im2col of pixels [p0, p0 + pb) of image n, group g: col[i][(c * KH + kh) * KW + kw]. */
static void im2col(const etch_q8_conv_desc *d, int64_t n, int64_t g, int64_t p0, int64_t pb,
                   uint8_t *col, int64_t K) {
    const int64_t Cg = d->C / d->groups;
    const uint8_t *xb = d->x + (n * d->C + g * Cg) * d->H * d->W;
    for (int64_t i = 0; i < pb; i++) {
        const int64_t oh = (p0 + i) / d->OW, ow = (p0 + i) % d->OW;
        uint8_t *r = col + i * K;
        if (d->KH == 1 && d->KW == 1 && d->ph == 0 && d->pw == 0) {
            const uint8_t *xp = xb + oh * d->sh * d->W + ow * d->sw;
            for (int64_t c = 0; c < Cg; c++)
                r[c] = xp[c * d->H * d->W];
            continue;
        }
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < d->KH; kh++) {
                const int64_t ih = oh * d->sh - d->ph + kh * d->dh;
                uint8_t *rr = r + (c * d->KH + kh) * d->KW;
                if (ih < 0 || ih >= d->H) {
                    memset(rr, d->zx, (size_t)d->KW);
                    continue;
                }
                const uint8_t *xr = xb + (c * d->H + ih) * d->W;
                for (int64_t kw = 0; kw < d->KW; kw++) {
                    const int64_t iw = ow * d->sw - d->pw + kw * d->dw;
                    rr[kw] = iw < 0 || iw >= d->W ? (uint8_t)d->zx : xr[iw];
                }
            }
    }
}

static void gemm_task(void *arg, int thread, int64_t b, int64_t e) {
    const qc_plan *p = arg;
    const etch_q8_conv_desc *d = p->d;
    const int64_t K = (d->C / d->groups) * d->KH * d->KW, Ng = d->OC / d->groups;
    const int64_t P = d->OH * d->OW;
    char *s = p->scratch + (size_t)thread * p->tb;
    uint8_t *col = (uint8_t *)s;
    void *gw = s + align64((size_t)(QC_PB * K));
    uint8_t *res = (uint8_t *)((char *)gw + etch_q8_gemm_work_size(QC_PB, K));
    for (int64_t t = b; t < e; t++) {
        const int64_t blk = t % p->nblk, ng = t / p->nblk, g = ng % d->groups, n = ng / d->groups;
        const int64_t p0 = blk * QC_PB, pb = P - p0 < QC_PB ? P - p0 : QC_PB;
        im2col(d, n, g, p0, pb, col, K);
        etch_q8_gemm_desc gd;
        memset(&gd, 0, sizeof gd);
        gd.M = pb;
        gd.a = col;
        gd.lda = K;
        gd.za = d->zx;
        gd.b = &p->pk[g];
        gd.bias32 = d->bias32 ? d->bias32 + g * Ng : NULL;
        gd.mult = d->mult + g * Ng;
        gd.mult_per_channel = true;
        gd.out_type = ETCH_Q8_OUT_U8;
        gd.zo = d->zo;
        gd.qmin = d->qmin;
        gd.qmax = d->qmax;
        gd.c = res;
        gd.ldc = Ng;
        gd.work = gw;
        if (etch_q8_gemm(NULL, &gd) != ETCH_OK)
            continue; /* (checked before: cannot happen) */
        uint8_t *yb = d->y + (n * d->OC + g * Ng) * P + p0;
        for (int64_t o = 0; o < Ng; o++)
            for (int64_t i = 0; i < pb; i++)
                yb[o * P + i] = res[i * Ng + o];
    }
}

/* Depthwise: output channels [b, e) of all images (task = n * OC + o). */
static void dw_task(void *arg, int thread, int64_t b, int64_t e) {
    const qc_plan *p = arg;
    const etch_q8_conv_desc *d = p->d;
    int32_t *restrict acc = (int32_t *)(p->scratch + (size_t)thread * p->tb);
    const int64_t mul = d->OC / d->groups, OW = d->OW;
    for (int64_t t = b; t < e; t++) {
        const int64_t n = t / d->OC, o = t % d->OC, c = o / mul;
        const uint8_t *xc = d->x + (n * d->C + c) * d->H * d->W;
        const int8_t *wo = d->w + o * d->KH * d->KW;
        uint8_t *yo = d->y + (n * d->OC + o) * d->OH * OW;
        const int32_t b32 = d->bias32 ? d->bias32[o] : 0, zx = d->zx;
        const float mult = d->mult[o];
        for (int64_t oh = 0; oh < d->OH; oh++) {
            for (int64_t i = 0; i < OW; i++)
                acc[i] = b32;
            for (int64_t kh = 0; kh < d->KH; kh++) {
                const int64_t ih = oh * d->sh - d->ph + kh * d->dh;
                if (ih < 0 || ih >= d->H)
                    continue;
                const uint8_t *xr = xc + ih * d->W;
                for (int64_t kw = 0; kw < d->KW; kw++) {
                    const int32_t wv = wo[kh * d->KW + kw];
                    const int64_t off = kw * d->dw - d->pw;
                    /* columns whose tap lies inside: 0 <= ow * sw + off < W */
                    int64_t lo = off >= 0 ? 0 : (-off + d->sw - 1) / d->sw;
                    int64_t hi = d->W - off <= 0 ? 0 : (d->W - off - 1) / d->sw + 1;
                    if (hi > OW)
                        hi = OW;
                    if (d->sw == 1) {
                        const uint8_t *restrict xs = xr + off;
                        for (int64_t i = lo; i < hi; i++)
                            acc[i] += ((int32_t)xs[i] - zx) * wv;
                    } else {
                        for (int64_t i = lo; i < hi; i++)
                            acc[i] += ((int32_t)xr[i * d->sw + off] - zx) * wv;
                    }
                }
            }
            uint8_t *restrict yr = yo + oh * OW;
            const float zo = (float)d->zo, qlo = (float)d->qmin, qhi = (float)d->qmax;
            for (int64_t i = 0; i < OW; i++) {
                float v = etch_q8_round((float)acc[i] * mult) + zo; /* requant, branch-free */
                v = v > qlo ? v : qlo;
                v = v < qhi ? v : qhi;
                yr[i] = (uint8_t)(int32_t)v;
            }
        }
    }
}

etch_status etch_q8_conv(etch_kernel_context *ctx, const etch_q8_conv_desc *d, void *work) {
    etch_status st = etch_q8_conv_check(d);
    if (st != ETCH_OK)
        return st;
    if (d->N == 0)
        return ETCH_OK;
    const int64_t K = (d->C / d->groups) * d->KH * d->KW, Ng = d->OC / d->groups;
    qc_plan p;
    p.d = d;
    p.tb = thread_bytes(d);
    char *w = work;
    etch_q8_packed *pk = (etch_q8_packed *)w;
    w += align64((size_t)d->groups * sizeof(etch_q8_packed));
    if (!depthwise(d)) {
        if (d->packed) {
            pk[0] = *d->packed;
        } else {
            const size_t one = etch_q8_gemm_packed_size(-1, Ng, K);
            for (int64_t g = 0; g < d->groups; g++)
                etch_q8_gemm_pack(-1, d->w + g * Ng * K, Ng, K, K, w + (size_t)g * one, &pk[g]);
            w += (size_t)d->groups * one;
        }
    }
    p.pk = pk;
    p.scratch = w;
    if (depthwise(d)) {
        p.nblk = 0;
        if (ctx)
            etch_kernel_parallel_for_thread(ctx, d->N * d->OC, 1, dw_task, &p);
        else
            dw_task(&p, 0, 0, d->N * d->OC);
    } else {
        p.nblk = (d->OH * d->OW + QC_PB - 1) / QC_PB;
        const int64_t tasks = d->N * d->groups * p.nblk;
        if (ctx)
            etch_kernel_parallel_for_thread(ctx, tasks, 1, gemm_task, &p);
        else
            gemm_task(&p, 0, 0, tasks);
    }
    return ETCH_OK;
}
