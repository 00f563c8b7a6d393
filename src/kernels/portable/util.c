/* Shared helpers of the portable kernels: dtypes, promotion, conversions, argument checks. */
#include <math.h>
#include <stdio.h>

#include "kernels/portable/portable.h"

/* ---- dtypes ------------------------------------------------------------------------- */

bool etch_pk_dtype_is_real(int d) {
    switch (d) {
    case ETCH_DTYPE_BOOL: case ETCH_DTYPE_BYTE: case ETCH_DTYPE_CHAR: case ETCH_DTYPE_SHORT:
    case ETCH_DTYPE_INT: case ETCH_DTYPE_LONG: case ETCH_DTYPE_HALF: case ETCH_DTYPE_BFLOAT16:
    case ETCH_DTYPE_FLOAT: case ETCH_DTYPE_DOUBLE:
        return true;
    default:
        return false;
    }
}

/* Rank within the signed integers (Byte is handled separately). */
static int int_rank(int d) {
    switch (d) {
    case ETCH_DTYPE_CHAR: return 1;
    case ETCH_DTYPE_SHORT: return 2;
    case ETCH_DTYPE_INT: return 3;
    case ETCH_DTYPE_LONG: return 4;
    default: return 0;
    }
}

int etch_pk_promote(int a, int b) {
    if (a == b)
        return a;
    if (a == ETCH_DTYPE_BOOL)
        return b;
    if (b == ETCH_DTYPE_BOOL)
        return a;
    bool fa = etch_pk_is_float(a), fb = etch_pk_is_float(b);
    if (fa && fb) {
        if (a == ETCH_DTYPE_DOUBLE || b == ETCH_DTYPE_DOUBLE)
            return ETCH_DTYPE_DOUBLE;
        return ETCH_DTYPE_FLOAT; /* Half+BFloat16, or either with Float */
    }
    if (fa)
        return a;
    if (fb)
        return b;
    /* both integral, not equal */
    if (a == ETCH_DTYPE_BYTE || b == ETCH_DTYPE_BYTE) {
        int other = a == ETCH_DTYPE_BYTE ? b : a;
        return other == ETCH_DTYPE_CHAR ? ETCH_DTYPE_SHORT : other;
    }
    return int_rank(a) > int_rank(b) ? a : b;
}

bool etch_pk_can_cast(int from, int to) {
    if (etch_pk_is_float(from) && !etch_pk_is_float(to) && to != ETCH_DTYPE_BOOL)
        return false;
    if (from != ETCH_DTYPE_BOOL && to == ETCH_DTYPE_BOOL)
        return false;
    return true;
}

void etch_pk_rt_init(etch_pk_result_type *rt) {
    rt->dim_result = rt->zero_result = rt->wrapped_result = -1;
}

static int promote_skip(int a, int b) {
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return etch_pk_promote(a, b);
}

void etch_pk_rt_tensor(etch_pk_result_type *rt, const etch_tensor *t) {
    if (t->dim == 0)
        rt->zero_result = promote_skip(rt->zero_result, t->dtype);
    else
        rt->dim_result = promote_skip(rt->dim_result, t->dtype);
}

void etch_pk_rt_scalar(etch_pk_result_type *rt, const etch_value *v) {
    int d = v->tag == ETCH_VALUE_DOUBLE ? ETCH_DTYPE_FLOAT
            : v->tag == ETCH_VALUE_BOOL ? ETCH_DTYPE_BOOL
                                        : ETCH_DTYPE_LONG;
    rt->wrapped_result = promote_skip(rt->wrapped_result, d);
}

/* A lower-priority result only wins when its category (bool < integral < floating) is higher. */
static int combine_categories(int higher, int lower) {
    if (higher >= 0 && etch_pk_is_float(higher))
        return higher;
    if (higher == ETCH_DTYPE_BOOL || (lower >= 0 && etch_pk_is_float(lower)))
        return promote_skip(higher, lower);
    if (higher >= 0)
        return higher;
    return lower;
}

int etch_pk_rt_result(const etch_pk_result_type *rt) {
    return combine_categories(rt->dim_result,
                              combine_categories(rt->zero_result, rt->wrapped_result));
}

/* ---- conversions ------------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t etch_pk_f32_to_half(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN (keep it a quiet NaN) */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x1ffu) : 0x7c00u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half (or zero) */
        uint32_t e = ax >> 23;
        if (e < 102) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even */
    uint32_t r = ax - (112u << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float etch_pk_half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t etch_pk_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7fc0u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow gives infinity */
    return (uint16_t)(x >> 16);
}

float etch_pk_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

int64_t etch_pk_f64_to_i64(double d) {
    if (!(d == d))
        return 0;
    if (d >= 9223372036854775808.0)
        return INT64_MAX;
    if (d < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* ---- element access ------------------------------------------------------------------------ */

static inline uint8_t ld_u8(const char *p) { return *(const uint8_t *)p; }
static inline int8_t ld_i8(const char *p) { return *(const int8_t *)p; }
static inline int16_t ld_i16(const char *p) { int16_t v; memcpy(&v, p, 2); return v; }
static inline int32_t ld_i32(const char *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline int64_t ld_i64(const char *p) { int64_t v; memcpy(&v, p, 8); return v; }
static inline uint16_t ld_u16(const char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline float ld_f32(const char *p) { float v; memcpy(&v, p, 4); return v; }
static inline double ld_f64(const char *p) { double v; memcpy(&v, p, 8); return v; }

double etch_pk_load_f64(const void *vp, int dtype) {
    const char *p = (const char *)vp;
    switch (dtype) {
    case ETCH_DTYPE_BOOL: return ld_u8(p) ? 1.0 : 0.0;
    case ETCH_DTYPE_BYTE: return ld_u8(p);
    case ETCH_DTYPE_CHAR: return ld_i8(p);
    case ETCH_DTYPE_SHORT: return ld_i16(p);
    case ETCH_DTYPE_INT: return ld_i32(p);
    case ETCH_DTYPE_LONG: return (double)ld_i64(p);
    case ETCH_DTYPE_HALF: return etch_pk_half_to_f32(ld_u16(p));
    case ETCH_DTYPE_BFLOAT16: return etch_pk_bf16_to_f32(ld_u16(p));
    case ETCH_DTYPE_FLOAT: return ld_f32(p);
    case ETCH_DTYPE_DOUBLE: return ld_f64(p);
    default: return 0.0;
    }
}

int64_t etch_pk_load_i64(const void *vp, int dtype) {
    const char *p = (const char *)vp;
    switch (dtype) {
    case ETCH_DTYPE_BOOL: return ld_u8(p) ? 1 : 0;
    case ETCH_DTYPE_BYTE: return ld_u8(p);
    case ETCH_DTYPE_CHAR: return ld_i8(p);
    case ETCH_DTYPE_SHORT: return ld_i16(p);
    case ETCH_DTYPE_INT: return ld_i32(p);
    case ETCH_DTYPE_LONG: return ld_i64(p);
    default: return etch_pk_f64_to_i64(etch_pk_load_f64(p, dtype));
    }
}

/* Wrap an int64 to the width of an integral dtype (two's complement, no UB). */
static inline int64_t wrap_to(int64_t v, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_BOOL: return v != 0;
    case ETCH_DTYPE_BYTE: return (int64_t)(uint8_t)(uint64_t)v;
    case ETCH_DTYPE_CHAR: {
        int64_t u = (int64_t)((uint64_t)v & 0xffu);
        return u >= 0x80 ? u - 0x100 : u;
    }
    case ETCH_DTYPE_SHORT: {
        int64_t u = (int64_t)((uint64_t)v & 0xffffu);
        return u >= 0x8000 ? u - 0x10000 : u;
    }
    case ETCH_DTYPE_INT: {
        int64_t u = (int64_t)((uint64_t)v & 0xffffffffu);
        return u >= 0x80000000LL ? u - 0x100000000LL : u;
    }
    default: return v;
    }
}

static inline void st_u16(char *p, uint16_t h) { memcpy(p, &h, 2); }

static inline void st_i64_bits(char *p, int dtype, int64_t v) {
    int64_t w = wrap_to(v, dtype);
    switch (dtype) {
    case ETCH_DTYPE_BOOL: case ETCH_DTYPE_BYTE: { uint8_t x = (uint8_t)w; memcpy(p, &x, 1); break; }
    case ETCH_DTYPE_CHAR: { int8_t x = (int8_t)w; memcpy(p, &x, 1); break; }
    case ETCH_DTYPE_SHORT: { int16_t x = (int16_t)w; memcpy(p, &x, 2); break; }
    case ETCH_DTYPE_INT: { int32_t x = (int32_t)w; memcpy(p, &x, 4); break; }
    case ETCH_DTYPE_LONG: memcpy(p, &w, 8); break;
    default: break; /* not a real dtype: callers reject these before storing */
    }
}

void etch_pk_store_i64(void *vp, int dtype, int64_t v) {
    char *p = (char *)vp;
    switch (dtype) {
    case ETCH_DTYPE_HALF: st_u16(p, etch_pk_f32_to_half((float)v)); break;
    case ETCH_DTYPE_BFLOAT16: st_u16(p, etch_pk_f32_to_bf16((float)v)); break;
    case ETCH_DTYPE_FLOAT: { float f = (float)v; memcpy(p, &f, 4); break; }
    case ETCH_DTYPE_DOUBLE: { double d = (double)v; memcpy(p, &d, 8); break; }
    default: st_i64_bits(p, dtype, v); break;
    }
}

void etch_pk_store_f64(void *vp, int dtype, double v) {
    char *p = (char *)vp;
    switch (dtype) {
    case ETCH_DTYPE_HALF: st_u16(p, etch_pk_f32_to_half((float)v)); break;
    case ETCH_DTYPE_BFLOAT16: st_u16(p, etch_pk_f32_to_bf16((float)v)); break;
    case ETCH_DTYPE_FLOAT: { float f = (float)v; memcpy(p, &f, 4); break; }
    case ETCH_DTYPE_DOUBLE: memcpy(p, &v, 8); break;
    case ETCH_DTYPE_BOOL: { uint8_t b = v != 0; memcpy(p, &b, 1); break; }
    default: st_i64_bits(p, dtype, etch_pk_f64_to_i64(v)); break;
    }
}

/* Row loops: the switch is outside the loop so each case is a tight (vectorisable) loop. */
#define PK_ROW_LOAD(dst, src, stride, n, expr)                                               \
    for (int64_t i_ = 0; i_ < (n); i_++) {                                                   \
        const char *p = (src) + i_ * (stride);                                               \
        (dst)[i_] = (expr);                                                                  \
    }

void etch_pk_load_row_f64(double *dst, const char *src, int64_t s, int64_t n, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_FLOAT: PK_ROW_LOAD(dst, src, s, n, ld_f32(p)); break;
    case ETCH_DTYPE_DOUBLE: PK_ROW_LOAD(dst, src, s, n, ld_f64(p)); break;
    case ETCH_DTYPE_HALF: PK_ROW_LOAD(dst, src, s, n, etch_pk_half_to_f32(ld_u16(p))); break;
    case ETCH_DTYPE_BFLOAT16: PK_ROW_LOAD(dst, src, s, n, etch_pk_bf16_to_f32(ld_u16(p))); break;
    case ETCH_DTYPE_BOOL: PK_ROW_LOAD(dst, src, s, n, ld_u8(p) ? 1.0 : 0.0); break;
    case ETCH_DTYPE_BYTE: PK_ROW_LOAD(dst, src, s, n, ld_u8(p)); break;
    case ETCH_DTYPE_CHAR: PK_ROW_LOAD(dst, src, s, n, ld_i8(p)); break;
    case ETCH_DTYPE_SHORT: PK_ROW_LOAD(dst, src, s, n, ld_i16(p)); break;
    case ETCH_DTYPE_INT: PK_ROW_LOAD(dst, src, s, n, ld_i32(p)); break;
    case ETCH_DTYPE_LONG: PK_ROW_LOAD(dst, src, s, n, (double)ld_i64(p)); break;
    default: memset(dst, 0, (size_t)n * sizeof *dst); break;
    }
}

void etch_pk_load_row_i64(int64_t *dst, const char *src, int64_t s, int64_t n, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_BOOL: PK_ROW_LOAD(dst, src, s, n, ld_u8(p) ? 1 : 0); break;
    case ETCH_DTYPE_BYTE: PK_ROW_LOAD(dst, src, s, n, ld_u8(p)); break;
    case ETCH_DTYPE_CHAR: PK_ROW_LOAD(dst, src, s, n, ld_i8(p)); break;
    case ETCH_DTYPE_SHORT: PK_ROW_LOAD(dst, src, s, n, ld_i16(p)); break;
    case ETCH_DTYPE_INT: PK_ROW_LOAD(dst, src, s, n, ld_i32(p)); break;
    case ETCH_DTYPE_LONG: PK_ROW_LOAD(dst, src, s, n, ld_i64(p)); break;
    default: PK_ROW_LOAD(dst, src, s, n, etch_pk_load_i64(p, dtype)); break;
    }
}

#define PK_ROW_STORE(dst, stride, n, T, expr)                                                \
    for (int64_t i_ = 0; i_ < (n); i_++) {                                                   \
        T x_ = (expr);                                                                       \
        memcpy((dst) + i_ * (stride), &x_, sizeof x_);                                       \
    }

void etch_pk_store_row_f64(char *dst, int64_t s, const double *v, int64_t n, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_FLOAT: PK_ROW_STORE(dst, s, n, float, (float)v[i_]); break;
    case ETCH_DTYPE_DOUBLE: PK_ROW_STORE(dst, s, n, double, v[i_]); break;
    case ETCH_DTYPE_HALF:
        PK_ROW_STORE(dst, s, n, uint16_t, etch_pk_f32_to_half((float)v[i_]));
        break;
    case ETCH_DTYPE_BFLOAT16:
        PK_ROW_STORE(dst, s, n, uint16_t, etch_pk_f32_to_bf16((float)v[i_]));
        break;
    case ETCH_DTYPE_BOOL: PK_ROW_STORE(dst, s, n, uint8_t, (uint8_t)(v[i_] != 0)); break;
    default:
        for (int64_t i = 0; i < n; i++)
            st_i64_bits(dst + i * s, dtype, etch_pk_f64_to_i64(v[i]));
        break;
    }
}

void etch_pk_store_row_i64(char *dst, int64_t s, const int64_t *v, int64_t n, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_FLOAT: PK_ROW_STORE(dst, s, n, float, (float)v[i_]); break;
    case ETCH_DTYPE_DOUBLE: PK_ROW_STORE(dst, s, n, double, (double)v[i_]); break;
    case ETCH_DTYPE_HALF:
        PK_ROW_STORE(dst, s, n, uint16_t, etch_pk_f32_to_half((float)v[i_]));
        break;
    case ETCH_DTYPE_BFLOAT16:
        PK_ROW_STORE(dst, s, n, uint16_t, etch_pk_f32_to_bf16((float)v[i_]));
        break;
    case ETCH_DTYPE_LONG: PK_ROW_STORE(dst, s, n, int64_t, v[i_]); break;
    default:
        for (int64_t i = 0; i < n; i++)
            st_i64_bits(dst + i * s, dtype, v[i]);
        break;
    }
}

void etch_pk_round_row_f64(double *v, int64_t n, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_FLOAT:
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)v[i];
        break;
    case ETCH_DTYPE_HALF:
        for (int64_t i = 0; i < n; i++)
            v[i] = etch_pk_half_to_f32(etch_pk_f32_to_half((float)v[i]));
        break;
    case ETCH_DTYPE_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            v[i] = etch_pk_bf16_to_f32(etch_pk_f32_to_bf16((float)v[i]));
        break;
    default:
        break;
    }
}

void etch_pk_round_row_i64(int64_t *v, int64_t n, int dtype) {
    if (dtype == ETCH_DTYPE_LONG)
        return;
    for (int64_t i = 0; i < n; i++)
        v[i] = wrap_to(v[i], dtype);
}

/* ---- argument access ---------------------------------------------------------------------- */

bool etch_pk_nargs(etch_kernel_context *ctx, size_t nargs, size_t n) {
    if (nargs >= n)
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_PROGRAM, "expected %zu arguments, got %zu", n, nargs);
    return false;
}

static bool tensor_ok(etch_kernel_context *ctx, const etch_tensor *t, const char *name) {
    if (t->dim > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has rank %u, more than %d", name,
                         (unsigned)t->dim, ETCH_MAX_DIMS);
        return false;
    }
    if (!etch_dtype_is_valid(t->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has unknown dtype %u", name,
                         (unsigned)t->dtype);
        return false;
    }
    uint32_t seen = 0;
    for (unsigned i = 0; i < t->dim; i++) {
        if (t->sizes[i] < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "%s has negative size %lld at dim %u",
                             name, (long long)t->sizes[i], i);
            return false;
        }
        unsigned d = t->dim_order[i];
        if (d >= t->dim || (seen & (1u << d))) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "%s has a dim_order that is not a permutation", name);
            return false;
        }
        seen |= 1u << d;
    }
    if (!t->data && etch_tensor_numel(t) > 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_STATE, "%s has elements but no data", name);
        return false;
    }
    return true;
}

etch_tensor *etch_pk_tensor(etch_kernel_context *ctx, etch_value *v, const char *name) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Tensor, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return NULL;
    }
    return tensor_ok(ctx, v->u.tensor, name) ? v->u.tensor : NULL;
}

etch_tensor *etch_pk_opt_tensor(etch_kernel_context *ctx, etch_value *v, const char *name,
                                bool *present) {
    *present = false;
    if (v && v->tag == ETCH_VALUE_NONE)
        return NULL;
    etch_tensor *t = etch_pk_tensor(ctx, v, name);
    *present = t != NULL;
    return t;
}

bool etch_pk_int(etch_kernel_context *ctx, const etch_value *v, const char *name, int64_t *out) {
    if (!v || v->tag != ETCH_VALUE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be an Int, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    *out = v->u.i;
    return true;
}

bool etch_pk_bool(etch_kernel_context *ctx, const etch_value *v, const char *name, bool *out) {
    if (!v || v->tag != ETCH_VALUE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Bool, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    *out = v->u.b;
    return true;
}

const int64_t *etch_pk_int_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                                size_t *len) {
    *len = 0;
    if (!v || v->tag != ETCH_VALUE_INT_LIST || (v->u.list.len && !v->u.list.items) ||
        (v->u.list.len && !v->u.list.scratch)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be an Int list, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return NULL;
    }
    for (size_t i = 0; i < v->u.list.len; i++) {
        const etch_value *item = v->u.list.items[i];
        if (!item || item->tag != ETCH_VALUE_INT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s[%zu] must be an Int, got %s", name,
                             i, item ? etch_value_tag_name(item->tag) : "None");
            return NULL;
        }
    }
    static const int64_t empty[1] = {0};
    const int64_t *r = etch_value_int_list(v, len);
    return r ? r : empty;
}

bool etch_pk_is_scalar(const etch_value *v) {
    return v && (v->tag == ETCH_VALUE_INT || v->tag == ETCH_VALUE_DOUBLE ||
                 v->tag == ETCH_VALUE_BOOL);
}

bool etch_pk_check_real(etch_kernel_context *ctx, const etch_tensor *t, const char *name) {
    if (etch_pk_dtype_is_real(t->dtype))
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s, which is not supported", name,
                     etch_dtype_name(t->dtype));
    return false;
}

bool etch_pk_check_same_dtype(etch_kernel_context *ctx, const etch_tensor *a, const char *an,
                              const etch_tensor *b, const char *bn) {
    if (a->dtype == b->dtype)
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s has dtype %s but %s has dtype %s", bn,
                     etch_dtype_name(b->dtype), an, etch_dtype_name(a->dtype));
    return false;
}

bool etch_pk_wrap_dim(etch_kernel_context *ctx, int64_t dim, size_t rank, int64_t *out) {
    int64_t r = rank == 0 ? 1 : (int64_t)rank;
    if (dim < -r || dim >= r) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "dim %lld out of range for a rank-%zu tensor (expected [%lld, %lld])",
                         (long long)dim, rank, (long long)-r, (long long)(r - 1));
        return false;
    }
    *out = dim < 0 ? dim + r : dim;
    return true;
}

const char *etch_pk_shape_str(char *buf, size_t cap, size_t dim, const int64_t *sizes) {
    size_t o = 0;
    if (cap < 8) {
        if (cap)
            buf[0] = 0;
        return buf;
    }
    buf[o++] = '[';
    for (size_t i = 0; i < dim && o + 24 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)sizes[i]);
    buf[o++] = ']';
    buf[o] = 0;
    return buf;
}

bool etch_pk_broadcast_shape(etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                             size_t *dim, int64_t *sizes) {
    size_t n = a->dim > b->dim ? a->dim : b->dim;
    for (size_t i = 0; i < n; i++) {
        /* i counts from the right */
        int64_t sa = i < a->dim ? a->sizes[a->dim - 1 - i] : 1;
        int64_t sb = i < b->dim ? b->sizes[b->dim - 1 - i] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[ETCH_PK_SHAPE_BUF], y[ETCH_PK_SHAPE_BUF];
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "shapes %s and %s cannot be broadcast (size %lld vs %lld at dim %zu "
                             "from the right)",
                             etch_pk_shape_str(x, sizeof x, a->dim, a->sizes),
                             etch_pk_shape_str(y, sizeof y, b->dim, b->sizes), (long long)sa,
                             (long long)sb, i);
            return false;
        }
        sizes[n - 1 - i] = sa == 1 ? sb : sa;
    }
    *dim = n;
    return true;
}

bool etch_pk_check_memory_format(etch_kernel_context *ctx, const etch_value *v,
                                 const etch_tensor *out) {
    if (!v || v->tag == ETCH_VALUE_NONE)
        return true;
    if (v->tag != ETCH_VALUE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "memory_format must be an Int or None, got %s",
                         etch_value_tag_name(v->tag));
        return false;
    }
    switch (v->u.i) {
    case 0: /* contiguous */
        if (!etch_tensor_is_contiguous(out)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "memory_format=contiguous but out has a non-contiguous dim order");
            return false;
        }
        return true;
    case 1: /* preserve: out's own dim order decides */
        return true;
    case 2: /* channels last */
        if (out->dim != 4 || out->dim_order[0] != 0 || out->dim_order[1] != 2 ||
            out->dim_order[2] != 3 || out->dim_order[3] != 1) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "memory_format=channels_last needs a 4-D out with dim order "
                             "[0, 2, 3, 1]");
            return false;
        }
        return true;
    default:
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "memory_format %lld is not supported",
                         (long long)v->u.i);
        return false;
    }
}

bool etch_pk_view_shape(etch_kernel_context *ctx, const int64_t *size, size_t len, int64_t numel,
                        int64_t *out) {
    int64_t known = 1, extent = 1;
    int infer = -1;
    for (size_t i = 0; i < len; i++) {
        if (size[i] == -1) {
            if (infer >= 0) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "only one dimension can be -1");
                return false;
            }
            infer = (int)i;
            continue;
        }
        if (size[i] < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "invalid size %lld at dim %zu",
                             (long long)size[i], i);
            return false;
        }
        /* the extent (zeros counted as one) is bounded, so `known` cannot overflow either */
        if (extent > INT64_MAX / 16 / (size[i] ? size[i] : 1)) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "size overflows");
            return false;
        }
        extent *= size[i] ? size[i] : 1;
        known *= size[i];
        out[i] = size[i];
    }
    char b[ETCH_PK_SHAPE_BUF];
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "shape %s is invalid for input of size %lld",
                             etch_pk_shape_str(b, sizeof b, len, size), (long long)numel);
            return false;
        }
        out[infer] = numel / known;
    } else if (known != numel) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "shape %s is invalid for input of size %lld",
                         etch_pk_shape_str(b, sizeof b, len, size), (long long)numel);
        return false;
    }
    return true;
}

etch_status etch_pk_resize(etch_kernel_context *ctx, etch_tensor *t, size_t dim,
                           const int64_t *sizes) {
    etch_status st = etch_kernel_resize(ctx, t, dim, sizes);
    if (st != ETCH_OK)
        return st;
    if (!t->data && etch_tensor_numel(t) > 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_STATE, "output has elements but no data");
        return ETCH_ERR_INVALID_STATE;
    }
    return ETCH_OK;
}

/* ---- iterator ------------------------------------------------------------------------------ */

void etch_pk_iter_init(etch_pk_iter *it, size_t dim, const int64_t *sizes) {
    it->nops = 0;
    it->ndim = (int)dim;
    for (size_t i = 0; i < dim; i++)
        it->sizes[i] = sizes[i];
}

void etch_pk_iter_add(etch_pk_iter *it, const etch_tensor *t) {
    int k = it->nops++;
    int64_t es = (int64_t)etch_dtype_size(t->dtype);
    int off = it->ndim - (int)t->dim;
    for (int i = 0; i < it->ndim; i++) {
        int td = i - off;
        if (td < 0 || (t->sizes[td] == 1 && it->sizes[i] != 1))
            it->strides[k][i] = 0;
        else
            it->strides[k][i] = t->strides[td] * es;
    }
    it->base[k] = (char *)t->data;
}

void etch_pk_iter_add_strided(etch_pk_iter *it, void *data, size_t elem_size,
                              const int64_t *elem_strides) {
    int k = it->nops++;
    for (int i = 0; i < it->ndim; i++)
        it->strides[k][i] = elem_strides[i] * (int64_t)elem_size;
    it->base[k] = (char *)data;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

void etch_pk_iter_run(etch_pk_iter *it, etch_pk_inner_fn fn, void *arg) {
    int nops = it->nops;
    /* drop size-1 dims; stop on empty */
    int nd = 0;
    int64_t sizes[ETCH_MAX_DIMS], strides[ETCH_PK_MAX_OPS][ETCH_MAX_DIMS];
    for (int i = 0; i < it->ndim; i++) {
        if (it->sizes[i] == 0)
            return;
        if (it->sizes[i] == 1)
            continue;
        sizes[nd] = it->sizes[i];
        for (int k = 0; k < nops; k++)
            strides[k][nd] = it->strides[k][i];
        nd++;
    }
    /* order dims by operand 0's stride, largest first (stable insertion sort) */
    for (int i = 1; i < nd; i++) {
        for (int j = i; j > 0 && abs64(strides[0][j]) > abs64(strides[0][j - 1]); j--) {
            int64_t t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
            for (int k = 0; k < nops; k++) {
                t = strides[k][j];
                strides[k][j] = strides[k][j - 1];
                strides[k][j - 1] = t;
            }
        }
    }
    /* merge an outer dim into the inner one when every operand steps through both evenly;
     * the merged dims are stored innermost first */
    int m = 0;
    int64_t msz[ETCH_MAX_DIMS], mst[ETCH_PK_MAX_OPS][ETCH_MAX_DIMS];
    for (int i = nd - 1; i >= 0; i--) {
        if (m > 0) {
            bool ok = true;
            for (int k = 0; k < nops && ok; k++)
                ok = strides[k][i] == mst[k][m - 1] * msz[m - 1];
            if (ok) {
                msz[m - 1] *= sizes[i];
                continue;
            }
        }
        msz[m] = sizes[i];
        for (int k = 0; k < nops; k++)
            mst[k][m] = strides[k][i];
        m++;
    }
    char *ptrs[ETCH_PK_MAX_OPS];
    int64_t inner_strides[ETCH_PK_MAX_OPS];
    if (m == 0) {
        for (int k = 0; k < nops; k++) {
            ptrs[k] = it->base[k];
            inner_strides[k] = 0;
        }
        fn(arg, ptrs, inner_strides, 1);
        return;
    }
    for (int k = 0; k < nops; k++)
        inner_strides[k] = mst[k][0];
    int64_t idx[ETCH_MAX_DIMS] = {0};
    int64_t off[ETCH_PK_MAX_OPS] = {0};
    for (;;) {
        for (int k = 0; k < nops; k++)
            ptrs[k] = it->base[k] + off[k];
        fn(arg, ptrs, inner_strides, msz[0]);
        int d = 1;
        for (; d < m; d++) {
            idx[d]++;
            for (int k = 0; k < nops; k++)
                off[k] += mst[k][d];
            if (idx[d] < msz[d])
                break;
            for (int k = 0; k < nops; k++)
                off[k] -= mst[k][d] * msz[d];
            idx[d] = 0;
        }
        if (d >= m)
            break;
    }
}

/* ---- logical-order copy ---------------------------------------------------------------------- */

static void convert_one(char *dst, int ddt, const char *src, int sdt) {
    if (ddt == sdt)
        memcpy(dst, src, etch_dtype_size(sdt));
    else if (etch_pk_is_float(sdt))
        etch_pk_store_f64(dst, ddt, etch_pk_load_f64(src, sdt));
    else
        etch_pk_store_i64(dst, ddt, etch_pk_load_i64(src, sdt));
}

/* Byte offset of the next element in row-major order, advancing an odometer. */
static void odo_next(const etch_tensor *t, int64_t *idx, int64_t *off, int64_t es) {
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        idx[d]++;
        *off += t->strides[d] * es;
        if (idx[d] < t->sizes[d])
            return;
        *off -= t->strides[d] * es * t->sizes[d];
        idx[d] = 0;
    }
}

void etch_pk_copy_logical(etch_tensor *dst, const etch_tensor *src) {
    int64_t n = etch_tensor_numel(src);
    if (n == 0)
        return;
    if (dst->dtype == src->dtype && etch_tensor_is_contiguous(dst) &&
        etch_tensor_is_contiguous(src)) {
        memmove(dst->data, src->data, (size_t)n * etch_dtype_size(src->dtype));
        return;
    }
    int64_t di[ETCH_MAX_DIMS] = {0}, si[ETCH_MAX_DIMS] = {0};
    int64_t doff = 0, soff = 0;
    int64_t des = (int64_t)etch_dtype_size(dst->dtype), ses = (int64_t)etch_dtype_size(src->dtype);
    for (int64_t i = 0; i < n; i++) {
        convert_one((char *)dst->data + doff, dst->dtype, (const char *)src->data + soff,
                    src->dtype);
        if (i + 1 < n) {
            odo_next(dst, di, &doff, des);
            odo_next(src, si, &soff, ses);
        }
    }
}

/* ---- same-shape conversion ----------------------------------------------------------------- */

void etch_pk_convert_inner(void *arg, char **p, const int64_t *s, int64_t n) {
    const etch_pk_convert *c = (const etch_pk_convert *)arg;
    if (c->src_dtype == c->dst_dtype) {
        size_t es = etch_dtype_size(c->src_dtype);
        if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
            memmove(p[0], p[1], (size_t)n * es);
        } else {
            for (int64_t i = 0; i < n; i++)
                memmove(p[0] + i * s[0], p[1] + i * s[1], es);
        }
        return;
    }
    enum { CH = 128 };
    for (int64_t off = 0; off < n; off += CH) {
        int64_t m = n - off < CH ? n - off : CH;
        if (etch_pk_is_float(c->src_dtype)) {
            double v[CH];
            etch_pk_load_row_f64(v, p[1] + off * s[1], s[1], m, c->src_dtype);
            etch_pk_store_row_f64(p[0] + off * s[0], s[0], v, m, c->dst_dtype);
        } else {
            int64_t v[CH];
            etch_pk_load_row_i64(v, p[1] + off * s[1], s[1], m, c->src_dtype);
            etch_pk_store_row_i64(p[0] + off * s[0], s[0], v, m, c->dst_dtype);
        }
    }
}

bool etch_pk_check_copy_dtypes(etch_kernel_context *ctx, const etch_tensor *src,
                               const etch_tensor *dst) {
    if (src->dtype == dst->dtype ||
        (etch_pk_dtype_is_real(src->dtype) && etch_pk_dtype_is_real(dst->dtype)))
        return true;
    etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "conversion from %s to %s is not supported",
                     etch_dtype_name(src->dtype), etch_dtype_name(dst->dtype));
    return false;
}

void etch_pk_copy_same_shape(etch_tensor *dst, const etch_tensor *src) {
    etch_pk_convert c = {src->dtype, dst->dtype};
    etch_pk_iter it;
    etch_pk_iter_init(&it, dst->dim, dst->sizes);
    etch_pk_iter_add(&it, dst);
    etch_pk_iter_add(&it, src);
    etch_pk_iter_run(&it, etch_pk_convert_inner, &c);
}

bool etch_pk_check_dim_order_arg(etch_kernel_context *ctx, etch_value *v, const etch_tensor *out) {
    if (v->tag == ETCH_VALUE_NONE)
        return true;
    size_t len;
    const int64_t *d = etch_pk_int_list(ctx, v, "dim_order", &len);
    if (!d)
        return false;
    bool ok = len == out->dim;
    for (size_t i = 0; ok && i < len; i++)
        ok = d[i] == out->dim_order[i];
    if (!ok)
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "dim_order argument does not match out's dim order");
    return ok;
}

void etch_pk_copy_into(etch_kernel_context *ctx, etch_tensor *in, etch_tensor *out) {
    if (!etch_pk_check_copy_dtypes(ctx, in, out))
        return;
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK)
        return;
    etch_pk_copy_same_shape(out, in);
}
