/*
 * 4-bit weight-only linears run from the packed bytes (etch/kernel.h, "chained calls"). The
 * 4w scheme (python/etch/quant/README.md) stores a linear's weight as ExecuTorch's
 * embedding_4bit packing and dequantizes it with the embedding gathering every row:
 *
 *   w  = quantized_decomposed::embedding_4bit[.dtype]_out(P uint8 [N, Kp/2], scales, zp,
 *            -8, 7, indices = arange(N)[, Float])                     -> f32 [N, Kp]
 *  (w  = aten::slice_copy.Tensor_out(w, 1, 0, K, 1)                   only when padded)
 *   wt = aten::permute_copy.out(w, [1, 0])                            -> f32 [K, N]
 *   y  = aten::mm.out(x, wt) | aten::addmm.out(bias, x, wt, 1, 1)
 *
 * Run one by one, every call writes (and the next reads back) a float [N, K] weight. Here the
 * embedding_4bit call's prepare function accepts a call site whose weight, scales, zero points
 * and indices are constants (uint8 [N, Kp/2]; scales [N, Kp/G] or [N] of a floating dtype,
 * finite; zero points None or of the scales' shape, finite; range -8, 7; indices Long or Int
 * [N] equal to arange(N), checked once here) and keeps the scales and zero points as float
 * (what the portable kernel computes with: each element rounded once to float). Its chain
 * function takes the run above when each call reads the previous one's result as the table
 * shows (checked here: the runtime lets later calls of a run read any intermediate, so the
 * mm's x and bias must be none of them), the mm's other operand is a
 * float [M, K] activation with unit column stride, addmm's beta and alpha are 1 and its bias
 * a float [N] or [1, N]; at execute the run is etch_q4_linear_f32 (quant.h) straight into
 * the mm's output (bias from addmm, then the mm's fused activation), the weight never
 * dequantized to memory. With padding (K < Kp) x is copied into kernel scratch with zero
 * columns up to Kp (the padded weights are finite, so those columns add exact zeros).
 * Results equal the calls run one by one within quant.h's bound for etch_q4_linear_f32.
 *
 * More than Q4L_MAX_M rows of x (a long prefill) run the calls one by one, as does anything
 * else that does not match (etch_kernel_chain_run), and an embedding_4bit call
 * that is not chained is the portable kernel: bitwise what it was. The intermediates' tensors
 * keep their planned bytes in the method's memory plan but are never written on the chained
 * path.
 *
 * The 8w scheme's linears likewise (int8 weight-only per channel):
 *
 *   w  = quantized_decomposed::dequantize_per_channel.out(Wq int8 [N, K], scales [N],
 *            zero_points None | integer [N], axis 0, qmin, qmax, Char[, out_dtype Float])
 *   wt = aten::permute_copy.out(w, [1, 0]);  y = aten::mm.out | aten::addmm.out as above
 *
 * dequantize_per_channel's prepare function (qconv_chain.c, shared with the static int8
 * chain) accepts constants only (scales Float or Double [N], finite and >= 0, kept as float;
 * zero points within int8, kept as float, skipped when all 0; the range within int8); its one
 * chain function (qconv_chain.c) tries the static int8 run and else etch_opt_q8w_linear_chain
 * here: the same permute_copy -> mm | addmm tail (mm_tail, shared with 4w), and the run
 * (etch_opt_q8w_linear_chain_run, called by that kernel) is etch_q8w_linear_f32 from the int8
 * bytes, within quant.h's bound for it. Up to Q4L_MAX_M rows, as for 4w (the kernel reads the
 * weight once per ETCH_Q4_MR rows as well); an unchained dequantize_per_channel is
 * qconv_chain.c's plain loop (bitwise the portable kernel).
 *
 * 8da4w and int8-dynamic put the per-token activation chain in front of those weight chains:
 *
 *   s, z = choose_qparams_per_token_asymmetric.out(x, Char)           (Float/Double, Long/Int)
 *   q    = quantize_per_token.out(x, s, z, -128, 127, Char);  xd = dequantize_per_token.out(
 *          q, s, z, -128, 127, Char, Float);  then the 4w or 8w chain, its mm reading xd
 *
 * (6 or 7 calls: a run of the runtime's DAG rule, s and z read by two later calls). The chain
 * function of choose_qparams checks that dataflow itself (who reads which intermediate at
 * which argument; the bias none of them). At execute, 8da4w is etch_q4_linear_8da4w_f32:
 * x quantized per token by the core (the same float formulas as the portable kernels, so
 * the same int8 rows), int8 x int4 products summed exactly per group; int8-dynamic quantizes
 * and dequantizes x per token into scratch as the calls do (the same floats) and runs
 * etch_q8w_linear_f32 (integer int8 x int8 products: not yet). Within quant.h's bounds.
 */
#include <math.h>
#include <string.h>

#include "kernels/optimized/chain_util.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt.h"
#include "kernels/optimized/opt_quant.h"
#include "kernels/optimized/quant.h"
#include "kernels/portable/portable_quant.h"

#define Q4L_MAGIC 0x6c34717445ull /* "Etq4l" */

/* The prepared data: this header, then scales[N * ng] and (has_z) zeros[N * ng] as float. */
typedef struct q4l_prep {
    uint64_t magic;
    const void *w; /* the constants it was made from */
    const void *s;
    const void *z;
    int64_t N, Kp, ng, G;
    int64_t has_z;
    int64_t arange; /* indices a constant arange(N): the linear chain may take the call */
} q4l_prep;

#define Q4L_HEAD ((sizeof(q4l_prep) + 63) / 64 * 64)

/* Rows of x up to which the int4 kernel runs; above, the calls one by one (the weight
 * dequantized once, then the float GEMM). etch_q4_linear_f32 dequantizes each weight chunk
 * once per ETCH_Q4_MR rows, so its cost grows with M where the portable dequantization's does
 * not: measured on a 1024 x 1024 4w linear (group 32, AVX2, 1 thread) the two meet near
 * M = 300 (M = 128: 32 ms against 74 ms). */
#define Q4L_MAX_M 256

/* The embedding's argument positions: out at 6 (.out) or 7 (.dtype_out, dtype at 6). */
static size_t out_index(const etch_kernel_call *c) {
    return c->kernel->fn == etch_opt_embedding_4bit_dtype_out ? 7 : 6;
}

/* The shape part of the prepare checks (no data read): N, Kp, the groups per row. linear:
 * indices [N] (the chain's arange); else any indices (a gather, e.g. the token embedding). */
static bool shape_ok(etch_value **args, size_t nargs, size_t oi, bool linear, int64_t *N,
                     int64_t *Kp, int64_t *ng) {
    etch_tensor *w = etch_chain_tensor_arg(args, nargs, 0), *s = etch_chain_tensor_arg(args, nargs, 1);
    etch_tensor *ix = etch_chain_tensor_arg(args, nargs, 5), *out = etch_chain_tensor_arg(args, nargs, oi);
    int64_t qmin, qmax;
    if (nargs < oi + 1 || !w || !s || !ix || !out || !etch_chain_int_arg(args, nargs, 3, &qmin) ||
        !etch_chain_int_arg(args, nargs, 4, &qmax) || qmin != -8 || qmax != 7 || w->dim != 2 ||
        w->dtype != ETCH_DTYPE_BYTE || out->dtype != ETCH_DTYPE_FLOAT ||
        (s->dim != 1 && s->dim != 2) || !etch_pk_is_float(s->dtype) ||
        (linear ? ix->dim != 1 : ix->dim + 1u > ETCH_MAX_DIMS) ||
        (ix->dtype != ETCH_DTYPE_LONG && ix->dtype != ETCH_DTYPE_INT))
        return false;
    if (oi == 7 && args[6] && args[6]->tag != ETCH_VALUE_NONE &&
        !(args[6]->tag == ETCH_VALUE_INT && args[6]->u.i == ETCH_DTYPE_FLOAT))
        return false;
    *N = w->sizes[0];
    *Kp = 2 * w->sizes[1];
    *ng = s->dim == 2 ? s->sizes[1] : 1;
    if (*N <= 0 || *Kp <= 0 || *N > ETCH_OPT_SIZE_LIMIT || *Kp > ETCH_OPT_SIZE_LIMIT ||
        s->sizes[0] != *N || *ng <= 0 || *Kp % *ng != 0 || (*Kp / *ng) % 2 != 0 ||
        (linear && ix->sizes[0] != *N))
        return false;
    bool has_z;
    etch_tensor *z = etch_chain_tensor_arg(args, nargs, 2);
    has_z = z != NULL;
    if (!has_z && args[2] && args[2]->tag != ETCH_VALUE_NONE)
        return false;
    if (has_z && (z->dim != s->dim || z->sizes[0] != *N || (s->dim == 2 && z->sizes[1] != *ng) ||
                  !etch_pk_dtype_is_real(z->dtype) || z->dtype == ETCH_DTYPE_BOOL))
        return false;
    return true;
}

static size_t q4l_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs, void *buf,
                          size_t cap, size_t oi) {
    (void)ctx;
    int64_t N, Kp, ng;
    if (!shape_ok(args, nargs, oi, false, &N, &Kp, &ng))
        return 0;
    etch_tensor *w = args[0]->u.tensor, *s = args[1]->u.tensor, *ix = args[5]->u.tensor;
    etch_tensor *z = etch_chain_tensor_arg(args, nargs, 2);
    const size_t arr = (size_t)(N * ng) * sizeof(float);
    if (!etch_chain_is_const(w) || !etch_chain_is_const(s) || (z && !etch_chain_is_const(z)))
        return 0; /* (the flags are set when the runtime measures the pool, data NULL) */
    int64_t N1, Kp1, ng1; /* the linear chain's indices: a constant arange(N), checked below */
    bool arange = etch_chain_is_const(ix) && shape_ok(args, nargs, oi, true, &N1, &Kp1, &ng1);
    const size_t need = Q4L_HEAD + (z ? 2 : 1) * arr;
    if (!buf || !w->data)
        return need;
    if (!s->data || (arange && !ix->data) || (z && !z->data) || !etch_tensor_is_contiguous(w))
        return 0;
    if (cap < need)
        return 0;
    for (int64_t i = 0; arange && i < N; i++) /* row_ids: every row, in order */
        arange = etch_q_int_at(ix, i) == i;
    float *sf = (float *)((char *)buf + Q4L_HEAD), *zf = sf + N * ng;
    for (int64_t i = 0; i < N * ng; i++) {
        sf[i] = (float)etch_q_f64_at(s, i);
        if (!isfinite(etch_q_f64_at(s, i)))
            return 0; /* the portable kernel refuses it: leave it to it */
        if (z) {
            zf[i] = (float)etch_q_f64_at(z, i);
            if (!isfinite(etch_q_f64_at(z, i)))
                return 0;
        }
    }
    q4l_prep h;
    memset(&h, 0, sizeof h);
    h.magic = Q4L_MAGIC;
    h.w = w->data;
    h.s = s->data;
    h.z = z ? z->data : NULL;
    h.N = N;
    h.Kp = Kp;
    h.ng = ng;
    h.G = Kp / ng;
    h.has_z = z != NULL;
    h.arange = arange;
    memcpy(buf, &h, sizeof h);
    return need;
}

bool etch_opt_embedding_4bit_prepared_linear(const void *buf, size_t size) {
    const q4l_prep *h = buf;
    return buf && size >= Q4L_HEAD && h->magic == Q4L_MAGIC && h->arange;
}

size_t etch_opt_embedding_4bit_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                       void *buf, size_t cap) {
    return q4l_prepare(ctx, args, nargs, buf, cap, 6);
}

size_t etch_opt_embedding_4bit_dtype_prepare(etch_kernel_context *ctx, etch_value **args,
                                             size_t nargs, void *buf, size_t cap) {
    return q4l_prepare(ctx, args, nargs, buf, cap, 7);
}

/* ---- the chains ----------------------------------------------------------------------------- */

/* What the permute_copy -> mm | addmm tail of a weight chain computes with. */
typedef struct lin_run {
    int64_t M, K; /* K: the columns of x */
    const float *x;
    int64_t ldx;
    const float *bias;
    etch_tensor *y;
    const etch_epilogue *epi;
} lin_run;

typedef struct q4l_run {
    etch_q4_weights w;
    lin_run l;
} q4l_run;

/* Does call c read prev's result (value or tensor) at argument k? */
static bool reads(const etch_kernel_call *c, size_t k, const etch_value *prev) {
    return k < c->nargs && c->args[k] &&
           (c->args[k] == prev || (c->args[k]->tag == ETCH_VALUE_TENSOR &&
                                   prev->tag == ETCH_VALUE_TENSOR &&
                                   c->args[k]->u.tensor == prev->u.tensor));
}

/* Does call c read at argument k any of the ni intermediates inter[]? */
static bool reads_any(const etch_kernel_call *c, size_t k, const etch_value *const *inter,
                      size_t ni) {
    for (size_t t = 0; t < ni; t++)
        if (reads(c, k, inter[t]))
            return true;
    return false;
}

/* calls[i] = permute_copy(prev, [1, 0]), calls[i + 1] = mm(x, .) | addmm(bias, x, ., 1, 1)
 * with an [N, K] weight before the permute: the number of calls up to the mm (i + 2; 0: not
 * that), *l filled. inter[0..ni) are the weight chain's intermediates before prev (the
 * runtime's rule lets later calls of the run read them anywhere: x and the bias must not be
 * one). exec: at execute, when every tensor is bound (at load an input may not be). */
static size_t mm_tail(const etch_kernel_call *calls, size_t n, size_t i, const etch_value *prev,
                      const etch_value **inter, size_t ni, int64_t N, int64_t K, bool exec,
                      lin_run *l) {
    memset(l, 0, sizeof *l);
    l->K = K;
    if (i + 2 > n || !etch_chain_named(&calls[i], "aten::permute_copy.out") || calls[i].nargs < 3 ||
        !reads(&calls[i], 0, prev) || !etch_chain_no_epilogue(&calls[i]) ||
        !calls[i].args[1] || calls[i].args[1]->tag != ETCH_VALUE_INT_LIST ||
        !etch_chain_tensor_arg(calls[i].args, calls[i].nargs, 2))
        return 0;
    size_t len;
    const int64_t *perm = etch_value_int_list(calls[i].args[1], &len);
    if (!perm || len != 2 || !((perm[0] == 1 || perm[0] == -1) && (perm[1] == 0 || perm[1] == -2)))
        return 0;
    inter[ni++] = prev;
    prev = calls[i].args[2];
    inter[ni++] = prev;
    i++;
    const etch_kernel_call *m = &calls[i];
    etch_value *xv, *yv;
    if (etch_chain_named(m, "aten::mm.out")) { /* (x, wt, out) */
        if (m->nargs < 3 || !reads(m, 1, prev) || reads_any(m, 0, inter, ni))
            return 0;
        xv = m->args[0];
        yv = m->args[2];
    } else if (etch_chain_named(m, "aten::addmm.out")) { /* (bias, x, wt, beta, alpha, out) */
        double beta, alpha;
        if (m->nargs < 6 || !reads(m, 2, prev) || reads_any(m, 1, inter, ni) ||
            reads_any(m, 0, inter, ni) ||
            !m->args[3] || !m->args[4] || m->args[3]->tag == ETCH_VALUE_BOOL ||
            m->args[4]->tag == ETCH_VALUE_BOOL ||
            !etch_value_scalar_to_double(m->args[3], &beta) ||
            !etch_value_scalar_to_double(m->args[4], &alpha) || beta != 1.0 || alpha != 1.0)
            return 0;
        /* at execute, data bound and aligned (etch_opt_fast_tensor); at load, maybe unbound */
        etch_tensor *b = exec ? etch_opt_fast_tensor(m->args[0], ETCH_DTYPE_FLOAT, true)
                              : etch_chain_tensor_arg(m->args, m->nargs, 0);
        if (!b || b->dtype != ETCH_DTYPE_FLOAT || !etch_tensor_is_contiguous(b) ||
            !(b->dim == 1 || (b->dim == 2 && b->sizes[0] == 1)) ||
            b->sizes[b->dim - 1] != N || (exec && !b->data))
            return 0;
        l->bias = (const float *)b->data;
        xv = m->args[1];
        yv = m->args[5];
    } else {
        return 0;
    }
    /* at execute both bound and aligned, in the sizes a fast path indexes (as the mm's own) */
    etch_tensor *x = xv && xv->tag == ETCH_VALUE_TENSOR ? xv->u.tensor : NULL;
    etch_tensor *y = yv && yv->tag == ETCH_VALUE_TENSOR ? yv->u.tensor : NULL;
    if (!x || !y || x->dtype != ETCH_DTYPE_FLOAT || x->dim != 2 || x->sizes[1] != K ||
        x->sizes[0] < 0 || x->sizes[0] > ETCH_OPT_SIZE_LIMIT ||
        (x->sizes[0] > 0 && (x->strides[1] != 1 || x->strides[0] < K)) ||
        (exec && ((x->sizes[0] > 0 && !x->data) || !y->data ||
                  !etch_opt_fast_tensor(xv, ETCH_DTYPE_FLOAT, false) ||
                  !etch_opt_fast_tensor(yv, ETCH_DTYPE_FLOAT, true))) ||
        y->dtype != ETCH_DTYPE_FLOAT || !etch_tensor_is_contiguous(y))
        return 0;
    l->M = x->sizes[0];
    l->x = (const float *)x->data;
    l->ldx = x->sizes[0] > 0 ? x->strides[0] : K;
    l->y = y;
    l->epi = etch_chain_no_epilogue(m) ? NULL : m->epilogue;
    return i + 1;
}

/* The calls of calls[0..n) the int4 linear runs (3 or 4; 0: none), described in *r. */
static size_t run_of(const etch_kernel_call *calls, size_t n, bool exec, q4l_run *r) {
    memset(r, 0, sizeof *r);
    if (n < 3 || (calls[0].kernel->fn != etch_opt_embedding_4bit_out &&
                  calls[0].kernel->fn != etch_opt_embedding_4bit_dtype_out))
        return 0;
    const etch_kernel_call *e = &calls[0];
    const size_t oi = out_index(e);
    int64_t N, Kp, ng;
    const q4l_prep *h = (const q4l_prep *)e->prepared;
    if (!shape_ok(e->args, e->nargs, oi, true, &N, &Kp, &ng) || !h ||
        e->prepared_size < Q4L_HEAD || h->magic != Q4L_MAGIC || !h->arange ||
        h->w != e->args[0]->u.tensor->data ||
        h->s != e->args[1]->u.tensor->data || h->N != N || h->Kp != Kp || h->ng != ng ||
        e->prepared_size < Q4L_HEAD + (size_t)((h->has_z ? 2 : 1) * N * ng) * sizeof(float) ||
        (h->has_z != (etch_chain_tensor_arg(e->args, e->nargs, 2) != NULL)) ||
        (h->has_z && h->z != e->args[2]->u.tensor->data) || !etch_chain_no_epilogue(e))
        return 0;
    const float *sf = (const float *)((const char *)h + Q4L_HEAD);
    r->w = (etch_q4_weights){N, Kp, h->G, (const uint8_t *)h->w, sf, h->has_z ? sf + N * ng : NULL};
    int64_t K = Kp;
    const etch_value *prev = e->args[oi], *inter[4];
    size_t i = 1, ni = 0;
    if (etch_chain_named(&calls[i], "aten::slice_copy.Tensor_out")) { /* (w, 1, 0, K, 1, out) */
        const etch_kernel_call *c = &calls[i];
        int64_t dim, start = 0, end, step;
        if (c->nargs < 6 || !reads(c, 0, prev) || !etch_chain_no_epilogue(c) ||
            !etch_chain_int_arg(c->args, c->nargs, 1, &dim) || (dim != 1 && dim != -1) ||
            (c->args[2]->tag != ETCH_VALUE_NONE && !etch_chain_int_arg(c->args, c->nargs, 2, &start)) ||
            start != 0 || !etch_chain_int_arg(c->args, c->nargs, 3, &end) || end <= 0 || end > Kp ||
            !etch_chain_int_arg(c->args, c->nargs, 4, &step) || step != 1 ||
            !etch_chain_tensor_arg(c->args, c->nargs, 5))
            return 0;
        K = end;
        inter[ni++] = prev;
        prev = c->args[5];
        i++;
    }
    const size_t used = mm_tail(calls, n, i, prev, inter, ni, N, K, exec, &r->l);
    return used && etch_q4_check(&r->w) == ETCH_OK ? used : 0;
}

size_t etch_opt_embedding_4bit_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                     size_t n) {
    (void)ctx;
    q4l_run r;
    return run_of(calls, n, false, &r);
}

/* The calls the 8w linear runs (dequantize_per_channel -> permute_copy -> mm | addmm: 3;
 * 0: none), described in *w and *l. */
static size_t run8_of(const etch_kernel_call *calls, size_t n, bool exec, etch_q8w_weights *w,
                      lin_run *l) {
    memset(w, 0, sizeof *w);
    if (n < 3 || calls[0].kernel->fn != etch_opt_dequantize_per_channel_out)
        return 0;
    const etch_kernel_call *e = &calls[0];
    if (!etch_opt_dequantize_per_channel_weights(e, w))
        return 0;
    const etch_value *inter[4];
    const size_t used = mm_tail(calls, n, 1, e->args[8], inter, 0, w->N, w->K, exec, l);
    return used && etch_q8w_check(w) == ETCH_OK ? used : 0;
}

size_t etch_opt_q8w_linear_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                 size_t n) {
    (void)ctx;
    etch_q8w_weights w;
    lin_run l;
    return run8_of(calls, n, false, &w, &l);
}

/* The chain's calls as the chain function saw them at load; false: run them one by one. */
static bool chain_calls(etch_kernel_context *ctx, etch_kernel_call *calls, size_t *n) {
    *n = etch_kernel_chain_length(ctx);
    bool ok = *n <= ETCH_CHAIN_MAX;
    for (size_t i = 0; ok && i < *n; i++)
        ok = etch_kernel_chain_call(ctx, i, &calls[i]);
    return ok;
}

/* Size the output; false when nothing is left to compute (done, failed, or run call by call:
 * an empty x or more than Q4L_MAX_M rows, a long prefill, where dequantizing once and the
 * float GEMM are faster). */
static bool tail_start(etch_kernel_context *ctx, const lin_run *l, int64_t N) {
    const int64_t osz[2] = {l->M, N};
    if (etch_kernel_resize(ctx, l->y, 2, osz) != ETCH_OK || l->M == 0)
        return false;
    if (l->M > Q4L_MAX_M) {
        etch_chain_run_each(ctx);
        return false;
    }
    return true;
}

static void q4l_chain_run(etch_kernel_context *ctx) {
    etch_kernel_call calls[ETCH_CHAIN_MAX];
    size_t n;
    q4l_run r;
    if (!chain_calls(ctx, calls, &n) || run_of(calls, n, true, &r) != n) {
        etch_chain_run_each(ctx); /* not the run accepted at load (the arguments changed) */
        return;
    }
    const int64_t M = r.l.M, N = r.w.N, Kp = r.w.K;
    if (!tail_start(ctx, &r.l, N))
        return;
    const float *x = r.l.x;
    int64_t ldx = r.l.ldx;
    void *work = etch_kernel_temp_try(ctx, etch_q4_linear_f32_work_size(M, Kp, r.w.G), 64);
    if (work && r.l.K < Kp) { /* zero columns up to the padded width */
        float *xp = (float *)etch_kernel_temp_try(ctx, (size_t)(M * Kp) * sizeof(float), 64);
        if (!xp) {
            work = NULL;
        } else {
            for (int64_t i = 0; i < M; i++) {
                memcpy(xp + i * Kp, x + i * ldx, (size_t)r.l.K * sizeof(float));
                memset(xp + i * Kp + r.l.K, 0, (size_t)(Kp - r.l.K) * sizeof(float));
            }
            x = xp;
            ldx = Kp;
        }
    }
    if (!work) {
        etch_chain_run_each(ctx); /* too little scratch */
        return;
    }
    float *y = (float *)r.l.y->data;
    etch_q4_linear_f32(ctx, &r.w, M, x, ldx, r.l.bias, y, N, work);
    etch_opt_apply_epilogue(r.l.epi, y, M * N);
}

void etch_opt_q8w_linear_chain_run(etch_kernel_context *ctx) {
    etch_kernel_call calls[ETCH_CHAIN_MAX];
    size_t n;
    etch_q8w_weights w;
    lin_run l;
    if (!chain_calls(ctx, calls, &n) || run8_of(calls, n, true, &w, &l) != n) {
        etch_chain_run_each(ctx);
        return;
    }
    if (!tail_start(ctx, &l, w.N))
        return;
    void *work = etch_kernel_temp_try(ctx, etch_q8w_linear_f32_work_size(l.M), 64);
    if (!work) {
        etch_chain_run_each(ctx);
        return;
    }
    float *y = (float *)l.y->data;
    etch_q8w_linear_f32(ctx, &w, l.M, l.x, l.ldx, l.bias, y, w.N, work);
    etch_opt_apply_epilogue(l.epi, y, l.M * w.N);
}

/* ---- 8da4w / int8-dynamic: the per-token activation chain in front --------------------- */

/* calls[0..3) = choose_qparams_per_token_asymmetric(x, Char, s, z), quantize_per_token(x, s,
 * z, -128, 127, Char, q), dequantize_per_token(q, s, z, -128, 127, Char, Float, xd), then a
 * 4w or 8w weight chain whose mm reads xd as x. */
typedef struct act_run {
    bool w4;
    q4l_run r4;            /* w4 */
    etch_q8w_weights w8;   /* !w4 */
    lin_run l;             /* l.x, l.ldx: x itself (xd is never written) */
} act_run;

static bool int_is(const etch_kernel_call *c, size_t k, int64_t v) {
    int64_t got;
    return etch_chain_int_arg(c->args, c->nargs, k, &got) && got == v;
}

static size_t act_run_of(const etch_kernel_call *calls, size_t n, bool exec, act_run *a) {
    memset(a, 0, sizeof *a);
    if (n < 6 || calls[0].kernel->fn != etch_opt_choose_qparams_per_token_asymmetric_out)
        return 0;
    const etch_kernel_call *c0 = &calls[0], *c1 = &calls[1], *c2 = &calls[2];
    if (c0->nargs < 4 || !int_is(c0, 1, ETCH_DTYPE_CHAR) || !etch_chain_no_epilogue(c0) ||
        !etch_chain_named(c1, "quantized_decomposed::quantize_per_token.out") || c1->nargs < 7 ||
        !etch_chain_named(c2, "quantized_decomposed::dequantize_per_token.out") || c2->nargs < 8 ||
        !etch_chain_no_epilogue(c1) || !etch_chain_no_epilogue(c2))
        return 0;
    etch_value *xv = c0->args[0], *sv = c0->args[2], *zv = c0->args[3];
    etch_tensor *x = etch_chain_tensor_arg(c0->args, c0->nargs, 0), *st = etch_chain_tensor_arg(c0->args, c0->nargs, 2);
    etch_tensor *zt = etch_chain_tensor_arg(c0->args, c0->nargs, 3);
    /* the dataflow: quantize reads x, s, z; dequantize reads q, s, z */
    if (!x || !st || !zt || !reads(c1, 0, xv) || !reads(c1, 1, sv) || !reads(c1, 2, zv) ||
        !int_is(c1, 3, -128) || !int_is(c1, 4, 127) || !int_is(c1, 5, ETCH_DTYPE_CHAR) ||
        !etch_chain_tensor_arg(c1->args, c1->nargs, 6) || !reads(c2, 0, c1->args[6]) ||
        !reads(c2, 1, sv) || !reads(c2, 2, zv) || !int_is(c2, 3, -128) ||
        !int_is(c2, 4, 127) || !int_is(c2, 5, ETCH_DTYPE_CHAR) ||
        !int_is(c2, 6, ETCH_DTYPE_FLOAT) || !etch_chain_tensor_arg(c2->args, c2->nargs, 7))
        return 0;
    /* what the kernels compute with: float x [M, K] rows, Float or Double scales (the
     * portable quantize and dequantize use the scale rounded to float, as the core's
     * per-token functions do: ExecuTorch's formulas in float), integer zero points */
    if (x->dtype != ETCH_DTYPE_FLOAT ||
        (st->dtype != ETCH_DTYPE_FLOAT && st->dtype != ETCH_DTYPE_DOUBLE) ||
        (zt->dtype != ETCH_DTYPE_LONG && zt->dtype != ETCH_DTYPE_INT) ||
        etch_chain_tensor_arg(c1->args, c1->nargs, 6)->dtype != ETCH_DTYPE_CHAR)
        return 0;
    const etch_value *xd = c2->args[7];
    size_t used;
    if (calls[3].kernel->fn == etch_opt_dequantize_per_channel_out) {
        used = run8_of(calls + 3, n - 3, exec, &a->w8, &a->l);
    } else {
        a->w4 = true;
        used = run_of(calls + 3, n - 3, exec, &a->r4);
        a->l = a->r4.l;
    }
    if (!used)
        return 0;
    /* the mm's x is xd; its bias none of the activation intermediates */
    const etch_kernel_call *m = &calls[3 + used - 1];
    const bool add = etch_chain_named(m, "aten::addmm.out");
    const etch_value *acts[4] = {sv, zv, c1->args[6], xd};
    if (!reads(m, add ? 1 : 0, xd) || (add && reads_any(m, 0, acts, 4)))
        return 0;
    const etch_tensor *xdt = xd->u.tensor;
    if (x->dim != 2 || xdt->dim != 2 || x->sizes[0] != xdt->sizes[0] ||
        x->sizes[1] != xdt->sizes[1] || (x->sizes[0] > 0 && x->strides[1] != 1) ||
        x->strides[0] < x->sizes[1] ||
        (exec && ((x->sizes[0] > 0 && !x->data) ||
                  !etch_opt_fast_tensor(xv, ETCH_DTYPE_FLOAT, false))))
        return 0;
    a->l.x = (const float *)x->data;
    a->l.ldx = x->sizes[0] > 0 ? x->strides[0] : a->l.K;
    return 3 + used;
}

size_t etch_opt_choose_qparams_per_token_asymmetric_chain(etch_kernel_context *ctx,
                                                          const etch_kernel_call *calls,
                                                          size_t n) {
    (void)ctx;
    act_run a;
    return act_run_of(calls, n, false, &a);
}

static void act_chain_run(etch_kernel_context *ctx) {
    etch_kernel_call calls[ETCH_CHAIN_MAX];
    size_t n;
    act_run a;
    if (!chain_calls(ctx, calls, &n) || act_run_of(calls, n, true, &a) != n) {
        etch_chain_run_each(ctx);
        return;
    }
    const int64_t M = a.l.M, K = a.l.K, N = a.w4 ? a.r4.w.N : a.w8.N;
    if (!tail_start(ctx, &a.l, N))
        return;
    float *y = (float *)a.l.y->data;
    if (a.w4) { /* int8 x int4 products (zero columns up to the padded width) */
        const int64_t Kp = a.r4.w.K;
        const float *x = a.l.x;
        int64_t ldx = a.l.ldx;
        void *work =
            etch_kernel_temp_try(ctx, etch_q4_linear_8da4w_f32_work_size(M, Kp, a.r4.w.G), 64);
        if (work && K < Kp) {
            float *xp = (float *)etch_kernel_temp_try(ctx, (size_t)(M * Kp) * sizeof(float), 64);
            if (xp)
                for (int64_t i = 0; i < M; i++) {
                    memcpy(xp + i * Kp, x + i * ldx, (size_t)K * sizeof(float));
                    memset(xp + i * Kp + K, 0, (size_t)(Kp - K) * sizeof(float));
                }
            work = xp ? work : NULL;
            x = xp;
            ldx = Kp;
        }
        if (!work) {
            etch_chain_run_each(ctx);
            return;
        }
        etch_q4_linear_8da4w_f32(ctx, &a.r4.w, M, x, ldx, a.l.bias, y, N, work);
    } else { /* the activations quantized and dequantized per token as the calls would, then
              * the int8-weight kernel */
        float *sc = (float *)etch_kernel_temp_try(ctx, (size_t)M * sizeof(float), 64);
        int32_t *zp = (int32_t *)etch_kernel_temp_try(ctx, (size_t)M * sizeof(int32_t), 64);
        int8_t *q = (int8_t *)etch_kernel_temp_try(ctx, (size_t)(M * K), 64);
        float *xd = (float *)etch_kernel_temp_try(ctx, (size_t)(M * K) * sizeof(float), 64);
        void *work = etch_kernel_temp_try(ctx, etch_q8w_linear_f32_work_size(M), 64);
        if (!sc || !zp || !q || !xd || !work) {
            etch_chain_run_each(ctx);
            return;
        }
        etch_q8_choose_qparams_per_token(a.l.x, M, K, a.l.ldx, sc, zp);
        etch_q8_quantize_per_token(a.l.x, M, K, a.l.ldx, sc, zp, q, K);
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                xd[i * K + k] = (float)(q[i * K + k] - zp[i]) * sc[i];
        etch_q8w_linear_f32(ctx, &a.w8, M, xd, K, a.l.bias, y, N, work);
    }
    etch_opt_apply_epilogue(a.l.epi, y, M * N);
}

ETCH_OPT_KERNEL(choose_qparams_per_token_asymmetric_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        act_chain_run(ctx);
        return;
    }
    etch_portable_choose_qparams_per_token_asymmetric_out(ctx, args, nargs);
}

/* Do a's and b's bytes (data, capacity) overlap? */
static bool bytes_overlap(const etch_tensor *a, const etch_tensor *b) {
    const uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    const uintptr_t a1 = a0 + (uintptr_t)a->capacity * etch_dtype_size(a->dtype);
    const uintptr_t b1 = b0 + (uintptr_t)b->capacity * etch_dtype_size(b->dtype);
    return a0 < b1 && b0 < a1;
}

/* An embedding_4bit call that is not chained (a gather, the token embedding): with the
 * prepared float scales (checked finite once, at load) the rows are dequantized as the
 * portable kernel does, bit for bit, without its per-call check of every scale. false: not
 * taken (no prepared data, indices out of range or sharing bytes with out, a non-contiguous
 * out): the portable kernel runs, and reports what is wrong. */
static bool q4l_gather(etch_kernel_context *ctx, etch_value **args, size_t nargs, size_t oi) {
    size_t psize = 0;
    const q4l_prep *h = (const q4l_prep *)etch_kernel_prepared(ctx, &psize);
    int64_t N, Kp, ng;
    if (!h || psize < Q4L_HEAD || h->magic != Q4L_MAGIC ||
        !shape_ok(args, nargs, oi, false, &N, &Kp, &ng) ||
        h->w != args[0]->u.tensor->data || h->s != args[1]->u.tensor->data || h->N != N ||
        h->Kp != Kp || h->ng != ng ||
        psize < Q4L_HEAD + (size_t)((h->has_z ? 2 : 1) * N * ng) * sizeof(float) ||
        h->has_z != (etch_chain_tensor_arg(args, nargs, 2) != NULL) ||
        (h->has_z && h->z != args[2]->u.tensor->data))
        return false;
    etch_tensor *ix = args[5]->u.tensor, *out = args[oi]->u.tensor;
    const int64_t ni = etch_tensor_numel(ix);
    if ((ni > 0 && !ix->data) || (ni > 0 && out->data && bytes_overlap(ix, out)))
        return false;
    for (int64_t i = 0; i < ni; i++) {
        const int64_t r = etch_q_int_at(ix, i);
        if (r < 0 || r >= N)
            return false;
    }
    int64_t osz[ETCH_MAX_DIMS];
    for (unsigned d = 0; d < ix->dim; d++)
        osz[d] = ix->sizes[d];
    osz[ix->dim] = Kp;
    if (etch_kernel_resize(ctx, out, ix->dim + 1u, osz) != ETCH_OK)
        return true; /* failed, reported */
    if (!etch_tensor_is_contiguous(out) || (ni > 0 && !out->data))
        return false;
    const float *sf = (const float *)((const char *)h + Q4L_HEAD);
    const float *zf = h->has_z ? sf + N * ng : NULL;
    const int64_t G = Kp / ng;
    const uint8_t *w = h->w;
    float *o = (float *)out->data;
    for (int64_t i = 0; i < ni; i++) {
        const int64_t r = etch_q_int_at(ix, i);
        const uint8_t *row = w + r * (Kp / 2);
        for (int64_t g = 0; g < ng; g++) {
            const float sc = sf[r * ng + g], zp = zf ? zf[r * ng + g] : 0.0f;
            for (int64_t j = g * G; j < (g + 1) * G; j += 2) {
                const uint8_t b = row[j / 2];
                o[i * Kp + j] = ((float)((b >> 4) - 8) - zp) * sc;
                o[i * Kp + j + 1] = ((float)((b & 15) - 8) - zp) * sc;
            }
        }
    }
    return true;
}

ETCH_OPT_KERNEL(embedding_4bit_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        q4l_chain_run(ctx);
        return;
    }
    if (!q4l_gather(ctx, args, nargs, 6))
        etch_portable_embedding_4bit_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(embedding_4bit_dtype_out) {
    if (etch_kernel_chain_length(ctx) > 1) {
        q4l_chain_run(ctx);
        return;
    }
    if (!q4l_gather(ctx, args, nargs, 7))
        etch_portable_embedding_4bit_dtype_out(ctx, args, nargs);
}
