/*
 * Channel-blocked (NCHW8c) convolution, groups == 1 (contract: opt_conv.h; internals:
 * conv_nchwc.h). A direct convolution with no im2col ("NCHWc direct convolution", an implicit
 * GEMM): each register tile is up to NCHWC_MR output pixels times 16 (or 8) output channels;
 * its depth loop runs over input-channel blocks, window taps and the lanes of a block,
 * broadcasting each input value straight from the input (lane stride 1 in a blocked input,
 * H*W in an NCHW one) against vectors of packed weights.
 *
 *   Winograd    a call whose weight was prepared as the Winograd pack (3x3 stride 1 with
 *               enough output tiles: conv_wino.c) goes there when scratch allows
 *   weights     the NCHWc pack (conv_nchwc.h) prepared at load (conv.c), else packed per call
 *               into scratch: all tiles at once, or groups of tiles as scratch allows; without
 *               any scratch, a scalar loop on the OIHW weight (slow, needs nothing)
 *   padding     a padded copy of one image's input in scratch, so that every window lies
 *               inside it; the output plane is then cut into items of about CHUNK pixels and
 *               those into tiles of equal width that run on across output rows (each pixel
 *               has its own input pointer). Without room for the copy, items are output rows:
 *               the window's rows are clipped per output row, and columns whose window leaves
 *               the image run one pixel at a time with their clipped taps
 *   epilogue    relu / clamp in registers; other activations once per finished item
 *   threads     items (image, channel tile, pixels) split by the pool; each value is computed
 *               the same way whatever the split (and whatever the scratch, but for the sign of
 *               an exact zero and non-finite weights: a padded copy adds 0 * w products)
 *   ISAs        scalar (this file), AVX2+FMA (conv_nchwc_avx2.c; AVX-512 machines run it too:
 *               there is no separate AVX-512 kernel), NEON (conv_nchwc_neon.c)
 */
#include <math.h>
#include <string.h>

#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/epilogue.h"

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- weight packing ----------------------------------------------------------------------- */

size_t etch_nchwc_packed_floats(int64_t C_out, int64_t C_in, int64_t KH, int64_t KW) {
    if (C_out <= 0 || C_in <= 0 || KH <= 0 || KW <= 0)
        return 0;
    double n = (double)((C_out + 7) / 8 * 8) * (double)C_in * (double)KH * (double)KW;
    if (n > 0x1p38)
        return 0;
    return (size_t)((C_out + 7) / 8 * 8 * C_in * KH * KW);
}

void etch_nchwc_pack(const float *w, int64_t C_out, int64_t C_in, int64_t KH, int64_t KW,
                     int64_t t0, int64_t t1, float *dst) {
    const int64_t ws[3] = {C_in * KH * KW, KH * KW, 1};
    etch_nchwc_pack_strided(w, ws, C_out, C_in, KH, KW, t0, t1, dst);
}

void etch_nchwc_pack_strided(const float *w, const int64_t ws[3], int64_t C_out, int64_t C_in,
                             int64_t KH, int64_t KW, int64_t t0, int64_t t1, float *dst) {
    const int64_t Cp = (C_out + 7) / 8 * 8, KK = KH * KW, nb = (C_in + 7) / 8;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t oct = imin(NCHWC_OCT, Cp - t * NCHWC_OCT);
        float *dt = dst + (t - t0) * NCHWC_OCT * C_in * KK;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t cb = imin(8, C_in - b * 8);
            float *db = dt + b * 8 * KK * oct;
            for (int64_t k = 0; k < KK; k++)
                for (int64_t l = 0; l < cb; l++)
                    for (int64_t c = 0; c < oct; c++) {
                        const int64_t oc = t * NCHWC_OCT + c, ic = b * 8 + l;
                        db[(k * cb + l) * oct + c] =
                            oc < C_out ? w[oc * ws[0] + ic * ws[1] + k * ws[2]] : 0.0f;
                    }
        }
    }
}

/* ---- scalar register tile ------------------------------------------------------------------ */

void etch_nchwc_tile_scalar(const nchwc_tile *t) {
    float acc[NCHWC_MR][NCHWC_OCT];
    const int np = t->np, oct = t->oct;
    for (int j = 0; j < np; j++)
        for (int c = 0; c < oct; c++)
            acc[j][c] = t->accumulate ? t->out[(c / 8) * t->obs + j * 8 + c % 8] : t->bias[c];
    for (int64_t b = t->b0; b < t->b1; b++) {
        const int64_t cb = b == t->nb - 1 ? t->cb_last : 8;
        for (int64_t kh = 0; kh < t->nkh; kh++) {
            for (int64_t kw = 0; kw < t->nkw; kw++) {
                const int64_t off = b * t->bs + kh * t->khs + kw * t->kws;
                const float *wp = t->w + b * t->wbs +
                                  (((t->kh0 + kh) * t->KW + t->kw0 + kw) * cb) * oct;
                for (int64_t l = 0; l < cb; l++) {
                    const float *wl = wp + l * oct;
                    for (int j = 0; j < np; j++) {
                        const float x = t->px[j][off + l * t->ls];
                        for (int c = 0; c < oct; c++)
                            acc[j][c] += x * wl[c];
                    }
                }
            }
        }
    }
    if (t->act)
        for (int j = 0; j < np; j++)
            for (int c = 0; c < oct; c++) {
                float v = acc[j][c];
                v = v != v ? v : (v < t->lo ? t->lo : v);
                v = v != v ? v : (v > t->hi ? t->hi : v);
                acc[j][c] = v;
            }
    if (t->out_nchw) {
        for (int c = 0; c < t->oc_valid; c++)
            for (int j = 0; j < np; j++)
                t->out[c * t->obs + j] = acc[j][c];
    } else {
        for (int j = 0; j < np; j++)
            for (int c = 0; c < oct; c++)
                t->out[(c / 8) * t->obs + j * 8 + c % 8] = acc[j][c];
    }
}

/* ---- without scratch: the same tiles on the OIHW weight, scalar ----------------------------- */

static void tile_direct(const nchwc_tile *t, const float *w_oihw, int64_t oc0, int64_t C_in,
                        int64_t KH) {
    const int np = t->np, oct = t->oct;
    const int64_t KW = t->KW;
    for (int j = 0; j < np; j++) {
        for (int c = 0; c < oct; c++) {
            float acc = t->bias[c];
            const int64_t oc = oc0 + c;
            for (int64_t b = 0; b < t->nb && c < t->oc_valid; b++) {
                const int64_t cb = b == t->nb - 1 ? t->cb_last : 8;
                for (int64_t kh = 0; kh < t->nkh; kh++)
                    for (int64_t kw = 0; kw < t->nkw; kw++) {
                        const float *ip = t->px[j] + b * t->bs + kh * t->khs + kw * t->kws;
                        const float *wp =
                            w_oihw + ((oc * C_in + b * 8) * KH + t->kh0 + kh) * KW + t->kw0 + kw;
                        for (int64_t l = 0; l < cb; l++)
                            acc += ip[l * t->ls] * wp[l * KH * KW];
                    }
            }
            if (t->act) {
                acc = acc != acc ? acc : (acc < t->lo ? t->lo : acc);
                acc = acc != acc ? acc : (acc > t->hi ? t->hi : acc);
            }
            if (t->out_nchw) {
                if (c < t->oc_valid)
                    t->out[c * t->obs + j] = acc;
            } else {
                t->out[(c / 8) * t->obs + j * 8 + c % 8] = acc;
            }
        }
    }
}

/* ---- the driver ------------------------------------------------------------------------------ */

nchwc_tile_fn etch_nchwc_tile_active(bool *reps) {
    *reps = false;
    switch (etch_isa_active()) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX512:
        *reps = true;
        return etch_nchwc_tile_avx512;
    case ETCH_ISA_AVX2:
        *reps = true;
        return etch_nchwc_tile_avx2;
#endif
#if ETCH_OPT_NEON
    case ETCH_ISA_NEON:
        return etch_nchwc_tile_neon;
#endif
    default:
        return etch_nchwc_tile_scalar;
    }
}

#define CHUNK 96 /* output pixels per work item when every window is inside the input */
#define DEPTH_BYTES 32768 /* packed weights of one channel tile summed per pass, at most */

typedef struct nchwc_job {
    const conv_shape *s; /* the call; or one image (N = 1) and its input copy (run_group) */
    nchwc_tile_fn fn;    /* NULL: tile_direct on s->w */
    bool fn_reps;        /* fn runs nchwc_tile.reps repetitions itself (the x86 tiles) */
    const float *wpack;  /* tiles [t0, t0 + nt) of the pack */
    int64_t t0, nt, Cp;
    int64_t items;             /* per (image, tile): pixel chunks (full) or output rows */
    bool full;                 /* every window inside s->in (no padding): pixel chunks */
    bool chunk_major;          /* items ordered (image, chunk, tile), else (image, tile, chunk) */
    int64_t depth_blocks;      /* input-channel blocks summed per pass over an item's pixels */
    bool in_blocked, out_blocked;
    bool interleaved;          /* s->in is an NCHW input (C_in <= 8) copied as [H][W][C_in]:
                                  each window row is one run of KW * C_in lanes (dw == 1) */
    bool act;                  /* relu / clamp in the tiles */
    float lo, hi;
    const etch_epilogue *post; /* any other activation: per finished item */
} nchwc_job;

/* Floats per pixel of the input the tiles read: 8 (blocked), 1 (NCHW), C_in (interleaved). */
static int64_t pixel_floats(const nchwc_job *j) {
    return j->interleaved ? j->s->C_in : (j->in_blocked ? 8 : 1);
}

/* The tile fields that depend on the channel tile only; returns the output of image n,
 * pixel 0 of the tile's first block (blocked) or channel (NCHW). */
static float *tile_setup(const nchwc_job *j, nchwc_tile *tt, float bias[NCHWC_OCT], int64_t n,
                         int64_t tl) {
    const conv_shape *s = j->s;
    const int64_t E = pixel_floats(j), HWi = s->IH * s->IW, HWo = s->OH * s->OW;
    const int64_t KK = s->KH * s->KW;
    const int64_t t = j->t0 + tl, oct = imin(NCHWC_OCT, j->Cp - t * NCHWC_OCT);
    const int64_t oc_valid = imin(oct, s->C_out - t * NCHWC_OCT);
    for (int64_t c = 0; c < NCHWC_OCT; c++)
        bias[c] = s->bias && c < oc_valid ? s->bias[t * NCHWC_OCT + c] : 0.0f;
    memset(tt, 0, sizeof *tt);
    tt->ls = j->in_blocked ? 1 : HWi;
    tt->bs = 8 * HWi;
    tt->khs = s->dh * s->IW * E;
    tt->kws = s->dw * E;
    tt->nb = (s->C_in + 7) / 8;
    tt->b0 = 0;
    tt->b1 = tt->nb;
    tt->cb_last = (int)(s->C_in - (tt->nb - 1) * 8);
    tt->KW = s->KW;
    if (j->interleaved) { /* one block; per window row one run of KW * C_in lanes */
        tt->ls = 1;
        tt->kws = 0;
        tt->cb_last = (int)(s->KW * s->C_in);
        tt->KW = 1;
    }
    tt->out_nchw = !j->out_blocked;
    tt->reps = 1;
    tt->act = j->act;
    tt->lo = j->lo;
    tt->hi = j->hi;
    tt->w = j->wpack ? j->wpack + tl * NCHWC_OCT * s->C_in * KK : NULL;
    tt->bias = bias;
    tt->wbs = 8 * KK * oct;
    tt->oct = (int)oct;
    tt->oc_valid = (int)oc_valid;
    if (j->out_blocked) {
        tt->obs = HWo * 8;
        return s->out + (n * (s->C_out / 8) + t * 2) * HWo * 8;
    }
    tt->obs = HWo;
    return s->out + (n * s->C_out + t * NCHWC_OCT) * HWo;
}

void etch_nchwc_tile_next(nchwc_tile *t, int64_t pstep) {
    for (int q = 0; q < t->np; q++)
        t->px[q] += pstep;
    t->out += t->out_nchw ? t->np : t->np * 8;
}

void etch_nchwc_tile_run(nchwc_tile_fn fn, bool fn_reps, const nchwc_tile *t) {
    if (fn_reps || t->reps <= 1) {
        fn(t);
        return;
    }
    nchwc_tile one = *t;
    one.reps = 1;
    for (int64_t r = 0; r < t->reps; r++, etch_nchwc_tile_next(&one, t->pstep))
        fn(&one);
}

static void run_tile(const nchwc_job *j, const nchwc_tile *tt, int64_t t) {
    if (j->fn) {
        etch_nchwc_tile_run(j->fn, j->fn_reps, tt);
        return;
    }
    /* no packed weights: the scalar loop on the OIHW weight, a repetition at a time */
    nchwc_tile one = *tt;
    one.reps = 1;
    const int64_t reps = tt->reps > 1 ? tt->reps : 1;
    for (int64_t r = 0; r < reps; r++, etch_nchwc_tile_next(&one, tt->pstep))
        tile_direct(&one, j->s->w, t * NCHWC_OCT, j->s->C_in, j->s->KH);
}

/* The activation of output pixels [p0, p1) of one tile. */
static void post_range(const nchwc_job *j, const nchwc_tile *tt, float *o, int64_t p0,
                       int64_t p1) {
    const int64_t HWo = j->s->OH * j->s->OW;
    if (j->out_blocked)
        for (int64_t q = 0; q < tt->oct / 8; q++)
            etch_opt_apply_epilogue(j->post, o + q * HWo * 8 + p0 * 8, (p1 - p0) * 8);
    else
        for (int64_t c = 0; c < tt->oc_valid; c++)
            etch_opt_apply_epilogue(j->post, o + c * HWo + p0, p1 - p0);
}

nchwc_split etch_nchwc_split_pixels(int64_t n) {
    nchwc_split t = {0, 0};
    if (n > 0) {
        const int64_t tiles = (n + NCHWC_MR - 1) / NCHWC_MR;
        t.base = n / tiles;
        t.extra = n % tiles;
    }
    return t;
}

bool etch_nchwc_tile_act(const etch_epilogue *e, bool *act, float *lo, float *hi) {
    *act = false;
    *lo = *hi = 0.0f;
    if (!e || e->act == ETCH_ACT_NONE)
        return true;
    if (e->act == ETCH_ACT_RELU) {
        *act = true;
        *hi = INFINITY;
        return true;
    }
    if (e->act == ETCH_ACT_CLAMP) {
        *act = true;
        *lo = (float)e->lo;
        *hi = (float)e->hi;
        return true;
    }
    return false;
}

void etch_nchwc_tile_1x1(nchwc_tile *tt, int64_t in_ps, int64_t C_in, int64_t oct,
                         int64_t out_ps) {
    memset(tt, 0, sizeof *tt);
    tt->ls = 1;
    tt->bs = in_ps;
    tt->nb = C_in / 8;
    tt->b1 = tt->nb;
    tt->cb_last = 8;
    tt->KW = 1;
    tt->wbs = 8 * oct;
    tt->nkh = tt->nkw = 1;
    tt->obs = out_ps;
    tt->oct = (int)oct;
    tt->oc_valid = (int)oct;
    tt->reps = 1;
}

void etch_nchwc_tile_pixels(nchwc_tile_fn fn, bool fn_reps, nchwc_tile *tt, const float *in,
                            int64_t in_step, float *out, int64_t n, nchwc_prefetch *pf) {
    const nchwc_split sp = etch_nchwc_split_pixels(n);
    const int64_t ntl = (n + NCHWC_MR - 1) / NCHWC_MR;
    int64_t p = 0;
    for (int g = 0; g < 2; g++) {
        const int64_t np = g == 0 ? sp.base + 1 : sp.base;
        const int64_t reps = g == 0 ? sp.extra : ntl - sp.extra;
        if (reps <= 0 || np <= 0)
            continue;
        for (int64_t q = 0; q < np; q++)
            tt->px[q] = in + (p + q) * in_step;
        tt->np = (int)np;
        tt->out = out + p * 8;
        tt->reps = reps;
        tt->pstep = np * in_step;
        if (pf)
            etch_nchwc_prefetch_slice(pf, tt, reps);
        etch_nchwc_tile_run(fn, fn_reps, tt);
        p += reps * np;
    }
    tt->reps = 1;
}

nchwc_prefetch etch_nchwc_prefetch_plan(const float *start, int64_t len, int64_t calls,
                                        int64_t steps) {
    nchwc_prefetch p = {NULL, 0, 0, 0};
    if (!start || len <= 0 || calls <= 0)
        return p;
    const int64_t lines = (len + 15) / 16, slice = (lines + calls - 1) / calls;
    p.next = start;
    p.left = len;
    p.slice = slice * 16;
    p.per_step = (slice + steps - 1) / imax(steps, 1);
    return p;
}

void etch_nchwc_prefetch_slice(nchwc_prefetch *p, nchwc_tile *tt, int64_t reps) {
    tt->pf = tt->pf_end = NULL;
    tt->pf_n = 0;
    if (p->left <= 0)
        return;
    const int64_t n = imin(p->left, reps * p->slice);
    tt->pf = p->next;
    tt->pf_end = p->next + n;
    tt->pf_n = p->per_step;
    p->next += n;
    p->left -= n;
}

/* The packed weights the tiles of the next pass (or the next item's channel tile) will read,
 * prefetched into L2 a slice per register tile of the current pass, spread over its window
 * steps: with few pixels (resnet18's 7x7 layers: 9 register tiles per 32 KiB pass) the next
 * pass's weights otherwise miss, from L3 or memory, at its start, in a burst. */
static nchwc_prefetch plan_prefetch(const nchwc_job *j, const nchwc_tile *tt, int64_t tl,
                                    int64_t ch, int64_t ntl) {
    nchwc_prefetch p = {NULL, 0, 0, 0};
    if (!j->fn_reps || !tt->w || ntl <= 0)
        return p;
    const conv_shape *s = j->s;
    const int64_t KK = s->KH * s->KW, tile_floats = NCHWC_OCT * s->C_in * KK;
    /* the floats of the pack's tiles [0, nt) (the last one may be 8 wide) */
    const int64_t oct_last = imin(NCHWC_OCT, j->Cp - (j->t0 + j->nt - 1) * NCHWC_OCT);
    const int64_t pack_floats = (j->nt - 1) * tile_floats + oct_last * s->C_in * KK;
    int64_t start = 0, len = 0; /* floats from j->wpack */
    if (tt->b1 < tt->nb) { /* the next pass of this tile */
        start = tl * tile_floats + tt->b1 * tt->wbs;
        len = imin(j->depth_blocks, tt->nb - tt->b1) * tt->wbs;
    } else if ((j->chunk_major || ch == j->items - 1) && tl + 1 < j->nt) {
        /* the next channel tile's first pass */
        const int64_t oct = imin(NCHWC_OCT, j->Cp - (j->t0 + tl + 1) * NCHWC_OCT);
        start = (tl + 1) * tile_floats;
        len = imin(j->depth_blocks, tt->nb) * 8 * KK * oct;
    } else { /* nothing new: the next item is this tile's next chunk (its weights are near) */
        return p;
    }
    const int64_t steps =
        (tt->b1 - tt->b0) * (j->in_blocked && tt->nkh * tt->nkw == 1 ? 1 : tt->nkh * tt->nkw);
    return etch_nchwc_prefetch_plan(j->wpack + start, imin(len, pack_floats - start), ntl,
                                    steps);
}

/* Every window inside the input: items are ranges of about CHUNK pixels of the output plane,
 * in register tiles that may span output rows. */
static void nchwc_full(void *arg, int64_t i0, int64_t i1) {
    const nchwc_job *j = (const nchwc_job *)arg;
    const conv_shape *s = j->s;
    const int64_t E = pixel_floats(j), HWo = s->OH * s->OW;
    for (int64_t i = i0; i < i1; i++) {
        int64_t ch, tl, n;
        if (j->chunk_major) {
            tl = i % j->nt;
            ch = i / j->nt % j->items;
            n = i / j->nt / j->items;
        } else {
            ch = i % j->items;
            tl = i / j->items % j->nt;
            n = i / j->items / j->nt;
        }
        nchwc_tile tt;
        float bias[NCHWC_OCT];
        float *o = tile_setup(j, &tt, bias, n, tl);
        const float *in_n = s->in + n * s->C_in * s->IH * s->IW;
        /* balanced ranges: the first HWo % items of them one pixel longer */
        const int64_t base = HWo / j->items, rem = HWo % j->items;
        const int64_t p0 = ch * base + imin(ch, rem), p1 = p0 + base + (ch < rem ? 1 : 0);
        tt.nkh = s->KH;
        tt.nkw = j->interleaved ? 1 : s->KW;
        const nchwc_split sp = etch_nchwc_split_pixels(p1 - p0);
        /* the input-channel blocks in passes whose weights stay in L1, each pass over all
         * the pixels (the partial sums in the output between passes) */
        const bool act = tt.act;
        const int64_t ntl_all = (p1 - p0 + NCHWC_MR - 1) / NCHWC_MR;
        for (int64_t b0 = 0; b0 < tt.nb; b0 += j->depth_blocks) {
            tt.b0 = b0;
            tt.b1 = imin(tt.nb, b0 + j->depth_blocks);
            tt.accumulate = b0 > 0;
            tt.act = act && tt.b1 == tt.nb;
            nchwc_prefetch pf = plan_prefetch(j, &tt, tl, ch, ntl_all);
            if (s->sh * s->IW == s->OW * s->sw) {
                /* pixel p's window starts at p * sw * E (the output rows continue the input
                 * rows: a 1x1 stride 1 without padding, or one on the padded copy): two runs
                 * of equal tiles (sp.extra tiles of base + 1 pixels, then tiles of base) */
                const int64_t ps = s->sw * E, ntl = (p1 - p0 + NCHWC_MR - 1) / NCHWC_MR;
                int64_t p = p0;
                for (int g = 0; g < 2; g++) {
                    const int64_t np = g == 0 ? sp.base + 1 : sp.base;
                    const int64_t reps = g == 0 ? sp.extra : ntl - sp.extra;
                    if (reps <= 0 || np <= 0)
                        continue;
                    for (int64_t q = 0; q < np; q++)
                        tt.px[q] = in_n + (p + q) * ps;
                    tt.np = (int)np;
                    tt.out = o + p * (j->out_blocked ? 8 : 1);
                    tt.reps = reps;
                    tt.pstep = np * ps;
                    etch_nchwc_prefetch_slice(&pf, &tt, reps);
                    run_tile(j, &tt, j->t0 + tl);
                    p += reps * np;
                }
                tt.reps = 1;
                continue;
            }
            int64_t oh = p0 / s->OW, ow = p0 % s->OW, k = 0;
            for (int64_t p = p0; p < p1; k++) {
                const int64_t np = k < sp.extra ? sp.base + 1 : sp.base;
                for (int64_t q = 0; q < np; q++) {
                    tt.px[q] = in_n + (oh * s->sh * s->IW + ow * s->sw) * E;
                    if (++ow == s->OW) {
                        ow = 0;
                        oh++;
                    }
                }
                tt.np = (int)np;
                tt.out = o + p * (j->out_blocked ? 8 : 1);
                etch_nchwc_prefetch_slice(&pf, &tt, 1);
                run_tile(j, &tt, j->t0 + tl);
                p += np;
            }
        }
        if (j->post)
            post_range(j, &tt, o, p0, p1);
    }
}

/* With padding and no padded copy: items are output rows; rows clip the window's taps,
 * columns whose window leaves the image run one pixel at a time with their clipped taps. */
static void nchwc_rows(void *arg, int64_t i0, int64_t i1) {
    const nchwc_job *j = (const nchwc_job *)arg;
    const conv_shape *s = j->s;
    const int64_t E = j->in_blocked ? 8 : 1, PE = j->out_blocked ? 8 : 1;
    /* the columns whose window lies inside the image horizontally: [lo, hi) */
    const int64_t rnum = s->IW - 1 + s->pw - (s->KW - 1) * s->dw;
    const int64_t lo = imin(ceil_div(s->pw, s->sw), s->OW);
    const int64_t hi = imin(imax(rnum >= 0 ? rnum / s->sw + 1 : 0, lo), s->OW);
    const nchwc_split sp = etch_nchwc_split_pixels(hi - lo);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t oh = i % j->items, r = i / j->items, tl = r % j->nt, n = r / j->nt;
        nchwc_tile tt;
        float bias[NCHWC_OCT];
        float *o = tile_setup(j, &tt, bias, n, tl);
        const float *in_n = s->in + n * s->C_in * s->IH * s->IW;
        const int64_t ih_base = oh * s->sh - s->ph;
        const int64_t kh0 = imax(0, ceil_div(-ih_base, s->dh));
        const int64_t kh1 = imin(s->KH, ceil_div(s->IH - ih_base, s->dh));
        for (int64_t ow = 0, k = 0; ow < s->OW;) {
            int64_t np = 1, kw0 = 0, kw1 = s->KW;
            if (ow >= lo && ow < hi) {
                np = k++ < sp.extra ? sp.base + 1 : sp.base;
            } else {
                const int64_t iw_base = ow * s->sw - s->pw;
                kw0 = imax(0, ceil_div(-iw_base, s->dw));
                kw1 = imin(s->KW, ceil_div(s->IW - iw_base, s->dw));
            }
            tt.np = (int)np;
            tt.out = o + (oh * s->OW + ow) * PE;
            if (kh1 > kh0 && kw1 > kw0) {
                tt.kh0 = kh0;
                tt.nkh = kh1 - kh0;
                tt.kw0 = kw0;
                tt.nkw = kw1 - kw0;
                for (int64_t q = 0; q < np; q++)
                    tt.px[q] = in_n + ((ih_base + kh0 * s->dh) * s->IW + (ow + q) * s->sw -
                                       s->pw + kw0 * s->dw) * E;
            } else { /* the window misses the image: the bias alone */
                tt.kh0 = tt.kw0 = tt.nkh = tt.nkw = 0;
                tt.px[0] = in_n;
            }
            run_tile(j, &tt, j->t0 + tl);
            ow += np;
        }
        if (j->post)
            post_range(j, &tt, o, oh * s->OW, (oh + 1) * s->OW);
    }
}

static void run_items(etch_kernel_context *ctx, nchwc_job *j) {
    const conv_shape *s = j->s;
    const double per_item = (double)(j->full ? CHUNK : s->OW) * (double)s->C_in *
                            (double)(s->KH * s->KW) * NCHWC_OCT;
    const int64_t grain =
        per_item >= 65536.0 ? 1 : (int64_t)(65536.0 / (per_item > 1 ? per_item : 1));
    etch_kernel_parallel_for(ctx, s->N * j->nt * j->items, grain,
                             j->full ? nchwc_full : nchwc_rows, j);
}

/* ---- the copy of one image's input (padded; or interleaved) ------------------------------------ */

typedef struct copy_job {
    const conv_shape *s; /* the original call */
    const float *src;    /* image n */
    float *dst;
    int64_t E, Hp, Wp;   /* floats per pixel of a plane (8 blocked, 1 NCHW), padded size */
    bool interleaved;    /* NCHW source to [Hp][Wp][C_in] */
} copy_job;

/* Rows of the copy: over every plane (a channel block, or a channel of an NCHW input), or the
 * rows of the interleaved copy. */
static void copy_rows(void *arg, int64_t r0, int64_t r1) {
    const copy_job *p = (const copy_job *)arg;
    const conv_shape *s = p->s;
    const int64_t E = p->interleaved ? s->C_in : p->E, rowlen = p->Wp * E;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t plane = r / p->Hp, hp = r % p->Hp, ih = hp - s->ph;
        float *d = p->dst + r * rowlen;
        if (ih < 0 || ih >= s->IH) {
            memset(d, 0, (size_t)rowlen * sizeof(float));
            continue;
        }
        memset(d, 0, (size_t)(s->pw * E) * sizeof(float));
        memset(d + (s->pw + s->IW) * E, 0, (size_t)((p->Wp - s->pw - s->IW) * E) * sizeof(float));
        if (p->interleaved) {
            const int64_t HW = s->IH * s->IW, IW = s->IW;
            const float *src = p->src + ih * IW;
            float *dd = d + s->pw * E;
            if (E == 3) { /* an RGB image */
                const float *s0 = src, *s1 = src + HW, *s2 = src + 2 * HW;
                for (int64_t iw = 0; iw < IW; iw++) {
                    dd[3 * iw] = s0[iw];
                    dd[3 * iw + 1] = s1[iw];
                    dd[3 * iw + 2] = s2[iw];
                }
            } else {
                for (int64_t c = 0; c < E; c++)
                    for (int64_t iw = 0; iw < IW; iw++)
                        dd[iw * E + c] = src[c * HW + iw];
            }
        } else {
            const float *src = p->src + (plane * s->IH + ih) * s->IW * E;
            memcpy(d + s->pw * E, src, (size_t)(s->IW * E) * sizeof(float));
        }
    }
}

void etch_nchwc_copy_interleaved(etch_kernel_context *ctx, const conv_shape *s, int64_t n,
                                 float *dst) {
    const int64_t Hp = s->IH + 2 * s->ph, Wp = s->IW + 2 * s->pw;
    copy_job pj = {s, s->in + n * s->C_in * s->IH * s->IW, dst, 1, Hp, Wp, true};
    etch_kernel_parallel_for(ctx, Hp, 4096 / (Wp * s->C_in) + 1, copy_rows, &pj);
}

/* Run the tiles [j->t0, j->t0 + j->nt) over every image: through a copy of each image's input
 * (padded, or interleaved when j->interleaved) when there is one, so that every window lies
 * inside it; else straight on the input (clipping windows at the borders when it pads). */
static void run_group(etch_kernel_context *ctx, nchwc_job *j, float *copybuf) {
    const conv_shape *s = j->s;
    const bool pad = s->ph > 0 || s->pw > 0;
    j->chunk_major = s->KH * s->KW == 1; /* the input chunk is larger than a weight tile */
    /* equal passes of input-channel blocks whose weights (per 16-channel tile) take at most
     * DEPTH_BYTES (near the caches); only with a blocked output (the partial sums stay in it)
     * and packed weights */
    const int64_t nb = (s->C_in + 7) / 8, block_bytes = s->KH * s->KW * 8 * NCHWC_OCT * 4;
    j->depth_blocks = nb;
    if (j->fn && j->out_blocked && block_bytes * nb > DEPTH_BYTES) {
        const int64_t per = imax(1, DEPTH_BYTES / block_bytes), passes = (nb + per - 1) / per;
        j->depth_blocks = (nb + passes - 1) / passes;
    }
    if (!copybuf) {
        j->interleaved = false;
        j->full = !pad;
        j->items = j->full ? (s->OH * s->OW + CHUNK - 1) / CHUNK : s->OH;
        run_items(ctx, j);
        return;
    }
    const int64_t E = j->in_blocked ? 8 : 1;
    const int64_t planes = j->interleaved ? 1 : (j->in_blocked ? s->C_in / 8 : s->C_in);
    conv_shape img = *s;
    img.N = 1;
    img.IH = s->IH + 2 * s->ph;
    img.IW = s->IW + 2 * s->pw;
    img.ph = img.pw = 0;
    img.in = copybuf;
    nchwc_job jj = *j;
    jj.s = &img;
    jj.full = true;
    jj.items = (s->OH * s->OW + CHUNK - 1) / CHUNK;
    for (int64_t n = 0; n < s->N; n++) {
        copy_job pj = {s, s->in + n * s->C_in * s->IH * s->IW, copybuf, E, img.IH, img.IW,
                       j->interleaved};
        const int64_t grain = 4096 / (img.IW * (j->interleaved ? s->C_in : E)) + 1;
        etch_kernel_parallel_for(ctx, planes * img.IH, grain, copy_rows, &pj);
        img.out = s->out + n * s->C_out * s->OH * s->OW;
        run_items(ctx, &jj);
    }
}

typedef struct pack_job {
    const conv_shape *s;
    int64_t t0;
    float *dst;
} pack_job;

static void pack_tiles(void *arg, int64_t a, int64_t b) {
    const pack_job *p = (const pack_job *)arg;
    const conv_shape *s = p->s;
    etch_nchwc_pack(s->w, s->C_out, s->C_in, s->KH, s->KW, p->t0 + a, p->t0 + b,
                    p->dst + a * NCHWC_OCT * s->C_in * s->KH * s->KW);
}

void etch_opt_conv_nchwc(etch_kernel_context *ctx, const conv_shape *s, bool in_blocked,
                         bool out_blocked) {
    if (s->groups != 1 || (!in_blocked && !out_blocked) || (in_blocked && s->C_in % 8) ||
        (out_blocked && s->C_out % 8) || s->N <= 0 || s->C_in <= 0 || s->C_out <= 0 ||
        s->OH <= 0 || s->OW <= 0) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED,
                         "channel-blocked convolution: groups %lld, C_in %lld, C_out %lld with "
                         "input %s, output %s is not a supported case",
                         (long long)s->groups, (long long)s->C_in, (long long)s->C_out,
                         in_blocked ? "blocked" : "NCHW", out_blocked ? "blocked" : "NCHW");
        return;
    }
    nchwc_job j;
    memset(&j, 0, sizeof j);
    j.s = s;
    j.in_blocked = in_blocked;
    j.out_blocked = out_blocked;
    j.Cp = (s->C_out + 7) / 8 * 8;
    if (!etch_nchwc_tile_act(s->epi, &j.act, &j.lo, &j.hi))
        j.post = s->epi;
    const float *wino = in_blocked && out_blocked ? etch_opt_conv_prep_wino(s) : NULL;
    if (wino && etch_wino_conv(ctx, s, wino, j.act ? 2 : 0, j.lo, j.hi, j.post))
        return;
    const int64_t ntiles = (j.Cp + NCHWC_OCT - 1) / NCHWC_OCT;
    const int64_t tile_floats = NCHWC_OCT * s->C_in * s->KH * s->KW;
    j.fn = etch_nchwc_tile_active(&j.fn_reps);
    j.wpack = etch_opt_conv_prep_nchwc(s);
    j.t0 = 0;
    j.nt = ntiles;
    /* the weights: prepared, else packed into scratch (every tile, else groups of tiles as
     * large as scratch allows), else read unpacked by the scalar loop */
    float *buf = NULL;
    int64_t g = ntiles;
    if (!j.wpack) {
        const size_t total = etch_nchwc_packed_floats(s->C_out, s->C_in, s->KH, s->KW);
        buf = total ? (float *)etch_kernel_temp_try(ctx, total * sizeof(float), 64) : NULL;
        while (!buf && total && g > 1) {
            g = (g + 1) / 2;
            buf = (float *)etch_kernel_temp_try(ctx, (size_t)(g * tile_floats) * sizeof(float),
                                                64);
        }
        if (!buf)
            j.fn = NULL, j.fn_reps = false;
        const int64_t groups = (ntiles + g - 1) / g;
        g = (ntiles + groups - 1) / groups; /* balanced groups */
        j.wpack = buf;
    }
    /* a copy of one image's input, when scratch allows: padded when the call pads; for an
     * NCHW input of at most 8 channels (an image) interleaved as [H][W][C_in], so that each
     * window row is one run of lanes at stride 1 */
    float *padbuf = NULL;
    j.interleaved = !in_blocked && s->C_in <= 8 && s->dw == 1;
    if ((s->ph > 0 || s->pw > 0 || j.interleaved) && j.fn) {
        const double pad_floats =
            (double)s->C_in * (double)(s->IH + 2 * s->ph) * (double)(s->IW + 2 * s->pw);
        if (pad_floats < 0x1p36)
            padbuf = (float *)etch_kernel_temp_try(ctx, (size_t)pad_floats * sizeof(float), 64);
    }
    if (!buf) { /* prepared, or no scratch at all */
        run_group(ctx, &j, padbuf);
        return;
    }
    for (int64_t t0 = 0; t0 < ntiles; t0 += g) {
        j.t0 = t0;
        j.nt = imin(g, ntiles - t0);
        pack_job pj = {s, t0, buf};
        etch_kernel_parallel_for(ctx, j.nt, 1, pack_tiles, &pj);
        run_group(ctx, &j, padbuf);
    }
}
