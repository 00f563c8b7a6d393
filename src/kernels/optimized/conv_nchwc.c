/* Channel-blocked (NCHW8c) convolution, groups == 1: see opt_conv.h. (Being written.) */
#include "kernels/optimized/opt_conv.h"

void etch_opt_conv_nchwc(etch_kernel_context *ctx, const conv_shape *s, bool in_blocked,
                         bool out_blocked) {
    (void)s;
    (void)in_blocked;
    (void)out_blocked;
    etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "channel-blocked convolution not built");
}
