/* float32 GEMM. For now a straightforward reference loop (the packed, blocked, SIMD version
 * replaces it; its contract is in opt_gemm.h). */
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_gemm.h"

void etch_opt_sgemm(etch_kernel_context *ctx, const etch_sgemm_desc *d) {
    (void)ctx;
    for (int64_t i = 0; i < d->M; i++) {
        float *crow = d->c + i * d->ldc;
        for (int64_t j = 0; j < d->N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < d->K; k++)
                acc += d->a[i * d->a_rs + k * d->a_cs] * d->b[k * d->b_rs + j * d->b_cs];
            float v = d->alpha * acc;
            if (d->bias)
                v += d->beta * d->bias[i * d->bias_rs + j * d->bias_cs];
            crow[j] = v;
        }
        etch_opt_apply_epilogue(d->epilogue, crow, d->N);
    }
}
