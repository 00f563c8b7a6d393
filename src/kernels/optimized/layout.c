/* Layout functions of the optimized kernels (etch_kernels_register_layout; the blocked channel
 * layout is described in etch/kernel.h) and their registration. */
#include "kernels/optimized/opt.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/optimized/opt_eltwise.h"
#include "kernels/optimized/nchwc.h"

/* Element-wise kernels: when every tensor argument (inputs, out, return slot) has the same
 * 4-D shape, element i of the output depends only on element i of each input, whatever order
 * the elements are stored in; so the tensors may be blocked, all of them or none. Broadcasts
 * (shapes that differ) keep NCHW. */
static void same_shape_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                              uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = 0;
    *tied = 0;
    const etch_tensor *first = NULL;
    uint64_t bits = 0;
    for (size_t k = 0; k < nargs && k < 64; k++) {
        const etch_value *v = args[k];
        if (!v || v->tag != ETCH_VALUE_TENSOR)
            continue;
        const etch_tensor *t = v->u.tensor;
        if (!t || t->dim != 4)
            return;
        if (!first)
            first = t;
        for (unsigned d = 0; d < 4; d++)
            if (t->sizes[d] != first->sizes[d])
                return;
        bits |= (uint64_t)1 << k;
    }
    *may = *tied = bits;
}

etch_status etch_opt_register_layouts(void) {
    static const struct {
        etch_kernel_fn kernel;
        etch_kernel_layout_fn layout;
    } table[] = {
        {etch_opt_add_out, same_shape_layout},      {etch_opt_sub_out, same_shape_layout},
        {etch_opt_mul_out, same_shape_layout},      {etch_opt_div_out, same_shape_layout},
        {etch_opt_add_scalar_out, same_shape_layout}, {etch_opt_sub_scalar_out, same_shape_layout},
        {etch_opt_mul_scalar_out, same_shape_layout}, {etch_opt_div_scalar_out, same_shape_layout},
        {etch_opt_relu_out, same_shape_layout},     {etch_opt_hardtanh_out, same_shape_layout},
        {etch_opt_clamp_out, same_shape_layout},    {etch_opt_sigmoid_out, same_shape_layout},
        {etch_opt_silu_out, same_shape_layout},     {etch_opt_gelu_out, same_shape_layout},
        {etch_opt_neg_out, same_shape_layout},      {etch_opt_tanh_out, same_shape_layout},
        {etch_opt_max_pool2d_with_indices_out, etch_opt_max_pool2d_layout},
        {etch_opt_adaptive_avg_pool2d_out, etch_opt_adaptive_avg_pool2d_layout},
        {etch_opt_mean_out, etch_opt_mean_layout},
        {etch_opt_convolution_out, etch_opt_convolution_layout},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        etch_status st = etch_kernels_register_layout(table[i].kernel, table[i].layout);
        if (st != ETCH_OK)
            return st;
    }
    return ETCH_OK;
}
