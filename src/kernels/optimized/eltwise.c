/* Optimized element-wise kernels: float32 fast paths over the vector row functions
 * (etch_opt_vec_active), threads over large tensors; everything else (other dtypes, mixed
 * dtypes, non-contiguous broadcasting, anything the portable kernel would reject) calls the
 * portable kernel.
 *
 * Fast paths:
 *  - add/sub/mul/div, Tensor and Scalar variants, alpha: all Float; either the three tensors
 *    share one layout (sizes and dim order: any dim order), or they are contiguous and
 *    broadcast (same shape, one-element operand, row vector [.., N] x [N], column
 *    [.., M, 1], any mix: the walk merges dims so each run is a vector op). They apply a
 *    fused activation (ETCH_KERNEL_FUSES_ACTIVATION), the fallback too.
 *  - relu, neg, exp, rsqrt, tanh, sigmoid, silu, gelu (none/tanh), hardtanh, clamp (Scalar
 *    bounds): Float self and out with the same layout.
 *  - masked_fill.Scalar_out: Float self, Bool mask broadcasting to it, contiguous.
 *  - pow.Tensor_Scalar_out with exponent 1, 2, 3, 0.5, -0.5, -1, -2 (x, x*x, x*x*x, sqrt,
 *    rsqrt, 1/x, 1/(x*x): the forms torch's float kernel uses for them); other exponents go
 *    to the portable kernel.
 * Accuracy: see opt_eltwise.h. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/eltwise_util.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_math.h"
#include "kernels/portable/portable_shape.h"

/* ---- binary --------------------------------------------------------------------------- */

typedef struct bin_job {
    const etch_opt_vec *v;
    int op;
    float alpha;
    const etch_epilogue *epi;
} bin_job;

static void bin_row(void *arg, char **p, const int *bc, int64_t n) {
    const bin_job *j = (const bin_job *)arg;
    float *r = (float *)(void *)p[0];
    j->v->binary(j->op, r, (const float *)(void *)p[1], bc[1], (const float *)(void *)p[2],
                 bc[2], j->alpha, n);
    if (j->epi)
        etch_opt_apply_epilogue(j->epi, r, n);
}

/* same-layout operands: one run per chunk, no walk */
typedef struct flat_job {
    const bin_job *j;
    float *r;
    const float *a, *b;
    int b_bcast;
} flat_job;

static void bin_flat_range(void *arg, int64_t b, int64_t e) {
    const flat_job *f = (const flat_job *)arg;
    const bin_job *j = f->j;
    j->v->binary(j->op, f->r + b, f->a + b, 0, f->b_bcast ? f->b : f->b + b, f->b_bcast,
                 j->alpha, e - b);
    if (j->epi)
        etch_opt_apply_epilogue(j->epi, f->r + b, e - b);
}

static bool broadcast_shape(const etch_tensor *a, const etch_tensor *b, size_t *dim,
                            int64_t *sizes) {
    const size_t nd = a->dim > b->dim ? a->dim : b->dim;
    for (size_t i = 0; i < nd; i++) {
        const int64_t sa = i < a->dim ? a->sizes[a->dim - 1 - i] : 1;
        const int64_t sb = i < b->dim ? b->sizes[b->dim - 1 - i] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return false;
        sizes[nd - 1 - i] = sa == 1 ? sb : sa;
    }
    *dim = nd;
    return true;
}

/* out = a op b (b_tensor) or a op b_value; false when the fast path does not apply (nothing
 * written, nothing recorded). */
static bool binary_fast(etch_kernel_context *ctx, int op, etch_value *va, etch_value *vb,
                        bool b_is_scalar, const etch_value *valpha, bool negate_alpha,
                        etch_value *vout) {
    etch_tensor *a = etch_ew_float(va), *out = etch_ew_float(vout);
    if (!a || !out)
        return false;
    float alpha = 1.0f, bval = 0.0f;
    if (valpha && (valpha->tag == ETCH_VALUE_BOOL || !etch_ew_scalar_f(valpha, &alpha)))
        return false; /* a Bool alpha is an error for Float results: portable reports it */
    if (negate_alpha)
        alpha = -alpha;
    etch_tensor *b = NULL;
    if (b_is_scalar) {
        if (!etch_ew_scalar_f(vb, &bval))
            return false;
    } else if (!(b = etch_ew_float(vb))) {
        return false;
    }
    bin_job j = {etch_opt_vec_active(), op, alpha, etch_kernel_epilogue(ctx)};
    etch_ew_walk w;
    if (!b || etch_ew_same_layout(a, b)) {
        /* one layout for all: any dim order, flat */
        if (!etch_ew_resize(out, a->dim, a->sizes) || !etch_ew_same_layout(a, out))
            return false;
        flat_job f = {&j, (float *)out->data, (const float *)a->data,
                      b ? (const float *)b->data : &bval, b == NULL};
        etch_ew_parallel(ctx, etch_tensor_numel(a), ETCH_EW_GRAIN_CHEAP, bin_flat_range, &f);
        return true;
    } else {
        size_t dim = 0;
        int64_t sizes[ETCH_MAX_DIMS];
        if (!etch_tensor_is_contiguous(a) || !etch_tensor_is_contiguous(b) ||
            !etch_tensor_is_contiguous(out) || !broadcast_shape(a, b, &dim, sizes) ||
            !etch_ew_resize(out, dim, sizes))
            return false;
        /* an out that overlaps an input it does not equal would be read after written */
        etch_ew_walk_init(&w, out);
        etch_ew_walk_add(&w, a);
        etch_ew_walk_add(&w, b);
    }
    etch_ew_walk_finish(&w);
    etch_ew_walk_run(ctx, &w, ETCH_EW_GRAIN_CHEAP, bin_row, &j);
    return true;
}

#define BINARY_KERNEL(fn, op, b_scalar, alpha_idx, neg, out_idx)                             \
    ETCH_OPT_KERNEL(fn) {                                                                    \
        if (nargs > (size_t)(out_idx) &&                                                     \
            binary_fast(ctx, op, args[0], args[1], b_scalar,                                 \
                        (alpha_idx) >= 0 ? args[(alpha_idx) < 0 ? 0 : (alpha_idx)] : NULL,   \
                        neg, args[out_idx]))                                                 \
            return;                                                                          \
        etch_portable_##fn(ctx, args, nargs);                                                \
        if (nargs > (size_t)(out_idx))                                                       \
            etch_ew_epilogue_after_fallback(ctx, etch_ew_tensor(args[out_idx]));             \
    }

BINARY_KERNEL(add_out, ETCH_OPT_BIN_ADD, false, 2, false, 3)
BINARY_KERNEL(add_scalar_out, ETCH_OPT_BIN_ADD, true, 2, false, 3)
BINARY_KERNEL(sub_out, ETCH_OPT_BIN_ADD, false, 2, true, 3)
BINARY_KERNEL(sub_scalar_out, ETCH_OPT_BIN_ADD, true, 2, true, 3)
BINARY_KERNEL(mul_out, ETCH_OPT_BIN_MUL, false, -1, false, 2)
BINARY_KERNEL(mul_scalar_out, ETCH_OPT_BIN_MUL, true, -1, false, 2)
BINARY_KERNEL(div_out, ETCH_OPT_BIN_DIV, false, -1, false, 2)
BINARY_KERNEL(div_scalar_out, ETCH_OPT_BIN_DIV, true, -1, false, 2)

/* ---- unary ---------------------------------------------------------------------------- */

typedef struct un_job {
    const etch_opt_vec *v;
    int op;
    float lo, hi;
    const float *x;
    float *r;
} un_job;

static void un_range(void *arg, int64_t b, int64_t e) {
    const un_job *j = (const un_job *)arg;
    j->v->unary(j->op, j->r + b, j->x + b, e - b, j->lo, j->hi);
}

static bool unary_fast(etch_kernel_context *ctx, int op, float lo, float hi, etch_value *vin,
                       etch_value *vout) {
    etch_tensor *in = etch_ew_float(vin), *out = etch_ew_float(vout);
    if (!in || !out || !etch_ew_resize(out, in->dim, in->sizes) ||
        !etch_ew_same_layout(in, out))
        return false;
    un_job j = {etch_opt_vec_active(), op, lo, hi, (const float *)in->data, (float *)out->data};
    const bool cheap = op == ETCH_OPT_UN_NEG || op == ETCH_OPT_UN_RELU || op == ETCH_OPT_UN_CLAMP;
    etch_ew_parallel(ctx, etch_tensor_numel(in), cheap ? ETCH_EW_GRAIN_CHEAP : ETCH_EW_GRAIN_MATH,
                     un_range, &j);
    return true;
}

#define UNARY_KERNEL(fn, op)                                                                 \
    ETCH_OPT_KERNEL(fn) {                                                                    \
        if (nargs >= 2 && unary_fast(ctx, op, 0.0f, 0.0f, args[0], args[1]))                 \
            return;                                                                          \
        etch_portable_##fn(ctx, args, nargs);                                                \
    }

UNARY_KERNEL(relu_out, ETCH_OPT_UN_RELU)
UNARY_KERNEL(neg_out, ETCH_OPT_UN_NEG)
UNARY_KERNEL(exp_out, ETCH_OPT_UN_EXP)
UNARY_KERNEL(rsqrt_out, ETCH_OPT_UN_RSQRT)
UNARY_KERNEL(tanh_out, ETCH_OPT_UN_TANH)
UNARY_KERNEL(sigmoid_out, ETCH_OPT_UN_SIGMOID)
UNARY_KERNEL(silu_out, ETCH_OPT_UN_SILU)

ETCH_OPT_KERNEL(gelu_out) {
    if (nargs >= 3 && args[1]->tag == ETCH_VALUE_STRING && args[1]->u.str.ptr) {
        const char *s = args[1]->u.str.ptr;
        const int op = strcmp(s, "none") == 0   ? ETCH_OPT_UN_GELU
                       : strcmp(s, "tanh") == 0 ? ETCH_OPT_UN_GELU_TANH
                                                : -1;
        if (op >= 0 && unary_fast(ctx, op, 0.0f, 0.0f, args[0], args[2]))
            return;
    }
    etch_portable_gelu_out(ctx, args, nargs);
}

/* A clamp bound: None gives the infinity `none`; a NaN bound is left to the portable kernel. */
static bool bound(const etch_value *v, float none, float *out) {
    if (v->tag == ETCH_VALUE_NONE) {
        *out = none;
        return true;
    }
    return etch_ew_scalar_f(v, out) && *out == *out;
}

ETCH_OPT_KERNEL(hardtanh_out) {
    float lo = 0.0f, hi = 0.0f;
    if (nargs >= 4 && args[1]->tag != ETCH_VALUE_NONE && args[2]->tag != ETCH_VALUE_NONE &&
        bound(args[1], 0.0f, &lo) && bound(args[2], 0.0f, &hi) &&
        unary_fast(ctx, ETCH_OPT_UN_CLAMP, lo, hi, args[0], args[3]))
        return;
    etch_portable_hardtanh_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(clamp_out) {
    float lo = 0.0f, hi = 0.0f;
    if (nargs >= 4 && (args[1]->tag != ETCH_VALUE_NONE || args[2]->tag != ETCH_VALUE_NONE) &&
        bound(args[1], -INFINITY, &lo) && bound(args[2], INFINITY, &hi) &&
        unary_fast(ctx, ETCH_OPT_UN_CLAMP, lo, hi, args[0], args[3]))
        return;
    etch_portable_clamp_out(ctx, args, nargs);
}

/* ---- masked_fill ---------------------------------------------------------------------- */

typedef struct mf_job {
    const etch_opt_vec *v;
    float value;
} mf_job;

static void mf_row(void *arg, char **p, const int *bc, int64_t n) {
    const mf_job *j = (const mf_job *)arg;
    float *r = (float *)(void *)p[0];
    const float *x = (const float *)(void *)p[1];
    if (bc[1]) { /* self broadcast over the run: rare, do it plainly */
        const uint8_t *m = (const uint8_t *)p[2];
        for (int64_t i = 0; i < n; i++)
            r[i] = m[bc[2] ? 0 : i] ? j->value : x[0];
        return;
    }
    j->v->masked_fill(r, x, (const uint8_t *)p[2], bc[2], j->value, n);
}

/* Bool bytes may hold any non-zero value; the fast path reads them as 0/1 and the row
 * functions test != 0, so any byte works. */
ETCH_OPT_KERNEL(masked_fill_scalar_out) {
    if (nargs >= 4) {
        etch_tensor *self = etch_ew_float(args[0]), *mask = etch_ew_tensor(args[1]),
                    *out = etch_ew_float(args[3]);
        float value = 0.0f;
        size_t dim = 0;
        int64_t sizes[ETCH_MAX_DIMS];
        if (self && mask && out && mask->dtype == ETCH_DTYPE_BOOL &&
            etch_ew_scalar_f(args[2], &value) && etch_tensor_is_contiguous(self) &&
            etch_tensor_is_contiguous(mask) && etch_tensor_is_contiguous(out) &&
            broadcast_shape(self, mask, &dim, sizes) && dim == self->dim &&
            memcmp(sizes, self->sizes, dim * sizeof(int64_t)) == 0 &&
            etch_ew_resize(out, self->dim, self->sizes)) {
            mf_job j = {etch_opt_vec_active(), value};
            etch_ew_walk w;
            etch_ew_walk_init(&w, out);
            etch_ew_walk_add(&w, self);
            etch_ew_walk_add(&w, mask);
            etch_ew_walk_finish(&w);
            etch_ew_walk_run(ctx, &w, ETCH_EW_GRAIN_CHEAP, mf_row, &j);
            return;
        }
    }
    etch_portable_masked_fill_scalar_out(ctx, args, nargs);
}

/* ---- pow with a scalar exponent --------------------------------------------------------- */

typedef struct pow_job {
    const etch_opt_vec *v;
    double e;
    const float *x;
    float *r;
} pow_job;

static void pow_range(void *arg, int64_t b, int64_t e) {
    const pow_job *j = (const pow_job *)arg;
    const float *x = j->x + b;
    float *r = j->r + b;
    const int64_t n = e - b;
    if (j->e == 1.0)
        j->v->unary(ETCH_OPT_UN_COPY, r, x, n, 0.0f, 0.0f);
    else if (j->e == 0.5)
        j->v->unary(ETCH_OPT_UN_SQRT, r, x, n, 0.0f, 0.0f);
    else if (j->e == -0.5)
        j->v->unary(ETCH_OPT_UN_RSQRT, r, x, n, 0.0f, 0.0f);
    else if (j->e == -1.0)
        j->v->unary(ETCH_OPT_UN_RECIP, r, x, n, 0.0f, 0.0f);
    else if (j->e == 3.0) { /* (x*x)*x: r may be x, so square a copy-free way */
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i];
            r[i] = v * v * v;
        }
    } else {
        j->v->binary(ETCH_OPT_BIN_MUL, r, x, 0, x, 0, 1.0f, n);
        if (j->e == -2.0)
            j->v->unary(ETCH_OPT_UN_RECIP, r, r, n, 0.0f, 0.0f);
    }
}

ETCH_OPT_KERNEL(pow_tensor_scalar_out) {
    if (nargs >= 3 && (args[1]->tag == ETCH_VALUE_INT || args[1]->tag == ETCH_VALUE_DOUBLE)) {
        const double e = args[1]->tag == ETCH_VALUE_INT ? (double)args[1]->u.i : args[1]->u.d;
        etch_tensor *in = etch_ew_float(args[0]), *out = etch_ew_float(args[2]);
        if ((e == 1.0 || e == 2.0 || e == 3.0 || e == 0.5 || e == -0.5 || e == -1.0 ||
             e == -2.0) &&
            in && out && etch_ew_resize(out, in->dim, in->sizes) &&
            etch_ew_same_layout(in, out)) {
            pow_job j = {etch_opt_vec_active(), e, (const float *)in->data, (float *)out->data};
            etch_ew_parallel(ctx, etch_tensor_numel(in), ETCH_EW_GRAIN_CHEAP, pow_range, &j);
            return;
        }
    }
    etch_portable_pow_tensor_scalar_out(ctx, args, nargs);
}
