/* Optimized _softmax.out / _log_softmax.out: Float self and out with one contiguous layout
 * (in place allowed), half_to_float false, rank >= 1.
 *  - dim is the last one (or every later dim has size 1): one pass for the max, one that
 *    writes exp(x - max) and sums it, one that scales by 1/sum (log: x - max - log(sum));
 *    rows split over threads.
 *  - other dims: the same passes over whole rows of the inner dims at once (vector ops across
 *    the inner dim), with 3 * inner floats of scratch; serial. Without the scratch, or for
 *    anything else, the portable kernel runs.
 * A row holding NaN or +inf, or only -inf, gives NaN, as torch. Float accumulation: see
 * opt_eltwise.h for the accuracy. */
#include <math.h>
#include <string.h>

#include "kernels/optimized/eltwise_util.h"
#include "kernels/portable/portable_nn.h"
#include "runtime/context.h"

typedef struct sm_job {
    const etch_opt_vec *v;
    const float *x;
    float *y;
    int64_t len;
    bool log;
} sm_job;

static void sm_rows(void *arg, int64_t r0, int64_t r1) {
    const sm_job *j = (const sm_job *)arg;
    const etch_opt_vec *v = j->v;
    const int64_t n = j->len;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * n;
        float *y = j->y + r * n;
        const float m = v->max(x, n);
        if (j->log) {
            const float s = v->exp_sum(NULL, x, m, n);
            const float nm = -m, nls = -logf(s);
            v->binary(ETCH_OPT_BIN_ADD, y, x, 0, &nm, 1, 1.0f, n);
            v->binary(ETCH_OPT_BIN_ADD, y, y, 0, &nls, 1, 1.0f, n);
        } else {
            const float s = v->exp_sum(y, x, m, n);
            const float inv = 1.0f / s;
            v->binary(ETCH_OPT_BIN_MUL, y, y, 0, &inv, 1, 1.0f, n);
        }
    }
}

/* dim with inner > 1: rows of `inner` floats, `len` of them per outer block */
static void sm_columns(const etch_opt_vec *v, const float *x, float *y, int64_t outer,
                       int64_t len, int64_t inner, bool log_, float *m, float *s, float *t) {
    for (int64_t o = 0; o < outer; o++) {
        const float *xb = x + o * len * inner;
        float *yb = y + o * len * inner;
        memcpy(m, xb, (size_t)inner * sizeof(float));
        for (int64_t k = 1; k < len; k++)
            v->binary(ETCH_OPT_BIN_MAX, m, m, 0, xb + k * inner, 0, 1.0f, inner);
        memset(s, 0, (size_t)inner * sizeof(float));
        for (int64_t k = 0; k < len; k++) {
            /* t = exp(x - m); s += t; y = log ? x - m : t */
            v->binary(ETCH_OPT_BIN_ADD, t, xb + k * inner, 0, m, 0, -1.0f, inner);
            if (log_) {
                float *yr = yb + k * inner;
                memmove(yr, t, (size_t)inner * sizeof(float));
                v->unary(ETCH_OPT_UN_EXP, t, t, inner, 0.0f, 0.0f);
            } else {
                v->unary(ETCH_OPT_UN_EXP, t, t, inner, 0.0f, 0.0f);
                memmove(yb + k * inner, t, (size_t)inner * sizeof(float));
            }
            v->binary(ETCH_OPT_BIN_ADD, s, s, 0, t, 0, 1.0f, inner);
        }
        if (log_)
            for (int64_t i = 0; i < inner; i++)
                s[i] = logf(s[i]);
        for (int64_t k = 0; k < len; k++) {
            float *yr = yb + k * inner;
            if (log_)
                v->binary(ETCH_OPT_BIN_ADD, yr, yr, 0, s, 0, -1.0f, inner);
            else
                v->binary(ETCH_OPT_BIN_DIV, yr, yr, 0, s, 0, 1.0f, inner);
        }
    }
}

static bool softmax_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool log_) {
    if (nargs < 4)
        return false;
    etch_tensor *in = etch_ew_float(args[0]), *out = etch_ew_float(args[3]);
    if (!in || !out || in->dim == 0 || args[1]->tag != ETCH_VALUE_INT ||
        args[2]->tag != ETCH_VALUE_BOOL || args[2]->u.b || !etch_tensor_is_contiguous(in))
        return false;
    int64_t d = args[1]->u.i;
    if (d < -(int64_t)in->dim || d >= (int64_t)in->dim)
        return false;
    if (d < 0)
        d += in->dim;
    if (!etch_ew_resize(out, in->dim, in->sizes) || !etch_ew_same_layout(in, out))
        return false;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; i++)
        outer *= in->sizes[i];
    for (int64_t i = d + 1; i < (int64_t)in->dim; i++)
        inner *= in->sizes[i];
    const int64_t len = in->sizes[d];
    if (outer * len * inner == 0)
        return true;
    sm_job j = {etch_opt_vec_active(), (const float *)in->data, (float *)out->data, len, log_};
    if (inner == 1) {
        const int64_t grain = len >= 2048 ? 1 : 2048 / len + 1;
        etch_ew_parallel(ctx, outer, grain, sm_rows, &j);
        return true;
    }
    const size_t mark = ctx->temp_used;
    float *scratch = (float *)etch_kernel_temp_try(ctx, (size_t)(3 * inner) * sizeof(float), 64);
    if (!scratch)
        return false;
    sm_columns(j.v, j.x, j.y, outer, len, inner, log_, scratch, scratch + inner,
               scratch + 2 * inner);
    ctx->temp_used = mark;
    return true;
}

ETCH_OPT_KERNEL(softmax_out) {
    if (!softmax_fast(ctx, args, nargs, false))
        etch_portable_softmax_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(log_softmax_out) {
    if (!softmax_fast(ctx, args, nargs, true))
        etch_portable_log_softmax_out(ctx, args, nargs);
}
