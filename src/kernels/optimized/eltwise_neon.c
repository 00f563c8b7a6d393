/* NEON (arm64 Advanced SIMD) row functions (eltwise_simd.h over 4-lane vectors). */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define VF float32x4_t
#define VI int32x4_t
#define VM uint32x4_t
#define VL 4
#define VEC_TABLE etch_opt_vec_neon
#define VEC_NAME "neon"

#define vload(p) vld1q_f32(p)
#define vstore(p, v) vst1q_f32(p, v)
#define vset1(x) vdupq_n_f32(x)
#define vadd vaddq_f32
#define vsub vsubq_f32
#define vmul vmulq_f32
#define vdiv vdivq_f32
#define vfma(a, b, c) vfmaq_f32(c, a, b)
#define vmaxn vmaxq_f32 /* NaN when either is NaN */
#define vminn vminq_f32
#define vsqrt vsqrtq_f32
#define vabs vabsq_f32
#define vcopysign(m, s) vbslq_f32(vdupq_n_u32(0x80000000u), s, m)
#define vround vrndnq_f32
#define vcvt vcvtq_s32_f32
#define vi_half(k) vshrq_n_s32(k, 1)
#define vi_sub vsubq_s32
#define vpow2(k) vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k, vdupq_n_s32(127)), 23))
#define vlt(a, b) vcltq_f32(a, b)
#define vblend(m, a, b) vbslq_f32(m, b, a)

static inline uint32x4_t vmask8(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    const uint16x4_t h = vget_low_u16(vmovl_u8(vcreate_u8((uint64_t)w)));
    return vcgtq_u32(vmovl_u16(h), vdupq_n_u32(0));
}
static inline float vhsum(float32x4_t v) { return vaddvq_f32(v); }
static inline float vhmax(float32x4_t v) { return vmaxvq_f32(v); }

#include "kernels/optimized/eltwise_simd.h"
