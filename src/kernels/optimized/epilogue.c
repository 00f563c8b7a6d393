/* Fused activations on float32, through the active ISA's vector row functions (the math and
 * its accuracy are opt_eltwise.h's: relu and clamp exact, the others within the stated
 * tolerances of the float functions). */
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_eltwise.h"

void etch_opt_apply_epilogue(const etch_epilogue *e, float *x, int64_t n) {
    if (!e || n <= 0)
        return;
    int op = ETCH_OPT_UN_COPY;
    float lo = 0.0f, hi = 0.0f;
    switch (e->act) {
    case ETCH_ACT_NONE:
        return;
    case ETCH_ACT_RELU:
        op = ETCH_OPT_UN_RELU;
        break;
    case ETCH_ACT_CLAMP:
        op = ETCH_OPT_UN_CLAMP;
        lo = (float)e->lo;
        hi = (float)e->hi;
        break;
    case ETCH_ACT_GELU:
        op = ETCH_OPT_UN_GELU;
        break;
    case ETCH_ACT_GELU_TANH:
        op = ETCH_OPT_UN_GELU_TANH;
        break;
    case ETCH_ACT_SILU:
        op = ETCH_OPT_UN_SILU;
        break;
    case ETCH_ACT_SIGMOID:
        op = ETCH_OPT_UN_SIGMOID;
        break;
    }
    etch_opt_vec_active()->unary(op, x, x, n, lo, hi);
}
