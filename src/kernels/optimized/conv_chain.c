/*
 * Inverted-residual blocks run as one call (etch/kernel.h, "chained calls"): a 1x1
 * convolution ("expand", optional), a depthwise 3x3 convolution on its result and a 1x1
 * convolution on that ("project"), every tensor channel-blocked. Run one by one, each call
 * writes its whole result and the next reads it back: mobilenet_v2's first expand writes
 * 112x112x96 floats (4.8 MB) that the depthwise convolution then reads, through the shared
 * last-level cache or memory. Chained, the output rows are cut into steps of a few rows, and
 * a step computes the expand's rows that its depthwise rows need, the depthwise rows, then the
 * project's rows, so the two intermediates live only in a per-thread scratch of a few rows
 * that stays in L2. Each thread runs a band of consecutive steps, keeping the expand's rows
 * one step shares with the next; a thread that finishes its band early takes over steps from
 * the end of another's (etch_kernel_parallel_for_thread), computing their rows anew, so a
 * thread slowed down (a busy core) is not waited for.
 *
 * Each stage calls the same register tile (conv_nchwc.h) or depthwise row function (nchwc.h)
 * with the same weights as the unchained call, and every value they compute depends only on
 * its inputs: results are bitwise those of the calls run one by one (the tests check it).
 * The intermediates' own tensors are left unwritten. Without scratch for the steps the calls
 * run one by one (etch_kernel_chain_run).
 *
 * The first call may also be a network's first convolution (a "stem": mobilenet_v2's 3x3
 * stride-2 convolution of the image, whose 112x112x32 result the depthwise convolution reads
 * back): its input is an NCHW image of at most 8 channels, which the run copies once per image,
 * padded and interleaved as [H][W][C_in] (etch_nchwc_copy_interleaved, what the unchained call
 * reads too), and its rows come from the same register tiles over that copy.
 *
 * Taken at load when (etch_opt_convolution_chain): every call is this kernel's; expand and
 * project are 1x1, stride 1, no padding, groups 1, with their NCHWc pack prepared (a stem: any
 * kernel, stride and padding, dilation 1 across, its NCHWc pack prepared); the
 * depthwise one is 3x3, stride 1 or 2 (both ways), padding 1, dilation 1, on the expand's
 * channels; channels multiples of 8 (a stem's input: up to 8 channels, NCHW), every other
 * tensor blocked; activations none, relu or clamp
 * (those the tiles apply in registers); and the intermediate is large against the weights
 * (CHAIN_MIN_RATIO): in a block whose weights outweigh its activations (mobilenet_v2's last
 * ones) every thread would read every weight where the unchained calls split them.
 *
 * A residual add after the block (mobilenet_v2's y = x + block(x)) joins the run when it is
 * add.out with alpha 1 of the last 1x1's result and a tensor of the same layout, all blocked
 * (add_of): each step then writes the add's result over its rows (the sum, then the add's fused
 * activation, through the add kernel's own vector functions), and the 1x1's result is left
 * unwritten like the other intermediates.
 */
#include <string.h>

#include "kernels/optimized/chain_util.h"
#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/eltwise_util.h"
#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/nchwc.h"

/* Chain a block only when its intermediate (the expand's result, or the depthwise one's
 * without an expand) has at least this many times the bytes of the packed 1x1 weights. */
#define CHAIN_MIN_RATIO 2
/* Floats of a stem's padded image copy, below: the limit of the unchained call's copy
 * (conv_nchwc.c), so that both read the image the same way */
#define STEM_MAX_COPY 0x1p36
/* Output pixels of the project per step (whole rows: at least this many when the image is
 * wide enough) */
#define CHAIN_MIN_PIXELS 48

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

static bool blocked_io(const etch_kernel_call *c) {
    const uint64_t io = 1u | (1u << 9);
    return (c->blocked & io) == io;
}

/* A 1x1 stride-1 convolution the band loop can run (its tensors blocked): its NCHWc pack
 * prepared. */
static bool pointwise_shape_ok(const conv_shape *s) {
    bool act;
    float lo, hi;
    return s->groups == 1 && s->KH == 1 && s->KW == 1 && s->sh == 1 && s->sw == 1 &&
           s->ph == 0 && s->pw == 0 && s->C_in % 8 == 0 && s->C_out % 8 == 0 &&
           etch_opt_conv_prep_nchwc(s) && etch_nchwc_tile_act(s->epi, &act, &lo, &hi);
}

static bool pointwise_ok(const etch_kernel_call *c, const conv_shape *s) {
    return blocked_io(c) && pointwise_shape_ok(s);
}

/* A depthwise 3x3 (stride 1 or 2 both ways, padding 1, dilation 1) on blocked tensors. */
static bool depthwise_shape_ok(const conv_shape *s) {
    bool act;
    float lo, hi;
    return s->groups == s->C_in && s->C_out == s->C_in && s->cin_g == 1 &&
           s->C_in % 8 == 0 && s->KH == 3 && s->KW == 3 && s->sh == s->sw &&
           (s->sh == 1 || s->sh == 2) && s->ph == 1 && s->pw == 1 && s->dh == 1 &&
           s->dw == 1 && etch_nchwc_tile_act(s->epi, &act, &lo, &hi);
}

static bool depthwise_ok(const etch_kernel_call *c, const conv_shape *s) {
    return blocked_io(c) && depthwise_shape_ok(s);
}

/* A network's first convolution as the block's first call (the "stem"): an NCHW input of at
 * most 8 channels (an image), any kernel, stride and padding, dilation 1 across, groups 1, a
 * blocked output, its NCHWc pack prepared: the blocked convolution's interleaved path, whose
 * windows read one run of KW * C_in lanes per row of a padded copy of the image. */
static bool stem_shape_ok(const conv_shape *s) {
    bool act;
    float lo, hi;
    /* the padded copy: as large as the unchained call would make it at most */
    const double copy = (double)s->C_in * (double)(s->IH + 2 * s->ph) * (double)(s->IW + 2 * s->pw);
    return s->groups == 1 && s->C_in <= 8 && s->C_out % 8 == 0 && s->dw == 1 &&
           copy < STEM_MAX_COPY && etch_opt_conv_prep_nchwc(s) &&
           etch_nchwc_tile_act(s->epi, &act, &lo, &hi);
}

static bool stem_ok(const etch_kernel_call *c, const conv_shape *s) {
    return !(c->blocked & 1u) && ((c->blocked >> 9) & 1u) && stem_shape_ok(s);
}

/* Does convolution call q read (as its input) the tensor convolution call p writes? The
 * runtime's chain rule leaves the dataflow of a run to the chain function. */
static bool feeds(const etch_kernel_call *p, const etch_kernel_call *q) {
    return p->nargs >= 10 && q->nargs >= 10 && p->args[9] && q->args[0] &&
           p->args[9]->tag == ETCH_VALUE_TENSOR && q->args[0]->tag == ETCH_VALUE_TENSOR &&
           p->args[9]->u.tensor == q->args[0]->u.tensor;
}

/* The block of calls[0..n) the band loop runs: 3 (expand or stem, depthwise, project), 2
 * (depthwise, project) or 0; shapes in s[3] (s[0] unused without an expand). */
static size_t block_of(const etch_kernel_call *calls, size_t n, conv_shape s[3]) {
    if (n < 2 || calls[0].kernel->fn != etch_opt_convolution_out ||
        calls[1].kernel->fn != etch_opt_convolution_out)
        return 0;
    conv_shape a, b;
    if (!etch_opt_conv_call_shape(&calls[0], &a) || !etch_opt_conv_call_shape(&calls[1], &b))
        return 0;
    if (!feeds(&calls[0], &calls[1]))
        return 0;
    if (depthwise_ok(&calls[0], &a) && pointwise_ok(&calls[1], &b) && a.C_out == b.C_in &&
        a.N == b.N && a.OH == b.IH && a.OW == b.IW) {
        s[1] = a;
        s[2] = b;
        return 2;
    }
    conv_shape c;
    if (n < 3 || calls[2].kernel->fn != etch_opt_convolution_out || !feeds(&calls[1], &calls[2]) ||
        !(pointwise_ok(&calls[0], &a) || stem_ok(&calls[0], &a)) ||
        !depthwise_ok(&calls[1], &b) ||
        !etch_opt_conv_call_shape(&calls[2], &c) || !pointwise_ok(&calls[2], &c) ||
        a.C_out != b.C_in || b.C_out != c.C_in || a.N != b.N || b.N != c.N || a.OH != b.IH ||
        a.OW != b.IW || b.OH != c.IH || b.OW != c.IW)
        return 0;
    s[0] = a;
    s[1] = b;
    s[2] = c;
    return 3;
}

/* A residual add after the block's last 1x1 (call c; p: that 1x1's shape): add.out of the 1x1's
 * result y and another tensor r of its layout, alpha 1, Float, all three channel-blocked. The
 * block then writes out = y + r (or r + y, the add's operand order) step by step into the add's
 * result, with the add's fused activation, if any, after it, through the same vector function
 * the add kernel uses: bitwise the add's result. y itself is left unwritten. */
typedef struct chain_add {
    const float *r;
    float *z;     /* the add's result */
    bool y_first; /* y is the add's self (first operand) */
    const etch_epilogue *epi;
} chain_add;

static bool add_of(const etch_kernel_call *c, const conv_shape *p, chain_add *out) {
    const uint64_t io = 1u | 2u | 8u; /* self, other, out */
    if (c->kernel->fn != etch_opt_add_out || c->nargs < 4 || (c->blocked & io) != io)
        return false;
    etch_tensor *a = etch_ew_float(c->args[0]), *b = etch_ew_float(c->args[1]);
    etch_tensor *z = etch_ew_float(c->args[3]);
    float alpha = 0.0f;
    if (!a || !b || !z || !c->args[2] || c->args[2]->tag == ETCH_VALUE_BOOL ||
        !etch_ew_scalar_f(c->args[2], &alpha) || alpha != 1.0f)
        return false;
    const bool y_first = a->data == (void *)p->out;
    etch_tensor *y = y_first ? a : b, *r = y_first ? b : a;
    if (y->data != (void *)p->out || r->data == (void *)p->out || y->dim != 4 ||
        y->sizes[0] != p->N || y->sizes[1] != p->C_out || y->sizes[2] != p->OH ||
        y->sizes[3] != p->OW || !etch_ew_same_layout(y, r) || !etch_ew_same_layout(y, z))
        return false;
    out->r = (const float *)r->data;
    out->z = (float *)z->data;
    out->y_first = y_first;
    out->epi = c->epilogue;
    return true;
}

/* The calls of calls[0..n) the band loop runs: the block (block_of), then a residual add
 * (add_of) when one follows; 0 for none. */
static size_t run_of(const etch_kernel_call *calls, size_t n, conv_shape s[3], chain_add *add,
                     bool *has_add) {
    const size_t got = block_of(calls, n, s);
    const etch_kernel_call *a = got && n > got ? &calls[got] : NULL;
    const etch_tensor *y = got ? calls[got - 1].args[9]->u.tensor : NULL;
    /* the add reads the block's result (the value itself, not just its bytes) */
    *has_add = a && a->nargs >= 4 && a->args[0] && a->args[1] &&
               ((a->args[0]->tag == ETCH_VALUE_TENSOR && a->args[0]->u.tensor == y) ||
                (a->args[1]->tag == ETCH_VALUE_TENSOR && a->args[1]->u.tensor == y)) &&
               add_of(a, &s[2], add);
    return got + (*has_add ? 1 : 0);
}

/* The intermediate written and read back, against the weights every thread would read. */
static bool worth_chaining(const conv_shape s[3], bool has_e) {
    const conv_shape *d = &s[1], *p = &s[2];
    const double mid = has_e ? (double)d->N * (double)d->C_in * (double)(d->IH * d->IW)
                             : (double)d->N * (double)d->C_out * (double)(d->OH * d->OW);
    double weights = (double)p->C_in * (double)p->C_out;
    if (has_e)
        weights += (double)s[0].C_in * (double)s[0].C_out * (double)(s[0].KH * s[0].KW);
    return mid >= CHAIN_MIN_RATIO * weights;
}

size_t etch_opt_convolution_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                  size_t n) {
    (void)ctx;
    conv_shape s[3];
    chain_add add;
    bool has_add;
    const size_t all = run_of(calls, n, s, &add, &has_add);
    const size_t got = all - (has_add ? 1 : 0); /* the convolutions */
    if (!all)
        return 0;
    return worth_chaining(s, got == 3) ? all : 0;
}

/* ---- the band loop ---------------------------------------------------------------------- */

typedef struct chain_job {
    conv_shape e, d, p; /* e only with has_e */
    bool has_e;
    const float *we, *wp; /* the 1x1 calls' NCHWc packs */
    const float *wd;      /* the depthwise call's pack, or NULL */
    bool e_act, p_act;
    float e_lo, e_hi, p_lo, p_hi;
    int d_act; /* 0, 1 relu, 2 clamp (the depthwise rows' encoding) */
    float d_lo, d_hi;
    nchwc_tile_fn fn;
    bool fn_reps;
    const nchwc_rows *rows;
    int64_t G;        /* depthwise output rows per step, at most */
    int64_t R;        /* rows of the expand's band buffer: (G - 1) * stride + 3 */
    int64_t bands;    /* bands of rows per image, as even as rows allow: one per thread */
    int64_t spb;      /* steps per band, each of at most G rows, as even as rows allow */
    int64_t steps;    /* steps per image (bands * spb): the parallel items */
    int64_t n0;       /* the image of step 0 */
    bool stem;        /* e reads an image through copy (stem_ok) */
    const float *copy; /* image n0's padded copy, [Hp][Wp][C_in] */
    int64_t Wp;
    float *scratch;   /* per thread: the expand's rows, then the depthwise rows */
    int64_t worker_floats;
    struct chain_ring *ring; /* per thread: what its scratch holds */
    bool has_add;            /* a residual add follows (add_of): the steps write its result */
    chain_add add;
    const etch_opt_vec *vec; /* the add's vector functions */
} chain_job;

/* What a thread's expand rows hold after its last step: the rows up to `have` of image n,
 * whose next step would be the one from depthwise row `next` (n -1: nothing). A step that
 * continues it computes only the rows not there yet; any other one computes its rows anew.
 * One cache line per thread. */
typedef struct chain_ring {
    _Alignas(64) int64_t n, next, have;
} chain_ring;

/* 1x1 convolution over n consecutive pixels of blocked planes (in: its first pixel of block 0,
 * planes in_ps floats apart) into out (likewise, out_ps), every output channel tile. */
static void pointwise(const chain_job *j, const conv_shape *s, const float *pack, bool act,
                      float lo, float hi, const float *in, int64_t in_ps, int64_t n, float *out,
                      int64_t out_ps) {
    const int64_t Cp = s->C_out, nt = (Cp + NCHWC_OCT - 1) / NCHWC_OCT;
    for (int64_t t = 0; t < nt; t++) {
        const int64_t oct = imin(NCHWC_OCT, Cp - t * NCHWC_OCT);
        float bias[NCHWC_OCT];
        for (int64_t c = 0; c < NCHWC_OCT; c++)
            bias[c] = s->bias && c < oct ? s->bias[t * NCHWC_OCT + c] : 0.0f;
        nchwc_tile tt;
        etch_nchwc_tile_1x1(&tt, in_ps, s->C_in, oct, out_ps);
        tt.act = act;
        tt.lo = lo;
        tt.hi = hi;
        tt.w = pack + t * NCHWC_OCT * s->C_in;
        tt.bias = bias;
        etch_nchwc_tile_pixels(j->fn, j->fn_reps, &tt, in, 8, out + t * 2 * out_ps, n, NULL);
    }
}

/* The stem's output rows [r0, r1) (every channel tile) from the padded copy of the image, row r
 * at out + (r - r0) * OW * 8, planes out_ps floats apart: the tiles the unchained call runs
 * (conv_nchwc.c's interleaved path), over one row at a time. */
static void stem_rows(const chain_job *j, int64_t r0, int64_t r1, float *out, int64_t out_ps) {
    const conv_shape *s = &j->e;
    const int64_t KK = s->KH * s->KW, Ci = s->C_in, nt = (s->C_out + NCHWC_OCT - 1) / NCHWC_OCT;
    for (int64_t t = 0; t < nt; t++) {
        const int64_t oct = imin(NCHWC_OCT, s->C_out - t * NCHWC_OCT);
        float bias[NCHWC_OCT];
        for (int64_t c = 0; c < NCHWC_OCT; c++)
            bias[c] = s->bias && c < oct ? s->bias[t * NCHWC_OCT + c] : 0.0f;
        nchwc_tile tt;
        memset(&tt, 0, sizeof tt);
        tt.ls = 1;
        tt.khs = s->dh * j->Wp * Ci;
        tt.nb = 1;
        tt.b1 = 1;
        tt.cb_last = (int)(s->KW * Ci); /* one run of lanes per window row */
        tt.KW = 1;
        tt.nkh = s->KH;
        tt.nkw = 1;
        tt.wbs = 8 * KK * oct;
        tt.obs = out_ps;
        tt.oct = (int)oct;
        tt.oc_valid = (int)oct;
        tt.reps = 1;
        tt.act = j->e_act;
        tt.lo = j->e_lo;
        tt.hi = j->e_hi;
        tt.w = j->we + t * NCHWC_OCT * Ci * KK;
        tt.bias = bias;
        for (int64_t r = r0; r < r1; r++)
            etch_nchwc_tile_pixels(j->fn, j->fn_reps, &tt, j->copy + r * s->sh * j->Wp * Ci,
                                   s->sw * Ci, out + (r - r0) * s->OW * 8 + t * 2 * out_ps,
                                   s->OW, NULL);
    }
}

/* n rows cut into k ranges as even as can be (the first n % k one longer): range i's first
 * row and length. */
static void even_range(int64_t n, int64_t k, int64_t i, int64_t *first, int64_t *len) {
    const int64_t base = n / k, rem = n % k;
    *first = i * base + imin(i, rem);
    *len = base + (i < rem ? 1 : 0);
}

/* The depthwise output rows [*a, *a + *g) of step k of an image: band k / spb of the image's
 * rows, then step k % spb of the band's (*g 0: a band with fewer rows than steps). The pool
 * hands each thread an equal count of consecutive steps, so with one band per thread each
 * gets as many rows as the others, give or take one. */
static void step_rows(const chain_job *j, int64_t k, int64_t *a, int64_t *g) {
    int64_t b0, bl, s0;
    even_range(j->d.OH, j->bands, k / j->spb, &b0, &bl);
    even_range(bl, j->spb, k % j->spb, &s0, g);
    *a = b0 + s0;
}

/* Steps [i0, i1) (step i: image n0 + i / steps, its step i % steps: step_rows), run
 * by thread t in its scratch. The pool runs a thread's own steps in ascending order, one range
 * continuing the other, so the expand's rows shared with the previous step are mostly there
 * already; a step taken over from another thread computes its rows anew. */
static void chain_steps(void *arg, int t, int64_t i0, int64_t i1) {
    const chain_job *j = (const chain_job *)arg;
    const conv_shape *e = &j->e, *d = &j->d, *p = &j->p;
    const int64_t H = d->IH, W = d->IW, OH = d->OH, OW = d->OW, st = d->sh;
    const int64_t CB = d->C_in / 8, R = j->R;
    float *tbuf = j->scratch + t * j->worker_floats;
    float *ubuf = tbuf + (j->has_e ? CB * R * W * 8 : 0);
    chain_ring *ring = &j->ring[t];
    for (int64_t i = i0; i < i1; i++) {
        const int64_t n = j->n0 + i / j->steps;
        int64_t a, g;
        step_rows(j, i % j->steps, &a, &g);
        if (g == 0)
            continue;
        const float *x = j->has_e ? e->in + n * e->C_in * H * W : d->in + n * d->C_in * H * W;
        float *y = (j->has_add ? j->add.z : p->out) + n * p->C_out * OH * OW;
        /* the input rows the depthwise rows [a, a + g) read */
        const int64_t lo = imax(0, a * st - 1), hi = imin(H, (a + g - 1) * st + 2);
        nchwc_dw_job dj = {.CB = CB, .IH = hi - lo, .IW = W, .OH = g, .OW = OW,
                           .KH = 3, .KW = 3, .sh = st, .sw = st, .ph = 1 + lo - a * st,
                           .pw = 1, .dh = 1, .dw = 1, .w = d->w, .wpk = j->wd,
                           .bias = d->bias,
                           .out = ubuf, .act = j->d_act, .lo = j->d_lo, .hi = j->d_hi};
        if (j->has_e) {
            /* the rows not computed at the previous step, each at row r % R of the ring (R
             * rows: a step's window always fits) */
            const bool cont = ring->n == n && ring->next == a && ring->have > lo;
            for (int64_t r = cont ? ring->have : lo; r < hi;) {
                const int64_t r1 = imin(hi, r + R - r % R);
                if (j->stem)
                    stem_rows(j, r, r1, tbuf + r % R * W * 8, R * W * 8);
                else
                    pointwise(j, e, j->we, j->e_act, j->e_lo, j->e_hi, x + r * W * 8,
                              H * W * 8, (r1 - r) * W, tbuf + r % R * W * 8, R * W * 8);
                r = r1;
            }
            ring->n = n;
            ring->next = a + g;
            ring->have = hi;
            dj.in = tbuf;
            dj.ips = R * W * 8;
            dj.ring = R;
            dj.ring0 = lo;
        } else {
            dj.in = x + lo * W * 8;
            dj.ips = H * W * 8;
        }
        j->rows->dw(&dj, 0, CB * g);
        pointwise(j, p, j->wp, j->p_act, j->p_lo, j->p_hi, ubuf, g * OW * 8, g * OW,
                  y + a * OW * 8, OH * OW * 8);
        if (j->has_add) /* the residual over the rows just written, every channel block */
            for (int64_t cb = 0; cb < p->C_out / 8; cb++) {
                const int64_t off = (n * p->C_out / 8 + cb) * OH * OW * 8 + a * OW * 8;
                float *z = j->add.z + off;
                const float *r = j->add.r + off;
                j->vec->binary(ETCH_OPT_BIN_ADD, z, j->add.y_first ? z : r, 0,
                               j->add.y_first ? r : z, 0, 1.0f, g * OW * 8);
                etch_opt_apply_epilogue(j->add.epi, z, g * OW * 8);
            }
    }
}

static bool block_exec(etch_kernel_context *ctx, const conv_shape s[3], bool has_e, bool stem,
                       const chain_add *add);

void etch_opt_conv_chain_run(etch_kernel_context *ctx) {
    const size_t n = etch_kernel_chain_length(ctx);
    etch_kernel_call calls[4];
    conv_shape s[3];
    chain_add add;
    bool has_add = false, ok = n <= 4;
    for (size_t i = 0; ok && i < n; i++)
        ok = etch_kernel_chain_call(ctx, i, &calls[i]);
    if (!ok || run_of(calls, n, s, &add, &has_add) != n) {
        etch_chain_run_each(ctx); /* not the block accepted at load (the arguments changed) */
        return;
    }
    const bool has_e = n - (has_add ? 1 : 0) == 3;
    if (!block_exec(ctx, s, has_e, has_e && stem_ok(&calls[0], &s[0]), has_add ? &add : NULL))
        etch_chain_run_each(ctx);
}

/* Run the block of shapes s (s[0] with has_e: the expand, or a stem), its residual add (NULL:
 * none); false, having written nothing, when scratch is short. */
static bool block_exec(etch_kernel_context *ctx, const conv_shape s[3], bool has_e, bool stem,
                       const chain_add *add) {
    chain_job j;
    memset(&j, 0, sizeof j);
    j.has_e = has_e;
    j.has_add = add != NULL;
    if (add)
        j.add = *add;
    j.vec = etch_opt_vec_active();
    if (j.has_e)
        j.e = s[0];
    j.stem = stem;
    j.d = s[1];
    j.p = s[2];
    j.we = j.has_e ? etch_opt_conv_prep_nchwc(&j.e) : NULL;
    j.wp = etch_opt_conv_prep_nchwc(&j.p);
    j.wd = etch_opt_conv_prep_dw(&j.d);
    bool act;
    float lo, hi;
    if (j.has_e)
        etch_nchwc_tile_act(j.e.epi, &j.e_act, &j.e_lo, &j.e_hi);
    etch_nchwc_tile_act(j.p.epi, &j.p_act, &j.p_lo, &j.p_hi);
    etch_nchwc_tile_act(j.d.epi, &act, &lo, &hi);
    if (act) {
        j.d_act = j.d.epi->act == ETCH_ACT_RELU ? 1 : 2;
        j.d_lo = lo;
        j.d_hi = hi;
    }
    j.fn = etch_nchwc_tile_active(&j.fn_reps);
    j.rows = etch_opt_nchwc_rows();
    const conv_shape *d = &j.d;
    const int64_t threads = etch_kernel_num_threads(ctx);
    /* a band of rows per thread, cut into steps of about CHAIN_MIN_PIXELS output pixels */
    j.bands = imin(threads, d->OH);
    const int64_t band_rows = (d->OH + j.bands - 1) / j.bands;
    j.G = imin(imax(1, (CHAIN_MIN_PIXELS + d->OW - 1) / d->OW), band_rows);
    j.spb = (band_rows + j.G - 1) / j.G;
    j.R = (j.G - 1) * d->sh + 3;
    j.steps = j.bands * j.spb;
    const int64_t CB = d->C_in / 8;
    j.worker_floats = (j.has_e ? CB * j.R * d->IW * 8 : 0) + CB * j.G * d->OW * 8;
    j.worker_floats = (j.worker_floats + 15) / 16 * 16; /* 64-byte aligned slices */
    /* the stem's padded image copy after the threads' scratch */
    const int64_t copy_floats =
        j.stem ? j.e.C_in * (j.e.IH + 2 * j.e.ph) * (j.e.IW + 2 * j.e.pw) : 0;
    j.scratch = (float *)etch_kernel_temp_try(
        ctx, (size_t)(threads * j.worker_floats + copy_floats) * sizeof(float), 64);
    j.ring = (chain_ring *)etch_kernel_temp_try(ctx, (size_t)threads * sizeof(chain_ring),
                                                _Alignof(chain_ring));
    if (!j.scratch || !j.ring)
        return false;
    for (int64_t t = 0; t < threads; t++)
        j.ring[t] = (chain_ring){.n = -1, .next = 0, .have = 0};
    if (!j.stem) {
        j.n0 = 0;
        etch_kernel_parallel_for_thread(ctx, d->N * j.steps, 1, chain_steps, &j);
        return true;
    }
    float *copy = j.scratch + threads * j.worker_floats;
    j.copy = copy;
    j.Wp = j.e.IW + 2 * j.e.pw;
    for (int64_t img = 0; img < d->N; img++) { /* an image at a time: its copy, its steps */
        etch_nchwc_copy_interleaved(ctx, &j.e, img, copy);
        j.n0 = img;
        etch_kernel_parallel_for_thread(ctx, j.steps, 1, chain_steps, &j);
    }
    return true;
}

bool etch_opt_conv_block_ok(const etch_conv_block *b, bool *stem) {
    const conv_shape *e = &b->s[0], *d = &b->s[1], *p = &b->s[2];
    *stem = false;
    if (!depthwise_shape_ok(d) || !pointwise_shape_ok(p) || d->C_out != p->C_in ||
        d->N != p->N || d->OH != p->IH || d->OW != p->IW)
        return false;
    if (b->has_e) {
        *stem = !pointwise_shape_ok(e) && stem_shape_ok(e);
        if ((!*stem && !pointwise_shape_ok(e)) || e->C_out != d->C_in || e->N != d->N ||
            e->OH != d->IH || e->OW != d->IW)
            return false;
    }
    return worth_chaining(b->s, b->has_e);
}

bool etch_opt_conv_block_run(etch_kernel_context *ctx, const etch_conv_block *b) {
    bool stem;
    if (!etch_opt_conv_block_ok(b, &stem))
        return false;
    chain_add add = {b->add_r, b->add_z, b->y_first, b->add_epi};
    return block_exec(ctx, b->s, b->has_e, stem, b->add_r ? &add : NULL);
}
