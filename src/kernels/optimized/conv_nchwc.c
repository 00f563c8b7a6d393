/*
 * Channel-blocked (NCHW8c) convolution, groups == 1 (contract: opt_conv.h; internals:
 * conv_nchwc.h). A direct convolution with no input packing ("NCHWc direct convolution", an
 * implicit GEMM): each register tile is NCHWC_MR consecutive output pixels of one row times 16
 * (or 8) output channels; its depth loop runs over input-channel blocks, window taps and the 8
 * lanes of a block, broadcasting each input value straight from the input (lane stride 1 in a
 * blocked input, H*W in an NCHW one) against a vector of packed weights.
 *
 *   weights     the NCHWc pack (conv_nchwc.h) prepared at load (conv.c), else packed per call
 *               into scratch: all tiles at once, or groups of tiles as scratch allows; without
 *               any scratch, a scalar direct loop on the OIHW weight (slow, needs nothing)
 *   borders     rows of output whose window leaves the image vertically use the clipped tap
 *               rows; columns whose window leaves it horizontally run one pixel at a time with
 *               the clipped taps; the interior runs in full tiles plus one narrower tile
 *   epilogue    relu / clamp in registers; other activations once per finished output row
 *   threads     items (image, channel tile, output row), split by the pool; each value is
 *               computed the same way whatever the split
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
                        db[(k * cb + l) * oct + c] = oc < C_out ? w[(oc * C_in + ic) * KK + k] : 0.0f;
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
            acc[j][c] = t->bias[c];
    for (int64_t b = 0; b < t->nb; b++) {
        const int64_t cb = b == t->nb - 1 ? t->cb_last : 8;
        const float *ib = t->in + b * t->bs;
        for (int64_t kh = 0; kh < t->nkh; kh++) {
            for (int64_t kw = 0; kw < t->nkw; kw++) {
                const float *ip = ib + kh * t->khs + kw * t->kws;
                const float *wp = t->w + b * t->wbs +
                                  (((t->kh0 + kh) * t->KW + t->kw0 + kw) * cb) * oct;
                for (int64_t l = 0; l < cb; l++) {
                    const float *wl = wp + l * oct;
                    for (int j = 0; j < np; j++) {
                        const float x = ip[j * t->ps + l * t->ls];
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
                        const float *ip = t->in + j * t->ps + b * t->bs + kh * t->khs + kw * t->kws;
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

static nchwc_tile_fn tile_fn(void) {
    switch (etch_isa_active()) {
#if ETCH_OPT_X86
    case ETCH_ISA_AVX512: /* no AVX-512 kernel: the AVX2 one */
    case ETCH_ISA_AVX2:
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

#define FLAT_ROW 96 /* pixels per work item of a 1x1 stride-1 unpadded convolution */

typedef struct nchwc_job {
    const conv_shape *s;
    nchwc_tile_fn fn;   /* NULL: tile_direct on s->w */
    const float *wpack; /* tiles [t0, t0 + nt) of the pack */
    int64_t t0, nt, Cp;
    int64_t rows;             /* items per (image, tile): OH, or flat pixel ranges */
    bool flat;                /* 1x1, stride 1, no padding: the plane as one row */
    bool in_blocked, out_blocked;
    bool act;                 /* relu / clamp in the tiles */
    float lo, hi;
    const etch_epilogue *post; /* any other activation: per finished row */
} nchwc_job;

static void nchwc_rows(void *arg, int64_t i0, int64_t i1) {
    const nchwc_job *j = (const nchwc_job *)arg;
    const conv_shape *s = j->s;
    const int64_t E = j->in_blocked ? 8 : 1, PE = j->out_blocked ? 8 : 1;
    const int64_t HWi = s->IH * s->IW, HWo = s->OH * s->OW, KK = s->KH * s->KW;
    /* the row's columns whose window lies inside the image horizontally: [lo, hi) */
    int64_t lo = ceil_div(s->pw, s->sw);
    const int64_t rnum = s->IW - 1 + s->pw - (s->KW - 1) * s->dw;
    int64_t hi = rnum >= 0 ? rnum / s->sw + 1 : 0;
    const int64_t OWr = j->flat ? HWo : s->OW; /* a flat convolution: one row of HWo pixels */
    lo = imin(lo, OWr);
    hi = imin(imax(hi, lo), OWr);
    nchwc_tile tt;
    memset(&tt, 0, sizeof tt);
    tt.ps = s->sw * E;
    tt.ls = j->in_blocked ? 1 : HWi;
    tt.bs = 8 * HWi;
    tt.khs = s->dh * s->IW * E;
    tt.kws = s->dw * E;
    tt.nb = (s->C_in + 7) / 8;
    tt.cb_last = (int)(s->C_in - (tt.nb - 1) * 8);
    tt.KW = s->KW;
    tt.out_nchw = !j->out_blocked;
    tt.act = j->act;
    tt.lo = j->lo;
    tt.hi = j->hi;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t row = i % j->rows, r = i / j->rows, tl = r % j->nt, n = r / j->nt;
        const int64_t t = j->t0 + tl, oct = imin(NCHWC_OCT, j->Cp - t * NCHWC_OCT);
        const int64_t oc_valid = imin(oct, s->C_out - t * NCHWC_OCT);
        float bias[NCHWC_OCT];
        for (int64_t c = 0; c < NCHWC_OCT; c++)
            bias[c] = s->bias && c < oc_valid ? s->bias[t * NCHWC_OCT + c] : 0.0f;
        const int64_t oh = j->flat ? 0 : row;
        const int64_t c0 = j->flat ? row * FLAT_ROW : 0;
        const int64_t c1 = j->flat ? imin(HWo, c0 + FLAT_ROW) : s->OW;
        const float *in_n = s->in + n * s->C_in * HWi;
        tt.w = j->wpack ? j->wpack + tl * NCHWC_OCT * s->C_in * KK : NULL;
        tt.bias = bias;
        tt.wbs = 8 * KK * oct;
        tt.oct = (int)oct;
        tt.oc_valid = (int)oc_valid;
        float *orow;
        if (j->out_blocked) {
            orow = s->out + ((n * (s->C_out / 8) + t * 2) * HWo + oh * s->OW) * 8;
            tt.obs = HWo * 8;
        } else {
            orow = s->out + (n * s->C_out + t * NCHWC_OCT) * HWo + oh * s->OW;
            tt.obs = HWo;
        }
        const int64_t ih_base = oh * s->sh - s->ph;
        const int64_t kh0 = imax(0, ceil_div(-ih_base, s->dh));
        const int64_t kh1 = imin(s->KH, ceil_div(s->IH - ih_base, s->dh));
        for (int64_t ow = c0; ow < c1;) {
            int64_t np = 1, kw0 = 0, kw1 = s->KW;
            const int64_t iw_base = ow * s->sw - s->pw;
            if (ow >= lo && ow < hi) {
                np = imin(NCHWC_MR, imin(hi, c1) - ow);
            } else {
                kw0 = imax(0, ceil_div(-iw_base, s->dw));
                kw1 = imin(s->KW, ceil_div(s->IW - iw_base, s->dw));
            }
            tt.np = (int)np;
            tt.out = orow + ow * PE;
            if (kh1 > kh0 && kw1 > kw0) {
                tt.kh0 = kh0;
                tt.nkh = kh1 - kh0;
                tt.kw0 = kw0;
                tt.nkw = kw1 - kw0;
                /* flat: ih_base = 0 and the pixel index runs on through the rows */
                tt.in = in_n + ((ih_base + kh0 * s->dh) * s->IW + iw_base + kw0 * s->dw) * E;
            } else { /* the window misses the image: the bias alone */
                tt.kh0 = tt.kw0 = tt.nkh = tt.nkw = 0;
                tt.in = in_n;
            }
            if (j->fn)
                j->fn(&tt);
            else
                tile_direct(&tt, s->w, t * NCHWC_OCT, s->C_in, s->KH);
            ow += np;
        }
        if (j->post) {
            if (j->out_blocked)
                for (int64_t q = 0; q < oct / 8; q++)
                    etch_opt_apply_epilogue(j->post, orow + q * HWo * 8 + c0 * 8, (c1 - c0) * 8);
            else
                for (int64_t c = 0; c < oc_valid; c++)
                    etch_opt_apply_epilogue(j->post, orow + c * HWo + c0, c1 - c0);
        }
    }
}

static void run_rows(etch_kernel_context *ctx, nchwc_job *j) {
    const conv_shape *s = j->s;
    const double per_row = (double)(j->flat ? FLAT_ROW : s->OW) * (double)s->C_in *
                           (double)(s->KH * s->KW) * NCHWC_OCT;
    const int64_t grain = per_row >= 65536.0 ? 1 : (int64_t)(65536.0 / (per_row > 1 ? per_row : 1));
    etch_kernel_parallel_for(ctx, s->N * j->nt * j->rows, grain, nchwc_rows, j);
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
    const etch_epilogue *e = s->epi;
    if (e && e->act == ETCH_ACT_RELU) {
        j.act = true;
        j.lo = 0.0f;
        j.hi = INFINITY;
    } else if (e && e->act == ETCH_ACT_CLAMP) {
        j.act = true;
        j.lo = (float)e->lo;
        j.hi = (float)e->hi;
    } else if (e && e->act != ETCH_ACT_NONE) {
        j.post = e;
    }
    /* 1x1, stride 1, no padding: output pixel p reads input pixel p, so the whole plane is
     * one row, cut into FLAT_ROW-pixel items */
    conv_shape flat = *s;
    if (s->KH == 1 && s->KW == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 && s->pw == 0) {
        j.flat = true;
        j.rows = (s->OH * s->OW + FLAT_ROW - 1) / FLAT_ROW;
        flat.IW = flat.IH * flat.IW; /* the lo/hi bounds of nchwc_rows: every pixel inside */
        flat.IH = 1;
        flat.OW = flat.OH * flat.OW;
        flat.OH = 1;
        j.s = &flat;
    } else {
        j.rows = s->OH;
    }
    const int64_t ntiles = (j.Cp + NCHWC_OCT - 1) / NCHWC_OCT;
    const int64_t tile_floats = NCHWC_OCT * s->C_in * s->KH * s->KW;
    j.fn = tile_fn();
    j.wpack = etch_opt_conv_prep_nchwc(s);
    j.t0 = 0;
    j.nt = ntiles;
    if (j.wpack) {
        run_rows(ctx, &j);
        return;
    }
    /* pack into scratch: every tile, else groups of tiles as large as scratch allows */
    const size_t total = etch_nchwc_packed_floats(s->C_out, s->C_in, s->KH, s->KW);
    float *buf = total ? (float *)etch_kernel_temp_try(ctx, total * sizeof(float), 64) : NULL;
    int64_t g = ntiles;
    while (!buf && total && g > 1) {
        g = (g + 1) / 2;
        buf = (float *)etch_kernel_temp_try(ctx, (size_t)(g * tile_floats) * sizeof(float), 64);
    }
    if (!buf) { /* no scratch at all: the scalar loop on the OIHW weight */
        j.fn = NULL;
        run_rows(ctx, &j);
        return;
    }
    const int64_t groups = (ntiles + g - 1) / g;
    g = (ntiles + groups - 1) / groups; /* balanced groups */
    j.wpack = buf;
    for (int64_t t0 = 0; t0 < ntiles; t0 += g) {
        j.t0 = t0;
        j.nt = imin(g, ntiles - t0);
        pack_job pj = {s, t0, buf};
        etch_kernel_parallel_for(ctx, j.nt, 1, pack_tiles, &pj);
        run_rows(ctx, &j);
    }
}
