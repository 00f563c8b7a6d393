/* Depthwise 3x3 convolution, padding 1: the scalar columns (the two border columns, short
 * tails, and whole rows when no SIMD instruction set is active). One partial sum per kernel
 * row (three short dependency chains instead of one of nine), added to the bias in kh order. */
#include "kernels/optimized/opt_conv.h"

void etch_opt_dw3x3_cols_scalar(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1) {
    const float *w = a->w;
    for (int64_t ow = ow0; ow < ow1; ow++) {
        /* columns x, x + 1, x + 2; the middle one is always inside the row for a valid ow */
        const int64_t x = ow * a->stride - 1;
        const bool left = x >= 0, right = x + 2 < a->W;
        float part[3] = {0.0f, 0.0f, 0.0f};
        for (int kh = 0; kh < 3; kh++) {
            const float *r = a->r[kh];
            if (!r)
                continue;
            float s = w[kh * 3 + 1] * r[x + 1];
            if (left)
                s += w[kh * 3 + 0] * r[x];
            if (right)
                s += w[kh * 3 + 2] * r[x + 2];
            part[kh] = s;
        }
        a->out[ow] = a->bias + part[0] + part[1] + part[2];
    }
}
