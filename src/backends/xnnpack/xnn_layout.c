/*
 * Storage layouts of the graph's values (xnn_ops.h: xnn_layout_plan).
 *
 * XNNPACK's graphs are NHWC. etch's fastest convolutions (the register-tiled direct and
 * Winograd ones, the depthwise rows: kernels/optimized/conv_nchwc.h) read and write channel-
 * blocked planes instead, the layout the CPU path keeps between its convolutions. So an fp32
 * rank-4 intermediate with C % 8 == 0 is stored blocked when whatever writes it and everything
 * that reads it can work on it that way:
 *   - a convolution with groups 1 or a depthwise one (multiplier 1, C % 8 == 0), symmetric
 *     padding: writes blocked; reads any layout (converting an NHWC input first);
 *   - element-wise nodes (unary, or binary on same-shaped inputs), max / average pooling and
 *     concatenation over channels: blocked in and out, all of their inputs;
 *   - global average pooling and the transpose to NCHW read a blocked input directly.
 * The candidates are pruned to a fixed point. Then a convolution that reads a blocked value and
 * writes one that cannot be blocked writes NCHW (the blocked kernels' other output), and the
 * transpose NCHW -> NHWC in front of convolutions that write blocked values hands them its NCHW
 * input as it is. Any other node reading a value stored otherwise than NHWC gets an NHWC copy
 * in scratch (xnn_ops.c).
 */
#include <math.h>
#include <string.h>

#include "backends/xnnpack/xnn_ops.h"
#include "kernels/optimized/opt_conv.h"
#include "runtime/error.h"

#define XNN_FLAG_TENSORFLOW_SAME_PADDING 4u

static xnn_value *in_v(const xnn_graph *g, const xnn_node *n, uint32_t k) {
    return k < n->nin && n->in[k] != XNN_INVALID_ID ? &g->values[n->in[k]] : NULL;
}

static bool f32_4d(const xnn_value *v) { return v && v->dtype == XDT_FP32 && v->rank == 4; }

static bool intermediate(const xnn_value *v) {
    return !v->is_constant && !(v->flags & (XNN_FLAG_EXTERNAL_INPUT | XNN_FLAG_EXTERNAL_OUTPUT));
}

static bool unary_kind(int k) {
    switch (k) {
    case XN_CLAMP: case XN_SIGMOID: case XN_FLOOR: case XN_CEILING: case XN_SQRT:
    case XN_RSQRT: case XN_LOG: case XN_ABS: case XN_NEGATE: case XN_SQUARE: case XN_GELU:
    case XN_TANH: case XN_EXP: case XN_SIN:
    case XN_HARDSWISH: case XN_LEAKY_RELU: case XN_ELU:
        return true;
    default:
        return false;
    }
}

static bool binary_kind(int k) {
    return k == XN_ADD || k == XN_SUBTRACT || k == XN_MULTIPLY || k == XN_DIV ||
           k == XN_MINIMUM || k == XN_MAXIMUM;
}

static bool concat_kind(int k) {
    return k == XN_CONCAT2 || k == XN_CONCAT3 || k == XN_CONCAT4 || k == XN_CONCAT5;
}

/* A float filter / bias operand the blocked kernels can read (fp32 data, or its float copy). */
static bool float_operand(const xnn_value *v, const float *copy) {
    return !v || copy || (v->dtype == XDT_FP32 && ((uintptr_t)v->constant & 3) == 0);
}

/* Whether convolution node n fits the blocked kernels (layouts aside). */
static bool conv_cap(const xnn_graph *g, const xnn_node *n) {
    if (n->kind != XN_CONV2D && n->kind != XN_DEPTHWISE_CONV2D)
        return false;
    const xnn_value *x = in_v(g, n, 0), *w = in_v(g, n, 1), *o = &g->values[n->out[0]];
    if (!f32_4d(x) || !f32_4d(o) || n->nout != 1 || !w || !w->is_constant ||
        !float_operand(w, n->wf) || !float_operand(in_v(g, n, 2), n->bf) ||
        (n->flags & XNN_FLAG_TENSORFLOW_SAME_PADDING) || n->pad[0] != n->pad[2] ||
        n->pad[1] != n->pad[3] || x->dims[0] < 1 || o->dims[1] < 1 || o->dims[2] < 1)
        return false;
    if (n->kind == XN_DEPTHWISE_CONV2D)
        return n->goc == 1 && n->gic == 1 && n->groups % 8 == 0 && x->dims[3] == n->groups;
    return n->groups == 1 && (x->dims[3] % 8 == 0 || o->dims[3] % 8 == 0);
}

bool xnn_layout_tied(const xnn_graph *g, const xnn_node *n) {
    if (n->nout != 1 || n->nin < 1)
        return false;
    const xnn_value *o = &g->values[n->out[0]], *x = in_v(g, n, 0);
    if (!f32_4d(o) || !f32_4d(x) || o->dims[3] % 8)
        return false;
    if (unary_kind(n->kind))
        return xnn_same_dims(x, o);
    if (binary_kind(n->kind)) {
        const xnn_value *y = in_v(g, n, 1);
        return y && f32_4d(y) && xnn_same_dims(x, o) && xnn_same_dims(y, o);
    }
    if (n->kind == XN_MAX_POOL || n->kind == XN_AVG_POOL)
        return !(n->flags & XNN_FLAG_TENSORFLOW_SAME_PADDING) && x->dims[3] == o->dims[3];
    if (concat_kind(n->kind)) {
        if (n->axis != 3)
            return false;
        for (uint32_t k = 0; k < n->nin; k++) {
            const xnn_value *v = in_v(g, n, k);
            if (!f32_4d(v) || v->dims[3] % 8)
                return false;
        }
        return true;
    }
    return false;
}

/* Whether n reads a blocked input 0 as it is while writing an ordinary tensor. */
static bool reads_blocked(const xnn_graph *g, const xnn_node *n) {
    const xnn_value *x = in_v(g, n, 0);
    if (!f32_4d(x) || n->nout != 1 || g->values[n->out[0]].dtype != XDT_FP32)
        return false;
    if (n->kind == XN_GLOBAL_AVG_POOL)
        return true;
    return n->kind == XN_STATIC_TRANSPOSE && n->perm[0] == 0 && n->perm[1] == 3 &&
           n->perm[2] == 1 && n->perm[3] == 2;
}

/* The transpose NCHW -> NHWC (perm 0, 2, 3, 1) of an fp32 rank-4 tensor. */
static bool to_nhwc(const xnn_graph *g, const xnn_node *n) {
    return n->kind == XN_STATIC_TRANSPOSE && f32_4d(in_v(g, n, 0)) && n->nout == 1 &&
           n->perm[0] == 0 && n->perm[1] == 2 && n->perm[2] == 3 && n->perm[3] == 1;
}

static size_t conv_prep_bytes(const xnn_graph *g, const xnn_node *n, void *buf, size_t cap,
                              bool *wino) {
    conv_shape s;
    xnn_layout_conv_shape(g, n, &s);
    const xnn_value *w = in_v(g, n, 1);
    const float *wd = n->wf ? n->wf : (const float *)(const void *)w->constant;
    /* OHWI filter [O, KH, KW, I]; depthwise [1, KH, KW, C] */
    const int64_t K = (int64_t)n->kh * n->kw;
    const int64_t conv_ws[3] = {K * s.C_in, 1, s.C_in}, dw_ws[3] = {1, 0, s.C_out};
    return etch_opt_conv_prepare_blocked(NULL, &s, wd, n->kind == XN_CONV2D ? conv_ws : dw_ws,
                                         wino, buf, cap);
}

void xnn_layout_conv_shape(const xnn_graph *g, const xnn_node *n, conv_shape *s) {
    const xnn_value *x = in_v(g, n, 0), *o = &g->values[n->out[0]];
    memset(s, 0, sizeof *s);
    s->N = x->dims[0];
    s->IH = x->dims[1], s->IW = x->dims[2], s->C_in = x->dims[3];
    s->OH = o->dims[1], s->OW = o->dims[2], s->C_out = o->dims[3];
    s->groups = n->kind == XN_DEPTHWISE_CONV2D ? s->C_in : 1;
    s->cin_g = s->C_in / s->groups;
    s->cout_g = s->C_out / s->groups;
    s->KH = n->kh, s->KW = n->kw, s->sh = n->sh, s->sw = n->sw, s->dh = n->dh, s->dw = n->dw;
    s->ph = n->pad[0], s->pw = n->pad[3];
    s->prep = n->prep;
}

/* Whether n applies its output range itself (the clamp of a fused Clamp node). */
static bool clamps_output(const xnn_node *n) {
    switch (n->kind) {
    case XN_FULLY_CONNECTED: case XN_CONV2D: case XN_DEPTHWISE_CONV2D: case XN_ADD:
    case XN_SUBTRACT: case XN_MULTIPLY: case XN_DIV: case XN_MINIMUM: case XN_MAXIMUM:
        return true;
    default:
        return false;
    }
}

/* How many node inputs read each value (NULL: the pool is short). */
static uint32_t *count_uses(const xnn_graph *g, xnn_alloc *a) {
    uint32_t *uses = (uint32_t *)xnn_alloc_bytes(a, sizeof(uint32_t) * (g->nvalues + 1), 4);
    if (!uses)
        return NULL;
    memset(uses, 0, sizeof(uint32_t) * g->nvalues);
    for (uint32_t i = 0; i < g->nnodes; i++)
        for (uint32_t k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] != XNN_INVALID_ID)
                uses[g->nodes[i].in[k]]++;
    return uses;
}

/* After the layouts: a reshape of a float intermediate to another (same storage order) shares
 * its storage instead of copying it; a Clamp whose input has no other reader and comes from a
 * node that clamps its own output moves its range onto that node and shares its storage. */
static etch_status fuse_plan(xnn_graph *g, xnn_alloc *a) {
    uint32_t *uses = count_uses(g, a);
    if (!uses)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: method pool too small");
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if ((n->kind != XN_STATIC_RESHAPE && n->kind != XN_CLAMP) || n->nin < 1 || n->nout != 1)
            continue;
        xnn_value *x = in_v(g, n, 0), *o = &g->values[n->out[0]];
        if (!x || x->producer < 0 || !intermediate(x) || !intermediate(o) ||
            x->dtype != o->dtype || (x->dtype != XDT_FP32 && x->dtype != XDT_FP16) ||
            x->layout != o->layout)
            continue;
        if (n->kind == XN_STATIC_RESHAPE) {
            if (x->layout != XL_NHWC || n->out_min > -INFINITY || n->out_max < INFINITY)
                continue;
        } else {
            /* through reshapes that share their input's storage, each the only reader */
            xnn_node *p = &g->nodes[x->producer];
            while (p->kind == XN_STATIC_RESHAPE && g->values[p->out[0]].alias_of >= 0 &&
                   uses[p->out[0]] == 1 && g->values[p->in[0]].producer >= 0)
                p = &g->nodes[g->values[p->in[0]].producer];
            if (uses[n->in[0]] != 1 || !clamps_output(p) || p->nout != 1 ||
                x->dtype != XDT_FP32 || n->out_min > p->out_max || p->out_min > n->out_max)
                continue; /* (disjoint ranges stay two clamps) */
            if (n->out_min > p->out_min)
                p->out_min = n->out_min;
            if (n->out_max < p->out_max)
                p->out_max = n->out_max;
            n->out_min = -INFINITY, n->out_max = INFINITY;
        }
        o->alias_of = (int32_t)n->in[0];
    }
    return ETCH_OK;
}

/* The activation of node n's output range (none: act NONE). */
static etch_epilogue range_epi(const xnn_node *n) {
    etch_epilogue e;
    memset(&e, 0, sizeof e);
    e.act = n->out_min > -INFINITY || n->out_max < INFINITY ? ETCH_ACT_CLAMP : ETCH_ACT_NONE;
    e.lo = n->out_min;
    e.hi = n->out_max;
    return e;
}

static bool only_reader(const xnn_graph *g, const uint32_t *uses, uint32_t v, const xnn_node *r) {
    return uses[v] == 1 && r->nin >= 1 && r->in[0] == v && intermediate(&g->values[v]);
}

void xnn_layout_block(const xnn_graph *g, const xnn_node *last, etch_conv_block *b) {
    memset(b, 0, sizeof *b);
    const xnn_node *n0 = &g->nodes[last->block_first];
    uint32_t nconv = last->block_len;
    const xnn_node *add = NULL;
    if (g->nodes[last->block_first + nconv - 1].kind == XN_ADD)
        add = &g->nodes[last->block_first + --nconv];
    b->has_e = nconv == 3;
    for (uint32_t k = 0; k < nconv; k++) {
        const xnn_node *n = n0 + k;
        conv_shape *s = &b->s[b->has_e ? k : k + 1];
        xnn_layout_conv_shape(g, n, s);
        s->epi = n->epi.act != ETCH_ACT_NONE ? &n->epi : NULL;
        const xnn_value *bias = in_v((xnn_graph *)g, n, 2);
        s->bias = n->bf ? n->bf : bias ? (const float *)(const void *)bias->data : NULL;
        s->in = (const float *)(const void *)g->values[n->in[0]].data;
        s->out = (float *)(void *)g->values[n->out[0]].data;
    }
    if (add) {
        const uint32_t y = n0[nconv - 1].out[0];
        b->y_first = add->in[0] == y;
        b->add_r = (const float *)(const void *)g->values[add->in[b->y_first ? 1 : 0]].data;
        b->add_z = (float *)(void *)g->values[add->out[0]].data;
        b->add_epi = add->epi.act != ETCH_ACT_NONE ? &add->epi : NULL;
    }
}

/* Consecutive blocked nodes 1x1 (or a stem reading NCHW) -> depthwise 3x3 -> 1x1 [-> Add of
 * that result and another blocked value], each intermediate read only by the next, run as
 * one block (etch_opt_conv_block_run: the CPU path's chained calls), at the last node. */
static etch_status block_plan(xnn_graph *g, xnn_alloc *a) {
    uint32_t *uses = count_uses(g, a);
    if (!uses)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: method pool too small");
    for (uint32_t i = 0; i < g->nnodes; i++)
        g->nodes[i].epi = range_epi(&g->nodes[i]);
    for (uint32_t i = 0; i + 1 < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if (!n->blk || n->in_block)
            continue;
        /* expand / stem, depthwise, project: three convolutions from i, else two */
        uint32_t nconv = 0;
        for (uint32_t want = 3; want >= 2 && !nconv; want--) {
            if (i + want > g->nnodes)
                continue;
            const xnn_node *c = &g->nodes[i];
            bool ok = true;
            static const int k3[3] = {XN_CONV2D, XN_DEPTHWISE_CONV2D, XN_CONV2D};
            static const int k2[2] = {XN_DEPTHWISE_CONV2D, XN_CONV2D};
            const int *kinds = want == 3 ? k3 : k2;
            for (uint32_t k = 0; k < want && ok; k++) {
                const xnn_node *m = c + k;
                ok = m->blk && !m->wino && m->kind == kinds[k] &&
                     g->values[m->out[0]].layout == XL_BLK;
                if (ok && k + 1 < want)
                    ok = only_reader(g, uses, m->out[0], m + 1);
            }
            const xnn_value *x = ok ? &g->values[c->in[0]] : NULL;
            if (ok && !(x->layout == XL_BLK || (want == 3 && x->layout == XL_NCHW)))
                ok = false;
            if (ok)
                nconv = want;
        }
        if (!nconv)
            continue;
        uint32_t len = nconv;
        const xnn_node *p = &g->nodes[i + nconv - 1];
        if (i + nconv < g->nnodes) { /* a residual add of the project's result */
            const xnn_node *d = &g->nodes[i + nconv];
            const uint32_t y = p->out[0];
            if (d->kind == XN_ADD && d->nin == 2 && g->values[d->out[0]].layout == XL_BLK &&
                uses[y] == 1 && intermediate(&g->values[y]) &&
                (d->in[0] == y) != (d->in[1] == y) &&
                g->values[d->in[d->in[0] == y ? 1 : 0]].layout == XL_BLK)
                len++;
        }
        xnn_node *last = &g->nodes[i + len - 1];
        if (!a->measure) { /* (measuring: the packed weights are not there to check; every
                              candidate then counts, which only lengthens lifetimes) */
            last->block_first = i;
            last->block_len = len;
            etch_conv_block b;
            xnn_layout_block(g, last, &b);
            bool stem;
            if (!etch_opt_conv_block_ok(&b, &stem) ||
                stem != (g->values[n->in[0]].layout == XL_NCHW)) {
                last->block_len = 0;
                continue;
            }
            for (uint32_t k = 0; k + 1 < len; k++)
                g->nodes[i + k].in_block = true;
        }
        /* the block reads its input up to its last node, which may write its result over
         * storage the plan would otherwise hand on */
        xnn_value *x = &g->values[n->in[0]];
        if (x->last_use < (int32_t)(i + len - 1))
            x->last_use = (int32_t)(i + len - 1);
        i += len - 1;
    }
    return ETCH_OK;
}

etch_status xnn_layout_plan(xnn_graph *g, xnn_alloc *a) {
    /* candidates, then pruned to a fixed point (each pass only removes) */
    uint8_t *cand = (uint8_t *)xnn_alloc_bytes(a, g->nvalues ? g->nvalues : 1, 1);
    if (!cand)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: method pool too small");
    memset(cand, 0, g->nvalues);
    for (uint32_t i = 0; i < g->nnodes; i++) {
        const xnn_node *n = &g->nodes[i];
        if (n->nout != 1)
            continue;
        const xnn_value *o = &g->values[n->out[0]];
        if (f32_4d(o) && intermediate(o) && o->dims[3] % 8 == 0 && o->producer == (int32_t)i &&
            (conv_cap(g, n) || xnn_layout_tied(g, n)))
            cand[n->out[0]] = 1;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < g->nnodes; i++) {
            const xnn_node *n = &g->nodes[i];
            const bool tied = xnn_layout_tied(g, n);
            const uint32_t out = n->nout == 1 ? n->out[0] : XNN_INVALID_ID;
            if (tied && cand[out])
                for (uint32_t k = 0; k < n->nin; k++)
                    if (n->in[k] != XNN_INVALID_ID && !cand[n->in[k]]) {
                        cand[out] = 0, changed = true;
                        break;
                    }
            for (uint32_t k = 0; k < n->nin; k++) {
                uint32_t v = n->in[k];
                if (v == XNN_INVALID_ID || !cand[v])
                    continue;
                bool ok = (k == 0 && conv_cap(g, n)) || (tied && cand[out]) ||
                          (k == 0 && reads_blocked(g, n));
                if (!ok)
                    cand[v] = 0, changed = true;
            }
        }
    }
    for (uint32_t v = 0; v < g->nvalues; v++)
        g->values[v].layout = cand[v] ? XL_BLK : XL_NHWC;
    /* convolutions from a blocked value to one that is not: NCHW out; their weights; then the
     * transposes NCHW -> NHWC whose every reader is a (direct) convolution writing a blocked
     * value */
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if (!conv_cap(g, n))
            continue;
        xnn_value *x = in_v(g, n, 0), *o = &g->values[n->out[0]];
        if (n->kind == XN_CONV2D && x->layout == XL_BLK && o->layout == XL_NHWC &&
            intermediate(o))
            o->layout = XL_NCHW;
        n->blk = o->layout == XL_BLK || (x->layout == XL_BLK && o->layout == XL_NCHW);
    }
    /* weights of the blocked convolutions */
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        if (!n->blk)
            continue;
        bool wino = false;
        size_t bytes = conv_prep_bytes(g, n, NULL, 0, &wino);
        if (!bytes) { /* cannot be packed (too large): the NHWC path */
            n->blk = false;
            xnn_value *o = &g->values[n->out[0]];
            if (o->layout == XL_NCHW)
                o->layout = XL_NHWC;
            if (o->layout == XL_BLK)
                return etch_err(ETCH_ERR_NOT_SUPPORTED, "XnnpackBackend: node %u (%s): filter "
                                "too large for the channel-blocked kernels", n->index,
                                xnn_node_kind_name(n->kind));
            continue;
        }
        n->prep = xnn_alloc_bulk(a, bytes, 64);
        if (!n->prep)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                            "XnnpackBackend: method pool too small for node %u's packed filter",
                            n->index);
        if (!a->measure && !conv_prep_bytes(g, n, n->prep, bytes, &wino))
            return etch_err(ETCH_ERR_INTERNAL, "XnnpackBackend: node %u: packing its filter "
                            "failed", n->index);
        n->wino = wino;
    }
    for (uint32_t i = 0; i < g->nnodes; i++) {
        const xnn_node *t = &g->nodes[i];
        if (!to_nhwc(g, t))
            continue;
        xnn_value *o = &g->values[t->out[0]];
        if (!intermediate(o) || o->layout != XL_NHWC)
            continue;
        bool all = true, any = false;
        for (uint32_t j = i + 1; j < g->nnodes && all; j++) {
            const xnn_node *c = &g->nodes[j];
            for (uint32_t k = 0; k < c->nin; k++)
                if (c->in[k] == t->out[0]) {
                    any = true;
                    if (k != 0 || c->kind != XN_CONV2D || !c->blk || c->wino ||
                        g->values[c->out[0]].layout != XL_BLK)
                        all = false;
                }
        }
        if (all && any)
            o->layout = XL_NCHW;
    }
    etch_status st = fuse_plan(g, a);
    return st ? st : block_plan(g, a);
}

int xnn_layout_wanted(const xnn_graph *g, const xnn_node *n, uint32_t k) {
    const xnn_value *v = in_v(g, n, k);
    if (!v || !f32_4d(v))
        return XL_NHWC;
    if (n->blk) {
        if (k != 0)
            return XL_NHWC;
        if (n->kind == XN_DEPTHWISE_CONV2D || n->wino || v->layout == XL_BLK)
            return XL_BLK;
        return v->layout == XL_NCHW || v->dims[3] % 8 ? XL_NCHW : XL_BLK;
    }
    if (n->nout == 1 && g->values[n->out[0]].layout == XL_BLK)
        return XL_BLK; /* tied */
    if (k == 0 && v->layout == XL_BLK && reads_blocked(g, n))
        return XL_BLK;
    if (k == 0 && v->layout == XL_NCHW && n->kind == XN_STATIC_TRANSPOSE && reads_blocked(g, n))
        return XL_NCHW;
    return XL_NHWC;
}
