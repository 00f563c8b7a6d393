/* Helpers shared by the quantized kernels (portable_quant.h). */
#include <math.h>

#include "kernels/portable/portable_quant.h"

bool etch_q_is_qdtype(int dtype) {
    return dtype == ETCH_DTYPE_BYTE || dtype == ETCH_DTYPE_CHAR || dtype == ETCH_DTYPE_SHORT ||
           dtype == ETCH_DTYPE_UINT16 || dtype == ETCH_DTYPE_INT;
}

bool etch_q_dtype_range(int dtype, int64_t *lo, int64_t *hi) {
    switch (dtype) {
    case ETCH_DTYPE_BYTE: *lo = 0; *hi = 255; return true;
    case ETCH_DTYPE_CHAR: *lo = -128; *hi = 127; return true;
    case ETCH_DTYPE_SHORT: *lo = INT16_MIN; *hi = INT16_MAX; return true;
    case ETCH_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return true;
    case ETCH_DTYPE_INT: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    default: return false;
    }
}

bool etch_q_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const char *name,
                      int *dtype) {
    int64_t d;
    if (!etch_pk_int(ctx, v, name, &d))
        return false;
    if (d < 0 || d > 255 || !etch_dtype_is_valid((int)d)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s %lld is not a known ScalarType", name,
                         (long long)d);
        return false;
    }
    *dtype = (int)d;
    return true;
}

bool etch_q_opt_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const char *name,
                          int *dtype, bool *given) {
    *given = false;
    if (v && v->tag == ETCH_VALUE_NONE)
        return true;
    if (!etch_q_dtype_arg(ctx, v, name, dtype))
        return false;
    *given = true;
    return true;
}

bool etch_q_check_qrange(etch_kernel_context *ctx, int dtype, int64_t qmin, int64_t qmax) {
    int64_t lo, hi;
    if (!etch_q_dtype_range(dtype, &lo, &hi)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "dtype %s is not a quantized dtype (Byte, Char, Short, UInt16 or Int)",
                         etch_dtype_name(dtype));
        return false;
    }
    if (qmin > qmax) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "quant_min %lld is greater than quant_max %lld", (long long)qmin,
                         (long long)qmax);
        return false;
    }
    if (qmin < lo || qmax > hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "[quant_min, quant_max] = [%lld, %lld] is outside %s's range [%lld, %lld]",
                         (long long)qmin, (long long)qmax, etch_dtype_name(dtype), (long long)lo,
                         (long long)hi);
        return false;
    }
    return true;
}

bool etch_q_check_float_in(etch_kernel_context *ctx, const etch_tensor *t, const char *name) {
    if (!etch_pk_is_float(t->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "%s has dtype %s; it must be Float, Double, Half or BFloat16", name,
                         etch_dtype_name(t->dtype));
        return false;
    }
    return true;
}

bool etch_q_check_float_out(etch_kernel_context *ctx, const etch_tensor *out, bool given,
                            int out_dtype, const char *arg) {
    if (given && out_dtype != out->dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s is %s but out has dtype %s", arg,
                         etch_dtype_name(out_dtype), etch_dtype_name(out->dtype));
        return false;
    }
    if (!etch_pk_is_float(out->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "out has dtype %s; it must be Float, Double, Half or BFloat16",
                         etch_dtype_name(out->dtype));
        return false;
    }
    return true;
}

int64_t etch_q_offset(const etch_tensor *t, int64_t linear) {
    int64_t off = 0;
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        int64_t n = t->sizes[d];
        off += (linear % n) * t->strides[d];
        linear /= n;
    }
    return off * (int64_t)etch_dtype_size(t->dtype);
}

int64_t etch_q_load_int(const void *p, int dtype) {
    if (dtype == ETCH_DTYPE_UINT16) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    return etch_pk_load_i64(p, dtype);
}

void etch_q_store_int(void *p, int dtype, int64_t v) {
    if (dtype == ETCH_DTYPE_UINT16) {
        uint16_t u = (uint16_t)v;
        memcpy(p, &u, 2);
        return;
    }
    etch_pk_store_i64(p, dtype, v);
}

int64_t etch_q_int_at(const etch_tensor *t, int64_t i) {
    return etch_q_load_int((const char *)t->data + etch_q_offset(t, i), t->dtype);
}

double etch_q_f64_at(const etch_tensor *t, int64_t i) {
    const char *p = (const char *)t->data + etch_q_offset(t, i);
    if (t->dtype == ETCH_DTYPE_UINT16)
        return (double)etch_q_load_int(p, t->dtype);
    return etch_pk_load_f64(p, t->dtype);
}

bool etch_q_check_scale(etch_kernel_context *ctx, double scale, bool positive) {
    if (!isfinite(scale) || scale < 0 || (positive && !((float)scale > 0.0f))) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "scale %g must be finite and %s", scale,
                         positive ? "> 0 (as a float)" : ">= 0");
        return false;
    }
    if (positive && isinf(1.0f / (float)scale)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "scale %g is so small that 1/scale overflows float", scale);
        return false;
    }
    return true;
}

bool etch_q_check_zero_point(etch_kernel_context *ctx, int64_t zp, int dtype) {
    int64_t lo, hi;
    if (etch_q_dtype_range(dtype, &lo, &hi) && (zp < lo || zp > hi)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "zero_point %lld is outside %s's range [%lld, %lld]", (long long)zp,
                         etch_dtype_name(dtype), (long long)lo, (long long)hi);
        return false;
    }
    return true;
}

bool etch_q_check_scales(etch_kernel_context *ctx, const etch_tensor *s, const char *name,
                         int64_t count, bool positive) {
    if (s->dtype != ETCH_DTYPE_FLOAT && s->dtype != ETCH_DTYPE_DOUBLE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s; it must be Float or Double",
                         name, etch_dtype_name(s->dtype));
        return false;
    }
    int64_t n = etch_tensor_numel(s);
    if (n != count) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has %lld elements, expected %lld",
                         name, (long long)n, (long long)count);
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = etch_q_f64_at(s, i);
        if (!isfinite(v) || v < 0 || (positive && (!((float)v > 0.0f) || isinf(1.0f / (float)v)))) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s[%lld] = %g must be finite and %s", name, (long long)i, v,
                             positive ? "> 0 (with 1/scale finite in float)" : ">= 0");
            return false;
        }
    }
    return true;
}

bool etch_q_check_zero_points(etch_kernel_context *ctx, const etch_tensor *z, const char *name,
                              int64_t count, int dtype) {
    if (z->dtype != ETCH_DTYPE_LONG && z->dtype != ETCH_DTYPE_INT && z->dtype != ETCH_DTYPE_SHORT &&
        z->dtype != ETCH_DTYPE_CHAR && z->dtype != ETCH_DTYPE_BYTE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "%s has dtype %s; it must be an integer dtype (Long, Int, Short, Char or "
                         "Byte)",
                         name, etch_dtype_name(z->dtype));
        return false;
    }
    int64_t n = etch_tensor_numel(z);
    if (n != count) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has %lld elements, expected %lld",
                         name, (long long)n, (long long)count);
        return false;
    }
    int64_t lo, hi;
    if (!etch_q_dtype_range(dtype, &lo, &hi))
        return true;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = etch_q_int_at(z, i);
        if (v < lo || v > hi) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s[%lld] = %lld is outside %s's range [%lld, %lld]", name,
                             (long long)i, (long long)v, etch_dtype_name(dtype), (long long)lo,
                             (long long)hi);
            return false;
        }
    }
    return true;
}

int64_t etch_q_quantize(double x, bool in_double, float inv_scale, int64_t zp, int64_t qmin,
                        int64_t qmax) {
    float p = in_double ? (float)((double)inv_scale * x) : inv_scale * (float)x;
    float r = nearbyintf(p);
    if (isnan(r))
        return qmin;
    double q = (double)zp + (double)r;
    if (q <= (double)qmin)
        return qmin;
    if (q >= (double)qmax)
        return qmax;
    return (int64_t)q;
}

void etch_q_choose(float min, float max, int64_t qmin, int64_t qmax, double *scale_out,
                   int64_t *zero_point_out) {
    const float small = 6.1e-5f;
    min = min < 0.f ? min : 0.f;
    max = max > 0.f ? max : 0.f;
    double scale = ((double)max - min) / (double)(qmax - qmin);
    if ((float)scale == 0.0f || isinf(1.0f / (float)scale))
        scale = 0.1;
    if (scale < small) {
        float org_scale = (float)scale;
        scale = small;
        if (min == 0.0f) {
            max = small * (float)(qmax - qmin);
        } else if (max == 0.0f) {
            min = -small * (float)(qmax - qmin);
        } else {
            float amplifier = small / org_scale;
            min *= amplifier;
            max *= amplifier;
        }
    }
    double zp_from_min = (double)qmin - min / scale;
    double zp_from_max = (double)qmax - max / scale;
    double zp_from_min_error = fabs((double)qmin) - fabs(min / scale);
    double zp_from_max_error = fabs((double)qmax) - fabs(max / scale);
    double initial = zp_from_min_error < zp_from_max_error ? zp_from_min : zp_from_max;
    int64_t nudged;
    if (!(initial >= (double)qmin)) /* NaN too */
        nudged = qmin;
    else if (initial > (double)qmax)
        nudged = qmax;
    else
        nudged = (int64_t)nearbyintf((float)initial);
    if (nudged < qmin)
        nudged = qmin;
    if (nudged > qmax)
        nudged = qmax;
    *scale_out = scale;
    *zero_point_out = nudged;
}

static inline int64_t param_index(const etch_q_params *p, int64_t i) {
    return (i / p->inner) % p->count;
}

void etch_q_quantize_run(etch_kernel_context *ctx, const etch_tensor *in, etch_tensor *out,
                         const etch_q_params *p, int64_t qmin, int64_t qmax) {
    if (etch_kernel_checking(ctx))
        return;
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(in);
    bool dbl = in->dtype == ETCH_DTYPE_DOUBLE;
    bool ic = etch_tensor_is_contiguous(in), oc = etch_tensor_is_contiguous(out);
    int64_t last = -1;
    float inv = 0;
    int64_t zp = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = param_index(p, i);
        if (c != last) {
            double s = p->scales ? etch_q_f64_at(p->scales, c) : p->scale;
            inv = 1.0f / (float)s;
            zp = p->zero_points ? etch_q_int_at(p->zero_points, c) : p->zp;
            last = c;
        }
        double x = etch_pk_load_f64((const char *)in->data + etch_q_offset_c(in, ic, i),
                                    in->dtype);
        etch_q_store_int((char *)out->data + etch_q_offset_c(out, oc, i), out->dtype,
                         etch_q_quantize(x, dbl, inv, zp, qmin, qmax));
    }
}

void etch_q_dequantize_run(etch_kernel_context *ctx, const etch_tensor *in, etch_tensor *out,
                           const etch_q_params *p) {
    if (etch_kernel_checking(ctx))
        return;
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(in);
    bool ic = etch_tensor_is_contiguous(in), oc = etch_tensor_is_contiguous(out);
    int64_t last = -1;
    float scale = 0;
    int64_t zp = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = param_index(p, i);
        if (c != last) {
            scale = (float)(p->scales ? etch_q_f64_at(p->scales, c) : p->scale);
            zp = p->zero_points ? etch_q_int_at(p->zero_points, c) : p->zp;
            last = c;
        }
        int64_t q = etch_q_load_int((const char *)in->data + etch_q_offset_c(in, ic, i),
                                    in->dtype);
        etch_pk_store_f64((char *)out->data + etch_q_offset_c(out, oc, i), out->dtype,
                          (double)etch_q_dequantize(q, zp, scale));
    }
}

void etch_q_tokens(const etch_tensor *in, int64_t *tokens, int64_t *last) {
    *tokens = 1;
    *last = in->dim ? in->sizes[in->dim - 1] : 1;
    for (unsigned d = 0; d + 1 < in->dim; d++)
        *tokens *= in->sizes[d];
}

/* ---- load-time checks ---- */

bool etch_q_check_stop(const etch_kernel_context *ctx, const etch_tensor *a,
                       const etch_tensor *b, const etch_tensor *c) {
    const etch_tensor *t[3] = {a, b, c};
    if (!etch_kernel_checking(ctx))
        return false;
    for (int i = 0; i < 3; i++)
        if (t[i] && !(t[i]->flags & ETCH_TENSOR_CONSTANT))
            return true;
    return false;
}

etch_status etch_q_register_checks(void) {
    static const etch_kernel_fn fns[] = {
        etch_portable_quantize_per_tensor_out,   etch_portable_quantize_per_tensor_tensor_out,
        etch_portable_dequantize_per_tensor_out, etch_portable_dequantize_per_tensor_tensor_out,
        etch_portable_quantize_per_channel_out,  etch_portable_dequantize_per_channel_out,
        etch_portable_quantize_per_token_out,    etch_portable_dequantize_per_token_out,
        etch_portable_dequantize_per_channel_group_out,
        etch_portable_embedding_byte_out,        etch_portable_embedding_byte_dtype_out,
        etch_portable_embedding_4bit_out,        etch_portable_embedding_4bit_dtype_out,
        etch_portable_embedding_2bit_out,        etch_portable_embedding_2bit_dtype_out,
    };
    etch_status st = ETCH_OK;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0] && !st; i++)
        st = etch_kernels_register_check(fns[i], fns[i]);
    return st;
}
