/* Channel-blocked (NCHW8c) depthwise convolution: see opt_conv.h. (Being written.) */
#include "kernels/optimized/opt_conv.h"

void etch_opt_conv_dw_nchwc(etch_kernel_context *ctx, const conv_shape *s) {
    (void)s;
    etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "channel-blocked depthwise convolution not built");
}
