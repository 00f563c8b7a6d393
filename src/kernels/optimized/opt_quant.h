/* Optimized quantized kernels (entry points listed in table_quant.inc): the 4w weight chain
 * embedding_4bit -> [slice_copy] -> permute_copy -> mm | addmm run as one int4 linear from
 * the packed bytes, and the 8w chain dequantize_per_channel -> permute_copy -> mm | addmm
 * from the int8 bytes (quant_linear.c). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_QUANT_H
#define ETCH_KERNELS_OPTIMIZED_OPT_QUANT_H

#include "kernels/optimized/opt.h"

ETCH_OPT_KERNEL(embedding_4bit_out);
ETCH_OPT_KERNEL(embedding_4bit_dtype_out);
size_t etch_opt_embedding_4bit_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                       void *buf, size_t cap);
size_t etch_opt_embedding_4bit_dtype_prepare(etch_kernel_context *ctx, etch_value **args,
                                             size_t nargs, void *buf, size_t cap);
/* Does the prepared data (buf, size) let the linear chain take the call (indices a constant
 * arange(N))? Without it the prepared scales serve the gather alone. */
bool etch_opt_embedding_4bit_prepared_linear(const void *buf, size_t size);
/* Takes the run (for either overload). */
size_t etch_opt_embedding_4bit_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                     size_t n);
/* The 8w chain dequantize_per_channel -> permute_copy -> mm | addmm from the int8 bytes: the
 * matcher and the run, called by dequantize_per_channel's chain function and kernel
 * (qconv_chain.c), which also take the static int8 runs. */
size_t etch_opt_q8w_linear_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                 size_t n);
void etch_opt_q8w_linear_chain_run(etch_kernel_context *ctx);
/* The per-token activation chain of 8da4w / int8-dynamic in front of a 4w or 8w chain. */
ETCH_OPT_KERNEL(choose_qparams_per_token_asymmetric_out);
size_t etch_opt_choose_qparams_per_token_asymmetric_chain(etch_kernel_context *ctx,
                                                          const etch_kernel_call *calls,
                                                          size_t n);


/* Static int8 (qconv_chain.c): dequantize_per_tensor -> [dequantize_per_channel weight
 * [-> permute_copy]] -> convolution | mm | addmm | relu | hardtanh -> quantize_per_tensor run as
 * one integer kernel. */
ETCH_OPT_KERNEL(dequantize_per_tensor_out); /* qdq.c: 8-bit <-> float loops, else portable */
ETCH_OPT_KERNEL(quantize_per_tensor_out);
/* The run of a chain etch_opt_dequantize_chain accepted (the kernels call it when
 * etch_kernel_chain_length > 1). */
void etch_opt_qconv_chain_run(etch_kernel_context *ctx);
/* Takes the static int8 run (registered on dequantize_per_tensor). */
size_t etch_opt_dequantize_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                 size_t n);

/* dequantize_per_channel (qconv_chain.c), the weight dequantization of both the static int8
 * and the 8w chains: one kernel (unchained: a plain loop, else portable), one prepare
 * function whose data serves both chains, one chain function taking either run. */
ETCH_OPT_KERNEL(dequantize_per_channel_out);
size_t etch_opt_dequantize_per_channel_prepare(etch_kernel_context *ctx, etch_value **args,
                                               size_t nargs, void *buf, size_t cap);
size_t etch_opt_dequantize_per_channel_chain(etch_kernel_context *ctx,
                                             const etch_kernel_call *calls, size_t n);
/* The 8w weights of call c (a 2-D weight) from its prepared data; false: not prepared for c. */
struct etch_q8w_weights;
bool etch_opt_dequantize_per_channel_weights(const etch_kernel_call *c,
                                             struct etch_q8w_weights *w);

#endif
