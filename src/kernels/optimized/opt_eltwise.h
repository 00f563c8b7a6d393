/* Optimized element-wise, softmax, normalization and data-movement kernels (entry points listed
 * in table_eltwise.inc) and the float32 vector row functions they are built on.
 *
 * Each ISA (scalar C, AVX2+FMA, AVX-512, NEON) provides one etch_opt_vec table; the kernels
 * call etch_opt_vec_active(), which follows etch_isa_active() (ETCH_ISA, etch_isa_set).
 *
 * Accuracy of the row functions against exact (double) math, float32 inputs:
 *  - add/sub/mul/div, neg, relu, clamp, max, masked_fill: correctly rounded (add/sub with an
 *    alpha other than 1 use one fused multiply-add: a + alpha*b rounded once).
 *  - sqrt, 1/x: correctly rounded; rsqrt: sqrt then divide, <= 1 ulp.
 *  - exp, sigmoid, silu: polynomial exp (range reduction by ln 2, degree-6 fit on
 *    [-ln2/2, ln2/2]): relative error <= 4e-7 for normal results; results below FLT_MIN
 *    (x < -87.3) flush to 0, x > 88.72 gives +inf, NaN stays NaN. The scalar table uses libm.
 *  - tanh: odd polynomial for |x| < 0.5, 1 - 2/(exp(2|x|)+1) beyond; relative error <= 1e-6.
 *  - gelu (erf): x * Phi(x) with Phi from erfc(z) = t*exp(-z^2 + P(t)), t = 1/(1+z/2);
 *    relative error <= 2e-6 (absolute <= 1e-7 * |x| near the root of Phi).
 *  - gelu (tanh): x * sigmoid(2u), the same value as 0.5x(1+tanh(u)) without cancellation.
 *  - sums (softmax, layer norm, mean) accumulate in float over 4 vector accumulators:
 *    relative error <= n * 6e-8 / lanes in the worst case, far less in practice.
 * Measured maximum relative errors over dense sweeps (2e6 points, AVX2 table; scalar/libm in
 * brackets): exp on [-87, 88] 7.5e-8 [6.0e-8], sigmoid and silu on [-80, 80] 1.7e-7
 * [1.7e-7], tanh on [-20, 20] 1.6e-7 [1.5e-7], rsqrt 8.9e-8 [8.9e-8], gelu on [-5, 10]
 * 2.3e-6 [1.4e-6] and gelu tanh 2.3e-6 [2.8e-6] (both at x near -5, Phi's conditioning).
 * The tests (tests/optimized_eltwise) hold every table to these bounds against the portable
 * kernels.
 */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_ELTWISE_H
#define ETCH_KERNELS_OPTIMIZED_OPT_ELTWISE_H

#include <stdint.h>

#include "kernels/optimized/opt.h"

/* Binary row operations. SUB is ADD with -alpha. */
typedef enum etch_opt_binop {
    ETCH_OPT_BIN_ADD = 0, /* a + alpha * b */
    ETCH_OPT_BIN_MUL,     /* a * b */
    ETCH_OPT_BIN_DIV,     /* a / b */
    ETCH_OPT_BIN_MAX,     /* max(a, b), NaN in a or b gives NaN */
    ETCH_OPT_BIN_COUNT
} etch_opt_binop;

/* Unary row operations (lo/hi are CLAMP's bounds, never NaN; -inf/+inf when absent). */
typedef enum etch_opt_unop {
    ETCH_OPT_UN_COPY = 0,
    ETCH_OPT_UN_NEG,
    ETCH_OPT_UN_RELU,
    ETCH_OPT_UN_CLAMP,
    ETCH_OPT_UN_EXP,
    ETCH_OPT_UN_SIGMOID,
    ETCH_OPT_UN_SILU,
    ETCH_OPT_UN_TANH,
    ETCH_OPT_UN_GELU,
    ETCH_OPT_UN_GELU_TANH,
    ETCH_OPT_UN_RSQRT,
    ETCH_OPT_UN_SQRT,
    ETCH_OPT_UN_RECIP, /* 1 / x */
    ETCH_OPT_UN_COUNT
} etch_opt_unop;

typedef struct etch_opt_vec {
    const char *name;
    /* r[i] = a[i or 0] op b[i or 0] for i < n (a_bcast / b_bcast: that operand is one value);
     * r may equal a or b. */
    void (*binary)(int op, float *r, const float *a, int a_bcast, const float *b, int b_bcast,
                   float alpha, int64_t n);
    /* r[i] = op(x[i]); r may equal x. */
    void (*unary)(int op, float *r, const float *x, int64_t n, float lo, float hi);
    /* r[i] = mask[i or 0] ? value : x[i] (mask bytes are 0/1). */
    void (*masked_fill)(float *r, const float *x, const uint8_t *mask, int mask_bcast,
                        float value, int64_t n);
    /* max over x[0..n), n >= 1 (NaN elements may be ignored: callers that care look at the
     * sum that follows, which a NaN makes NaN). */
    float (*max)(const float *x, int64_t n);
    /* sum over x[0..n). */
    float (*sum)(const float *x, int64_t n);
    /* r[i] = exp(x[i] - shift) when r != NULL; returns the sum of those values. */
    float (*exp_sum)(float *r, const float *x, float shift, int64_t n);
    /* sum of (x[i] - mean)^2. */
    float (*sqdev_sum)(const float *x, float mean, int64_t n);
    /* r[i] = (x[i] - mean) * rstd * (w ? w[i] : 1) + (b ? b[i] : 0). */
    void (*norm)(float *r, const float *x, float mean, float rstd, const float *w,
                 const float *b, int64_t n);
} etch_opt_vec;

extern const etch_opt_vec etch_opt_vec_scalar;
#if ETCH_OPT_X86
extern const etch_opt_vec etch_opt_vec_avx2;
extern const etch_opt_vec etch_opt_vec_avx512;
#endif
#if ETCH_OPT_NEON
extern const etch_opt_vec etch_opt_vec_neon;
#endif

/* The table for an ISA (scalar for one not built in) and for the active one. */
const etch_opt_vec *etch_opt_vec_for(int isa);
const etch_opt_vec *etch_opt_vec_active(void);

/* ---- kernels ----------------------------------------------------------------------------- */

/* eltwise.c: binary arithmetic, activations, masked_fill */
ETCH_OPT_KERNEL(add_out);
ETCH_OPT_KERNEL(add_scalar_out);
ETCH_OPT_KERNEL(sub_out);
ETCH_OPT_KERNEL(sub_scalar_out);
ETCH_OPT_KERNEL(mul_out);
ETCH_OPT_KERNEL(mul_scalar_out);
ETCH_OPT_KERNEL(div_out);
ETCH_OPT_KERNEL(div_scalar_out);
ETCH_OPT_KERNEL(relu_out);
ETCH_OPT_KERNEL(neg_out);
ETCH_OPT_KERNEL(exp_out);
ETCH_OPT_KERNEL(rsqrt_out);
ETCH_OPT_KERNEL(tanh_out);
ETCH_OPT_KERNEL(sigmoid_out);
ETCH_OPT_KERNEL(silu_out);
ETCH_OPT_KERNEL(gelu_out);
ETCH_OPT_KERNEL(hardtanh_out);
ETCH_OPT_KERNEL(clamp_out);
ETCH_OPT_KERNEL(masked_fill_scalar_out);
ETCH_OPT_KERNEL(pow_tensor_scalar_out);
/* softmax.c */
ETCH_OPT_KERNEL(softmax_out);
ETCH_OPT_KERNEL(log_softmax_out);
/* norm.c */
ETCH_OPT_KERNEL(native_layer_norm_out);
ETCH_OPT_KERNEL(mean_out);
/* copy.c */
/* dst (contiguous, out dims osz[0..nd)) = the elements of src at input element strides ist
 * of each out dim (a permutation, a slice: src already at the first element), es bytes each;
 * dims merged where they chain, runs memcpy'd, a moved innermost dim transposed in tiles,
 * split across the pool. nd <= ETCH_MAX_DIMS; dst and src must not overlap. */
void etch_opt_gather(etch_kernel_context *ctx, void *dst, const void *src, int64_t es, int nd,
                     const int64_t *osz, const int64_t *ist);
/* `outer` blocks of `chunk` bytes from src (blocks src_step bytes apart) to dst (dst_step
 * apart), split across the pool. */
void etch_opt_copy_blocks(etch_kernel_context *ctx, char *dst, int64_t dst_step, const char *src,
                          int64_t src_step, int64_t chunk, int64_t outer);
ETCH_OPT_KERNEL(permute_copy_out);
ETCH_OPT_KERNEL(clone_out);
ETCH_OPT_KERNEL(select_copy_int_out);
ETCH_OPT_KERNEL(slice_copy_tensor_out);
ETCH_OPT_KERNEL(cat_out);
ETCH_OPT_KERNEL(stack_out);
ETCH_OPT_KERNEL(index_put_);
ETCH_OPT_KERNEL(embedding_out);

#endif
