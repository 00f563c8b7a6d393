/*
 * aten::max_pool2d_with_indices.out(Tensor self, int[2] kernel_size, int[2] stride=[],
 *     int[2] padding=0, int[2] dilation=1, bool ceil_mode=False, *, Tensor(a!) out,
 *     Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))
 *
 * Input [C, H, W] or [N, C, H, W] of any real dtype but Bool, any dim order. Padding is
 * implicit -inf. `indices` (Long) holds the flat index h * W + w of each maximum within its
 * input plane; NaN wins over everything (the last NaN in a window), as torch.
 */
#include <math.h>

#include "kernels/portable/portable.h"

#define LIMIT 0x3fffffffLL

typedef struct pool_job {
    int dtype;
    int64_t C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    const char *in;
    char *out, *idx;
    int64_t es;
    int64_t is[4], os[4], xs[4]; /* byte strides n/c/h/w of input, out, indices */
} pool_job;

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static void pool_planes(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = (const pool_job *)arg;
    bool fdom = etch_pk_is_float(j->dtype);
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->C, c = p % j->C;
        const char *plane = j->in + n * j->is[0] + c * j->is[1];
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t h0 = oh * j->sh - j->ph;
            int64_t h1 = h0 + (j->kh - 1) * j->dh + 1;
            if (h1 > j->H)
                h1 = j->H;
            if (h0 < 0)
                h0 += ceil_div(-h0, j->dh) * j->dh;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                int64_t w0 = ow * j->sw - j->pw;
                int64_t w1 = w0 + (j->kw - 1) * j->dw + 1;
                if (w1 > j->W)
                    w1 = j->W;
                if (w0 < 0)
                    w0 += ceil_div(-w0, j->dw) * j->dw;
                int64_t best = h0 * j->W + w0;
                const char *bestp = NULL;
                double bf = -INFINITY;
                int64_t bi = INT64_MIN;
                for (int64_t ih = h0; ih < h1; ih += j->dh) {
                    for (int64_t iw = w0; iw < w1; iw += j->dw) {
                        const char *e = plane + ih * j->is[2] + iw * j->is[3];
                        bool take;
                        if (fdom) {
                            double v = etch_pk_load_f64(e, j->dtype);
                            take = v > bf || isnan(v);
                            if (take)
                                bf = v;
                        } else {
                            int64_t v = etch_pk_load_i64(e, j->dtype);
                            take = v > bi || !bestp;
                            if (take)
                                bi = v;
                        }
                        if (take) {
                            best = ih * j->W + iw;
                            bestp = e;
                        }
                    }
                }
                char *o = j->out + n * j->os[0] + c * j->os[1] + oh * j->os[2] + ow * j->os[3];
                if (bestp)
                    memmove(o, bestp, (size_t)j->es);
                else if (fdom)
                    etch_pk_store_f64(o, j->dtype, -INFINITY);
                else
                    etch_pk_store_i64(o, j->dtype, 0); /* unreachable with valid windows */
                memcpy(j->idx + n * j->xs[0] + c * j->xs[1] + oh * j->xs[2] + ow * j->xs[3],
                       &best, 8);
            }
        }
    }
}

/* Read a list of 1 or 2 values (or 0 when allow_empty) into v[2]. */
static bool pair(etch_kernel_context *ctx, etch_value *val, const char *name, bool allow_empty,
                 int64_t min, int64_t *v, bool *empty) {
    size_t len;
    const int64_t *l = etch_pk_int_list(ctx, val, name, &len);
    if (!l)
        return false;
    *empty = len == 0;
    if ((len == 0 && !allow_empty) || len > 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s must have %s2 values, got %zu",
                         name, allow_empty ? "0, 1 or " : "1 or ", len);
        return false;
    }
    if (len == 0)
        return true;
    for (int i = 0; i < 2; i++) {
        v[i] = l[len == 1 ? 0 : i];
        if (v[i] < min || v[i] > LIMIT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s[%d] = %lld is out of range (%s)",
                             name, i, (long long)v[i], min > 0 ? "must be > 0" : "must be >= 0");
            return false;
        }
    }
    return true;
}

static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
    int64_t o = floor_div(in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;
    /* the last window must start inside the input or the left padding */
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

ETCH_PK_KERNEL(max_pool2d_with_indices_out) {
    if (!etch_pk_nargs(ctx, nargs, 8))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[6], "out") : NULL;
    etch_tensor *idx = out ? etch_pk_tensor(ctx, args[7], "indices") : NULL;
    bool ceil_mode;
    if (!idx || !etch_pk_bool(ctx, args[5], "ceil_mode", &ceil_mode))
        return;
    int64_t k[2], s[2], p[2], d[2];
    bool empty;
    if (!pair(ctx, args[1], "kernel_size", false, 1, k, &empty) ||
        !pair(ctx, args[2], "stride", true, 1, s, &empty))
        return;
    if (empty) {
        s[0] = k[0];
        s[1] = k[1];
    }
    if (!pair(ctx, args[3], "padding", false, 0, p, &empty) ||
        !pair(ctx, args[4], "dilation", false, 1, d, &empty))
        return;
    if (p[0] > k[0] / 2 || p[1] > k[1] / 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "padding [%lld, %lld] must be at most half of kernel_size [%lld, %lld]",
                         (long long)p[0], (long long)p[1], (long long)k[0], (long long)k[1]);
        return;
    }
    char is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    if (in->dim != 3 && in->dim != 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got %s", is);
        return;
    }
    if (!etch_pk_check_real(ctx, in, "self"))
        return;
    if (in->dtype == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "max_pool2d does not support Bool");
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, in, "self", out, "out"))
        return;
    if (idx->dtype != ETCH_DTYPE_LONG) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "indices must be Long, got %s",
                         etch_dtype_name(idx->dtype));
        return;
    }
    bool batched = in->dim == 4;
    int64_t N = batched ? in->sizes[0] : 1;
    int64_t C = in->sizes[in->dim - 3], H = in->sizes[in->dim - 2], W = in->sizes[in->dim - 1];
    if (C == 0 || H == 0 || W == 0 || H > LIMIT || W > LIMIT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input %s must have non-empty (and < 2^30) C, H and W", is);
        return;
    }
    int64_t OH = out_size(H, k[0], p[0], s[0], d[0], ceil_mode);
    int64_t OW = out_size(W, k[1], p[1], s[1], d[1], ceil_mode);
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
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK ||
        etch_pk_resize(ctx, idx, od, osz) != ETCH_OK)
        return;
    if (N == 0)
        return;

    pool_job j;
    j.dtype = in->dtype;
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
    j.dh = d[0];
    j.dw = d[1];
    j.in = (const char *)in->data;
    j.out = (char *)out->data;
    j.idx = (char *)idx->data;
    j.es = (int64_t)etch_dtype_size(in->dtype);
    for (int i = 0; i < 4; i++) {
        int src = batched ? i : i - 1; /* unbatched: no n dim */
        j.is[i] = src < 0 ? 0 : in->strides[src] * j.es;
        j.os[i] = src < 0 ? 0 : out->strides[src] * j.es;
        j.xs[i] = src < 0 ? 0 : idx->strides[src] * 8;
    }
    double per = (double)OH * (double)OW * (double)k[0] * (double)k[1];
    etch_kernel_parallel_for(ctx, N * C, per >= 65536 ? 1 : (int64_t)(65536 / per), pool_planes,
                             &j);
}
