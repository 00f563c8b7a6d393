/*
 * quantized_decomposed::embedding_4bit.out(Tensor weight, Tensor weight_scales,
 *     Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices,
 *     *, Tensor(a!) out) -> Tensor(a!)
 * quantized_decomposed::embedding_4bit.dtype_out(..., Tensor indices, *,
 *     ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)
 *
 * A 4-bit group-wise quantized embedding lookup: see quant_embedding.c for the layout,
 * the arithmetic and the checks.
 */
#include "kernels/portable/portable_quant.h"

ETCH_PK_KERNEL(embedding_4bit_out) {
    etch_q_embedding(ctx, args, nargs, 4, NULL, 6);
}

ETCH_PK_KERNEL(embedding_4bit_dtype_out) {
    etch_q_embedding(ctx, args, nargs, 4, nargs > 6 ? args[6] : NULL, 7);
}
