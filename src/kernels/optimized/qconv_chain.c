/*
 * Static int8 programs run as integer kernels (etch/kernel.h, "chained calls"). The int8
 * scheme (python/etch/quant/README.md, "int8 (static) and QAT") writes every quantized
 * convolution and linear as
 *
 *   xd = quantized_decomposed::dequantize_per_tensor.out(xq uint8, sx, zx, qmin, qmax, Byte)
 *   w  = quantized_decomposed::dequantize_per_channel.out(Wq int8 const, scales const [OC],
 *            zero_points const zeros [OC] | None, 0, qmin, qmax, Char)
 *  (wt = aten::permute_copy.out(w, [1, 0])                                 linear only)
 *   y  = aten::convolution.out(xd, w, bias, ...) | aten::mm.out(xd, wt) |
 *        aten::addmm.out(bias, xd, wt, 1, 1)       (a fused relu / clamp epilogue allowed)
 *  (y  = aten::relu.out(y) | aten::hardtanh.out(y, lo, hi))
 *   yq = quantized_decomposed::quantize_per_tensor.out(y, so, zo, qmin, qmax, Byte)
 *
 * (the two dequantizations in either order, the permute anywhere after its dequantization),
 * and an activation between quantized ops as dq -> relu | hardtanh -> q. The runtime offers
 * such runs (every intermediate read only by later calls of the run); the chain function
 * below, registered on both dequantizations, checks the dataflow itself (which argument reads
 * which result, nothing else reading one) and takes the run when:
 *  - conv / linear: xq uint8, the weight's dequantization prepared at load (its prepare
 *    function: a constant int8 weight [OC, K] or [OC, Cg, KH, KW] whose zero points are all
 *    0, finite scales, axis 0, float out; it keeps the scales as float and the weight packed
 *    for the int8 GEMM of the active ISA), a 2-D non-transposed convolution or a 2-D mm /
 *    addmm (beta = alpha = 1, bias float [OC] or [1, OC]), yq uint8. At execute
 *        acc = sum (xq - zx) * Wq + bias32,  bias32 = nearbyint(bias / (sx * sw)),
 *        yq  = clamp(nearbyintf(acc * mult) + zo, lo, hi),  mult = sx * sw / so,
 *    with the ReLU / clamp as a clamp of the quantized value (lo, hi: the quantized limits,
 *    by the portable quantization's own formula: quantization is monotonic, so clamping
 *    before or after it gives the same). Through etch_q8_conv / etch_q8_gemm (quant.h).
 *  - the activation: a 256-entry table made by the portable kernels' own arithmetic
 *    (etch_q_dequantize, float relu / clamp, etch_q_quantize): bit for bit the calls' result.
 *
 * Accuracy of the conv / linear path against the calls run one by one: the result differs by
 * at most 1 (one step of the output's quantization). The calls compute y in float then
 * round y / so to the nearest integer; here acc is exact and the only differences before
 * that rounding are the bias rounded to an integer (at most 0.5 * mult steps: the chain
 * refuses channels with mult > 0.5, so at most 0.25), mult's and acc's float roundings
 * (2^-23 relative) and the calls' own float summation error (about K * 2^-24 * sum |x w| / so
 * steps): together below one step, so the two roundings differ by at most one.
 *
 * Anything else (another dtype, per-channel scales that are not finite or do not fit the
 * weight, a non-constant weight, zero points that are not 0, shapes that do not fit, too
 * little scratch at execute, another active ISA than at load) runs the calls one by one
 * (etch_kernel_chain_run), and a dequantization that is not chained is the portable kernel.
 */
#include <math.h>
#include <string.h>

#include "kernels/optimized/chain_util.h"
#include "kernels/optimized/opt.h"
#include "kernels/optimized/opt_quant.h"
#include "kernels/optimized/quant.h"
#include "kernels/portable/portable_quant.h"

#define Q8W_MAGIC 0x7738717445ull /* "Etq8w" */
#define QC_MAX_MULT 0.5f

/* The prepared data (one layout for both chains of the weight's dequantization: this file's
 * static int8 one and quant_linear.c's 8w one): this header, scales[OC] as float, (has_z)
 * zeros[OC] as float, then (a convolution's) the packed weight. */
typedef struct q8w_prep {
    uint64_t magic;
    const void *w, *s; /* the constants it was made from */
    int64_t OC, K;     /* K: the elements of one output channel */
    int64_t isa, nr, kp;
    int64_t panels_off, colsum_off; /* from the buffer's start; 0: not packed (a linear's) */
    const void *z;                  /* the zero points' constant, or NULL */
    int64_t has_z;                  /* zero points given (zeros[] stored) */
    int64_t use_z;                  /* and not all 0 (the static int8 chain refuses those) */
} q8w_prep;

#define Q8W_HEAD ((sizeof(q8w_prep) + 63) / 64 * 64)

static size_t align64(size_t v) { return (v + 63) & ~(size_t)63; }

static bool num_arg(etch_value **args, size_t nargs, size_t k, double *v) {
    return k < nargs && args[k] && args[k]->tag != ETCH_VALUE_BOOL &&
           etch_value_scalar_to_double(args[k], v);
}

static bool none_arg(etch_value **args, size_t nargs, size_t k) {
    return k < nargs && (!args[k] || args[k]->tag == ETCH_VALUE_NONE);
}

/* out_dtype (an optional ScalarType) None or Float. */
static bool float_or_none(etch_value **args, size_t nargs, size_t k) {
    int64_t dt;
    return none_arg(args, nargs, k) || (etch_chain_int_arg(args, nargs, k, &dt) && dt == ETCH_DTYPE_FLOAT);
}

/* dequantize_per_channel.out(in, scales, zps, axis, qmin, qmax, dtype, out_dtype, out): the
 * checks that read no data (an int8 weight [OC, K] or [OC, Cg, KH, KW], axis 0, the range
 * within int8, floating scales [OC], integer zero points [OC] or None, float out); OC and K. */
static bool w_shape_ok(etch_value **args, size_t nargs, int64_t *OC, int64_t *K) {
    etch_tensor *w = etch_chain_tensor_arg(args, nargs, 0), *s = etch_chain_tensor_arg(args, nargs, 1);
    etch_tensor *z = etch_chain_tensor_arg(args, nargs, 2), *out = etch_chain_tensor_arg(args, nargs, 8);
    int64_t axis, dt, qmin, qmax;
    if (nargs < 9 || !w || !s || !out || (!z && !none_arg(args, nargs, 2)) ||
        !etch_chain_int_arg(args, nargs, 3, &axis) || !etch_chain_int_arg(args, nargs, 6, &dt) ||
        !etch_chain_int_arg(args, nargs, 4, &qmin) || !etch_chain_int_arg(args, nargs, 5, &qmax) ||
        qmin < -128 || qmax > 127 || qmin > qmax ||
        dt != ETCH_DTYPE_CHAR || w->dtype != ETCH_DTYPE_CHAR || !float_or_none(args, nargs, 7) ||
        out->dtype != ETCH_DTYPE_FLOAT || (w->dim != 2 && w->dim != 4) ||
        (axis != 0 && axis != -(int64_t)w->dim) || s->dim != 1 ||
        (s->dtype != ETCH_DTYPE_FLOAT && s->dtype != ETCH_DTYPE_DOUBLE) ||
        (z && (z->dim != 1 || !etch_pk_dtype_is_real(z->dtype) || etch_pk_is_float(z->dtype) ||
               z->dtype == ETCH_DTYPE_BOOL)))
        return false;
    *OC = w->sizes[0];
    *K = 1;
    for (unsigned d = 1; d < w->dim; d++)
        *K *= w->sizes[d];
    return *OC > 0 && *K > 0 && *OC <= ETCH_OPT_SIZE_LIMIT && *K <= ETCH_OPT_SIZE_LIMIT &&
           s->sizes[0] == *OC && (!z || z->sizes[0] == *OC);
}

/* The prepare function of dequantize_per_channel (both chains'): constants only, finite scales
 * >= 0 kept as float, zero points within int8 kept as float; a convolution's weight (4-D) only
 * with zero points all 0 (the static int8 chain alone takes it), packed for the int8 GEMM of
 * the active ISA. A linear's weight (2-D) is packed at execute by the static int8 chain (the
 * same dequantize_per_channel -> permute_copy -> mm form is the 8w scheme's, whose weights
 * must not be doubled). */
size_t etch_opt_dequantize_per_channel_prepare(etch_kernel_context *ctx, etch_value **args,
                                               size_t nargs, void *buf, size_t cap) {
    (void)ctx;
    int64_t OC, K;
    if (!w_shape_ok(args, nargs, &OC, &K))
        return 0;
    etch_tensor *w = args[0]->u.tensor, *s = args[1]->u.tensor, *z = etch_chain_tensor_arg(args, nargs, 2);
    if (!etch_chain_is_const(w) || !etch_chain_is_const(s) || (z && !etch_chain_is_const(z)))
        return 0;
    const int isa = (int)etch_isa_active();
    const size_t sc = align64((size_t)OC * sizeof(float));
    const bool pack = w->dim == 4;
    if (pack && K > ETCH_Q8_MAX_K)
        return 0;
    const size_t need = Q8W_HEAD + (z ? 2 : 1) * sc + (pack ? etch_q8_gemm_packed_size(isa, OC, K) : 0);
    if (!buf || !w->data)
        return need;
    if (!s->data || (z && !z->data) || !etch_tensor_is_contiguous(w) || cap < need)
        return 0;
    float *sf = (float *)((char *)buf + Q8W_HEAD), *zf = (float *)((char *)sf + sc);
    bool nonzero = false;
    for (int64_t i = 0; i < OC; i++) {
        const double v = etch_q_f64_at(s, i);
        if (!isfinite(v) || v < 0)
            return 0; /* the portable kernel refuses it: leave it to it */
        sf[i] = (float)v;
        if (z) {
            const int64_t zi = etch_q_int_at(z, i);
            if (zi < -128 || zi > 127 || (pack && zi != 0))
                return 0; /* refused, or a convolution's zero points: not the static path */
            zf[i] = (float)zi;
            nonzero |= zi != 0;
        }
    }
    q8w_prep h;
    memset(&h, 0, sizeof h);
    if (pack) {
        etch_q8_packed pk;
        char *pb = (char *)buf + Q8W_HEAD + (z ? 2 : 1) * sc;
        etch_q8_gemm_pack(isa, (const int8_t *)w->data, OC, K, K, pb, &pk);
        h.nr = pk.nr;
        h.kp = pk.kp;
        h.panels_off = (int64_t)((const char *)pk.panels - (const char *)buf);
        h.colsum_off = (int64_t)((const char *)pk.colsum - (const char *)buf);
    }
    h.magic = Q8W_MAGIC;
    h.w = w->data;
    h.s = s->data;
    h.z = z ? z->data : NULL;
    h.OC = OC;
    h.K = K;
    h.isa = isa;
    h.has_z = z != NULL;
    h.use_z = nonzero;
    memcpy(buf, &h, sizeof h);
    return need;
}

/* The prepared data of dequantize_per_channel call c when it was made from c's constants (the
 * shape checks, the header, its size), else NULL; *OC, *K. */
static const q8w_prep *prep_of(const etch_kernel_call *c, int64_t *OC, int64_t *K) {
    const q8w_prep *h = (const q8w_prep *)c->prepared;
    etch_tensor *z = etch_chain_tensor_arg(c->args, c->nargs, 2);
    if (!w_shape_ok(c->args, c->nargs, OC, K) || !etch_chain_no_epilogue(c) || !h ||
        c->prepared_size < Q8W_HEAD || h->magic != Q8W_MAGIC ||
        h->w != c->args[0]->u.tensor->data || h->s != c->args[1]->u.tensor->data ||
        h->OC != *OC || h->K != *K || h->has_z != (z != NULL) || (z && h->z != z->data) ||
        c->prepared_size < Q8W_HEAD + (h->has_z ? 2 : 1) * align64((size_t)*OC * sizeof(float)) ||
        (h->panels_off && c->prepared_size < (size_t)h->colsum_off + (size_t)*OC * sizeof(int32_t)))
        return NULL;
    return h;
}

bool etch_opt_dequantize_per_channel_weights(const etch_kernel_call *c, etch_q8w_weights *w) {
    int64_t OC, K;
    const q8w_prep *h = prep_of(c, &OC, &K);
    if (!h || c->args[0]->u.tensor->dim != 2)
        return false;
    const float *sf = (const float *)((const char *)h + Q8W_HEAD);
    const float *zf = (const float *)((const char *)sf + align64((size_t)OC * sizeof(float)));
    *w = (etch_q8w_weights){OC, K, K, (const int8_t *)h->w, sf, h->use_z ? zf : NULL};
    return true;
}

/* ---- the chain ------------------------------------------------------------------------------ */

enum { QR_CONV = 1, QR_LINEAR, QR_LUT };

typedef struct qrun {
    int kind;
    size_t n; /* calls taken */
    etch_tensor *xq, *yq, *bias;
    float sx, so;
    int32_t zx, zo, qmin, qmax;
    /* weight (conv / linear) */
    const q8w_prep *wp;
    const float *sw;
    etch_q8_packed pk;
    const etch_tensor *wt; /* the int8 constant */
    /* conv */
    int64_t stride[2], pad[2], dil[2], groups;
    /* the activation before the quantization (in float) */
    bool has_lo, has_hi;
    float lo, hi;
    int act_kind; /* QR_LUT: 1 relu, 2 hardtanh */
} qrun;

static bool same(const etch_value *a, const etch_value *b) {
    return a && b &&
           (a == b || (a->tag == ETCH_VALUE_TENSOR && b->tag == ETCH_VALUE_TENSOR &&
                       a->u.tensor == b->u.tensor));
}

/* Does any argument of c other than `except` refer to v? */
static bool refers_else(const etch_kernel_call *c, const etch_value *v, size_t except) {
    for (size_t k = 0; k < c->nargs; k++)
        if (k != except && same(c->args[k], v))
            return true;
    return false;
}

static bool reads_only_at(const etch_kernel_call *c, const etch_value *v, size_t k) {
    return k < c->nargs && same(c->args[k], v) && !refers_else(c, v, k);
}

/* dequantize_per_tensor.out(xq, s, z, qmin, qmax, dtype, out_dtype, out) of uint8. */
static bool dqx_ok(const etch_kernel_call *c, qrun *r) {
    etch_tensor *x = etch_chain_tensor_arg(c->args, c->nargs, 0), *o = etch_chain_tensor_arg(c->args, c->nargs, 7);
    double s;
    int64_t z, qmin, qmax, dt;
    if (c->nargs < 8 || !x || !o || x->dtype != ETCH_DTYPE_BYTE || o->dtype != ETCH_DTYPE_FLOAT ||
        !num_arg(c->args, c->nargs, 1, &s) || !etch_chain_int_arg(c->args, c->nargs, 2, &z) ||
        !etch_chain_int_arg(c->args, c->nargs, 3, &qmin) || !etch_chain_int_arg(c->args, c->nargs, 4, &qmax) ||
        !etch_chain_int_arg(c->args, c->nargs, 5, &dt) || dt != ETCH_DTYPE_BYTE ||
        !float_or_none(c->args, c->nargs, 6) || !etch_chain_no_epilogue(c) || !isfinite(s) || s < 0 ||
        z < 0 || z > 255 || same(c->args[0], c->args[7]))
        return false;
    r->xq = x;
    r->sx = (float)s;
    r->zx = (int32_t)z;
    return true;
}

/* quantize_per_tensor.out(y, s, z, qmin, qmax, dtype, out) to uint8. */
static bool q_ok(const etch_kernel_call *c, qrun *r) {
    etch_tensor *o = etch_chain_tensor_arg(c->args, c->nargs, 6);
    double s;
    int64_t z, qmin, qmax, dt;
    if (c->nargs < 7 || !o || o->dtype != ETCH_DTYPE_BYTE || !num_arg(c->args, c->nargs, 1, &s) ||
        !etch_chain_int_arg(c->args, c->nargs, 2, &z) || !etch_chain_int_arg(c->args, c->nargs, 3, &qmin) ||
        !etch_chain_int_arg(c->args, c->nargs, 4, &qmax) || !etch_chain_int_arg(c->args, c->nargs, 5, &dt) ||
        dt != ETCH_DTYPE_BYTE || !etch_chain_no_epilogue(c) || !isfinite(s) || !((float)s > 0.0f) ||
        isinf(1.0f / (float)s) || z < 0 || z > 255 || qmin < 0 || qmax > 255 || qmin > qmax)
        return false;
    r->so = (float)s;
    r->zo = (int32_t)z;
    r->qmin = (int32_t)qmin;
    r->qmax = (int32_t)qmax;
    r->yq = o;
    return true;
}

/* The activation an epilogue or a relu / hardtanh call applies, as a float clamp. */
static bool clamp_of_epilogue(const etch_epilogue *e, qrun *r) {
    if (!e || e->act == ETCH_ACT_NONE)
        return true;
    if (r->has_lo || r->has_hi)
        return false;
    if (e->act == ETCH_ACT_RELU) {
        r->has_lo = true;
        r->lo = 0.0f;
        return true;
    }
    if (e->act == ETCH_ACT_CLAMP && !isnan(e->lo) && !isnan(e->hi) && e->lo <= e->hi) {
        r->has_lo = isfinite(e->lo);
        r->has_hi = isfinite(e->hi);
        r->lo = (float)e->lo;
        r->hi = (float)e->hi;
        return true;
    }
    return false;
}

/* relu.out(x, out) or hardtanh.out(x, lo, hi, out) reading *prev at 0 (the out becomes *prev). */
static bool act_call(const etch_kernel_call *c, const etch_value **prev, qrun *r) {
    etch_epilogue e = {ETCH_ACT_NONE, 0, 0};
    size_t oi;
    if (etch_chain_named(c, "aten::relu.out")) {
        e.act = ETCH_ACT_RELU;
        oi = 1;
    } else if (etch_chain_named(c, "aten::hardtanh.out")) {
        if (!num_arg(c->args, c->nargs, 1, &e.lo) || !num_arg(c->args, c->nargs, 2, &e.hi))
            return false;
        e.act = ETCH_ACT_CLAMP;
        oi = 3;
    } else {
        return false;
    }
    etch_tensor *o = etch_chain_tensor_arg(c->args, c->nargs, oi);
    if (c->nargs <= oi || !o || o->dtype != ETCH_DTYPE_FLOAT || !etch_chain_no_epilogue(c) ||
        !reads_only_at(c, *prev, 0) || !clamp_of_epilogue(&e, r))
        return false;
    r->act_kind = e.act == ETCH_ACT_RELU ? 1 : 2;
    *prev = c->args[oi];
    return true;
}

static bool int_pair(etch_value *v, int64_t out[2], int64_t dflt) {
    size_t len;
    const int64_t *l = v && v->tag == ETCH_VALUE_INT_LIST ? etch_value_int_list(v, &len) : NULL;
    if (!l)
        return false;
    if (len == 0) {
        out[0] = out[1] = dflt;
        return true;
    }
    if (len != 1 && len != 2)
        return false;
    out[0] = l[0];
    out[1] = l[len - 1];
    return true;
}

/* The weight dequantization c, prepared for this ISA, zero points all 0: r->wp, sw, pk. */
static bool weight_ok(const etch_kernel_call *c, qrun *r) {
    int64_t OC, K;
    const q8w_prep *h = prep_of(c, &OC, &K);
    if (!h || h->use_z || K > ETCH_Q8_MAX_K || h->isa != (int64_t)etch_isa_active())
        return false;
    r->wp = h;
    r->sw = (const float *)((const char *)h + Q8W_HEAD);
    r->wt = c->args[0]->u.tensor;
    r->pk.isa = (int)h->isa;
    r->pk.nr = (int)h->nr;
    r->pk.N = OC;
    r->pk.K = K;
    r->pk.kp = h->kp;
    r->pk.panels = h->panels_off ? (const int8_t *)((const char *)h + h->panels_off) : NULL;
    r->pk.colsum = h->panels_off ? (const int32_t *)((const char *)h + h->colsum_off) : NULL;
    return true;
}

/* A float bias [OC] or [1, OC] (or None) that is none of the run's intermediates. */
static bool bias_ok(const etch_kernel_call *calls, size_t nmid, etch_value *v, int64_t OC,
                    bool exec, qrun *r) {
    r->bias = NULL;
    if (!v || v->tag == ETCH_VALUE_NONE)
        return true;
    for (size_t i = 0; i < nmid; i++)
        for (size_t k = 0; k < calls[i].nargs; k++)
            if (same(calls[i].args[k], v))
                return false;
    etch_tensor *b = exec ? etch_opt_fast_tensor(v, ETCH_DTYPE_FLOAT, true)
                          : (v->tag == ETCH_VALUE_TENSOR ? v->u.tensor : NULL);
    if (!b || b->dtype != ETCH_DTYPE_FLOAT || !etch_tensor_is_contiguous(b) ||
        !(b->dim == 1 || (b->dim == 2 && b->sizes[0] == 1)) || b->sizes[b->dim - 1] != OC ||
        (exec && !b->data))
        return false;
    r->bias = b;
    return true;
}

static bool is_dqx(const etch_kernel_call *c) {
    return c->kernel->fn == etch_opt_dequantize_per_tensor_out;
}
static bool is_dqw(const etch_kernel_call *c) {
    return c->kernel->fn == etch_opt_dequantize_per_channel_out;
}

/* The calls of calls[0..n) run as one (0: none), described in *r; exec: at execute, when every
 * tensor is bound (at load the input may not be). */
static size_t run_of(const etch_kernel_call *calls, size_t n, bool exec, qrun *r) {
    memset(r, 0, sizeof *r);
    const etch_kernel_call *dqx = NULL, *dqw = NULL, *perm = NULL;
    size_t i = 0;
    for (; i < n && i < 3; i++) {
        const etch_kernel_call *c = &calls[i];
        if (is_dqx(c) && !dqx)
            dqx = c;
        else if (is_dqw(c) && !dqw)
            dqw = c;
        else if (etch_chain_named(c, "aten::permute_copy.out") && dqw && !perm)
            perm = c;
        else
            break;
    }
    if (!dqx || !dqx_ok(dqx, r) || i >= n)
        return 0;
    const etch_value *xd = dqx->args[7];
    const etch_value *prev = xd;
    if (!dqw) { /* dq -> relu | hardtanh -> q: the table */
        if (i != 1 || perm || !act_call(&calls[1], &prev, r) || n < 3 ||
            !etch_chain_named(&calls[2], "quantized_decomposed::quantize_per_tensor.out") ||
            !q_ok(&calls[2], r) || !reads_only_at(&calls[2], prev, 0))
            return 0;
        if (exec && (!r->xq->data || !r->yq->data || !etch_tensor_is_contiguous(r->xq)))
            return 0;
        r->kind = QR_LUT;
        return r->n = 3;
    }
    if (!weight_ok(dqw, r))
        return 0;
    const etch_value *wv = dqw->args[8];
    const etch_kernel_call *op = &calls[i];
    const int64_t OC = r->wp->OC;
    etch_value *yv;
    if (etch_chain_named(op, "aten::convolution.out")) {
        /* (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
         * out) */
        int64_t op_pad[2];
        etch_tensor *wd = etch_chain_tensor_arg(dqw->args, dqw->nargs, 8);
        if (perm || op->nargs < 10 || !reads_only_at(op, xd, 0) || !reads_only_at(op, wv, 1) ||
            !op->args[6] || op->args[6]->tag != ETCH_VALUE_BOOL || op->args[6]->u.b ||
            !int_pair(op->args[3], r->stride, 1) || !int_pair(op->args[4], r->pad, 0) ||
            !int_pair(op->args[5], r->dil, 1) || !int_pair(op->args[7], op_pad, 0) ||
            op_pad[0] || op_pad[1] || !etch_chain_int_arg(op->args, op->nargs, 8, &r->groups) ||
            r->wt->dim != 4 || !wd || wd->dim != 4 || r->xq->dim != 4 ||
            r->groups <= 0 || r->xq->sizes[1] != r->wt->sizes[1] * r->groups ||
            OC % r->groups || r->stride[0] <= 0 || r->stride[1] <= 0 || r->pad[0] < 0 ||
            r->pad[1] < 0 || r->dil[0] <= 0 || r->dil[1] <= 0 ||
            !bias_ok(calls, i, op->args[2], OC, exec, r))
            return 0;
        yv = op->args[9];
        r->kind = QR_CONV;
    } else if (etch_chain_named(op, "aten::mm.out") || etch_chain_named(op, "aten::addmm.out")) {
        const bool add = etch_chain_named(op, "aten::addmm.out");
        const size_t xi = add ? 1 : 0, oi = add ? 5 : 2;
        size_t len;
        const int64_t *pl;
        double beta = 1, alpha = 1;
        if (!perm || perm->nargs < 3 || !reads_only_at(perm, wv, 0) || !etch_chain_no_epilogue(perm) ||
            !perm->args[1] || perm->args[1]->tag != ETCH_VALUE_INT_LIST ||
            !(pl = etch_value_int_list(perm->args[1], &len)) || len != 2 ||
            !((pl[0] == 1 || pl[0] == -1) && (pl[1] == 0 || pl[1] == -2)) ||
            r->wt->dim != 2 || op->nargs <= oi || r->xq->dim != 2 ||
            r->xq->sizes[1] != r->wp->K || !reads_only_at(op, xd, xi) ||
            !reads_only_at(op, perm->args[2], xi + 1) ||
            (add && (!num_arg(op->args, op->nargs, 3, &beta) ||
                     !num_arg(op->args, op->nargs, 4, &alpha) || beta != 1.0 || alpha != 1.0 ||
                     !bias_ok(calls, i, op->args[0], OC, exec, r))))
            return 0;
        yv = op->args[oi];
        r->kind = QR_LINEAR;
    } else {
        return 0;
    }
    etch_tensor *y = yv && yv->tag == ETCH_VALUE_TENSOR ? yv->u.tensor : NULL;
    if (!y || y->dtype != ETCH_DTYPE_FLOAT || !clamp_of_epilogue(op->epilogue, r))
        return 0;
    prev = yv;
    i++;
    if (i < n && etch_chain_no_epilogue(op) && (etch_chain_named(&calls[i], "aten::relu.out") ||
                                     etch_chain_named(&calls[i], "aten::hardtanh.out"))) {
        if (!act_call(&calls[i], &prev, r))
            return 0;
        i++;
    }
    if (i >= n || !etch_chain_named(&calls[i], "quantized_decomposed::quantize_per_tensor.out") ||
        !q_ok(&calls[i], r) || !reads_only_at(&calls[i], prev, 0))
        return 0;
    /* nothing but the designated readers refers to an intermediate */
    for (size_t a = 0; a <= i; a++)
        if (calls[a].blocked)
            return 0;
    if (exec && (!r->xq->data || !r->yq->data || !etch_tensor_is_contiguous(r->xq) ||
                 !etch_tensor_is_contiguous(r->yq)))
        return 0;
    r->n = i + 1;
    return r->n;
}

size_t etch_opt_dequantize_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                 size_t n) {
    (void)ctx;
    qrun r;
    return run_of(calls, n, false, &r);
}

/* The portable quantization of one float (the limits of a clamp). */
static int32_t quantize1(const qrun *r, float v) {
    return (int32_t)etch_q_quantize((double)v, false, 1.0f / r->so, r->zo, r->qmin, r->qmax);
}

static void lut_run(etch_kernel_context *ctx, const qrun *r) {
    uint8_t t[256];
    const float inv = 1.0f / r->so;
    for (int u = 0; u < 256; u++) {
        float v = etch_q_dequantize(u, r->zx, r->sx);
        if (r->act_kind == 1)
            v = v > 0.0f ? v : (isnan(v) ? v : 0.0f);
        else
            v = r->lo > r->hi ? r->hi : isnan(v) ? v : v < r->lo ? r->lo : v > r->hi ? r->hi : v;
        t[u] = (uint8_t)etch_q_quantize((double)v, false, inv, r->zo, r->qmin, r->qmax);
    }
    if (etch_kernel_resize(ctx, r->yq, r->xq->dim, r->xq->sizes) != ETCH_OK)
        return;
    const uint8_t *x = r->xq->data;
    uint8_t *y = r->yq->data;
    const int64_t n = etch_tensor_numel(r->xq);
    for (int64_t k = 0; k < n; k++)
        y[k] = t[x[k]];
}

void etch_opt_qconv_chain_run(etch_kernel_context *ctx) {
    const size_t n = etch_kernel_chain_length(ctx);
    etch_kernel_call calls[ETCH_CHAIN_MAX];
    bool ok = n <= ETCH_CHAIN_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = etch_kernel_chain_call(ctx, i, &calls[i]);
    qrun r;
    if (!ok || run_of(calls, n, true, &r) != n) {
        etch_chain_run_each(ctx); /* not the run accepted at load (the arguments changed) */
        return;
    }
    if (r.kind == QR_LUT) {
        lut_run(ctx, &r);
        return;
    }
    const int64_t OC = r.wp->OC;
    int32_t *b32 = etch_kernel_temp_try(ctx, (size_t)OC * sizeof(int32_t), 64);
    float *mult = etch_kernel_temp_try(ctx, (size_t)OC * sizeof(float), 64);
    if (!b32 || !mult) {
        etch_chain_run_each(ctx);
        return;
    }
    const float inv = 1.0f / r.so;
    const float *bias = r.bias ? (const float *)r.bias->data : NULL;
    for (int64_t o = 0; o < OC; o++) {
        const double sxw = (double)r.sx * (double)r.sw[o];
        mult[o] = (float)(sxw * (double)inv);
        const double b = !bias ? 0.0 : sxw > 0 ? nearbyint((double)bias[o] / sxw) : INFINITY;
        if (!(mult[o] <= QC_MAX_MULT) || !(fabs(b) <= 1073741824.0)) {
            etch_chain_run_each(ctx); /* outside the accuracy bound, or the bias does not fold */
            return;
        }
        b32[o] = (int32_t)b;
    }
    /* the clamp: the output range, narrowed by a ReLU / clamp before the quantization */
    int32_t qmin = r.qmin, qmax = r.qmax;
    if (r.has_lo && quantize1(&r, r.lo) > qmin)
        qmin = quantize1(&r, r.lo);
    if (r.has_hi && quantize1(&r, r.hi) < qmax)
        qmax = quantize1(&r, r.hi);
    if (qmin > qmax)
        qmin = qmax;
    if (r.kind == QR_LINEAR) {
        const int64_t M = r.xq->sizes[0], osz[2] = {M, OC};
        if (etch_kernel_resize(ctx, r.yq, 2, osz) != ETCH_OK)
            return;
        if (M == 0)
            return;
        const int64_t K = r.wp->K;
        void *work = etch_kernel_temp_try(ctx, etch_q8_gemm_work_size(M, K), 64);
        void *pkb = r.pk.panels ? NULL
                                : etch_kernel_temp_try(ctx, etch_q8_gemm_packed_size(-1, OC, K), 64);
        if (!work || (!r.pk.panels && !pkb)) {
            etch_chain_run_each(ctx);
            return;
        }
        if (pkb)
            etch_q8_gemm_pack(-1, (const int8_t *)r.wt->data, OC, K, K, pkb, &r.pk);
        etch_q8_gemm_desc d;
        memset(&d, 0, sizeof d);
        d.M = M;
        d.a = r.xq->data;
        d.lda = r.wp->K;
        d.za = r.zx;
        d.b = &r.pk;
        d.bias32 = bias ? b32 : NULL;
        d.mult = mult;
        d.mult_per_channel = true;
        d.out_type = ETCH_Q8_OUT_U8;
        d.zo = r.zo;
        d.qmin = qmin;
        d.qmax = qmax;
        d.c = r.yq->data;
        d.ldc = OC;
        d.work = work;
        const etch_status st = etch_q8_gemm(ctx, &d);
        if (st != ETCH_OK)
            etch_kernel_fail(ctx, st, "%s", etch_last_error());
        return;
    }
    etch_q8_conv_desc d;
    memset(&d, 0, sizeof d);
    const etch_tensor *x = r.xq, *w = r.wt;
    d.N = x->sizes[0];
    d.C = x->sizes[1];
    d.H = x->sizes[2];
    d.W = x->sizes[3];
    d.OC = OC;
    d.KH = w->sizes[2];
    d.KW = w->sizes[3];
    d.groups = r.groups;
    d.sh = r.stride[0];
    d.sw = r.stride[1];
    d.ph = r.pad[0];
    d.pw = r.pad[1];
    d.dh = r.dil[0];
    d.dw = r.dil[1];
    const int64_t eh = d.H + 2 * d.ph - d.dh * (d.KH - 1) - 1;
    const int64_t ew = d.W + 2 * d.pw - d.dw * (d.KW - 1) - 1;
    if (eh < 0 || ew < 0) {
        etch_chain_run_each(ctx); /* the portable kernel names the problem */
        return;
    }
    d.OH = eh / d.sh + 1;
    d.OW = ew / d.sw + 1;
    d.x = x->data;
    d.zx = r.zx;
    d.w = (const int8_t *)w->data;
    d.packed = d.groups == 1 && r.pk.panels ? &r.pk : NULL;
    d.bias32 = bias ? b32 : NULL;
    d.mult = mult;
    d.zo = r.zo;
    d.qmin = qmin;
    d.qmax = qmax;
    const int64_t osz[4] = {d.N, OC, d.OH, d.OW};
    d.y = r.yq->data; /* (bound: checked in run_of; set again after the resize) */
    if (etch_q8_conv_check(&d) != ETCH_OK) {
        etch_chain_run_each(ctx);
        return;
    }
    if (etch_kernel_resize(ctx, r.yq, 4, osz) != ETCH_OK)
        return;
    d.y = r.yq->data;
    void *work = etch_kernel_temp_try(ctx, etch_q8_conv_work_size(&d, etch_kernel_num_threads(ctx)),
                                      64);
    if (!work) {
        etch_chain_run_each(ctx);
        return;
    }
    const etch_status st = etch_q8_conv(ctx, &d, work);
    if (st != ETCH_OK)
        etch_kernel_fail(ctx, st, "%s", etch_last_error());
}

/* An int8 weight [OC, ...] dequantized per output channel outside a chain (a run the chain
 * rule refused): the portable arithmetic, (float)(q - zp[c]) * (float)scale[c], without its
 * per-element index and dtype dispatch; only when every argument is one the portable kernel
 * accepts (else it runs and names the problem). */
static bool dq_channel_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    int64_t OC, K;
    if (!w_shape_ok(args, nargs, &OC, &K))
        return false;
    etch_tensor *w = args[0]->u.tensor, *s = args[1]->u.tensor, *z = etch_chain_tensor_arg(args, nargs, 2);
    etch_tensor *out = args[8]->u.tensor;
    if (!w->data || !s->data || (z && !z->data) || !etch_tensor_is_contiguous(w))
        return false;
    for (int64_t c = 0; c < OC; c++) {
        const double v = etch_q_f64_at(s, c);
        const int64_t zp = z ? etch_q_int_at(z, c) : 0;
        if (!isfinite(v) || v < 0 || zp < -128 || zp > 127)
            return false;
    }
    if (etch_kernel_resize(ctx, out, w->dim, w->sizes) != ETCH_OK || !out->data ||
        !etch_tensor_is_contiguous(out))
        return false;
    const char *w0 = (const char *)w->data, *o0 = (const char *)out->data;
    if (w0 < o0 + etch_tensor_nbytes(out) && o0 < w0 + etch_tensor_nbytes(w))
        return false;
    const int8_t *q = (const int8_t *)w->data;
    float *o = (float *)out->data;
    for (int64_t c = 0; c < OC; c++) {
        const float sc = (float)etch_q_f64_at(s, c);
        const int32_t zp = z ? (int32_t)etch_q_int_at(z, c) : 0;
        /* etch_q_dequantize's value: q - zp is exact in int32 for int8 q and zero point (the
         * loop vectorizes) */
        for (int64_t k = 0; k < K; k++)
            o[c * K + k] = (float)((int32_t)q[c * K + k] - zp) * sc;
    }
    return true;
}

/* The one chain function of dequantize_per_channel: the static int8 run (a dequantized
 * activation, ending in a quantization) or else the 8w linear (quant_linear.c: the weight's
 * dequantization -> permute_copy -> mm | addmm with float activations). The two never match
 * the same calls. */
size_t etch_opt_dequantize_per_channel_chain(etch_kernel_context *ctx,
                                             const etch_kernel_call *calls, size_t n) {
    const size_t taken = etch_opt_dequantize_chain(ctx, calls, n);
    return taken ? taken : etch_opt_q8w_linear_chain(ctx, calls, n);
}

/* Is the chain a static int8 one (a dequantize_per_tensor among its first calls)? */
static bool static_chain(etch_kernel_context *ctx) {
    const size_t n = etch_kernel_chain_length(ctx);
    etch_kernel_call c;
    for (size_t i = 0; i < n && i < 3; i++)
        if (etch_kernel_chain_call(ctx, i, &c) && is_dqx(&c))
            return true;
    return false;
}

ETCH_OPT_KERNEL(dequantize_per_channel_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        if (static_chain(ctx))
            etch_opt_qconv_chain_run(ctx);
        else
            etch_opt_q8w_linear_chain_run(ctx);
        return;
    }
    if (!dq_channel_fast(ctx, args, nargs))
        etch_portable_dequantize_per_channel_out(ctx, args, nargs);
}
