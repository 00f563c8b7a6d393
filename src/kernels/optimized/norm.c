/* Optimized native_layer_norm.out and mean.out (the RMS-norm piece).
 *  - layer norm: Float input, out0, out1 (mean), out2 (rstd) contiguous, weight / bias None or
 *    contiguous Float of normalized_shape; per row: mean = sum/M, biased variance from the
 *    squared deviations (two passes, float accumulation), rstd = 1/sqrt(var + eps) in double,
 *    out = (x - mean) * rstd * w + b. Rows split over threads. M == 0 is the portable
 *    kernel's (mean 0, rstd NaN).
 *  - mean.out: Float self and out contiguous, dtype None or Float, a non-empty dim list that
 *    names each of the last k dims once (any order, negative allowed): out = row sums / count.
 *    A channel-blocked self (NCHW8c, etch/kernel.h; etch_opt_mean_layout) reduced over H and W:
 *    the portable kernel's double sums in its order (partial sums of 128 pixels), so equal to
 *    it bit for bit; the NCHW path above sums in float (relative difference ~1e-6 from it).
 * Everything else calls the portable kernel. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/eltwise_util.h"
#include "kernels/optimized/nchwc.h"
#include "kernels/portable/portable_nn.h"

typedef struct ln_job {
    const etch_opt_vec *v;
    const float *x, *w, *b;
    float *y, *mean, *rstd;
    int64_t M;
    double eps;
} ln_job;

static void ln_rows(void *arg, int64_t r0, int64_t r1) {
    const ln_job *j = (const ln_job *)arg;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->M;
        const float mean = j->v->sum(x, j->M) / (float)j->M;
        const double var = (double)j->v->sqdev_sum(x, mean, j->M) / (double)j->M;
        const float rstd = (float)(1.0 / sqrt(var + j->eps));
        j->v->norm(j->y + r * j->M, x, mean, rstd, j->w, j->b, j->M);
        j->mean[r] = mean;
        j->rstd[r] = rstd;
    }
}

static bool param_ok(etch_value *v, const int64_t *ns, size_t len, const float **out) {
    if (v->tag == ETCH_VALUE_NONE) {
        *out = NULL;
        return true;
    }
    etch_tensor *t = etch_ew_float(v);
    if (!t || t->dim != len || !etch_tensor_is_contiguous(t))
        return false;
    for (size_t i = 0; i < len; i++)
        if (t->sizes[i] != ns[i])
            return false;
    *out = (const float *)t->data;
    return true;
}

static bool layer_norm_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 8 || args[1]->tag != ETCH_VALUE_INT_LIST || args[4]->tag != ETCH_VALUE_DOUBLE)
        return false;
    etch_tensor *in = etch_ew_float(args[0]), *out = etch_ew_float(args[5]),
                *mean = etch_ew_float(args[6]), *rstd = etch_ew_float(args[7]);
    if (!in || !out || !mean || !rstd || !etch_tensor_is_contiguous(in) ||
        !etch_tensor_is_contiguous(out) || !etch_tensor_is_contiguous(mean) ||
        !etch_tensor_is_contiguous(rstd))
        return false;
    size_t len = 0;
    const int64_t *ns = etch_value_int_list(args[1], &len);
    if (!ns || len < 1 || len > in->dim)
        return false;
    int64_t M = 1, rows = 1;
    const size_t axis = in->dim - len;
    for (size_t i = 0; i < len; i++) {
        if (ns[i] != in->sizes[axis + i])
            return false;
        M *= ns[i];
    }
    if (M == 0)
        return false;
    ln_job j;
    memset(&j, 0, sizeof j);
    if (!param_ok(args[2], ns, len, &j.w) || !param_ok(args[3], ns, len, &j.b))
        return false;
    int64_t ssz[ETCH_MAX_DIMS];
    for (size_t i = 0; i < in->dim; i++) {
        ssz[i] = i < axis ? in->sizes[i] : 1;
        rows *= ssz[i];
    }
    if (!etch_ew_resize(out, in->dim, in->sizes) || !etch_ew_resize(mean, in->dim, ssz) ||
        !etch_ew_resize(rstd, in->dim, ssz))
        return false;
    j.v = etch_opt_vec_active();
    j.x = (const float *)in->data;
    j.y = (float *)out->data;
    j.mean = (float *)mean->data;
    j.rstd = (float *)rstd->data;
    j.M = M;
    j.eps = args[4]->u.d;
    etch_ew_parallel(ctx, rows, M >= 4096 ? 1 : 4096 / M + 1, ln_rows, &j);
    return true;
}

ETCH_OPT_KERNEL(native_layer_norm_out) {
    if (!layer_norm_fast(ctx, args, nargs))
        etch_portable_native_layer_norm_out(ctx, args, nargs);
}

typedef struct mean_job {
    const etch_opt_vec *v;
    const float *x;
    float *y;
    int64_t M;
} mean_job;

static void mean_rows(void *arg, int64_t r0, int64_t r1) {
    const mean_job *j = (const mean_job *)arg;
    for (int64_t r = r0; r < r1; r++)
        j->y[r] = (float)((double)j->v->sum(j->x + r * j->M, j->M) / (double)j->M);
}

static bool mean_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 5 || args[1]->tag != ETCH_VALUE_INT_LIST || args[2]->tag != ETCH_VALUE_BOOL ||
        args[3]->tag != ETCH_VALUE_NONE)
        return false;
    etch_tensor *in = etch_ew_float(args[0]), *out = etch_ew_float(args[4]);
    if (!in || !out || in->dim == 0 || !etch_tensor_is_contiguous(in) ||
        !etch_tensor_is_contiguous(out))
        return false;
    size_t len = 0;
    const int64_t *dims = etch_value_int_list(args[1], &len);
    if (!dims || len == 0 || len > in->dim)
        return false;
    uint32_t mask = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t d = dims[i];
        if (d < -(int64_t)in->dim || d >= (int64_t)in->dim)
            return false;
        if (d < 0)
            d += in->dim;
        if (mask & (1u << d))
            return false;
        mask |= 1u << d;
    }
    const size_t axis = in->dim - len;
    if (mask != (uint32_t)(((1ull << in->dim) - 1u) & ~((1ull << axis) - 1u)))
        return false; /* not a suffix of dims */
    int64_t M = 1, rows = 1, osz[ETCH_MAX_DIMS];
    size_t odim = 0;
    const bool keep = args[2]->u.b;
    for (size_t i = 0; i < in->dim; i++) {
        if (i < axis) {
            rows *= in->sizes[i];
            osz[odim++] = in->sizes[i];
        } else {
            M *= in->sizes[i];
            if (keep)
                osz[odim++] = 1;
        }
    }
    if (M == 0 || !etch_ew_resize(out, odim, osz))
        return false;
    mean_job j = {etch_opt_vec_active(), (const float *)in->data, (float *)out->data, M};
    etch_ew_parallel(ctx, rows, M >= 4096 ? 1 : 4096 / M + 1, mean_rows, &j);
    return true;
}

/* ---- mean over H and W of a channel-blocked self ------------------------------------------ */

/* A dim list naming dims 2 and 3 of a 4-D tensor (any order, negative allowed). */
static bool hw_dims(etch_value *v) {
    if (!v || v->tag != ETCH_VALUE_INT_LIST || v->u.list.len != 2 || !v->u.list.items ||
        !v->u.list.scratch)
        return false;
    size_t len = 0;
    const int64_t *d = etch_value_int_list(v, &len);
    if (!d || len != 2)
        return false;
    uint32_t mask = 0;
    for (size_t i = 0; i < 2; i++) {
        if (d[i] < -4 || d[i] > 3)
            return false;
        mask |= 1u << (d[i] < 0 ? d[i] + 4 : d[i]);
    }
    return mask == 0xcu;
}

/* A 4-D float tensor with sizes in [1, 2^30) and channels a multiple of ETCH_BLOCK_C (data
 * not looked at). */
static const etch_tensor *blockable_f32(const etch_value *v) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return NULL;
    const etch_tensor *t = v->u.tensor;
    if (t->dtype != ETCH_DTYPE_FLOAT || t->dim != 4 || !etch_tensor_is_contiguous(t) ||
        t->sizes[1] % ETCH_BLOCK_C != 0)
        return NULL;
    for (unsigned i = 0; i < 4; i++)
        if (t->sizes[i] < 1 || t->sizes[i] > ETCH_OPT_SIZE_LIMIT)
            return NULL;
    return t;
}

void etch_opt_mean_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                          uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = 0;
    *tied = 0;
    if (nargs < 5 || !args[2] || args[2]->tag != ETCH_VALUE_BOOL || !args[3] ||
        args[3]->tag != ETCH_VALUE_NONE || !args[4] || args[4]->tag != ETCH_VALUE_TENSOR ||
        args[4] == args[0])
        return;
    const etch_tensor *in = blockable_f32(args[0]), *out = args[4]->u.tensor;
    if (!in || !out || out->dtype != ETCH_DTYPE_FLOAT || !hw_dims(args[1]))
        return;
    const bool keep = args[2]->u.b;
    if (out->dim != (keep ? 4u : 2u) || out->sizes[0] != in->sizes[0] ||
        out->sizes[1] != in->sizes[1] || (keep && (out->sizes[2] != 1 || out->sizes[3] != 1)))
        return;
    *may = 1u << 0;
}

static void mean_blocked(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    etch_tensor *in = nargs >= 5 ? etch_opt_fast_tensor(args[0], ETCH_DTYPE_FLOAT, true) : NULL;
    etch_tensor *out = in ? etch_opt_fast_tensor(args[4], ETCH_DTYPE_FLOAT, true) : NULL;
    bool ok = out && etch_kernel_blocked_args(ctx) == 1u && blockable_f32(args[0]) &&
              hw_dims(args[1]) && args[2] && args[2]->tag == ETCH_VALUE_BOOL && args[3] &&
              args[3]->tag == ETCH_VALUE_NONE;
    if (ok) {
        const int64_t osz[4] = {in->sizes[0], in->sizes[1], 1, 1};
        if (etch_kernel_resize(ctx, out, args[2]->u.b ? 4 : 2, osz) != ETCH_OK)
            return;
        const char *o = (const char *)out->data, *i = (const char *)in->data;
        ok = o && !(o < i + etch_tensor_nbytes(in) && i < o + etch_tensor_nbytes(out));
    }
    if (!ok) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "channel-blocked mean: arguments changed since load (a 4-D float self "
                         "with channels a multiple of %d reduced over dims 2 and 3, dtype None, "
                         "a float out apart from the input)",
                         ETCH_BLOCK_C);
        return;
    }
    nchwc_mean_job j = {in->sizes[2] * in->sizes[3], (const float *)in->data,
                        (float *)out->data, true};
    etch_opt_nchwc_mean(ctx, &j, in->sizes[0] * (in->sizes[1] / ETCH_BLOCK_C));
}

ETCH_OPT_KERNEL(mean_out) {
    if (etch_kernel_blocked_args(ctx)) {
        mean_blocked(ctx, args, nargs);
        return;
    }
    if (!mean_fast(ctx, args, nargs))
        etch_portable_mean_out(ctx, args, nargs);
}
