/* CMSIS-NN's fixed-point arithmetic and the argument checks of the cortex_m:: kernels
 * (portable_cortex_m.h). Signed right shifts of negative values are avoided: divisions by
 * powers of two are written out, so the results do not depend on the compiler. */
#include "kernels/portable/portable_cortex_m.h"

#define CM_Q31_MIN (-2147483647 - 1)
#define CM_Q31_MAX 2147483647

static int64_t floor_div_pot64(int64_t x, int e) {
    int64_t d = (int64_t)1 << e;
    int64_t q = x / d;
    if (x % d != 0 && x < 0)
        q--;
    return q;
}

/* The low 32 bits as int32, without an implementation-defined conversion. */
static int32_t low32(int64_t v) {
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= (uint32_t)CM_Q31_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) + CM_Q31_MIN;
}

int32_t etch_cm_dhm(int32_t a, int32_t b) {
    return low32(floor_div_pot64((int64_t)a * b + ((int64_t)1 << 30), 31));
}

int32_t etch_cm_sat_dhm(int32_t a, int32_t b) {
    if (a == CM_Q31_MIN && b == CM_Q31_MIN)
        return CM_Q31_MAX;
    int64_t nudge = ((a < 0) != (b < 0)) ? 1 - ((int64_t)1 << 30) : ((int64_t)1 << 30);
    return low32(((int64_t)a * b + nudge) / ((int64_t)1 << 31)); /* C division truncates */
}

int32_t etch_cm_rdiv_pot(int32_t x, int32_t exponent) {
    int64_t q = floor_div_pot64(x, exponent);
    int64_t rem = (int64_t)x - q * ((int64_t)1 << exponent); /* x mod 2^e, >= 0 */
    int64_t threshold = ((((int64_t)1 << exponent) - 1) >> 1) + (q < 0 ? 1 : 0);
    if (rem > threshold)
        q++;
    return (int32_t)q;
}

int32_t etch_cm_requantize(int32_t val, int32_t multiplier, int32_t shift) {
    int32_t left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t v = low32((int64_t)((uint64_t)(uint32_t)val << left));
    return etch_cm_rdiv_pot(etch_cm_dhm(v, multiplier), right);
}

/* ---- checks ----------------------------------------------------------------------------------- */

bool etch_cm_check_tensor(etch_kernel_context *ctx, const etch_tensor *t, const char *name,
                          int dtype, int dim) {
    if (t->dtype != dtype) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s, expected %s", name,
                         etch_dtype_name(t->dtype), etch_dtype_name(dtype));
        return false;
    }
    if (dim >= 0 && t->dim != dim) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has rank %d, expected %d", name,
                         (int)t->dim, dim);
        return false;
    }
    return true;
}

bool etch_cm_check_int8(etch_kernel_context *ctx, const etch_tensor *t, const char *name) {
    return etch_cm_check_tensor(ctx, t, name, ETCH_DTYPE_CHAR, -1);
}

bool etch_cm_int_arg(etch_kernel_context *ctx, const etch_value *v, const char *name, int64_t lo,
                     int64_t hi, int32_t *out) {
    int64_t x;
    if (!etch_pk_int(ctx, v, name, &x))
        return false;
    if (x < lo || x > hi) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s is %lld, outside [%lld, %lld]",
                         name, (long long)x, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int32_t)x;
    return true;
}

bool etch_cm_check_mult_shift(etch_kernel_context *ctx, int64_t mult, int64_t shift,
                              const char *mname, const char *sname, int64_t index) {
    /* index < 0: a scalar argument; else element `index` of a tensor or list */
    if (mult <= CM_Q31_MIN || mult > CM_Q31_MAX) {
        if (index < 0)
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s is %lld, outside CMSIS-NN's [-2147483647, 2147483647]", mname,
                             (long long)mult);
        else
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s[%lld] is %lld, outside CMSIS-NN's [-2147483647, 2147483647]",
                             mname, (long long)index, (long long)mult);
        return false;
    }
    if (shift < -31 || shift > 30) {
        if (index < 0)
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s is %lld, outside [-31, 30]",
                             sname, (long long)shift);
        else
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s[%lld] is %lld, outside [-31, 30]",
                             sname, (long long)index, (long long)shift);
        return false;
    }
    return true;
}

bool etch_cm_check_channel_params(etch_kernel_context *ctx, const etch_tensor *mult,
                                  const etch_tensor *shift, int64_t count) {
    if (!etch_cm_check_tensor(ctx, mult, "requantize_multipliers", ETCH_DTYPE_INT, 1) ||
        !etch_cm_check_tensor(ctx, shift, "requantize_shifts", ETCH_DTYPE_INT, 1))
        return false;
    if (mult->sizes[0] != count || shift->sizes[0] != count) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "requantize_multipliers has %lld and requantize_shifts %lld elements, "
                         "the output has %lld channels",
                         (long long)mult->sizes[0], (long long)shift->sizes[0],
                         (long long)count);
        return false;
    }
    for (int64_t c = 0; c < count; c++)
        if (!etch_cm_check_mult_shift(ctx, etch_cm_i32_at(mult, c), etch_cm_i32_at(shift, c),
                                      "requantize_multipliers", "requantize_shifts", c))
            return false;
    return true;
}

bool etch_cm_check_activation(etch_kernel_context *ctx, int32_t amin, int32_t amax) {
    if (amin > amax) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "activation_min %d is greater than activation_max %d", (int)amin,
                         (int)amax);
        return false;
    }
    return true;
}

const int64_t *etch_cm_list_arg(etch_kernel_context *ctx, etch_value *v, const char *name,
                                size_t n, int64_t lo, int64_t hi) {
    size_t len;
    const int64_t *l = etch_pk_int_list(ctx, v, name, &len);
    if (!l)
        return NULL;
    if (len != n) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has %zu elements, expected %zu",
                         name, len, n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (l[i] < lo || l[i] > hi) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s[%zu] is %lld, outside [%lld, %lld]", name, i, (long long)l[i],
                             (long long)lo, (long long)hi);
            return NULL;
        }
    return l;
}

bool etch_cm_resize(etch_kernel_context *ctx, etch_tensor *out, size_t dim, const int64_t *sizes) {
    return etch_pk_resize(ctx, out, dim, sizes) == ETCH_OK;
}

int64_t etch_cm_offset(const etch_tensor *t, int64_t linear) {
    int64_t off = 0;
    for (size_t d = t->dim; d-- > 0;) {
        int64_t s = t->sizes[d];
        if (s > 0) {
            off += (linear % s) * t->strides[d];
            linear /= s;
        }
    }
    return off;
}

int64_t etch_cm_pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return -1;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--; /* the last window must start inside the input or its left padding */
    return o;
}

bool etch_cm_broadcast(etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                       etch_tensor *out) {
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
    return etch_pk_broadcast_shape(ctx, a, b, &dim, sizes) && etch_cm_resize(ctx, out, dim, sizes);
}

int64_t etch_cm_bcast_offset(const etch_tensor *out, const etch_tensor *t, int64_t linear) {
    int64_t off = 0;
    for (size_t d = out->dim; d-- > 0;) {
        int64_t s = out->sizes[d], c = s > 0 ? linear % s : 0;
        linear = s > 0 ? linear / s : 0;
        size_t lead = out->dim - t->dim; /* t's dims align to the right */
        if (d >= lead && t->sizes[d - lead] != 1)
            off += c * t->strides[d - lead];
    }
    return off;
}

void etch_cm_nchw_view(const etch_tensor *nhwc, etch_tensor *view) {
    static const int perm[4] = {0, 3, 1, 2}; /* NCHW dim i is NHWC dim perm[i] */
    *view = *nhwc;
    for (int i = 0; i < 4; i++) {
        view->sizes[i] = nhwc->sizes[perm[i]];
        view->strides[i] = nhwc->strides[perm[i]];
    }
}

etch_tensor *etch_cm_out_nchw(etch_kernel_context *ctx, etch_tensor *out, const int64_t *osz,
                              bool nhwc, etch_tensor *view) {
    if (!nhwc)
        return etch_cm_resize(ctx, out, 4, osz) ? out : NULL;
    int64_t s[4] = {osz[0], osz[2], osz[3], osz[1]};
    if (!etch_cm_resize(ctx, out, 4, s))
        return NULL;
    etch_cm_nchw_view(out, view);
    return view;
}

bool etch_cm_load_stop(const etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                       const etch_tensor *c, const etch_tensor *d) {
    const etch_tensor *t[4] = {a, b, c, d};
    if (!etch_kernel_checking(ctx))
        return false;
    for (int i = 0; i < 4; i++)
        if (t[i] && !(t[i]->flags & ETCH_TENSOR_CONSTANT))
            return true;
    return false;
}

etch_status etch_cm_register_checks(void) {
    static const etch_kernel_fn fns[] = {
        etch_portable_cm_quantize_per_tensor_out,
        etch_portable_cm_dequantize_per_tensor_out,
        etch_portable_cm_quantized_add_out,
        etch_portable_cm_quantized_mul_out,
        etch_portable_cm_quantized_div_out,
        etch_portable_cm_quantized_linear_out,
        etch_portable_cm_quantized_conv2d_out,
        etch_portable_cm_quantized_conv2d_nhwc_out,
        etch_portable_cm_quantized_depthwise_conv2d_out,
        etch_portable_cm_quantized_depthwise_conv2d_nhwc_out,
        etch_portable_cm_quantized_transpose_conv2d_out,
        etch_portable_cm_quantized_transpose_conv2d_nhwc_out,
        etch_portable_cm_quantized_avg_pool2d_out,
        etch_portable_cm_quantized_avg_pool2d_nhwc_out,
        etch_portable_cm_quantized_max_pool2d_out,
        etch_portable_cm_quantized_max_pool2d_nhwc_out,
        etch_portable_cm_quantized_batch_matmul_out,
        etch_portable_cm_quantized_activation_out,
        etch_portable_cm_pad_out,
        etch_portable_cm_maximum_out,
        etch_portable_cm_minimum_out,
        etch_portable_cm_transpose_out,
        etch_portable_cm_softmax_out,
    };
    etch_status st = ETCH_OK;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0] && !st; i++)
        st = etch_kernels_register_check(fns[i], fns[i]);
    return st;
}

bool etch_cm_pool_setup(etch_kernel_context *ctx, etch_tensor **in, etch_tensor **out,
                        const int64_t *k, const int64_t *st, const int64_t *pad, bool ceil_mode,
                        bool nhwc, etch_tensor *in_view, etch_tensor *out_view) {
    if (!etch_cm_check_tensor(ctx, *in, "input", ETCH_DTYPE_CHAR, 4) ||
        !etch_cm_check_tensor(ctx, *out, "out", ETCH_DTYPE_CHAR, 4))
        return false;
    if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "padding [%lld, %lld] exceeds half the kernel [%lld, %lld]",
                         (long long)pad[0], (long long)pad[1], (long long)k[0], (long long)k[1]);
        return false;
    }
    if (etch_kernel_checking(ctx)) /* at load: nothing depends on constants only */
        return false;
    if (nhwc) {
        etch_cm_nchw_view(*in, in_view);
        *in = in_view;
    }
    int64_t N = (*in)->sizes[0], C = (*in)->sizes[1], H = (*in)->sizes[2], W = (*in)->sizes[3];
    int64_t OH = etch_cm_pool_out(H, k[0], st[0], pad[0], 1, ceil_mode);
    int64_t OW = etch_cm_pool_out(W, k[1], st[1], pad[1], 1, ceil_mode);
    if (OH < 1 || OW < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "kernel [%lld, %lld] is larger than the padded input [%lld, %lld]",
                         (long long)k[0], (long long)k[1], (long long)H, (long long)W);
        return false;
    }
    int64_t osz[4] = {N, C, OH, OW};
    *out = etch_cm_out_nchw(ctx, *out, osz, nhwc, out_view);
    return *out != NULL;
}
