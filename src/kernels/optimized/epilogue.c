/* Fused activations on float32 (scalar reference; the math matches torch's float kernels). */
#include <math.h>

#include "kernels/optimized/epilogue.h"

void etch_opt_apply_epilogue(const etch_epilogue *e, float *x, int64_t n) {
    if (!e)
        return;
    switch (e->act) {
    case ETCH_ACT_NONE:
        break;
    case ETCH_ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : (x[i] != x[i] ? x[i] : 0.0f);
        break;
    case ETCH_ACT_CLAMP: {
        const float lo = (float)e->lo, hi = (float)e->hi;
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            if (v != v)
                continue; /* NaN stays NaN, as in torch */
            v = v < lo ? lo : v;
            x[i] = v > hi ? hi : v;
        }
        break;
    }
    case ETCH_ACT_GELU:
        for (int64_t i = 0; i < n; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        break;
    case ETCH_ACT_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
        }
        break;
    case ETCH_ACT_SILU:
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] / (1.0f + expf(-x[i]));
        break;
    case ETCH_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            x[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    }
}
