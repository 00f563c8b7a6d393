/* Depthwise 3x3 convolution, padding 1: the scalar columns (borders, tails, and whole rows
 * when no SIMD instruction set is active). */
#include "kernels/optimized/opt_conv.h"

void etch_opt_dw3x3_cols_scalar(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    for (int64_t ow = ow0; ow < ow1; ow++) {
        float acc = a->bias;
        const int64_t x = ow * a->stride - 1;
        for (int kh = 0; kh < 3; kh++) {
            const float *r = a->r[kh];
            if (!r)
                continue;
            for (int kw = 0; kw < 3; kw++)
                if (x + kw >= 0 && x + kw < a->W)
                    acc += a->w[kh * 3 + kw] * r[x + kw];
        }
        a->out[ow] = acc;
    }
}
