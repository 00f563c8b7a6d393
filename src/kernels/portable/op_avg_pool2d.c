/*
 * aten::avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
 *     bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None, *,
 *     Tensor(a!) out)
 *
 * Input [C, H, W] or [N, C, H, W] (N may be 0; C, H, W may not), Float, Double, Half,
 * BFloat16 or Long (as torch); out has self's dtype. stride [] means kernel_size; padding is at
 * most half the kernel. Each window averages its elements: the divisor is divisor_override
 * when given (non-zero), else the window size clipped to the padded input
 * (count_include_pad) or to the input itself. Floating sums accumulate in double; Long sums in
 * int64 (wrap-around) and divide truncating toward zero, as torch. Any dim order.
 */
#include "kernels/portable/portable_nn.h"

typedef struct avg_job {
    int dtype;
    int64_t C, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
    bool include_pad, has_div;
    int64_t divisor;
    const char *in;
    char *out;
    int64_t es;
    int64_t is[4], os[4]; /* byte strides n/c/h/w */
} avg_job;

static void avg_planes(void *arg, int64_t p0, int64_t p1) {
    const avg_job *j = (const avg_job *)arg;
    bool fdom = etch_pk_is_float(j->dtype);
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->C, c = p % j->C;
        const char *plane = j->in + n * j->is[0] + c * j->is[1];
        char *oplane = j->out + n * j->os[0] + c * j->os[1];
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
                char *o = oplane + oh * j->os[2] + ow * j->os[3];
                if (h0 >= h1 || w0 >= w1) {
                    etch_pk_store_i64(o, j->dtype, 0);
                    continue;
                }
                int64_t div = j->has_div       ? j->divisor
                              : j->include_pad ? pool
                                               : (h1 - h0) * (w1 - w0);
                if (fdom) {
                    double sum = 0, v[ETCH_NN_CHUNK];
                    for (int64_t ih = h0; ih < h1; ih++) {
                        for (int64_t x = w0; x < w1; x += ETCH_NN_CHUNK) {
                            int64_t m = w1 - x < ETCH_NN_CHUNK ? w1 - x : ETCH_NN_CHUNK;
                            etch_pk_load_row_f64(v, plane + ih * j->is[2] + x * j->is[3], j->is[3],
                                                 m, j->dtype);
                            for (int64_t k = 0; k < m; k++)
                                sum += v[k];
                        }
                    }
                    etch_pk_store_f64(o, j->dtype, sum / (double)div);
                } else {
                    int64_t sum = 0;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            sum = etch_pk_wrap_add(
                                sum,
                                etch_pk_load_i64(plane + ih * j->is[2] + iw * j->is[3], j->dtype));
                    /* INT64_MIN / -1 wraps instead of trapping */
                    etch_pk_store_i64(o, j->dtype,
                                      div == -1 ? etch_pk_wrap_sub(0, sum) : sum / div);
                }
            }
        }
    }
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, bool ceil_mode) {
    int64_t o = floor_div(in + 2 * p - k + (ceil_mode ? s - 1 : 0), s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) /* the last window must start inside */
        o--;
    return o;
}

ETCH_PK_KERNEL(avg_pool2d_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[7], "out") : NULL;
    bool ceil_mode, include_pad, empty;
    int64_t k[2], s[2], p[2], divisor = 0;
    if (!out || !etch_pk_bool(ctx, args[4], "ceil_mode", &ceil_mode) ||
        !etch_pk_bool(ctx, args[5], "count_include_pad", &include_pad) ||
        !etch_nn_pair(ctx, args[1], "kernel_size", false, 1, k, &empty) ||
        !etch_nn_pair(ctx, args[2], "stride", true, 1, s, &empty))
        return;
    if (empty) {
        s[0] = k[0];
        s[1] = k[1];
    }
    if (!etch_nn_pair(ctx, args[3], "padding", false, 0, p, &empty))
        return;
    bool has_div = args[6]->tag != ETCH_VALUE_NONE;
    if (has_div && !etch_pk_int(ctx, args[6], "divisor_override", &divisor))
        return;
    if (has_div && divisor == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "divisor_override must not be zero");
        return;
    }
    if (p[0] > k[0] / 2 || p[1] > k[1] / 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "padding [%lld, %lld] must be at most half of kernel_size [%lld, %lld]",
                         (long long)p[0], (long long)p[1], (long long)k[0], (long long)k[1]);
        return;
    }
    char is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    bool batched = in->dim == 4;
    if ((in->dim != 3 && in->dim != 4) || in->sizes[in->dim - 1] == 0 ||
        in->sizes[in->dim - 2] == 0 || in->sizes[in->dim - 3] == 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected a 3-D [C, H, W] or 4-D [N, C, H, W] input with non-empty C, "
                         "H, W, got %s",
                         is);
        return;
    }
    int dt = in->dtype;
    if (!etch_pk_is_float(dt) && dt != ETCH_DTYPE_LONG) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "avg_pool2d supports Float, Double, Half, BFloat16 and Long, not %s",
                         etch_dtype_name(dt));
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, in, "self", out, "out"))
        return;
    int64_t N = batched ? in->sizes[0] : 1;
    int64_t C = in->sizes[in->dim - 3], H = in->sizes[in->dim - 2], W = in->sizes[in->dim - 1];
    if (H > 0x3fffffffLL || W > 0x3fffffffLL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input %s is too large", is);
        return;
    }
    int64_t OH = out_size(H, k[0], p[0], s[0], ceil_mode);
    int64_t OW = out_size(W, k[1], p[1], s[1], ceil_mode);
    if (OH < 1 || OW < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input %s is too small for the pooling window: output would be "
                         "[%lld, %lld]",
                         is, (long long)OH, (long long)OW);
        return;
    }
    int64_t osz[4];
    size_t od = 0;
    if (batched)
        osz[od++] = N;
    osz[od++] = C;
    osz[od++] = OH;
    osz[od++] = OW;
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK || N == 0)
        return;
    avg_job j;
    j.dtype = dt;
    j.C = C;
    j.H = H;
    j.W = W;
    j.OH = OH;
    j.OW = OW;
    j.kh = k[0];
    j.kw = k[1];
    j.sh = s[0];
    j.sw = s[1];
    j.ph = p[0];
    j.pw = p[1];
    j.include_pad = include_pad;
    j.has_div = has_div;
    j.divisor = divisor;
    j.in = (const char *)in->data;
    j.out = (char *)out->data;
    j.es = (int64_t)etch_dtype_size(dt);
    for (int i = 0; i < 4; i++) {
        int src = batched ? i : i - 1;
        j.is[i] = src < 0 ? 0 : in->strides[src] * j.es;
        j.os[i] = src < 0 ? 0 : out->strides[src] * j.es;
    }
    double per = (double)OH * (double)OW * (double)k[0] * (double)k[1];
    etch_kernel_parallel_for(ctx, N * C, per >= 65536 ? 1 : (int64_t)(65536 / per), avg_planes, &j);
}
