/* The scalar row functions (libm for the transcendental ones; gcc vectorizes the simple loops
 * for the baseline ISA) and the per-ISA table choice. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/opt_eltwise.h"

static inline float s_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static inline float s_unary1(int op, float x, float lo, float hi) {
    switch (op) {
    case ETCH_OPT_UN_NEG:
        return -x;
    case ETCH_OPT_UN_RELU:
        return x > 0.0f ? x : (x != x ? x : 0.0f);
    case ETCH_OPT_UN_CLAMP:
        if (x != x)
            return x;
        x = x < lo ? lo : x;
        return x > hi ? hi : x;
    case ETCH_OPT_UN_EXP:
        return expf(x);
    case ETCH_OPT_UN_SIGMOID:
        return s_sigmoid(x);
    case ETCH_OPT_UN_SILU:
        return x / (1.0f + expf(-x));
    case ETCH_OPT_UN_TANH:
        return tanhf(x);
    case ETCH_OPT_UN_GELU: /* x * Phi(x) through erfc: no cancellation for negative x */
        return 0.5f * x * erfcf(-x * 0.70710678118654752f);
    case ETCH_OPT_UN_GELU_TANH: {
        const float u2 = 1.5957691216057308f * (x + 0.044715f * x * x * x);
        return x * s_sigmoid(u2);
    }
    case ETCH_OPT_UN_RSQRT:
        return 1.0f / sqrtf(x);
    case ETCH_OPT_UN_SQRT:
        return sqrtf(x);
    case ETCH_OPT_UN_RECIP:
        return 1.0f / x;
    default:
        return x;
    }
}

#define S_UNARY(OP)                                                                         \
    do {                                                                                    \
        for (int64_t i = 0; i < n; i++)                                                     \
            r[i] = s_unary1(OP, x[i], lo, hi);                                              \
    } while (0)

static void s_unary(int op, float *r, const float *x, int64_t n, float lo, float hi) {
    switch (op) {
    case ETCH_OPT_UN_NEG: S_UNARY(ETCH_OPT_UN_NEG); break;
    case ETCH_OPT_UN_RELU: S_UNARY(ETCH_OPT_UN_RELU); break;
    case ETCH_OPT_UN_CLAMP: S_UNARY(ETCH_OPT_UN_CLAMP); break;
    case ETCH_OPT_UN_EXP: S_UNARY(ETCH_OPT_UN_EXP); break;
    case ETCH_OPT_UN_SIGMOID: S_UNARY(ETCH_OPT_UN_SIGMOID); break;
    case ETCH_OPT_UN_SILU: S_UNARY(ETCH_OPT_UN_SILU); break;
    case ETCH_OPT_UN_TANH: S_UNARY(ETCH_OPT_UN_TANH); break;
    case ETCH_OPT_UN_GELU: S_UNARY(ETCH_OPT_UN_GELU); break;
    case ETCH_OPT_UN_GELU_TANH: S_UNARY(ETCH_OPT_UN_GELU_TANH); break;
    case ETCH_OPT_UN_RSQRT: S_UNARY(ETCH_OPT_UN_RSQRT); break;
    case ETCH_OPT_UN_SQRT: S_UNARY(ETCH_OPT_UN_SQRT); break;
    case ETCH_OPT_UN_RECIP: S_UNARY(ETCH_OPT_UN_RECIP); break;
    default:
        if (r != x)
            memmove(r, x, (size_t)n * sizeof(float));
        break;
    }
}

static inline float s_binary1(int op, float a, float b, float alpha) {
    switch (op) {
    case ETCH_OPT_BIN_ADD: /* one rounding, as a fused multiply-add */
        return alpha == 1.0f ? a + b : (float)((double)a + (double)alpha * (double)b);
    case ETCH_OPT_BIN_MUL:
        return a * b;
    case ETCH_OPT_BIN_DIV:
        return a / b;
    default:
        return b > a || b != b ? b : a;
    }
}

#define S_BINARY(OP)                                                                        \
    do {                                                                                    \
        if (!a_bcast && !b_bcast)                                                           \
            for (int64_t i = 0; i < n; i++)                                                 \
                r[i] = s_binary1(OP, a[i], b[i], alpha);                                    \
        else if (!a_bcast) {                                                                \
            const float b0 = b[0];                                                          \
            for (int64_t i = 0; i < n; i++)                                                 \
                r[i] = s_binary1(OP, a[i], b0, alpha);                                      \
        } else if (!b_bcast) {                                                              \
            const float a0 = a[0];                                                          \
            for (int64_t i = 0; i < n; i++)                                                 \
                r[i] = s_binary1(OP, a0, b[i], alpha);                                      \
        } else {                                                                            \
            const float v = s_binary1(OP, a[0], b[0], alpha);                               \
            for (int64_t i = 0; i < n; i++)                                                 \
                r[i] = v;                                                                   \
        }                                                                                   \
    } while (0)

static void s_binary(int op, float *r, const float *a, int a_bcast, const float *b, int b_bcast,
                     float alpha, int64_t n) {
    switch (op) {
    case ETCH_OPT_BIN_ADD: S_BINARY(ETCH_OPT_BIN_ADD); break;
    case ETCH_OPT_BIN_MUL: S_BINARY(ETCH_OPT_BIN_MUL); break;
    case ETCH_OPT_BIN_DIV: S_BINARY(ETCH_OPT_BIN_DIV); break;
    default: S_BINARY(ETCH_OPT_BIN_MAX); break;
    }
}

static void s_masked_fill(float *r, const float *x, const uint8_t *mask, int mask_bcast,
                          float value, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        r[i] = mask[mask_bcast ? 0 : i] ? value : x[i];
}

static float s_max(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

static float s_sum(const float *x, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += x[i + l];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += x[i];
    return s;
}

static float s_exp_sum(float *r, const float *x, float shift, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float e = expf(x[i] - shift);
        if (r)
            r[i] = e;
        s += e;
    }
    return s;
}

static float s_sqdev_sum(const float *x, float mean, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += (x[i + l] - mean) * (x[i + l] - mean);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += (x[i] - mean) * (x[i] - mean);
    return s;
}

static void s_norm(float *r, const float *x, float mean, float rstd, const float *w,
                   const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float y = (x[i] - mean) * rstd;
        r[i] = y * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

const etch_opt_vec etch_opt_vec_scalar = {"scalar", s_binary,  s_unary,     s_masked_fill,
                                          s_max,    s_sum,     s_exp_sum,   s_sqdev_sum,
                                          s_norm};

const etch_opt_vec *etch_opt_vec_for(int isa) {
    switch (isa) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX2:
        return &etch_opt_vec_avx2;
    case ETCH_ISA_AVX512:
        return &etch_opt_vec_avx512;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return &etch_opt_vec_neon;
#endif
    default:
        return &etch_opt_vec_scalar;
    }
}

const etch_opt_vec *etch_opt_vec_active(void) { return etch_opt_vec_for((int)etch_isa_active()); }
