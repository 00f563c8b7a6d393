/* The optimized kernel table, by family (table_<area>.inc, each line KP(name, sig, fn) for a
 * plain kernel or KF(...) for one that applies a fused activation). Names and signatures are
 * the portable kernels' own; each kernel takes its fast path for the cases it covers
 * (float32, contiguous, ...) and calls the portable kernel otherwise. */
#include <stdbool.h>
#include <string.h>

#include "kernels/optimized/opt.h"
#include "kernels/optimized/opt_attention.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/opt_quant.h"
#include "kernels/portable/portable_quant.h"
#include "kernels/optimized/sparse.h"

#define ENTRY(name, sig, fn) {name, sig, etch_opt_##fn},
#define SKIP(name, sig, fn)

static const etch_kernel optimized_plain[] = {
#define KP ENTRY
#define KF SKIP
#include "kernels/optimized/table_conv.inc"
#include "kernels/optimized/table_eltwise.inc"
#include "kernels/optimized/table_gemm.inc"
#include "kernels/optimized/table_attention.inc"
#include "kernels/optimized/table_quant.inc"
#undef KP
#undef KF
    {0, 0, 0}};

static const etch_kernel optimized_fusing[] = {
#define KP SKIP
#define KF ENTRY
#include "kernels/optimized/table_conv.inc"
#include "kernels/optimized/table_eltwise.inc"
#include "kernels/optimized/table_gemm.inc"
#include "kernels/optimized/table_attention.inc"
#include "kernels/optimized/table_quant.inc"
#undef KP
#undef KF
    {0, 0, 0}};

#define COUNT(t) (sizeof t / sizeof t[0] - 1) /* without the terminator */

/* Both tables, for listings: plain entries first, then the fusing ones. */
const etch_kernel *etch_opt_table(bool fusing, size_t *count) {
    if (count)
        *count = fusing ? COUNT(optimized_fusing) : COUNT(optimized_plain);
    return fusing ? optimized_fusing : optimized_plain;
}

const etch_kernel *etch_kernels_optimized_table(size_t *count) {
    return etch_opt_table(false, count);
}

etch_status etch_kernels_register_optimized(void) {
    etch_status st = etch_opt_select_isa_from_env();
    if (st != ETCH_OK)
        return st;
    if ((st = etch_kernels_register_portable()) != ETCH_OK)
        return st;
    /* idempotent while the tables are registered (tests may reset the registry) */
    const etch_kernel *first = COUNT(optimized_plain)    ? &optimized_plain[0]
                               : COUNT(optimized_fusing) ? &optimized_fusing[0]
                                                         : NULL;
    for (size_t i = etch_kernels_count(); first && i-- > 0;)
        if (etch_kernels_at(i) == first)
            return ETCH_OK;
    if ((st = etch_kernels_register_ex(optimized_plain, COUNT(optimized_plain), "optimized",
                                       0)) != ETCH_OK)
        return st;
    if ((st = etch_kernels_register_ex(optimized_fusing, COUNT(optimized_fusing), "optimized",
                                       ETCH_KERNEL_FUSES_ACTIVATION)) != ETCH_OK)
        return st;
    /* load-time packing of constant weights (etch_method_options.no_prepack) */
    static const struct {
        etch_kernel_fn kernel;
        etch_kernel_prepare_fn prepare;
    } prep[] = {
        {etch_opt_mm_out, etch_opt_mm_prepare},
        {etch_opt_addmm_out, etch_opt_addmm_prepare},
        {etch_opt_linear_out, etch_opt_linear_prepare},
        /* the registered mm / addmm / linear: 2:4 weights compressed (sparse.c), else the
         * dense packing */
        {etch_opt_sparse_mm_out, etch_opt_sparse_mm_prepare},
        {etch_opt_sparse_addmm_out, etch_opt_sparse_addmm_prepare},
        {etch_opt_sparse_linear_out, etch_opt_sparse_linear_prepare},
        {etch_opt_convolution_out, etch_opt_convolution_prepare},
        {etch_opt_embedding_4bit_out, etch_opt_embedding_4bit_prepare},
        {etch_opt_embedding_4bit_dtype_out, etch_opt_embedding_4bit_dtype_prepare},
        {etch_opt_dequantize_per_channel_out, etch_opt_dequantize_per_channel_prepare},
    };
    for (size_t i = 0; i < sizeof prep / sizeof prep[0]; i++)
        if ((st = etch_kernels_register_prepare(prep[i].kernel, prep[i].prepare)) != ETCH_OK)
            return st;
    /* an operator taken over here keeps the portable kernel's load-time check (the quantized
     * ones: etch_q_register_checks) */
    if ((st = etch_q_register_checks()) != ETCH_OK)
        return st;
    size_t np;
    const etch_kernel *pt = etch_kernels_portable_table(&np);
    for (size_t i = 0; i < COUNT(optimized_plain) + COUNT(optimized_fusing); i++) {
        const etch_kernel *k = i < COUNT(optimized_plain)
                                   ? &optimized_plain[i]
                                   : &optimized_fusing[i - COUNT(optimized_plain)];
        for (size_t j = 0; j < np; j++) {
            etch_kernel_fn check = etch_kernels_check_of(pt[j].fn);
            if (check && strcmp(pt[j].name, k->name) == 0 &&
                (st = etch_kernels_register_check(k->fn, check)) != ETCH_OK)
                return st;
        }
    }
    /* convolution blocks run as one (chained calls; etch_method_options.no_fusion) */
    if ((st = etch_kernels_register_chain(etch_opt_convolution_out,
                                          etch_opt_convolution_chain)) != ETCH_OK)
        return st;
    /* 4w linears from the packed int4 weight, the 8da4w / int8-dynamic activation chain
     * (quant_linear.c) */
    if ((st = etch_kernels_register_chain(etch_opt_embedding_4bit_out,
                                          etch_opt_embedding_4bit_chain)) != ETCH_OK ||
        (st = etch_kernels_register_chain(etch_opt_embedding_4bit_dtype_out,
                                          etch_opt_embedding_4bit_chain)) != ETCH_OK ||
        (st = etch_kernels_register_chain(etch_opt_choose_qparams_per_token_asymmetric_out,
                                          etch_opt_choose_qparams_per_token_asymmetric_chain)) !=
            ETCH_OK)
        return st;
    /* static int8: dequantize -> op -> quantize as integer kernels (qconv_chain.c); the weight's
     * dequantize_per_channel also starts the 8w linears (one chain function taking either) */
    if ((st = etch_kernels_register_chain(etch_opt_dequantize_per_tensor_out,
                                          etch_opt_dequantize_chain)) != ETCH_OK ||
        (st = etch_kernels_register_chain(etch_opt_dequantize_per_channel_out,
                                          etch_opt_dequantize_per_channel_chain)) != ETCH_OK)
        return st;
    /* channel-blocked tensors between layers (etch_method_options.no_blocked_layout) */
    return etch_opt_register_layouts();
}
