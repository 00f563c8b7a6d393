/* Optimized quantized kernels (entry points listed in table_quant.inc): the 4w weight chain
 * embedding_4bit -> [slice_copy] -> permute_copy -> mm | addmm run as one int4 linear from
 * the packed bytes (quant_linear.c). */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_QUANT_H
#define ETCH_KERNELS_OPTIMIZED_OPT_QUANT_H

#include "kernels/optimized/opt.h"

ETCH_OPT_KERNEL(embedding_4bit_out);
ETCH_OPT_KERNEL(embedding_4bit_dtype_out);
size_t etch_opt_embedding_4bit_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                       void *buf, size_t cap);
size_t etch_opt_embedding_4bit_dtype_prepare(etch_kernel_context *ctx, etch_value **args,
                                             size_t nargs, void *buf, size_t cap);
/* Takes the run (for either overload). */
size_t etch_opt_embedding_4bit_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                     size_t n);


/* Static int8 (qconv_chain.c): dequantize_per_tensor -> [dequantize_per_channel weight
 * [-> permute_copy]] -> convolution | mm | addmm | relu | hardtanh -> quantize_per_tensor run as
 * one integer kernel. The prepare function is the weight dequantization's. */
ETCH_OPT_KERNEL(dequantize_per_tensor_out); /* qdq.c: 8-bit <-> float loops, else portable */
ETCH_OPT_KERNEL(quantize_per_tensor_out);
ETCH_OPT_KERNEL(dequantize_per_channel_out);
/* The run of a chain the function below accepted (the kernels call it when
 * etch_kernel_chain_length > 1). */
void etch_opt_qconv_chain_run(etch_kernel_context *ctx);
size_t etch_opt_dequantize_per_channel_prepare(etch_kernel_context *ctx, etch_value **args,
                                               size_t nargs, void *buf, size_t cap);
/* Takes the run (registered on both dequantizations). */
size_t etch_opt_dequantize_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                 size_t n);

#endif
