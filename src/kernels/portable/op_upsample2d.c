/*
 * aten::upsample_nearest2d.out(Tensor self, SymInt[2] output_size, float? scales_h=None,
 *                              float? scales_w=None, *, Tensor(a!) out)
 * aten::upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size,
 *                                  float[]? scale_factors, *, Tensor(a!) out)
 * aten::upsample_bilinear2d.out(Tensor self, SymInt[2] output_size, bool align_corners,
 *                               float? scales_h=None, float? scales_w=None, *, Tensor(a!) out)
 * aten::upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners,
 *                                   float[]? scale_factors, *, Tensor(a!) out)
 *
 * Input [N, C, H, W] (N and C may be 0; H, W and the output sizes must be > 0); out has its
 * dtype. Nearest: Float, Double, Half, BFloat16, Byte; bilinear: the four floating dtypes.
 * .vec takes exactly one of output_size (2 values) and scale_factors (2 values; the size is
 * trunc(in * scale), and the scale itself then maps coordinates, as torch).
 *
 * Source coordinates are computed exactly as torch's CPU kernels do, in float (double for
 * Double inputs): nearest src = min(floor(dst * s), in - 1) with s = 1 / scale when a scale > 0
 * is given, else in / out (and the identity / halving shortcuts for out == in, 2 * in);
 * bilinear src = s * (dst + 0.5) - 0.5 clamped at 0 (align_corners: s = (in - 1) / (out - 1),
 * src = s * dst), interpolated between floor(src) and the next pixel. The bilinear blend is
 * computed in double from those weights. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

#define LIMIT 0x3fffffffLL

typedef struct up_job {
    int dtype;
    bool bilinear, align, dbl;
    int64_t C, H, W, OH, OW;
    bool has_sh, has_sw;
    double sh, sw; /* scales as given */
    const char *in;
    char *out;
    int64_t es;
    int64_t is[4], os[4];
} up_job;

static int64_t nearest_src(int64_t o, int64_t in, int64_t out, bool has, double scale) {
    if (out == in)
        return o;
    if (out == 2 * in)
        return o >> 1;
    float s = has && scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
    float f = floorf((float)o * s);
    int64_t i = f > (float)(in - 1) ? in - 1 : (int64_t)f;
    return i < 0 ? 0 : i;
}

/* bilinear source pixels i0, i1 and the weight l1 of i1 for output index o */
static void linear_src(int64_t o, int64_t in, int64_t out, bool align, bool has, double scale,
                       bool dbl, int64_t *i0, int64_t *i1, double *l1) {
    double real;
    if (dbl) {
        double s = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                         : (has && scale > 0 ? 1.0 / scale : (double)in / (double)out);
        real = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        if (real < 0)
            real = 0;
    } else {
        float s = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                        : (has && scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out);
        float r = align ? s * (float)o : s * ((float)o + 0.5f) - 0.5f;
        if (r < 0)
            r = 0;
        real = r;
    }
    int64_t a = (int64_t)real;
    if (a > in - 1)
        a = in - 1;
    *i0 = a;
    *i1 = a < in - 1 ? a + 1 : a;
    double l = dbl ? real - (double)a : (double)((float)real - (float)a);
    *l1 = l < 0 ? 0 : l > 1 ? 1 : l;
}

static void up_planes(void *arg, int64_t p0, int64_t p1) {
    const up_job *j = (const up_job *)arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->C, c = p % j->C;
        const char *plane = j->in + n * j->is[0] + c * j->is[1];
        char *oplane = j->out + n * j->os[0] + c * j->os[1];
        for (int64_t oh = 0; oh < j->OH; oh++) {
            char *orow = oplane + oh * j->os[2];
            if (!j->bilinear) {
                const char *row = plane + nearest_src(oh, j->H, j->OH, j->has_sh, j->sh) * j->is[2];
                for (int64_t ow = 0; ow < j->OW; ow++)
                    memcpy(orow + ow * j->os[3],
                           row + nearest_src(ow, j->W, j->OW, j->has_sw, j->sw) * j->is[3],
                           (size_t)j->es);
                continue;
            }
            int64_t h0, h1;
            double lh;
            linear_src(oh, j->H, j->OH, j->align, j->has_sh, j->sh, j->dbl, &h0, &h1, &lh);
            const char *r0 = plane + h0 * j->is[2], *r1 = plane + h1 * j->is[2];
            for (int64_t ow = 0; ow < j->OW; ow++) {
                int64_t w0, w1;
                double lw;
                linear_src(ow, j->W, j->OW, j->align, j->has_sw, j->sw, j->dbl, &w0, &w1, &lw);
                double x00 = etch_pk_load_f64(r0 + w0 * j->is[3], j->dtype);
                double x01 = etch_pk_load_f64(r0 + w1 * j->is[3], j->dtype);
                double x10 = etch_pk_load_f64(r1 + w0 * j->is[3], j->dtype);
                double x11 = etch_pk_load_f64(r1 + w1 * j->is[3], j->dtype);
                double v =
                    (1 - lh) * ((1 - lw) * x00 + lw * x01) + lh * ((1 - lw) * x10 + lw * x11);
                etch_pk_store_f64(orow + ow * j->os[3], j->dtype, v);
            }
        }
    }
}

/* An optional double: None or a Double (an Int is accepted too). */
static bool opt_scale(etch_kernel_context *ctx, etch_value *v, const char *name, bool *has,
                      double *s) {
    *has = v->tag != ETCH_VALUE_NONE;
    *s = 0;
    return !*has || etch_nn_double(ctx, v, name, s);
}

/* output_size / scale_factors of the .vec variants into osz and the scales */
static bool vec_sizes(etch_kernel_context *ctx, const etch_tensor *in, etch_value *size_v,
                      etch_value *sf_v, int64_t *osz, bool *has, double *sc) {
    bool has_size = size_v->tag != ETCH_VALUE_NONE, has_sf = sf_v->tag != ETCH_VALUE_NONE;
    has[0] = has[1] = false;
    sc[0] = sc[1] = 0;
    if (has_size == has_sf) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "exactly one of output_size and scale_factors must be given");
        return false;
    }
    if (has_size) {
        size_t len;
        const int64_t *l = etch_pk_int_list(ctx, size_v, "output_size", &len);
        if (!l)
            return false;
        if (len != 2) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "output_size must have 2 values, got %zu", len);
            return false;
        }
        osz[0] = l[0];
        osz[1] = l[1];
        return true;
    }
    if (sf_v->tag != ETCH_VALUE_DOUBLE_LIST || (sf_v->u.doubles.len && !sf_v->u.doubles.ptr)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "scale_factors must be a Double list or None, got %s",
                         etch_value_tag_name(sf_v->tag));
        return false;
    }
    if (sf_v->u.doubles.len != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "scale_factors must have 2 values, got %zu", sf_v->u.doubles.len);
        return false;
    }
    for (int i = 0; i < 2; i++) {
        double s = sf_v->u.doubles.ptr[i];
        double o = (double)in->sizes[2 + i] * s;
        if (!(o > -1.0 && o < (double)LIMIT + 1)) { /* NaN too */
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "scale factor %g gives an invalid output size", s);
            return false;
        }
        osz[i] = (int64_t)o;
        has[i] = true;
        sc[i] = s;
    }
    return true;
}

static void up_common(etch_kernel_context *ctx, bool bilinear, bool align, etch_tensor *in,
                      etch_tensor *out, const int64_t *os2, const bool *has, const double *sc) {
    char is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    if (in->dim != 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected a 4-D [N, C, H, W] input, got %s", is);
        return;
    }
    int dt = in->dtype;
    if (!etch_pk_is_float(dt) && (bilinear || dt != ETCH_DTYPE_BYTE)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s does not support %s",
                         bilinear ? "upsample_bilinear2d" : "upsample_nearest2d",
                         etch_dtype_name(dt));
        return;
    }
    if (!etch_pk_check_same_dtype(ctx, in, "self", out, "out"))
        return;
    int64_t H = in->sizes[2], W = in->sizes[3];
    if (H <= 0 || W <= 0 || os2[0] <= 0 || os2[1] <= 0 || H > LIMIT || W > LIMIT ||
        os2[0] > LIMIT || os2[1] > LIMIT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "input (H: %lld, W: %lld) and output (H: %lld, W: %lld) sizes must be "
                         "greater than 0 (and below 2^30)",
                         (long long)H, (long long)W, (long long)os2[0], (long long)os2[1]);
        return;
    }
    int64_t osz[4] = {in->sizes[0], in->sizes[1], os2[0], os2[1]};
    if (etch_pk_resize(ctx, out, 4, osz) != ETCH_OK || etch_tensor_numel(out) == 0)
        return;
    up_job j;
    j.dtype = dt;
    j.bilinear = bilinear;
    j.align = align;
    j.dbl = dt == ETCH_DTYPE_DOUBLE;
    j.C = in->sizes[1];
    j.H = H;
    j.W = W;
    j.OH = os2[0];
    j.OW = os2[1];
    j.has_sh = has[0];
    j.has_sw = has[1];
    j.sh = sc[0];
    j.sw = sc[1];
    j.in = (const char *)in->data;
    j.out = (char *)out->data;
    j.es = (int64_t)etch_dtype_size(dt);
    for (int i = 0; i < 4; i++) {
        j.is[i] = in->strides[i] * j.es;
        j.os[i] = out->strides[i] * j.es;
    }
    double per = (double)j.OH * (double)j.OW * (bilinear ? 4.0 : 1.0);
    etch_kernel_parallel_for(ctx, in->sizes[0] * j.C, per >= 65536 ? 1 : (int64_t)(65536 / per),
                             up_planes, &j);
}

static bool fixed_sizes(etch_kernel_context *ctx, etch_value *v, int64_t *osz) {
    size_t len;
    const int64_t *l = etch_pk_int_list(ctx, v, "output_size", &len);
    if (!l)
        return false;
    if (len != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "output_size must have 2 values, got %zu",
                         len);
        return false;
    }
    osz[0] = l[0];
    osz[1] = l[1];
    return true;
}

ETCH_PK_KERNEL(upsample_nearest2d_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    int64_t osz[2];
    bool has[2];
    double sc[2];
    if (!out || !fixed_sizes(ctx, args[1], osz) ||
        !opt_scale(ctx, args[2], "scales_h", &has[0], &sc[0]) ||
        !opt_scale(ctx, args[3], "scales_w", &has[1], &sc[1]))
        return;
    up_common(ctx, false, false, in, out, osz, has, sc);
}

ETCH_PK_KERNEL(upsample_nearest2d_vec_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    int64_t osz[2];
    bool has[2];
    double sc[2];
    if (!out)
        return;
    if (in->dim != 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "expected a 4-D [N, C, H, W] input");
        return;
    }
    if (!vec_sizes(ctx, in, args[1], args[2], osz, has, sc))
        return;
    up_common(ctx, false, false, in, out, osz, has, sc);
}

ETCH_PK_KERNEL(upsample_bilinear2d_out) {
    if (!etch_pk_nargs(ctx, nargs, 6))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[5], "out") : NULL;
    int64_t osz[2];
    bool has[2], align;
    double sc[2];
    if (!out || !fixed_sizes(ctx, args[1], osz) ||
        !etch_pk_bool(ctx, args[2], "align_corners", &align) ||
        !opt_scale(ctx, args[3], "scales_h", &has[0], &sc[0]) ||
        !opt_scale(ctx, args[4], "scales_w", &has[1], &sc[1]))
        return;
    up_common(ctx, true, align, in, out, osz, has, sc);
}

ETCH_PK_KERNEL(upsample_bilinear2d_vec_out) {
    if (!etch_pk_nargs(ctx, nargs, 5))
        return;
    etch_tensor *in = etch_pk_tensor(ctx, args[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, args[4], "out") : NULL;
    int64_t osz[2];
    bool has[2], align;
    double sc[2];
    if (!out || !etch_pk_bool(ctx, args[2], "align_corners", &align))
        return;
    if (in->dim != 4) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "expected a 4-D [N, C, H, W] input");
        return;
    }
    if (!vec_sizes(ctx, in, args[1], args[3], osz, has, sc))
        return;
    up_common(ctx, true, align, in, out, osz, has, sc);
}
