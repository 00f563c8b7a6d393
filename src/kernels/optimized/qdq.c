/*
 * quantized_decomposed::quantize_per_tensor.out and dequantize_per_tensor.out between float32
 * and 8-bit tensors (Byte / Char), contiguous, every argument valid: a plain loop over the
 * elements split over the threads, with the portable kernels' own arithmetic
 *   dequantize: (float)(q - zp) * (float)scale                      (etch_q_dequantize)
 *   quantize:   clamp(zp + nearbyintf(x * (1.0f / (float)scale)), qmin, qmax), NaN -> qmin
 * (etch_q_quantize; the rounding by etch_q8_round, which the 8-bit clamp cannot tell from
 * nearbyintf), so the bytes and floats are the portable kernels'. Anything else (other
 * dtypes, strides, a bad argument: the portable kernel names it) is the portable kernel. The
 * dequantization is also the first call of the static int8 chains (qconv_chain.c).
 */
#include <math.h>

#include "kernels/optimized/opt.h"
#include "kernels/optimized/opt_quant.h"
#include "kernels/optimized/quant.h"
#include "kernels/portable/portable_quant.h"

#define QDQ_GRAIN 16384

typedef struct qdq_job {
    const void *in;
    void *out;
    bool s8;
    float scale; /* dequantize: scale; quantize: 1 / scale */
    int32_t zp, qmin, qmax;
} qdq_job;

static void dq_task(void *arg, int64_t b, int64_t e) {
    const qdq_job *j = arg;
    float *o = j->out;
    const int32_t zp = j->zp;
    const float scale = j->scale;
    /* etch_q_dequantize's value: q - zp is exact in int32 for 8-bit q and zero point */
    if (j->s8) {
        const int8_t *x = j->in;
        for (int64_t i = b; i < e; i++)
            o[i] = (float)((int32_t)x[i] - zp) * scale;
    } else {
        const uint8_t *x = j->in;
        for (int64_t i = b; i < e; i++)
            o[i] = (float)((int32_t)x[i] - zp) * scale;
    }
}

/* etch_q_quantize for an 8-bit range, branch-free (the loops vectorize): a NaN fails both
 * comparisons of the clamp's lower end and becomes qmin, as there. */
#define Q_LOOP(T)                                                                               \
    for (int64_t i = b; i < e; i++) {                                                           \
        float t = zf + etch_q8_round(inv * x[i]);                                               \
        t = t > lo ? t : lo;                                                                    \
        t = t < hi ? t : hi;                                                                    \
        o[i] = (T)(int32_t)t;                                                                   \
    }

static void q_task(void *arg, int64_t b, int64_t e) {
    const qdq_job *j = arg;
    const float *x = j->in;
    const float inv = j->scale, zf = (float)j->zp, lo = (float)j->qmin, hi = (float)j->qmax;
    if (j->s8) {
        int8_t *o = j->out;
        Q_LOOP(int8_t)
    } else {
        uint8_t *o = j->out;
        Q_LOOP(uint8_t)
    }
}

static bool int_v(const etch_value *v, int64_t *out) {
    return v && v->tag == ETCH_VALUE_INT && ((*out = v->u.i), true);
}

/* The arguments the fast paths take: q (8-bit dtype `dtype`, a tensor) and f (float), the
 * range and zero point valid for dtype; everything the portable kernel would accept. */
static bool fast_args(etch_value **args, int qi, int fi, double *scale, qdq_job *j,
                      etch_tensor **q, etch_tensor **f) {
    int64_t zp, qmin, qmax, dt, lo, hi;
    if (!args[qi] || args[qi]->tag != ETCH_VALUE_TENSOR || !args[fi] ||
        args[fi]->tag != ETCH_VALUE_TENSOR || !args[1] || args[1]->tag == ETCH_VALUE_BOOL ||
        !etch_value_scalar_to_double(args[1], scale) || !int_v(args[2], &zp) ||
        !int_v(args[3], &qmin) || !int_v(args[4], &qmax) || !int_v(args[5], &dt) ||
        (dt != ETCH_DTYPE_BYTE && dt != ETCH_DTYPE_CHAR) || !etch_q_dtype_range((int)dt, &lo, &hi) ||
        qmin < lo || qmax > hi || qmin > qmax || zp < lo || zp > hi)
        return false;
    *q = args[qi]->u.tensor;
    *f = args[fi]->u.tensor;
    if ((*q)->dtype != dt || (*f)->dtype != ETCH_DTYPE_FLOAT || !isfinite(*scale) ||
        *scale < 0)
        return false;
    j->s8 = dt == ETCH_DTYPE_CHAR;
    j->zp = (int32_t)zp;
    j->qmin = (int32_t)qmin;
    j->qmax = (int32_t)qmax;
    return true;
}

static bool overlaps(const etch_tensor *a, const etch_tensor *b) {
    const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
    return a0 < b0 + etch_tensor_nbytes(b) && b0 < a0 + etch_tensor_nbytes(a);
}

/* out resized like in, then fn over the elements; false (nothing written) when the tensors
 * are not bound, not contiguous or share bytes: the portable kernel's case. */
static bool run_job(etch_kernel_context *ctx, etch_tensor *in, etch_tensor *out,
                    etch_parallel_fn fn, qdq_job *j) {
    const int64_t n = etch_tensor_numel(in);
    if (n == 0 || !in->data || etch_kernel_resize(ctx, out, in->dim, in->sizes) != ETCH_OK ||
        !out->data || !etch_tensor_is_contiguous(out) || overlaps(in, out))
        return false;
    j->in = in->data;
    j->out = out->data;
    etch_kernel_parallel_for(ctx, n, QDQ_GRAIN, fn, j);
    return true;
}

/* (input, scale, zero_point, quant_min, quant_max, dtype, out_dtype, out, ret) */
ETCH_OPT_KERNEL(dequantize_per_tensor_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        etch_opt_qconv_chain_run(ctx);
        return;
    }
    double scale;
    qdq_job j;
    etch_tensor *q, *f;
    int64_t od;
    if (nargs >= 9 && fast_args(args, 0, 7, &scale, &j, &q, &f) &&
        (!args[6] || args[6]->tag == ETCH_VALUE_NONE ||
         (int_v(args[6], &od) && od == ETCH_DTYPE_FLOAT)) &&
        etch_tensor_is_contiguous(q) && (j.scale = (float)scale, run_job(ctx, q, f, dq_task, &j)))
        return;
    etch_portable_dequantize_per_tensor_out(ctx, args, nargs);
}

/* (input, scale, zero_point, quant_min, quant_max, dtype, out, ret) */
ETCH_OPT_KERNEL(quantize_per_tensor_out) {
    double scale;
    qdq_job j;
    etch_tensor *q, *f;
    if (nargs >= 8 && fast_args(args, 6, 0, &scale, &j, &q, &f) && (float)scale > 0.0f &&
        !isinf(1.0f / (float)scale) && etch_tensor_is_contiguous(f) &&
        (j.scale = 1.0f / (float)scale, run_job(ctx, f, q, q_task, &j)))
        return;
    etch_portable_quantize_per_tensor_out(ctx, args, nargs);
}
