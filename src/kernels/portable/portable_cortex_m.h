/*
 * ExecuTorch's Cortex-M backend operators (cortex_m::*, backends/cortex_m/ops in ExecuTorch),
 * computed as CMSIS-NN computes them, and the arithmetic they share (cortex_m_util.c).
 *
 * The numerics are CMSIS-NN's default (not CMSIS_NN_USE_SINGLE_ROUNDING) build:
 *
 *   doubling high multiply (no saturation), for requantization:
 *       dhm(a, b) = floor((a * b + 2^30) / 2^31)            (int64 product, ties up)
 *   saturating rounding doubling high multiply (VQRDMULH-like, softmax):
 *       sat_dhm(a, b) = trunc((a * b + (a, b same sign ? 2^30 : 1 - 2^30)) / 2^31),
 *       INT32_MAX when a == b == INT32_MIN                  (ties away from zero)
 *   rounding divide by 2^e, 0 <= e <= 31: nearest, ties away from zero
 *   requantize(v, m, s) = rdiv(dhm(v * 2^max(s, 0), m), max(-s, 0))
 *       where v * 2^max(s, 0) wraps in 32 bits, as the int32 multiply on the core does;
 *       m in [INT32_MIN + 1, INT32_MAX], s in [-31, 30].
 *
 * Every kernel here takes int8 (Char) activations, int32 (Int) biases and per-channel
 * parameters, and checks all of them before writing; tensors are addressed through their
 * strides, so the dim order (ExecuTorch passes NCHW tensors in channels-last order) does not
 * change results. Nothing here allocates, prints or uses floating point outside the float
 * quantize / dequantize ops.
 */
#ifndef ETCH_KERNELS_PORTABLE_CORTEX_M_H
#define ETCH_KERNELS_PORTABLE_CORTEX_M_H

#include "kernels/portable/portable.h"

/* ---- arithmetic ---------------------------------------------------------------------------- */

int32_t etch_cm_dhm(int32_t a, int32_t b);
int32_t etch_cm_sat_dhm(int32_t a, int32_t b);
int32_t etch_cm_rdiv_pot(int32_t x, int32_t exponent);
int32_t etch_cm_requantize(int32_t val, int32_t multiplier, int32_t shift);
static inline int32_t etch_cm_clamp(int32_t v, int32_t lo, int32_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}
/* Wrapping int32 arithmetic (the core's 32-bit add / multiply). */
static inline int32_t etch_cm_wadd(int32_t a, int32_t b) {
    return (int32_t)(uint32_t)((uint32_t)a + (uint32_t)b);
}
static inline int32_t etch_cm_wmul(int32_t a, int32_t b) {
    return (int32_t)(uint32_t)((uint32_t)a * (uint32_t)b);
}

/* sum_i (x[i] + x_offset) * (w[i] + w_offset) modulo 2^32 over contiguous vectors
 * (cortex_m_dot.c: SMLAD on Cortex-M DSP cores, VMLADAVA on Helium, else the portable loop;
 * bit-identical). x_offset and w_offset in [-256, 256]. */
int32_t etch_cm_dot_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                       int32_t w_offset);
int32_t etch_cm_dot_s8_portable(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                                int32_t w_offset);

/* ---- argument checks (each fails naming the argument) ----------------------------------------- */

/* t has dtype Char. */
bool etch_cm_check_int8(etch_kernel_context *ctx, const etch_tensor *t, const char *name);
/* t has dtype `dtype` and rank `dim` (dim < 0: any rank). */
bool etch_cm_check_tensor(etch_kernel_context *ctx, const etch_tensor *t, const char *name,
                          int dtype, int dim);
/* An Int argument within [lo, hi]. */
bool etch_cm_int_arg(etch_kernel_context *ctx, const etch_value *v, const char *name, int64_t lo,
                     int64_t hi, int32_t *out);
/* A multiplier / shift pair within CMSIS-NN's range. */
bool etch_cm_check_mult_shift(etch_kernel_context *ctx, int64_t mult, int64_t shift,
                              const char *mname, const char *sname, int64_t index);
/* Per-channel multipliers and shifts: Int tensors of `count` elements (1-D), every pair in
 * range. */
bool etch_cm_check_channel_params(etch_kernel_context *ctx, const etch_tensor *mult,
                                  const etch_tensor *shift, int64_t count);
/* activation_min <= activation_max, both within int8. */
bool etch_cm_check_activation(etch_kernel_context *ctx, int32_t amin, int32_t amax);
/* An int list of exactly n elements, each within [lo, hi]. */
const int64_t *etch_cm_list_arg(etch_kernel_context *ctx, etch_value *v, const char *name,
                                size_t n, int64_t lo, int64_t hi);
/* Resize out to `sizes` and check it has that shape. */
bool etch_cm_resize(etch_kernel_context *ctx, etch_tensor *out, size_t dim, const int64_t *sizes);

/* ---- load-time checks (etch_kernels_register_check) ----------------------------------------
 * Each kernel is its own check function: when a method loads it validates its scalar
 * arguments and dtypes, then, where they are constants, the weights, biases, multipliers and
 * shifts (counts, ranges), and returns before anything that depends on the activations. */

/* At a load-time check: stop here (true) unless every tensor given (NULL: none) is a
 * constant. False when the call runs. */
bool etch_cm_load_stop(const etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                       const etch_tensor *c, const etch_tensor *d);
/* Register the kernels as their own check functions (etch_kernels_register_portable). */
etch_status etch_cm_register_checks(void);

/* ---- element access through strides (elements) --------------------------------------------- */

static inline int64_t etch_cm_off4(const etch_tensor *t, int64_t a, int64_t b, int64_t c,
                                   int64_t d) {
    return a * t->strides[0] + b * t->strides[1] + c * t->strides[2] + d * t->strides[3];
}
static inline int32_t etch_cm_i32_at(const etch_tensor *t, int64_t i) {
    int32_t v;
    memcpy(&v, (const char *)t->data + i * 4, 4);
    return v;
}
/* Offset (elements) of logical element `linear` (row-major) of t. */
int64_t etch_cm_offset(const etch_tensor *t, int64_t linear);

/* Resize out to the broadcast shape of a and b (torch's rule). */
bool etch_cm_broadcast(etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                       etch_tensor *out);
/* Offset (elements) in t of out's logical element `linear`, t broadcast to out's shape. */
int64_t etch_cm_bcast_offset(const etch_tensor *out, const etch_tensor *t, int64_t linear);

/* The *_nhwc operators take [N, H, W, C] tensors: an NCHW header over the same data (sizes
 * and strides permuted), through which the NCHW kernels run unchanged. */
void etch_cm_nchw_view(const etch_tensor *nhwc, etch_tensor *view);
/* Resize out to the NCHW shape osz (as [N, H, W, C] when nhwc) and return the NCHW header to
 * write through: out itself, or *view over it. NULL after a failure. */
etch_tensor *etch_cm_out_nchw(etch_kernel_context *ctx, etch_tensor *out, const int64_t *osz,
                              bool nhwc, etch_tensor *view);

/* Pooling output size along one dim (torch's rule, ceil_mode included); -1 when negative. */
int64_t etch_cm_pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

/* The part avg and max pooling share, after their own arguments: the tensors' dtypes and
 * ranks, padding within half the kernel, the output size (out resized); *in / *out become
 * the NCHW headers to read and write through (views kept in *in_view / *out_view).
 * False after a failure, and at load (nothing to compute then). */
bool etch_cm_pool_setup(etch_kernel_context *ctx, etch_tensor **in, etch_tensor **out,
                        const int64_t *k, const int64_t *st, const int64_t *pad, bool ceil_mode,
                        bool nhwc, etch_tensor *in_view, etch_tensor *out_view);

/* ---- kernels ------------------------------------------------------------------------------- */

ETCH_PK_KERNEL(cm_quantize_per_tensor_out);
ETCH_PK_KERNEL(cm_dequantize_per_tensor_out);
ETCH_PK_KERNEL(cm_quantized_add_out);
ETCH_PK_KERNEL(cm_quantized_mul_out);
ETCH_PK_KERNEL(cm_quantized_div_out);
ETCH_PK_KERNEL(cm_quantized_linear_out);
ETCH_PK_KERNEL(cm_quantized_conv2d_out);
ETCH_PK_KERNEL(cm_quantized_depthwise_conv2d_out);
ETCH_PK_KERNEL(cm_quantized_transpose_conv2d_out);
ETCH_PK_KERNEL(cm_quantized_avg_pool2d_out);
ETCH_PK_KERNEL(cm_quantized_max_pool2d_out);
ETCH_PK_KERNEL(cm_quantized_batch_matmul_out);
ETCH_PK_KERNEL(cm_quantized_activation_out);
ETCH_PK_KERNEL(cm_pad_out);
ETCH_PK_KERNEL(cm_maximum_out);
ETCH_PK_KERNEL(cm_minimum_out);
ETCH_PK_KERNEL(cm_transpose_out);
ETCH_PK_KERNEL(cm_softmax_out);
ETCH_PK_KERNEL(cm_quantized_conv2d_nhwc_out);
ETCH_PK_KERNEL(cm_quantized_depthwise_conv2d_nhwc_out);
ETCH_PK_KERNEL(cm_quantized_transpose_conv2d_nhwc_out);
ETCH_PK_KERNEL(cm_quantized_avg_pool2d_nhwc_out);
ETCH_PK_KERNEL(cm_quantized_max_pool2d_nhwc_out);

#endif
