/*
 * The int8 dot product the cortex_m:: convolutions and linear layers reduce over:
 *     sum_i (x[i] + x_offset) * (w[i] + w_offset)   modulo 2^32 (the core's wrapping int32)
 * over contiguous vectors. Portable C everywhere; on a Cortex-M with the DSP extension (M4,
 * M7, M33: __ARM_FEATURE_DSP) two SMLADs per four bytes, with the offsets added in the
 * 16-bit lanes by SXTAB16 as CMSIS-NN does; on Helium (M55, M85: __ARM_FEATURE_MVE) sixteen
 * lanes per VMLADAVA, with the offsets applied afterwards through the sums of x and w. Both
 * are the same polynomial modulo 2^32, so every path gives the portable result bit for bit.
 * Host builds compile only the portable loop.
 */
#include <stdint.h>
#include <string.h>

#include "kernels/portable/portable_cortex_m.h"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>
#define ETCH_CM_DOT_MVE 1
#elif defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP == 1
#include <arm_acle.h>
#define ETCH_CM_DOT_DSP 1
#endif

int32_t etch_cm_dot_s8_portable(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                                int32_t w_offset) {
    uint32_t acc = 0; /* unsigned: the sum wraps modulo 2^32 as the core's */
    for (int32_t i = 0; i < n; i++)
        acc += (uint32_t)((x[i] + x_offset) * (w[i] + w_offset));
    return etch_cm_wadd((int32_t)(acc & 0x7FFFFFFFu), (int32_t)(acc & 0x80000000u ? -2147483647 - 1 : 0));
}

#if defined(ETCH_CM_DOT_DSP)
static inline int8x4_t ror8(int8x4_t v) { /* compilers fold this into SXTAB16's rotation */
    uint32_t u = (uint32_t)v;
    return (int8x4_t)((u >> 8) | (u << 24));
}

static int32_t dot_dsp(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                       int32_t w_offset) {
    /* both 16-bit lanes hold the offset; (x + offset) lies in [-255, 256]: no lane overflows */
    const int16x2_t xo = (int16x2_t)(((uint32_t)x_offset & 0xFFFFu) * 0x10001u);
    const int16x2_t wo = (int16x2_t)(((uint32_t)w_offset & 0xFFFFu) * 0x10001u);
    int32_t acc = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        int8x4_t xv, wv;
        memcpy(&xv, x + i, 4);
        memcpy(&wv, w + i, 4);
        /* bytes 0 and 2, then (rotated) bytes 1 and 3, sign-extended plus the offset */
        int16x2_t x02 = __sxtab16(xo, xv), x13 = __sxtab16(xo, ror8(xv));
        int16x2_t w02 = __sxtab16(wo, wv), w13 = __sxtab16(wo, ror8(wv));
        acc = __smlad(x02, w02, acc);
        acc = __smlad(x13, w13, acc);
    }
    return etch_cm_wadd(acc, etch_cm_dot_s8_portable(x + i, w + i, n - i, x_offset, w_offset));
}
#endif

#if defined(ETCH_CM_DOT_MVE)
static int32_t dot_mve(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                       int32_t w_offset) {
    int32_t sxw = 0, sx = 0, sw = 0;
    for (int32_t i = 0; i < n; i += 16) {
        mve_pred16_t p = vctp8q((uint32_t)(n - i));
        int8x16_t xv = vldrbq_z_s8(x + i, p), wv = vldrbq_z_s8(w + i, p); /* tail lanes 0 */
        sxw = vmladavaq_s8(sxw, xv, wv);
        sx = vaddvaq_s8(sx, xv);
        sw = vaddvaq_s8(sw, wv);
    }
    /* sum (x + a)(w + b) = sum xw + a sum w + b sum x + n a b, all modulo 2^32 */
    int32_t acc = etch_cm_wadd(sxw, etch_cm_wmul(x_offset, sw));
    acc = etch_cm_wadd(acc, etch_cm_wmul(w_offset, sx));
    return etch_cm_wadd(acc, etch_cm_wmul(etch_cm_wmul(n, x_offset), w_offset));
}
#endif

int32_t etch_cm_dot_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t x_offset,
                       int32_t w_offset) {
#if defined(ETCH_CM_DOT_MVE)
    return dot_mve(x, w, n, x_offset, w_offset);
#elif defined(ETCH_CM_DOT_DSP)
    return dot_dsp(x, w, n, x_offset, w_offset);
#else
    return etch_cm_dot_s8_portable(x, w, n, x_offset, w_offset);
#endif
}
