/* The float32 row functions of opt_eltwise.h written once over a small vector vocabulary, so
 * the AVX2, AVX-512 and NEON tables are the same code (included by eltwise_<isa>.c, which
 * define the vocabulary first):
 *
 *   VF (float vector), VI (int32 vector), VM (lane mask), VL (lanes), VEC_TABLE (table name)
 *   vload/vstore (unaligned), vset1, vadd, vsub, vmul, vdiv, vfma(a, b, c) = a*b + c,
 *   vmaxn(c, x) / vminn(c, x): max/min that return x when x is NaN (c is never NaN),
 *   vsqrt, vabs, vcopysign(mag, sgn), vround (to nearest integral value), vcvt (exact
 *   integral float -> int), vi_half(k) (k >> 1 arithmetic), vi_sub, vpow2(k) (2^k as float
 *   for -126 <= k <= 127), vlt(a, b) -> VM, vblend(m, a, b) = m ? b : a,
 *   vmask8(p) (VL mask bytes -> VM of byte != 0), vhsum, vhmax.
 *
 * Tails (n % VL) go through a VL-float stack buffer so every element sees the same math. */
#include <string.h>

#include "kernels/optimized/opt_eltwise.h"

/* ---- exp and friends -------------------------------------------------------------------- */

/* exp(x): x = k ln2 + r, |r| <= ln2/2; exp(r) by a degree-6 polynomial fitted for relative
 * error (3.6e-9 on the interval); 2^k applied as two factors 2^(k>>1) * 2^(k - k>>1) so that
 * results down to the subnormal range and up to overflow come out right. */
static inline VF v_exp(VF x) {
    x = vminn(vset1(89.0f), vmaxn(vset1(-104.0f), x)); /* NaN passes through */
    const VF k = vround(vmul(x, vset1(1.44269504088896341f)));
    VF r = vfma(k, vset1(-0.693359375f), x); /* ln2 split in two: the high part is exact */
    r = vfma(k, vset1(2.12194440e-4f), r);
    VF p = vset1(1.375140818129901e-3f);
    p = vfma(p, r, vset1(8.368919080973094e-3f));
    p = vfma(p, r, vset1(4.1669533395475564e-2f));
    p = vfma(p, r, vset1(1.666651843720962e-1f));
    p = vfma(p, r, vset1(4.9999988592958855e-1f));
    p = vfma(p, r, vset1(1.0f));
    p = vfma(p, r, vset1(1.0f));
    const VI ki = vcvt(k);
    const VI k1 = vi_half(ki);
    return vmul(vmul(p, vpow2(k1)), vpow2(vi_sub(ki, k1)));
}

static inline VF v_sigmoid(VF x) {
    const VF one = vset1(1.0f);
    return vdiv(one, vadd(one, v_exp(vsub(vset1(0.0f), x))));
}

/* tanh(|x|) by an odd polynomial below 0.5 (relative error 1.2e-9 fitted), else
 * 1 - 2/(exp(2|x|) + 1); the sign is copied back. */
static inline VF v_tanh(VF x) {
    const VF a = vabs(x), one = vset1(1.0f);
    const VF z = vmul(a, a);
    VF q = vset1(-6.264324411651788e-3f);
    q = vfma(q, z, vset1(2.10641079397342e-2f));
    q = vfma(q, z, vset1(-5.385028973994348e-2f));
    q = vfma(q, z, vset1(1.3332564390698048e-1f));
    q = vfma(q, z, vset1(-3.333331679734162e-1f));
    const VF small = vfma(vmul(q, z), a, a);
    const VF e = v_exp(vadd(a, a));
    const VF big = vsub(one, vdiv(vset1(2.0f), vadd(e, one)));
    return vcopysign(vblend(vlt(a, vset1(0.5f)), big, small), x);
}

/* erfc(z) for z >= 0 as t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), P of degree 9 fitted to
 * log-error 3.3e-7 (float evaluation) for z <= 12; erfc underflows to 0 beyond. */
static inline VF v_erfc_pos(VF z) {
    const VF one = vset1(1.0f);
    const VF t = vdiv(one, vfma(z, vset1(0.5f), one));
    VF p = vset1(1.615106371133096e-1f);
    p = vfma(p, t, vset1(-7.667642495110345e-1f));
    p = vfma(p, t, vset1(1.3488850112003212f));
    p = vfma(p, t, vset1(-9.389015413866197e-1f));
    p = vfma(p, t, vset1(1.0992590263992158e-1f));
    p = vfma(p, t, vset1(-9.444688192742207e-2f));
    p = vfma(p, t, vset1(6.543808498081372e-2f));
    p = vfma(p, t, vset1(3.8052378132448517e-1f));
    p = vfma(p, t, vset1(9.993091267853659e-1f));
    p = vfma(p, t, vset1(-1.2654796998432074f));
    return vmul(t, v_exp(vsub(p, vmul(z, z))));
}

/* x * Phi(x): Phi(x) = erfc(-x/sqrt2)/2 for x < 0, 1 - erfc(x/sqrt2)/2 otherwise. */
static inline VF v_gelu(VF x) {
    const VF h = vmul(v_erfc_pos(vmul(vabs(x), vset1(0.70710678118654752f))), vset1(0.5f));
    const VF phi = vblend(vlt(x, vset1(0.0f)), vsub(vset1(1.0f), h), h);
    return vmul(x, phi);
}

/* 0.5x(1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3). */
static inline VF v_gelu_tanh(VF x) {
    const VF x3 = vmul(vmul(x, x), x);
    const VF u2 = vmul(vfma(x3, vset1(0.044715f), x), vset1(1.5957691216057308f));
    return vmul(x, v_sigmoid(u2));
}

static inline VF v_unary1(int op, VF x, VF lo, VF hi) {
    switch (op) {
    case ETCH_OPT_UN_NEG:
        return vsub(vset1(-0.0f), x);
    case ETCH_OPT_UN_RELU:
        return vmaxn(vset1(0.0f), x);
    case ETCH_OPT_UN_CLAMP:
        return vminn(hi, vmaxn(lo, x));
    case ETCH_OPT_UN_EXP:
        return v_exp(x);
    case ETCH_OPT_UN_SIGMOID:
        return v_sigmoid(x);
    case ETCH_OPT_UN_SILU:
        return vdiv(x, vadd(vset1(1.0f), v_exp(vsub(vset1(0.0f), x))));
    case ETCH_OPT_UN_TANH:
        return v_tanh(x);
    case ETCH_OPT_UN_GELU:
        return v_gelu(x);
    case ETCH_OPT_UN_GELU_TANH:
        return v_gelu_tanh(x);
    case ETCH_OPT_UN_RSQRT:
        return vdiv(vset1(1.0f), vsqrt(x));
    case ETCH_OPT_UN_SQRT:
        return vsqrt(x);
    case ETCH_OPT_UN_RECIP:
        return vdiv(vset1(1.0f), x);
    default:
        return x;
    }
}

/* The loop is instantiated per operation so the switch leaves the inner loop. */
#define UNARY_LOOP(OP)                                                                      \
    do {                                                                                    \
        int64_t i = 0;                                                                      \
        for (; i + 2 * VL <= n; i += 2 * VL) {                                              \
            VF a0 = vload(x + i), a1 = vload(x + i + VL);                                   \
            vstore(r + i, v_unary1(OP, a0, vlo, vhi));                                      \
            vstore(r + i + VL, v_unary1(OP, a1, vlo, vhi));                                 \
        }                                                                                   \
        for (; i + VL <= n; i += VL)                                                        \
            vstore(r + i, v_unary1(OP, vload(x + i), vlo, vhi));                            \
        if (i < n) {                                                                        \
            float buf[VL];                                                                  \
            memset(buf, 0, sizeof buf);                                                     \
            memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));                            \
            vstore(buf, v_unary1(OP, vload(buf), vlo, vhi));                                \
            memcpy(r + i, buf, (size_t)(n - i) * sizeof(float));                            \
        }                                                                                   \
    } while (0)

static void vec_unary(int op, float *r, const float *x, int64_t n, float lo, float hi) {
    const VF vlo = vset1(lo), vhi = vset1(hi);
    switch (op) {
    case ETCH_OPT_UN_NEG: UNARY_LOOP(ETCH_OPT_UN_NEG); break;
    case ETCH_OPT_UN_RELU: UNARY_LOOP(ETCH_OPT_UN_RELU); break;
    case ETCH_OPT_UN_CLAMP: UNARY_LOOP(ETCH_OPT_UN_CLAMP); break;
    case ETCH_OPT_UN_EXP: UNARY_LOOP(ETCH_OPT_UN_EXP); break;
    case ETCH_OPT_UN_SIGMOID: UNARY_LOOP(ETCH_OPT_UN_SIGMOID); break;
    case ETCH_OPT_UN_SILU: UNARY_LOOP(ETCH_OPT_UN_SILU); break;
    case ETCH_OPT_UN_TANH: UNARY_LOOP(ETCH_OPT_UN_TANH); break;
    case ETCH_OPT_UN_GELU: UNARY_LOOP(ETCH_OPT_UN_GELU); break;
    case ETCH_OPT_UN_GELU_TANH: UNARY_LOOP(ETCH_OPT_UN_GELU_TANH); break;
    case ETCH_OPT_UN_RSQRT: UNARY_LOOP(ETCH_OPT_UN_RSQRT); break;
    case ETCH_OPT_UN_SQRT: UNARY_LOOP(ETCH_OPT_UN_SQRT); break;
    case ETCH_OPT_UN_RECIP: UNARY_LOOP(ETCH_OPT_UN_RECIP); break;
    default:
        if (r != x)
            memmove(r, x, (size_t)n * sizeof(float));
        break;
    }
}

/* ---- binary ----------------------------------------------------------------------------- */

static inline VF v_binary1(int op, VF a, VF b, VF alpha) {
    switch (op) {
    case ETCH_OPT_BIN_ADD:
        return vfma(b, alpha, a);
    case ETCH_OPT_BIN_MUL:
        return vmul(a, b);
    case ETCH_OPT_BIN_DIV:
        return vdiv(a, b);
    default:
        return vmaxn(a, b);
    }
}

/* LA / LB load an operand at i (a full vector or the broadcast value). */
#define BINARY_LOOP(OP, LA, LB)                                                             \
    do {                                                                                    \
        int64_t i = 0;                                                                      \
        for (; i + 2 * VL <= n; i += 2 * VL) {                                              \
            VF a0 = LA(a, i), b0 = LB(b, i), a1 = LA(a, i + VL), b1 = LB(b, i + VL);        \
            vstore(r + i, v_binary1(OP, a0, b0, va));                                       \
            vstore(r + i + VL, v_binary1(OP, a1, b1, va));                                  \
        }                                                                                   \
        for (; i + VL <= n; i += VL)                                                        \
            vstore(r + i, v_binary1(OP, LA(a, i), LB(b, i), va));                           \
        if (i < n) {                                                                        \
            float ba[VL], bb[VL];                                                           \
            for (int l = 0; l < VL; l++) {                                                  \
                const int64_t j = i + l < n ? i + l : i;                                    \
                ba[l] = a_bcast ? a[0] : a[j];                                              \
                bb[l] = b_bcast ? b[0] : b[j];                                              \
            }                                                                               \
            vstore(ba, v_binary1(OP, vload(ba), vload(bb), va));                            \
            memcpy(r + i, ba, (size_t)(n - i) * sizeof(float));                            \
        }                                                                                   \
    } while (0)

#define LD_VEC(p, i) vload((p) + (i))
#define LD_ONE(p, i) p##_one

#define BINARY_OP(OP)                                                                       \
    do {                                                                                    \
        if (!a_bcast && !b_bcast)                                                           \
            BINARY_LOOP(OP, LD_VEC, LD_VEC);                                                \
        else if (b_bcast && !a_bcast)                                                       \
            BINARY_LOOP(OP, LD_VEC, LD_ONE);                                                \
        else if (a_bcast && !b_bcast)                                                       \
            BINARY_LOOP(OP, LD_ONE, LD_VEC);                                                \
        else                                                                                \
            BINARY_LOOP(OP, LD_ONE, LD_ONE);                                                \
    } while (0)

static void vec_binary(int op, float *r, const float *a, int a_bcast, const float *b,
                       int b_bcast, float alpha, int64_t n) {
    const VF va = vset1(alpha);
    const VF a_one = vset1(a[0]), b_one = vset1(b[0]);
    (void)a_one;
    (void)b_one;
    switch (op) {
    case ETCH_OPT_BIN_ADD: BINARY_OP(ETCH_OPT_BIN_ADD); break;
    case ETCH_OPT_BIN_MUL: BINARY_OP(ETCH_OPT_BIN_MUL); break;
    case ETCH_OPT_BIN_DIV: BINARY_OP(ETCH_OPT_BIN_DIV); break;
    default: BINARY_OP(ETCH_OPT_BIN_MAX); break;
    }
}

static void vec_masked_fill(float *r, const float *x, const uint8_t *mask, int mask_bcast,
                            float value, int64_t n) {
    if (mask_bcast) {
        if (mask[0]) {
            const VF v = vset1(value);
            int64_t i = 0;
            for (; i + VL <= n; i += VL)
                vstore(r + i, v);
            for (; i < n; i++)
                r[i] = value;
        } else if (r != x) {
            memmove(r, x, (size_t)n * sizeof(float));
        }
        return;
    }
    const VF v = vset1(value);
    int64_t i = 0;
    for (; i + VL <= n; i += VL)
        vstore(r + i, vblend(vmask8(mask + i), vload(x + i), v));
    for (; i < n; i++)
        r[i] = mask[i] ? value : x[i];
}

/* ---- reductions ------------------------------------------------------------------------- */

static float vec_max(const float *x, int64_t n) {
    int64_t i = 0;
    float m = x[0];
    if (n >= 4 * VL) {
        VF m0 = vload(x), m1 = vload(x + VL), m2 = vload(x + 2 * VL), m3 = vload(x + 3 * VL);
        for (i = 4 * VL; i + 4 * VL <= n; i += 4 * VL) {
            m0 = vmaxn(m0, vload(x + i));
            m1 = vmaxn(m1, vload(x + i + VL));
            m2 = vmaxn(m2, vload(x + i + 2 * VL));
            m3 = vmaxn(m3, vload(x + i + 3 * VL));
        }
        m = vhmax(vmaxn(vmaxn(m0, m1), vmaxn(m2, m3)));
    }
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

static float vec_sum(const float *x, int64_t n) {
    VF s0 = vset1(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 * VL <= n; i += 4 * VL) {
        s0 = vadd(s0, vload(x + i));
        s1 = vadd(s1, vload(x + i + VL));
        s2 = vadd(s2, vload(x + i + 2 * VL));
        s3 = vadd(s3, vload(x + i + 3 * VL));
    }
    for (; i + VL <= n; i += VL)
        s0 = vadd(s0, vload(x + i));
    float s = vhsum(vadd(vadd(s0, s1), vadd(s2, s3)));
    for (; i < n; i++)
        s += x[i];
    return s;
}

static float vec_exp_sum(float *r, const float *x, float shift, int64_t n) {
    const VF sh = vset1(shift);
    VF s0 = vset1(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        const VF e0 = v_exp(vsub(vload(x + i), sh)), e1 = v_exp(vsub(vload(x + i + VL), sh));
        if (r) {
            vstore(r + i, e0);
            vstore(r + i + VL, e1);
        }
        s0 = vadd(s0, e0);
        s1 = vadd(s1, e1);
    }
    for (; i + VL <= n; i += VL) {
        const VF e0 = v_exp(vsub(vload(x + i), sh));
        if (r)
            vstore(r + i, e0);
        s0 = vadd(s0, e0);
    }
    float s = vhsum(vadd(s0, s1));
    if (i < n) {
        float buf[VL];
        for (int l = 0; l < VL; l++)
            buf[l] = i + l < n ? x[i + l] : shift;
        vstore(buf, v_exp(vsub(vload(buf), sh)));
        for (int64_t l = 0; l < n - i; l++) {
            s += buf[l];
            if (r)
                r[i + l] = buf[l];
        }
    }
    return s;
}

static float vec_sqdev_sum(const float *x, float mean, int64_t n) {
    const VF m = vset1(mean);
    VF s0 = vset1(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
        const VF d0 = vsub(vload(x + i), m), d1 = vsub(vload(x + i + VL), m);
        s0 = vfma(d0, d0, s0);
        s1 = vfma(d1, d1, s1);
    }
    for (; i + VL <= n; i += VL) {
        const VF d0 = vsub(vload(x + i), m);
        s0 = vfma(d0, d0, s0);
    }
    float s = vhsum(vadd(s0, s1));
    for (; i < n; i++)
        s += (x[i] - mean) * (x[i] - mean);
    return s;
}

static void vec_norm(float *r, const float *x, float mean, float rstd, const float *w,
                     const float *b, int64_t n) {
    const VF m = vset1(mean), s = vset1(rstd), zero = vset1(0.0f), one = vset1(1.0f);
    int64_t i = 0;
    for (; i + VL <= n; i += VL) {
        const VF y = vmul(vsub(vload(x + i), m), s);
        vstore(r + i, vfma(y, w ? vload(w + i) : one, b ? vload(b + i) : zero));
    }
    for (; i < n; i++) {
        const float y = (x[i] - mean) * rstd;
        r[i] = y * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

const etch_opt_vec VEC_TABLE = {VEC_NAME,        vec_binary, vec_unary,     vec_masked_fill,
                                vec_max,         vec_sum,    vec_exp_sum,   vec_sqdev_sum,
                                vec_norm};
