/* aten::arange.out(Scalar end, *, Tensor(a!) out)
 * aten::arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out)
 *
 * out = start, start + step, ... (exclusive of end), bit for bit as torch computes it on CPU:
 *  - start/end/step convert (with c10's overflow check) to out's accumulation type: int64 for
 *    integral outs (so 2.7 -> 2), double for Float/Double, float for Half/BFloat16;
 *  - the length is ceil((end - start) / step) in double, except for Long outs, where it is
 *    (end - start + step - sign(step)) / step in int64 on the converted values;
 *  - values are start + step * i in the accumulation type, rounded to out's dtype. torch's CPU
 *    kernel (AVX2 build, outputs of at most 32768 elements: one thread) fills blocks of
 *    2 * V elements (V = 32 bytes / element size) with vectors: base = start + step * i0 at
 *    the block-vector start, then element j = base (rounded to out's dtype) + j * step; the
 *    products-and-sums are fused multiply-adds where the compiler fused them. The remaining
 *    tail uses the scalar formula. This is reproduced exactly, so float outputs match torch.
 * out is resized to [length] (an out of another rank works when its element count already is
 * the length, as in torch: it is filled in memory order). Bool outs are not supported (torch
 * has no Bool arange). */
#include <math.h>

#include "kernels/portable/portable_shape.h"

static bool scalar_to_double(etch_kernel_context *ctx, const etch_value *v, const char *name,
                             double *out) {
    if (!etch_value_scalar_to_double(v, out)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "%s must be a Scalar, got %s", name,
                         v ? etch_value_tag_name(v->tag) : "nothing");
        return false;
    }
    return true;
}

/* A Scalar as int64 the way c10 converts it (checked: NaN, inf and out-of-range fail). */
static bool scalar_to_i64(etch_kernel_context *ctx, const etch_value *v, const char *name,
                          int64_t *out) {
    char buf[8];
    if (!etch_shape_scalar_elem(ctx, v, ETCH_DTYPE_LONG, buf, name))
        return false;
    memcpy(out, buf, 8);
    return true;
}

/* A Scalar as float, checked (for Half/BFloat16 outs). */
static bool scalar_to_f32(etch_kernel_context *ctx, const etch_value *v, const char *name,
                          float *out) {
    char buf[8];
    if (!etch_shape_scalar_elem(ctx, v, ETCH_DTYPE_FLOAT, buf, name))
        return false;
    memcpy(out, buf, 4);
    return true;
}

static void arange(etch_kernel_context *ctx, const etch_value *start_v, const etch_value *end_v,
                   const etch_value *step_v, etch_tensor *out) {
    int dt = out->dtype;
    if (!etch_pk_dtype_is_real(dt) || dt == ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "arange does not support out dtype %s",
                         etch_dtype_name(dt));
        return;
    }
    double start_d, end_d, step_d;
    if (!scalar_to_double(ctx, start_v, "start", &start_d) ||
        !scalar_to_double(ctx, end_v, "end", &end_d) ||
        !scalar_to_double(ctx, step_v, "step", &step_d))
        return;
    bool integral = !etch_pk_is_float(dt);
    bool f16 = dt == ETCH_DTYPE_HALF || dt == ETCH_DTYPE_BFLOAT16;
    int64_t si = 0, ei = 0, sti = 0;
    float sf = 0, ef = 0, stf = 0;
    double xs, xe, xst; /* the accumulation-type values, as double, for the checks */
    if (integral) {
        if (!scalar_to_i64(ctx, start_v, "start", &si) || !scalar_to_i64(ctx, end_v, "end", &ei) ||
            !scalar_to_i64(ctx, step_v, "step", &sti))
            return;
        xs = (double)si, xe = (double)ei, xst = (double)sti;
    } else if (f16) {
        if (!scalar_to_f32(ctx, start_v, "start", &sf) || !scalar_to_f32(ctx, end_v, "end", &ef) ||
            !scalar_to_f32(ctx, step_v, "step", &stf))
            return;
        xs = sf, xe = ef, xst = stf;
    } else {
        xs = start_d, xe = end_d, xst = step_d;
    }
    double size_d;
    if (dt == ETCH_DTYPE_LONG) {
        int64_t sgn = (sti > 0) - (sti < 0);
        /* (end - start + step - sgn) / step in int64; wrap-around like the C++ it mirrors */
        int64_t num = etch_pk_wrap_sub(etch_pk_wrap_add(etch_pk_wrap_sub(ei, si), sti), sgn);
        size_d = sti == 0 || (num == INT64_MIN && sti == -1) ? 0 : (double)(num / sti);
    } else {
        size_d = ceil((end_d - start_d) / step_d);
    }
    if (!(xst > 0 || xst < 0)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "step must be nonzero");
        return;
    }
    if (!isfinite(xs) || !isfinite(xe)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "unsupported range: %g -> %g", xs, xe);
        return;
    }
    if (!((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs))) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "the bounds %g -> %g are inconsistent with the step's sign", xs, xe);
        return;
    }
    if (!(size_d >= 0 && size_d <= 9223372036854775807.0)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "invalid arange length");
        return;
    }
    int64_t n = size_d >= 9223372036854775807.0 ? INT64_MAX : (int64_t)size_d;
    if (etch_tensor_numel(out) != n) {
        int64_t sz[1] = {n};
        if (etch_pk_resize(ctx, out, 1, sz) != ETCH_OK)
            return;
    }
    if (n == 0)
        return;
    char *o = (char *)out->data;
    int64_t es = (int64_t)etch_dtype_size(dt);
    if (integral) {
        for (int64_t i = 0; i < n; i++)
            etch_pk_store_i64(o + i * es, dt, etch_pk_wrap_add(si, etch_pk_wrap_mul(sti, i)));
        return;
    }
    int64_t V = 32 / es, nvec = n / (2 * V) * (2 * V);
    for (int64_t i = 0; i < n; i++) {
        int64_t b = i - i % V, j = i % V;
        if (dt == ETCH_DTYPE_DOUBLE) {
            double v = i < nvec ? fma((double)j, step_d, fma(step_d, (double)b, start_d))
                                : fma(step_d, (double)i, start_d);
            memcpy(o + i * es, &v, 8);
        } else if (dt == ETCH_DTYPE_FLOAT) {
            float v;
            if (i < nvec) {
                float base = (float)fma(step_d, (double)b, start_d);
                v = (float)fma((double)j, step_d, (double)base);
            } else {
                v = (float)fma(step_d, (double)i, start_d);
            }
            memcpy(o + i * es, &v, 4);
        } else {
            float v;
            if (i < nvec) {
                /* the base rounds to out's dtype; base + j * step is not fused */
                char tmp[2];
                etch_pk_store_f64(tmp, dt, fmaf(stf, (float)b, sf));
                float base = (float)etch_pk_load_f64(tmp, dt);
                float prod = (float)j * stf;
                v = base + prod;
            } else {
                v = fmaf(stf, (float)i, sf);
            }
            etch_pk_store_f64(o + i * es, dt, v);
        }
    }
}

ETCH_PK_KERNEL(arange_out) {
    if (!etch_pk_nargs(ctx, nargs, 2))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[1], "out");
    etch_value zero = {.tag = ETCH_VALUE_INT, .u.i = 0}, one = {.tag = ETCH_VALUE_INT, .u.i = 1};
    if (out)
        arange(ctx, &zero, args[0], &one, out);
}

ETCH_PK_KERNEL(arange_start_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *out = etch_pk_tensor(ctx, args[3], "out");
    if (out)
        arange(ctx, args[0], args[1], args[2], out);
}
