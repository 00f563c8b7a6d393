/*
 * Declarations of the quantized kernels listed in table_quant.inc (ExecuTorch's
 * quantized_decomposed::* operators: quantize / dequantize per tensor, channel, token and
 * channel group, qparam selection, quantized embeddings), plus the helpers they share
 * (quant_util.c).
 *
 * Numerics follow ExecuTorch's kernels/quantized/cpu, not torch's Python formulas where the
 * two differ: quantization computes inv_scale = 1.0f / (float)scale and
 * q = zero_point + nearbyint((float)(inv_scale * x)) in single precision (round half to
 * even), then clamps to [quant_min, quant_max]; dequantization computes
 * (q - zero_point) * (float)scale in single precision and rounds once to the out dtype.
 */
#ifndef ETCH_KERNELS_PORTABLE_QUANT_H
#define ETCH_KERNELS_PORTABLE_QUANT_H

#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"

/* ---- dtypes and ranges ----------------------------------------------------------------- */

/* The quantized integer dtypes: Byte, Char, Short, UInt16, Int. */
bool etch_q_is_qdtype(int dtype);
/* The representable range of a quantized dtype (false for others). */
bool etch_q_dtype_range(int dtype, int64_t *lo, int64_t *hi);
/* A ScalarType argument (an Int naming a known dtype) into *dtype. */
bool etch_q_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const char *name,
                      int *dtype);
/* An optional ScalarType argument: None gives *given = false. */
bool etch_q_opt_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const char *name,
                          int *dtype, bool *given);
/* `dtype` must be a quantized dtype, and quant_min <= quant_max within its range. */
bool etch_q_check_qrange(etch_kernel_context *ctx, int dtype, int64_t qmin, int64_t qmax);
/* A floating input of quantize ops: Float, Double, Half or BFloat16. */
bool etch_q_check_float_in(etch_kernel_context *ctx, const etch_tensor *t, const char *name);
/* The out tensor of a dequantize op: floating, and equal to out_dtype when given. */
bool etch_q_check_float_out(etch_kernel_context *ctx, const etch_tensor *out, bool given,
                            int out_dtype, const char *arg);

/* ---- load-time checks (etch_kernels_register_check) --------------------------------------
 * The quantized kernels are their own check functions: at a load-time check
 * (etch_kernel_checking) they validate their scalar arguments and dtypes, then, where the
 * tensors that define the shapes and parameters are constants (a weight, its scales and zero
 * points), those too, and return before computing (etch_q_*_run return at once). */

/* At a load-time check: stop here (true) unless every tensor given (NULL: absent) is a
 * constant. At run time false. */
bool etch_q_check_stop(const etch_kernel_context *ctx, const etch_tensor *a,
                       const etch_tensor *b, const etch_tensor *c);
/* Register the kernels above as their own check functions (etch_kernels_register_portable
 * calls it; other kernels of these operators may register the portable function as theirs). */
etch_status etch_q_register_checks(void);

/* ---- elements ---------------------------------------------------------------------------- */

/* Byte offset of element `linear` (row-major logical index) of t. */
int64_t etch_q_offset(const etch_tensor *t, int64_t linear);
/* etch_q_offset with a fast path: `contig` is etch_tensor_is_contiguous(t), computed once. */
static inline int64_t etch_q_offset_c(const etch_tensor *t, bool contig, int64_t linear) {
    return contig ? linear * (int64_t)etch_dtype_size(t->dtype) : etch_q_offset(t, linear);
}
/* Integer element of a quantized (or Long) dtype; UInt16 included. */
int64_t etch_q_load_int(const void *p, int dtype);
void etch_q_store_int(void *p, int dtype, int64_t v);
/* Integer element `i` (logical) of t. */
int64_t etch_q_int_at(const etch_tensor *t, int64_t i);
/* Floating element `i` (logical) of t as double (Float, Double, Half, BFloat16; integral
 * dtypes convert exactly as C does). */
double etch_q_f64_at(const etch_tensor *t, int64_t i);

/* ---- quantization parameters -------------------------------------------------------------- */

/* A tensor of scales (Float or Double, `count` elements, each finite and > 0 when
 * `positive`, else finite and >= 0). */
bool etch_q_check_scales(etch_kernel_context *ctx, const etch_tensor *s, const char *name,
                         int64_t count, bool positive);
/* A tensor of integer zero points (Char, Byte, Short, Int or Long; `count` elements), each
 * within the range of `dtype`. */
bool etch_q_check_zero_points(etch_kernel_context *ctx, const etch_tensor *z, const char *name,
                              int64_t count, int dtype);
/* One scalar scale / zero point (the .out overloads' Double / Int arguments). */
bool etch_q_check_scale(etch_kernel_context *ctx, double scale, bool positive);
bool etch_q_check_zero_point(etch_kernel_context *ctx, int64_t zp, int dtype);

/* ---- the arithmetic ---------------------------------------------------------------------- */

/* ExecuTorch's quantize_val: x is the input element read as double (a Float, Half or BFloat16
 * element is exact in float; in_double tells that x is a Double element, multiplied in double
 * then rounded to float). NaN gives quant_min. */
int64_t etch_q_quantize(double x, bool in_double, float inv_scale, int64_t zp, int64_t qmin,
                        int64_t qmax);
/* (q - zp) * scale in single precision (the difference wraps: only a program whose out
 * shares bytes with its zero points can make it overflow). */
static inline float etch_q_dequantize(int64_t q, int64_t zp, float scale) {
    return (float)etch_pk_wrap_sub(q, zp) * scale;
}

/* ExecuTorch's calculate_scale_and_zero_point over [min, max] (fbgemm's ChooseQuantization
 * Params): the range is extended to contain 0, scale = (max - min) / (qmax - qmin) in double,
 * at least 6.1e-5, and the zero point nudged into [qmin, qmax]. */
void etch_q_choose(float min, float max, int64_t qmin, int64_t qmax, double *scale,
                   int64_t *zero_point);

/* Where element i of a tensor finds its parameters: index c = (i / inner) % count of
 * `scales` / `zero_points` (NULL: the scalar `scale` / `zp`). Per tensor: inner = 1,
 * count = 1; per channel along axis a: inner = the product of the sizes after a, count =
 * size(a); per token: inner = the last size; per group: inner = the group size. */
typedef struct etch_q_params {
    const etch_tensor *scales, *zero_points;
    double scale;
    int64_t zp;
    int64_t inner, count;
} etch_q_params;
/* Resize out to in's shape and quantize every element (every check already done). */
void etch_q_quantize_run(etch_kernel_context *ctx, const etch_tensor *in, etch_tensor *out,
                         const etch_q_params *p, int64_t qmin, int64_t qmax);
/* Resize out to in's shape and dequantize every element. */
void etch_q_dequantize_run(etch_kernel_context *ctx, const etch_tensor *in, etch_tensor *out,
                           const etch_q_params *p);

/* The parameters' inner/count along `axis` of `in` (wrapped; fails for a 0-dim input or an
 * axis out of range). */
bool etch_q_channel_params(etch_kernel_context *ctx, const etch_tensor *in, int64_t axis,
                           etch_q_params *p);
/* Number of tokens (product of every size but the last; 1 for rank <= 1) and the last size
 * (1 for rank 0) of a per-token tensor. */
void etch_q_tokens(const etch_tensor *in, int64_t *tokens, int64_t *last);

/* min/max over elements [begin, end) of `in` (logical order), NaN skipped; false (and a
 * failure) for an infinity. All-NaN gives 0, 0 (op_choose_qparams.c). */
bool etch_q_minmax(etch_kernel_context *ctx, const etch_tensor *in, int64_t begin, int64_t end,
                   float *mn, float *mx);
/* scale_out: Double or Float; zero_point_out: Long or Int. */
bool etch_q_check_qparam_outs(etch_kernel_context *ctx, const etch_tensor *s,
                              const etch_tensor *z);

/* Shared body of the group-wise quantized embeddings (embedding_byte/4bit/2bit): nbit 8
 * reads weight as Byte or Char, 4 and 2 unpack ExecuTorch's layout. dtype_arg: the
 * .dtype_out overload's optional ScalarType (NULL for .out). */
void etch_q_embedding(etch_kernel_context *ctx, etch_value **args, size_t nargs, int nbit,
                      const etch_value *dtype_arg, size_t out_index);

/* ---- kernels ---------------------------------------------------------------------------- */

ETCH_PK_KERNEL(quantize_per_tensor_out);
ETCH_PK_KERNEL(quantize_per_tensor_tensor_out);
ETCH_PK_KERNEL(dequantize_per_tensor_out);
ETCH_PK_KERNEL(dequantize_per_tensor_tensor_out);
ETCH_PK_KERNEL(quantize_per_channel_out);
ETCH_PK_KERNEL(dequantize_per_channel_out);
ETCH_PK_KERNEL(choose_qparams_tensor_out);
ETCH_PK_KERNEL(choose_qparams_per_token_asymmetric_out);
ETCH_PK_KERNEL(quantize_per_token_out);
ETCH_PK_KERNEL(dequantize_per_token_out);
ETCH_PK_KERNEL(dequantize_per_channel_group_out);
ETCH_PK_KERNEL(embedding_byte_out);
ETCH_PK_KERNEL(embedding_byte_dtype_out);
ETCH_PK_KERNEL(embedding_4bit_out);
ETCH_PK_KERNEL(embedding_4bit_dtype_out);
ETCH_PK_KERNEL(embedding_2bit_out);
ETCH_PK_KERNEL(embedding_2bit_dtype_out);

#endif
