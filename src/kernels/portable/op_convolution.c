/*
 * aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding,
 *                       int[] dilation, bool transposed, int[] output_padding, int groups, *,
 *                       Tensor(a!) out)
 *
 * 1-D ([N, C, L]) and 2-D ([N, C, H, W]) convolution, plain and transposed, with stride,
 * padding, dilation, groups and (transposed) output_padding. Float, Double, Half and BFloat16
 * (all tensors one dtype), accumulated in double. Any dim order (strided access).
 *
 * Direct method: each output row accumulates in a small double buffer. A transposed
 * convolution is computed as a gather (each output element sums the inputs that map onto
 * it), so nothing is scattered and no output pre-zeroing is needed.
 */
#include "kernels/portable/portable.h"

#define OWC 128       /* output columns accumulated at once */
#define LIMIT 0x3fffffffLL /* sizes and parameters beyond 2^30 are refused (int64 headroom) */

typedef struct conv_job {
    int dtype;
    bool transposed;
    int64_t N, C_out, cin_g, cout_g;
    int64_t IH, IW, OH, OW, KH, KW;
    int64_t sh, sw, ph, pw, dh, dw;
    const char *in, *w, *bias;
    char *out;
    int64_t es;
    int64_t is[4], ws[4], os[4]; /* byte strides: n/c/h/w for in and out; o/i/h/w weight */
    int64_t bias_s;
} conv_job;

static inline float ld_f32(const char *p) { float v; memcpy(&v, p, 4); return v; }
static inline double ld_f64(const char *p) { double v; memcpy(&v, p, 8); return v; }

/* ceil(a / b) for b > 0 and any sign of a */
static inline int64_t ceil_div(int64_t a, int64_t b) {
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

#define ACCUM_LOOP(LD)                                                                       \
    for (int64_t i = i0; i < i1; i++)                                                        \
        acc[i * ostep + obase - ow0] += wv * LD(in_row + (i * istep + ibase) * is);

/* For i in [i0, i1): acc[i * ostep + obase - ow0] += wv * in_row[(i * istep + ibase) * is]. */
static void accum(const conv_job *j, double *acc, int64_t ow0, double wv, const char *in_row,
                  int64_t is, int64_t i0, int64_t i1, int64_t ostep, int64_t obase,
                  int64_t istep, int64_t ibase) {
    switch (j->dtype) {
    case ETCH_DTYPE_FLOAT: ACCUM_LOOP(ld_f32); break;
    case ETCH_DTYPE_DOUBLE: ACCUM_LOOP(ld_f64); break;
    default:
        for (int64_t i = i0; i < i1; i++)
            acc[i * ostep + obase - ow0] +=
                wv * etch_pk_load_f64(in_row + (i * istep + ibase) * is, j->dtype);
        break;
    }
}

static void conv_planes(void *arg, int64_t p0, int64_t p1) {
    const conv_job *j = (const conv_job *)arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->C_out, oc = p % j->C_out;
        int64_t g = oc / j->cout_g, ocl = oc % j->cout_g;
        double b = j->bias ? etch_pk_load_f64(j->bias + oc * j->bias_s, j->dtype) : 0.0;
        for (int64_t oh = 0; oh < j->OH; oh++) {
            for (int64_t ow0 = 0; ow0 < j->OW; ow0 += OWC) {
                int64_t own = j->OW - ow0 < OWC ? j->OW - ow0 : OWC;
                double acc[OWC];
                for (int64_t i = 0; i < own; i++)
                    acc[i] = b;
                for (int64_t icl = 0; icl < j->cin_g; icl++) {
                    int64_t ic = g * j->cin_g + icl;
                    const char *in_c = j->in + n * j->is[0] + ic * j->is[1];
                    for (int64_t kh = 0; kh < j->KH; kh++) {
                        int64_t ih;
                        if (!j->transposed) {
                            ih = oh * j->sh - j->ph + kh * j->dh;
                        } else {
                            int64_t t = oh + j->ph - kh * j->dh;
                            if (t < 0 || t % j->sh)
                                continue;
                            ih = t / j->sh;
                        }
                        if (ih < 0 || ih >= j->IH)
                            continue;
                        const char *in_row = in_c + ih * j->is[2];
                        /* weight [C_out, C_in/g, ...] or, transposed, [C_in, C_out/g, ...] */
                        const char *w_row =
                            j->transposed ? j->w + ic * j->ws[0] + ocl * j->ws[1] + kh * j->ws[2]
                                          : j->w + oc * j->ws[0] + icl * j->ws[1] + kh * j->ws[2];
                        for (int64_t kw = 0; kw < j->KW; kw++) {
                            double wv = etch_pk_load_f64(w_row + kw * j->ws[3], j->dtype);
                            int64_t off = kw * j->dw - j->pw;
                            if (!j->transposed) {
                                /* iw = ow * sw + off must lie in [0, IW) */
                                int64_t lo = ceil_div(-off, j->sw);
                                int64_t hi = ceil_div(j->IW - off, j->sw);
                                if (lo < ow0)
                                    lo = ow0;
                                if (hi > ow0 + own)
                                    hi = ow0 + own;
                                if (lo >= hi)
                                    continue;
                                accum(j, acc, ow0, wv, in_row, j->is[3], lo, hi, 1, 0, j->sw, off);
                            } else {
                                /* ow = iw * sw + off for iw in [0, IW) */
                                int64_t lo = ceil_div(ow0 - off, j->sw),
                                        hi = ceil_div(ow0 + own - off, j->sw);
                                if (lo < 0)
                                    lo = 0;
                                if (hi > j->IW)
                                    hi = j->IW;
                                if (lo >= hi)
                                    continue;
                                accum(j, acc, ow0, wv, in_row, j->is[3], lo, hi, j->sw, off, 1, 0);
                            }
                        }
                    }
                }
                etch_pk_store_row_f64(j->out + n * j->os[0] + oc * j->os[1] + oh * j->os[2] +
                                          ow0 * j->os[3],
                                      j->os[3], acc, own, j->dtype);
            }
        }
    }
}

/* A list of 1 value (applies to every spatial dim) or `spatial` values. */
static bool expand_param(etch_kernel_context *ctx, etch_value *v, const char *name,
                         size_t spatial, int64_t min, int64_t *out) {
    size_t len;
    const int64_t *l = etch_pk_int_list(ctx, v, name, &len);
    if (!l)
        return false;
    if (len != 1 && len != spatial) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s must have 1 or %zu values, got %zu", name, spatial, len);
        return false;
    }
    for (size_t i = 0; i < spatial; i++) {
        int64_t x = l[len == 1 ? 0 : i];
        if (x < min || x > LIMIT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s[%zu] = %lld is out of range (%s)",
                             name, i, (long long)x, min > 0 ? "must be > 0" : "must be >= 0");
            return false;
        }
        out[i] = x;
    }
    return true;
}

ETCH_PK_KERNEL(convolution_out) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    bool has_bias;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *w = in ? etch_pk_tensor(ctx, args[1], "weight") : NULL;
    etch_tensor *bias = w ? etch_pk_opt_tensor(ctx, args[2], "bias", &has_bias) : NULL;
    if (!w || etch_kernel_failed(ctx))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[9], "out");
    bool transposed;
    int64_t groups;
    if (!out || !etch_pk_bool(ctx, args[6], "transposed", &transposed) ||
        !etch_pk_int(ctx, args[8], "groups", &groups))
        return;

    if ((in->dim != 3 && in->dim != 4) || w->dim != in->dim) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "expected a 3-D (1-D conv) or 4-D (2-D conv) input with a weight of the "
                         "same rank, got ranks %u and %u",
                         (unsigned)in->dim, (unsigned)w->dim);
        return;
    }
    if (!etch_pk_is_float(in->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "input has dtype %s; convolution supports Float, Double, Half, BFloat16",
                         etch_dtype_name(in->dtype));
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, in, "input", w, "weight") ||
        (has_bias && !etch_pk_check_same_dtype(ctx, in, "input", bias, "bias")) ||
        !etch_pk_check_same_dtype(ctx, in, "input", out, "out"))
        return;

    size_t spatial = in->dim - 2u;
    int64_t stride[2], pad[2], dil[2], opad[2];
    if (!expand_param(ctx, args[3], "stride", spatial, 1, stride) ||
        !expand_param(ctx, args[4], "padding", spatial, 0, pad) ||
        !expand_param(ctx, args[5], "dilation", spatial, 1, dil) ||
        !expand_param(ctx, args[7], "output_padding", spatial, 0, opad))
        return;
    for (unsigned i = 0; i < in->dim; i++)
        if (in->sizes[i] > LIMIT || w->sizes[i] > LIMIT) {
            etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                             "tensor sizes beyond 2^30 are not supported");
            return;
        }
    if (groups <= 0 || groups > LIMIT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "groups must be positive, got %lld",
                         (long long)groups);
        return;
    }
    int64_t N = in->sizes[0], C_in = in->sizes[1], C_out, cin_g, cout_g;
    char ws[ETCH_PK_SHAPE_BUF], is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(ws, sizeof ws, w->dim, w->sizes);
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    if (!transposed) {
        C_out = w->sizes[0];
        cin_g = w->sizes[1];
        if (C_in != cin_g * groups || C_out % groups != 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "weight %s with groups=%lld does not fit input %s (expected [C_out "
                             "divisible by groups, C_in/groups, ...])",
                             ws, (long long)groups, is);
            return;
        }
        cout_g = C_out / groups;
    } else {
        if (w->sizes[0] != C_in || C_in % groups != 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "transposed weight %s with groups=%lld does not fit input %s "
                             "(expected [C_in, C_out/groups, ...], C_in divisible by groups)",
                             ws, (long long)groups, is);
            return;
        }
        cin_g = C_in / groups;
        cout_g = w->sizes[1];
        C_out = cout_g * groups;
    }
    if (has_bias && (bias->dim != 1 || bias->sizes[0] != C_out)) {
        char bs[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "bias %s must have shape [%lld]",
                         etch_pk_shape_str(bs, sizeof bs, bias->dim, bias->sizes),
                         (long long)C_out);
        return;
    }

    int64_t osz[4] = {N, C_out, 1, 1};
    for (size_t i = 0; i < spatial; i++) {
        int64_t isz = in->sizes[2 + i], k = w->sizes[2 + i];
        if (isz < 1 || k < 1) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "input %s and weight %s need non-empty spatial dims", is, ws);
            return;
        }
        int64_t eff = dil[i] * (k - 1) + 1;
        if (!transposed) {
            if (isz + 2 * pad[i] < eff) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "kernel extent %lld (dilated) exceeds the padded input size %lld "
                                 "at spatial dim %zu",
                                 (long long)eff, (long long)(isz + 2 * pad[i]), i);
                return;
            }
            osz[2 + i] = (isz + 2 * pad[i] - eff) / stride[i] + 1;
        } else {
            if (opad[i] >= stride[i] && opad[i] >= dil[i]) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "output_padding %lld must be smaller than stride %lld or "
                                 "dilation %lld",
                                 (long long)opad[i], (long long)stride[i], (long long)dil[i]);
                return;
            }
            osz[2 + i] = (isz - 1) * stride[i] - 2 * pad[i] + eff + opad[i];
            if (osz[2 + i] < 1) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "transposed convolution output size %lld at spatial dim %zu is "
                                 "not positive",
                                 (long long)osz[2 + i], i);
                return;
            }
        }
    }
    if (etch_pk_resize(ctx, out, in->dim, osz) != ETCH_OK)
        return;
    if (etch_tensor_numel(out) == 0)
        return;

    conv_job j;
    j.dtype = in->dtype;
    j.transposed = transposed;
    j.N = N;
    j.C_out = C_out;
    j.cin_g = cin_g;
    j.cout_g = cout_g;
    j.es = (int64_t)etch_dtype_size(in->dtype);
    /* a 1-D convolution is a 2-D one with H = 1 */
    int64_t two = in->dim == 4;
    j.IH = two ? in->sizes[2] : 1;
    j.IW = in->sizes[in->dim - 1];
    j.OH = osz[2];
    j.OW = two ? osz[3] : osz[2];
    if (!two)
        j.OH = 1;
    j.KH = two ? w->sizes[2] : 1;
    j.KW = w->sizes[w->dim - 1];
    j.sh = two ? stride[0] : 1;
    j.sw = stride[spatial - 1];
    j.ph = two ? pad[0] : 0;
    j.pw = pad[spatial - 1];
    j.dh = two ? dil[0] : 1;
    j.dw = dil[spatial - 1];
    j.in = (const char *)in->data;
    j.w = (const char *)w->data;
    j.out = (char *)out->data;
    j.bias = has_bias ? (const char *)bias->data : NULL;
    j.bias_s = has_bias ? bias->strides[0] * j.es : 0;
    for (int i = 0; i < 4; i++) {
        int src = two ? i : (i == 2 ? -1 : (i == 3 ? 2 : i));
        j.is[i] = src < 0 ? 0 : in->strides[src] * j.es;
        j.ws[i] = src < 0 ? 0 : w->strides[src] * j.es;
        j.os[i] = src < 0 ? 0 : out->strides[src] * j.es;
    }
    if (cin_g == 0 || etch_tensor_numel(in) == 0) {
        /* nothing to accumulate: the output is the bias (or zeros); inputs may lack data */
        j.cin_g = 0;
        j.in = j.w = NULL;
    }
    double per_plane = (double)j.OH * (double)j.OW * (double)(j.cin_g ? j.cin_g : 1) *
                       (double)j.KH * (double)j.KW;
    int64_t grain = per_plane >= 65536 ? 1 : (int64_t)(65536 / per_plane);
    etch_kernel_parallel_for(ctx, N * C_out, grain, conv_planes, &j);
}
