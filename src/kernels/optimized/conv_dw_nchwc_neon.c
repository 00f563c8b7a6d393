/* The channel-blocked row functions (nchwc.h: depthwise convolution, max pooling, the mean
 * over H and W) for NEON: one pixel's 8 channels in two float32x4 registers. The body is
 * nchwc_body.inc; this file defines its vocabulary. */
#include <arm_neon.h>

#include "kernels/optimized/nchwc.h"

typedef struct {
    float32x4_t a, b;
} v8f;
typedef struct {
    int32x4_t a, b;
} v8i;
typedef struct {
    float64x2_t a, b, c, d;
} v8d;

static inline v8f v8_load(const float *p) { return (v8f){vld1q_f32(p), vld1q_f32(p + 4)}; }
static inline void v8_store(float *p, v8f x) {
    vst1q_f32(p, x.a);
    vst1q_f32(p + 4, x.b);
}
static inline v8f v8_set1(float x) { return (v8f){vdupq_n_f32(x), vdupq_n_f32(x)}; }
static inline v8f v8_fma(v8f a, v8f b, v8f c) {
    return (v8f){vfmaq_f32(c.a, a.a, b.a), vfmaq_f32(c.b, a.b, b.b)};
}
static inline v8f v8_add(v8f a, v8f b) { return (v8f){vaddq_f32(a.a, b.a), vaddq_f32(a.b, b.b)}; }
static inline v8f v8_sub(v8f a, v8f b) { return (v8f){vsubq_f32(a.a, b.a), vsubq_f32(a.b, b.b)}; }
/* NaN when either operand is NaN (c never is) */
static inline v8f v8_maxn(v8f c, v8f x) { return (v8f){vmaxq_f32(c.a, x.a), vmaxq_f32(c.b, x.b)}; }
static inline v8f v8_minn(v8f c, v8f x) { return (v8f){vminq_f32(c.a, x.a), vminq_f32(c.b, x.b)}; }
static inline v8i v8i_set1(int32_t x) { return (v8i){vdupq_n_s32(x), vdupq_n_s32(x)}; }
static inline uint32x4_t take4(float32x4_t v, float32x4_t best) {
    return vorrq_u32(vcgtq_f32(v, best), vmvnq_u32(vceqq_f32(v, v)));
}
static inline void v8_maxsel(v8f v, v8i pos, v8f *best, v8i *idx) {
    const uint32x4_t ta = take4(v.a, best->a), tb = take4(v.b, best->b);
    best->a = vbslq_f32(ta, v.a, best->a);
    best->b = vbslq_f32(tb, v.b, best->b);
    idx->a = vbslq_s32(ta, pos.a, idx->a);
    idx->b = vbslq_s32(tb, pos.b, idx->b);
}
static inline void v8i_store64(int64_t *p, v8i x) {
    vst1q_s64(p, vmovl_s32(vget_low_s32(x.a)));
    vst1q_s64(p + 2, vmovl_high_s32(x.a));
    vst1q_s64(p + 4, vmovl_s32(vget_low_s32(x.b)));
    vst1q_s64(p + 6, vmovl_high_s32(x.b));
}
static inline v8d v8d_zero(void) {
    const float64x2_t z = vdupq_n_f64(0.0);
    return (v8d){z, z, z, z};
}
static inline v8d v8d_addf(v8d s, v8f x) {
    s.a = vaddq_f64(s.a, vcvt_f64_f32(vget_low_f32(x.a)));
    s.b = vaddq_f64(s.b, vcvt_high_f64_f32(x.a));
    s.c = vaddq_f64(s.c, vcvt_f64_f32(vget_low_f32(x.b)));
    s.d = vaddq_f64(s.d, vcvt_high_f64_f32(x.b));
    return s;
}
static inline v8d v8d_add(v8d s, v8d t) {
    return (v8d){vaddq_f64(s.a, t.a), vaddq_f64(s.b, t.b), vaddq_f64(s.c, t.c),
                 vaddq_f64(s.d, t.d)};
}
static inline void v8d_store(double *p, v8d x) {
    vst1q_f64(p, x.a);
    vst1q_f64(p + 2, x.b);
    vst1q_f64(p + 4, x.c);
    vst1q_f64(p + 6, x.d);
}

#define NCHWC_FN(name) nchwc_##name##_neon
#define NCHWC_TABLE etch_opt_nchwc_rows_neon
#include "kernels/optimized/nchwc_body.inc"
