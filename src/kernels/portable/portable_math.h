/*
 * Math kernels (listed in table_math.inc) and the elementwise engine they share (math_util.c).
 *
 * The engine follows torch's TensorIterator semantics: every input is converted to a
 * computation dtype ("common"), the operation runs in double (floating common) or int64
 * (integral common, wrap-around), intermediate steps round to "opmath" (Float for Half,
 * BFloat16 and Float; Double for Double) exactly where torch's kernels round, the result is
 * rounded to common and finally cast to out's dtype. Inputs broadcast to out's shape; any dim
 * order works (the strided iterator of portable.h does the walking).
 */
#ifndef ETCH_KERNELS_PORTABLE_MATH_H
#define ETCH_KERNELS_PORTABLE_MATH_H

#include "kernels/portable/portable.h"

/* ---- dtype classes ------------------------------------------------------------------------- */

#define ETCH_PM_C_BOOL 1u  /* Bool */
#define ETCH_PM_C_INT 2u   /* Byte, Char, Short, Int, Long */
#define ETCH_PM_C_FLOAT 4u /* Half, BFloat16, Float, Double */
#define ETCH_PM_C_ALL 7u

/* The class bit of a real dtype. */
unsigned etch_pm_class(int dtype);

/* ---- elementwise engine -------------------------------------------------------------------- */

#define ETCH_PM_MAX_IN 3

typedef struct etch_pm_ew etch_pm_ew;
/* r[i] = f(x[0][i], x[1][i], ...) for i < n; the inputs are already converted to common. */
typedef void (*etch_pm_frow)(const etch_pm_ew *e, double *r, const double *const *x, int64_t n);
typedef void (*etch_pm_irow)(const etch_pm_ew *e, int64_t *r, const int64_t *const *x,
                             int64_t n);

struct etch_pm_ew {
    int nin;
    int in_dt[ETCH_PM_MAX_IN]; /* dtypes as stored */
    int common;                /* computation dtype */
    int opmath;                /* intermediate rounding: Float, or Double for Double */
    int out_dt;
    bool fdom;                 /* common is floating: rows of double, else of int64 */
    bool pred;                 /* results are 0/1 (no rounding to common) */
    etch_pm_frow frow;
    etch_pm_irow irow;
    double fp[4];              /* operation parameters (in opmath) */
    int64_t ip[4];
};

/* Fill the conversion fields from common (fdom, opmath) and clear the rest. */
void etch_pm_ew_init(etch_pm_ew *e, int common, int out_dt);
/* out (already resized) = op(ins) over out's shape, each input broadcasting to it. */
void etch_pm_ew_run(const etch_pm_ew *e, etch_tensor *out, etch_tensor *const *ins);

/* Round to the engine's opmath (Float or Double), as torch's float/double arithmetic does. */
static inline double etch_pm_rnd(const etch_pm_ew *e, double v) {
    return e->opmath == ETCH_DTYPE_DOUBLE ? v : (double)(float)v;
}
/* Round to common itself, as torch's scalar_t arithmetic on Half/BFloat16 values does. */
static inline double etch_pm_rnd_common(const etch_pm_ew *e, double v) {
    etch_pk_round_row_f64(&v, 1, e->common);
    return v;
}

/* ---- scalars and shapes --------------------------------------------------------------------- */

/* A Scalar argument as a zero-dim tensor over its own storage (Int -> Long, Double -> Double,
 * Bool -> Bool). The struct must stay where it is while the tensor is in use. */
typedef struct etch_pm_scalar {
    etch_tensor t;
    int64_t i;
    double d;
    uint8_t b;
} etch_pm_scalar;
bool etch_pm_wrap_scalar(etch_kernel_context *ctx, const etch_value *v, const char *name,
                         etch_pm_scalar *s);

/* Broadcast the shapes of n tensors (right-aligned); fails naming them when incompatible. */
bool etch_pm_broadcast(etch_kernel_context *ctx, etch_tensor *const *ts, const char *const *names,
                       int n, size_t *dim, int64_t *sizes);

/* Convert a Scalar to `dtype` the way torch's checked Scalar conversion does, failing when it
 * does not fit: floating targets take any Int/Bool and any non-finite or in-range Double (the
 * value is then rounded to dtype); integral targets need an Int in the dtype's range (Byte
 * also accepts -255..-1, which wraps) or a finite Double whose truncation fits. *d and *i
 * receive the converted value. */
bool etch_pm_scalar_to(etch_kernel_context *ctx, const etch_value *v, const char *name,
                       int dtype, double *d, int64_t *i);

/* True when any element of t, converted to the integral dtype `common`, is zero. */
bool etch_pm_has_zero(const etch_tensor *t, int common);

/* ---- drivers -------------------------------------------------------------------------------- */

enum { ETCH_PM_OUT_CAST, ETCH_PM_OUT_EXACT, ETCH_PM_OUT_ANY };
/* out's dtype against the result dtype: CAST = torch's can_cast, EXACT = equal, ANY = any real. */
bool etch_pm_check_out(etch_kernel_context *ctx, int rule, int result, const etch_tensor *out);

/* Unary ops: self, out. */
enum {
    ETCH_PM_SAME,  /* computes in self's dtype; out must have it */
    ETCH_PM_FLOAT, /* Bool/integral self computes in Float; out is any safe cast */
    ETCH_PM_PRED   /* 0/1 result computed from self read as Double; out may be any real dtype */
};
typedef struct etch_pm_unary_spec {
    const char *what; /* operator name for messages */
    unsigned allow;   /* accepted dtype classes of self */
    int result;       /* ETCH_PM_SAME / FLOAT / PRED */
    etch_pm_frow frow;
    etch_pm_irow irow;
} etch_pm_unary_spec;

typedef struct etch_pm_un {
    etch_pm_ew e;
    etch_tensor *in, *out;
} etch_pm_un;
/* Checks self and out, sets up the engine, resizes out. */
bool etch_pm_unary_prepare(etch_kernel_context *ctx, const etch_pm_unary_spec *spec,
                           etch_value *self, etch_value *out, etch_pm_un *u);
void etch_pm_unary_run(etch_pm_un *u);
/* Whole kernel for parameterless unary ops: args = self, out, return slot. */
void etch_pm_unary(etch_kernel_context *ctx, const etch_pm_unary_spec *spec, etch_value **args,
                   size_t nargs);

/* Binary ops: a, b (each a Tensor or a Scalar; at least one Tensor), out. */
enum {
    ETCH_PM_COMMON,   /* compute in torch's result type */
    ETCH_PM_TO_FLOAT, /* ... except that Bool/integral result types compute in Float */
    ETCH_PM_DOUBLE    /* read both operands as Double (logical ops) */
};
typedef struct etch_pm_binary_spec {
    const char *what;
    unsigned allow;   /* accepted classes of the result type */
    int compute;      /* ETCH_PM_COMMON / TO_FLOAT / DOUBLE */
    int out_rule;     /* ETCH_PM_OUT_* */
    bool pred;        /* result is 0/1 */
    bool divisor;     /* integral computation: b must have no zero */
    etch_pm_frow frow;
    etch_pm_irow irow;
} etch_pm_binary_spec;

typedef struct etch_pm_bin {
    etch_pm_ew e;
    etch_pm_scalar sa, sb;
    etch_tensor *a, *b, *out;
    int result; /* torch's result type (before TO_FLOAT / DOUBLE) */
} etch_pm_bin;
bool etch_pm_binary_prepare(etch_kernel_context *ctx, const etch_pm_binary_spec *spec,
                            etch_value *a, etch_value *b, etch_value *out, etch_pm_bin *st);
void etch_pm_binary_run(etch_pm_bin *st);
/* Whole kernel: args = a, b, out, return slot. */
void etch_pm_binary(etch_kernel_context *ctx, const etch_pm_binary_spec *spec, etch_value **args,
                    size_t nargs);

/* A unary kernel computing EXPR (of `double v`) in double: Bool and integral self compute in
 * Float, the result is rounded to the computation dtype and cast to out when torch allows it. */
#define ETCH_PM_UNARY_FLOAT_KERNEL(name, EXPR)                                               \
    static void name##_row(const etch_pm_ew *e, double *r, const double *const *x,           \
                           int64_t n) {                                                      \
        (void)e;                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                    \
            double v = x[0][i];                                                              \
            r[i] = (EXPR);                                                                   \
        }                                                                                    \
    }                                                                                        \
    static const etch_pm_unary_spec name##_spec = {#name, ETCH_PM_C_ALL, ETCH_PM_FLOAT,        \
                                                   name##_row, NULL};                        \
    ETCH_PK_KERNEL(name##_out) { etch_pm_unary(ctx, &name##_spec, args, nargs); }

/* ---- kernels -------------------------------------------------------------------------------- */

/* op_comparison.c */
ETCH_PK_KERNEL(eq_tensor_out);
ETCH_PK_KERNEL(eq_scalar_out);
ETCH_PK_KERNEL(ne_tensor_out);
ETCH_PK_KERNEL(ne_scalar_out);
ETCH_PK_KERNEL(lt_tensor_out);
ETCH_PK_KERNEL(lt_scalar_out);
ETCH_PK_KERNEL(le_tensor_out);
ETCH_PK_KERNEL(le_scalar_out);
ETCH_PK_KERNEL(gt_tensor_out);
ETCH_PK_KERNEL(gt_scalar_out);
ETCH_PK_KERNEL(ge_tensor_out);
ETCH_PK_KERNEL(ge_scalar_out);
/* op_maximum.c */
ETCH_PK_KERNEL(maximum_out);
ETCH_PK_KERNEL(minimum_out);
/* op_where.c */
ETCH_PK_KERNEL(where_self_out);
/* op_logical.c */
ETCH_PK_KERNEL(logical_and_out);
ETCH_PK_KERNEL(logical_or_out);
ETCH_PK_KERNEL(logical_xor_out);
ETCH_PK_KERNEL(logical_not_out);
/* op_bitwise.c */
ETCH_PK_KERNEL(bitwise_and_tensor_out);
ETCH_PK_KERNEL(bitwise_and_scalar_out);
ETCH_PK_KERNEL(bitwise_or_tensor_out);
ETCH_PK_KERNEL(bitwise_or_scalar_out);
ETCH_PK_KERNEL(bitwise_xor_tensor_out);
ETCH_PK_KERNEL(bitwise_xor_scalar_out);
ETCH_PK_KERNEL(bitwise_not_out);
/* op_isnan.c */
ETCH_PK_KERNEL(isnan_out);
ETCH_PK_KERNEL(isinf_out);
/* op_remainder.c */
ETCH_PK_KERNEL(remainder_tensor_out);
ETCH_PK_KERNEL(remainder_scalar_out);
ETCH_PK_KERNEL(fmod_tensor_out);
ETCH_PK_KERNEL(fmod_scalar_out);
ETCH_PK_KERNEL(floor_divide_out);
/* op_pow.c */
ETCH_PK_KERNEL(pow_tensor_tensor_out);
ETCH_PK_KERNEL(pow_tensor_scalar_out);
ETCH_PK_KERNEL(pow_scalar_out);
/* op_rsub.c */
ETCH_PK_KERNEL(rsub_scalar_out);
/* op_neg.c, op_abs.c, op_sign.c, op_reciprocal.c */
ETCH_PK_KERNEL(neg_out);
ETCH_PK_KERNEL(abs_out);
ETCH_PK_KERNEL(sign_out);
ETCH_PK_KERNEL(reciprocal_out);
/* op_exp.c */
ETCH_PK_KERNEL(exp_out);
ETCH_PK_KERNEL(expm1_out);
/* op_log.c */
ETCH_PK_KERNEL(log_out);
ETCH_PK_KERNEL(log1p_out);
ETCH_PK_KERNEL(log2_out);
ETCH_PK_KERNEL(log10_out);
/* op_sqrt.c */
ETCH_PK_KERNEL(sqrt_out);
ETCH_PK_KERNEL(rsqrt_out);
/* op_trig.c */
ETCH_PK_KERNEL(sin_out);
ETCH_PK_KERNEL(cos_out);
ETCH_PK_KERNEL(tan_out);
ETCH_PK_KERNEL(asin_out);
ETCH_PK_KERNEL(acos_out);
ETCH_PK_KERNEL(atan_out);
/* op_hyperbolic.c */
ETCH_PK_KERNEL(sinh_out);
ETCH_PK_KERNEL(cosh_out);
ETCH_PK_KERNEL(tanh_out);
ETCH_PK_KERNEL(asinh_out);
ETCH_PK_KERNEL(acosh_out);
ETCH_PK_KERNEL(atanh_out);
/* op_erf.c */
ETCH_PK_KERNEL(erf_out);
/* op_rounding.c */
ETCH_PK_KERNEL(floor_out);
ETCH_PK_KERNEL(ceil_out);
ETCH_PK_KERNEL(round_out);
ETCH_PK_KERNEL(trunc_out);
/* op_atan2.c */
ETCH_PK_KERNEL(atan2_out);
/* activations */
ETCH_PK_KERNEL(sigmoid_out);
ETCH_PK_KERNEL(gelu_out);
ETCH_PK_KERNEL(silu_out);
ETCH_PK_KERNEL(hardtanh_out);
ETCH_PK_KERNEL(clamp_out);
ETCH_PK_KERNEL(clamp_tensor_out);
/* op_clamp.c, shared with hardtanh: out (already resized) = self clamped to scalar bounds that
 * were converted to `dtype`, the computation dtype. */
void etch_pm_clamp_scalar_run(etch_tensor *self, etch_tensor *out, int dtype, bool has_lo,
                              double lo_d, int64_t lo_i, bool has_hi, double hi_d,
                              int64_t hi_i);
ETCH_PK_KERNEL(hardswish_out);
ETCH_PK_KERNEL(hardsigmoid_out);
ETCH_PK_KERNEL(leaky_relu_out);
ETCH_PK_KERNEL(elu_out);
ETCH_PK_KERNEL(softplus_out);
ETCH_PK_KERNEL(glu_out);
ETCH_PK_KERNEL(logit_out);

#endif
