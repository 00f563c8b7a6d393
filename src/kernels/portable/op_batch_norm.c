/*
 * aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias,
 *     Tensor running_mean, Tensor running_var, float momentum, float eps, *, Tensor(a!) out0,
 *     Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))
 * aten::native_batch_norm.out(Tensor input, Tensor? weight, Tensor? bias,
 *     Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, *,
 *     Tensor(a!) out, Tensor(b!) save_mean, Tensor(c!) save_invstd)
 *
 * Input [N, C, *] (rank >= 2), Float, Double, Half or BFloat16; out has its dtype and shape.
 * Parameters are 1-D [C] of input's dtype (or Float for a Half/BFloat16 input).
 *
 * Inference: out = (x - running_mean) / sqrt(running_var + eps) * weight + bias, computed in
 * double; the two statistics outputs are resized to [0], as torch's CPU kernels return them.
 * native_batch_norm with training=True normalizes with the batch statistics (biased variance)
 * and returns them as save_mean / save_invstd ([C]); it needs running_mean/var None (updating
 * running statistics is not supported) and at least one element per channel. momentum is not
 * used. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

typedef struct bn_job {
    etch_nn_plan pl; /* kept dim: C; reduced: N and the spatial dims; tensors in, out */
    const etch_tensor *in, *out, *w, *b, *rm, *rv, *smean, *sinv;
    double eps;
    bool training;
} bn_job;

typedef struct bn_acc {
    int in_dt, out_dt;
    double alpha, beta;
} bn_acc;

static void bn_run(void *arg, char *p, int64_t s, char *q, int64_t qs, int64_t n) {
    const bn_acc *a = (const bn_acc *)arg;
    double v[ETCH_NN_CHUNK];
    for (int64_t off = 0; off < n; off += ETCH_NN_CHUNK) {
        int64_t m = n - off < ETCH_NN_CHUNK ? n - off : ETCH_NN_CHUNK;
        etch_pk_load_row_f64(v, p + off * s, s, m, a->in_dt);
        for (int64_t i = 0; i < m; i++)
            v[i] = v[i] * a->alpha + a->beta;
        etch_pk_store_row_f64(q + off * qs, qs, v, m, a->out_dt);
    }
}

static double param(const etch_tensor *t, int64_t c, double dflt) {
    if (!t)
        return dflt;
    return etch_pk_load_f64(
        (const char *)etch_nn_at(t->data, c * t->strides[0] * (int64_t)etch_dtype_size(t->dtype)),
        t->dtype);
}

static void store_stat(const etch_tensor *t, int64_t c, double v) {
    etch_pk_store_f64(etch_nn_at(t->data, c * t->strides[0] * (int64_t)etch_dtype_size(t->dtype)),
                      t->dtype, v);
}

static void bn_channels(void *arg, int64_t c0, int64_t c1) {
    const bn_job *j = (const bn_job *)arg;
    int64_t ies = (int64_t)etch_dtype_size(j->in->dtype),
            oes = (int64_t)etch_dtype_size(j->out->dtype);
    for (int64_t c = c0; c < c1; c++) {
        int64_t idx[1] = {c};
        char *ib = etch_nn_at(j->in->data, etch_nn_plan_offset(&j->pl, idx, j->in, true) * ies);
        char *ob = etch_nn_at(j->out->data, etch_nn_plan_offset(&j->pl, idx, j->out, true) * oes);
        double mean, invstd;
        if (j->training) {
            double var;
            etch_nn_moments(&j->pl, ib, j->in->dtype, &mean, &var);
            invstd = 1.0 / sqrt(var + j->eps);
            store_stat(j->smean, c, mean);
            store_stat(j->sinv, c, invstd);
        } else {
            mean = param(j->rm, c, 0.0);
            invstd = 1.0 / sqrt(param(j->rv, c, 1.0) + j->eps);
        }
        bn_acc a;
        a.in_dt = j->in->dtype;
        a.out_dt = j->out->dtype;
        a.alpha = invstd * param(j->w, c, 1.0);
        a.beta = param(j->b, c, 0.0) - mean * a.alpha;
        etch_nn_plan_runs(&j->pl, ib, ies, ob, oes, bn_run, &a);
    }
}

/* args: input, weight, bias, running_mean, running_var; outs: out, save_mean, save_invstd */
static void bn_common(etch_kernel_context *ctx, etch_value **a, bool training, etch_value *eps_v,
                      etch_value *mom_v, etch_value **outs) {
    bn_job j;
    etch_tensor *in = etch_pk_tensor(ctx, a[0], "input");
    etch_tensor *out = in ? etch_pk_tensor(ctx, outs[0], "out") : NULL;
    etch_tensor *sm = out ? etch_pk_tensor(ctx, outs[1], "save_mean") : NULL;
    etch_tensor *si = sm ? etch_pk_tensor(ctx, outs[2], "save_invstd") : NULL;
    double momentum;
    if (!si || !etch_nn_double(ctx, eps_v, "eps", &j.eps) ||
        !etch_nn_double(ctx, mom_v, "momentum", &momentum) ||
        !etch_nn_check_float(ctx, in, "input"))
        return;
    if (in->dim < 2) {
        char b[ETCH_PK_SHAPE_BUF];
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected an input of rank >= 2 ([N, C, *]), got %s",
                         etch_pk_shape_str(b, sizeof b, in->dim, in->sizes));
        return;
    }
    int64_t C = in->sizes[1];
    etch_tensor *w, *b, *rm, *rv;
    if (!etch_nn_norm_param(ctx, a[1], "weight", in, 1, NULL, C, false, &w) ||
        !etch_nn_norm_param(ctx, a[2], "bias", in, 1, NULL, C, false, &b) ||
        !etch_nn_norm_param(ctx, a[3], "running_mean", in, 1, NULL, C, false, &rm) ||
        !etch_nn_norm_param(ctx, a[4], "running_var", in, 1, NULL, C, false, &rv) ||
        !etch_pk_check_same_dtype(ctx, in, "input", out, "out") ||
        !etch_nn_check_stat_dtype(ctx, in, sm, "save_mean") ||
        !etch_nn_check_stat_dtype(ctx, in, si, "save_invstd"))
        return;
    if (training && (rm || rv)) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "training mode with running statistics (which it would update) is not "
                         "supported");
        return;
    }
    if (!training && (!rm || !rv)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "inference mode needs running_mean and running_var");
        return;
    }
    int64_t count = C ? etch_tensor_numel(in) / C : 0;
    if (training && count == 0 && C > 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "training mode needs at least one value per channel");
        return;
    }
    int64_t zero[1] = {0}, cs[1] = {C};
    if (etch_pk_resize(ctx, out, in->dim, in->sizes) != ETCH_OK ||
        etch_pk_resize(ctx, sm, 1, training ? cs : zero) != ETCH_OK ||
        etch_pk_resize(ctx, si, 1, training ? cs : zero) != ETCH_OK)
        return;
    if (etch_tensor_numel(in) == 0)
        return;
    uint32_t mask = (uint32_t)((1ull << in->dim) - 1u) & ~2u;
    etch_nn_plan_init(&j.pl, in, out, mask);
    j.in = in;
    j.out = out;
    j.w = w;
    j.b = b;
    j.rm = rm;
    j.rv = rv;
    j.smean = sm;
    j.sinv = si;
    j.training = training;
    etch_kernel_parallel_for(ctx, C, count >= 4096 ? 1 : 4096 / count + 1, bn_channels, &j);
}

ETCH_PK_KERNEL(native_batch_norm_out) {
    bool training;
    if (!etch_pk_nargs(ctx, nargs, 11) || !etch_pk_bool(ctx, args[5], "training", &training))
        return;
    bn_common(ctx, args, training, args[7], args[6], args + 8);
}

ETCH_PK_KERNEL(batch_norm_no_training_out) {
    if (!etch_pk_nargs(ctx, nargs, 10))
        return;
    if (args[3]->tag == ETCH_VALUE_NONE || args[4]->tag == ETCH_VALUE_NONE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "running_mean and running_var are required");
        return;
    }
    bn_common(ctx, args, false, args[6], args[5], args + 7);
}
