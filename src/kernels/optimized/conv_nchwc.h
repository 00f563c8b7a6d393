/* Internal interface of the channel-blocked (NCHW8c) convolution, groups == 1 (conv_nchwc*.c;
 * the entry point etch_opt_conv_nchwc is declared in opt_conv.h).
 *
 * Packed weight ("NCHWc pack"), the same for every ISA: output channels padded to Cp, a
 * multiple of 8, in tiles of 16 (the last one 8 wide when Cp % 16 == 8). Tile t (starting at
 * t * 16 * C_in * KH * KW floats) holds, for each input-channel block b of cb lanes (8, or
 * C_in % 8 for the last block of an NCHW input), at b * 8 * KH * KW * oct from the tile:
 *     [kh][kw][lane < cb][oct]        oct = the tile's width (16 or 8)
 * Channels past C_out are zeros. */
#ifndef ETCH_KERNELS_OPTIMIZED_CONV_NCHWC_H
#define ETCH_KERNELS_OPTIMIZED_CONV_NCHWC_H

#include "kernels/optimized/opt_conv.h"

#define NCHWC_MR 6  /* output pixels per register tile */
#define NCHWC_OCT 16 /* output channels per tile (the last may be 8) */

/* Floats of the NCHWc pack of a [C_out, C_in, KH, KW] weight; 0 when it would not fit in
 * memory. */
size_t etch_nchwc_packed_floats(int64_t C_out, int64_t C_in, int64_t KH, int64_t KW);
/* Pack tiles [t0, t1) of the OIHW weight w into dst (which receives tile t0 first). */
void etch_nchwc_pack(const float *w, int64_t C_out, int64_t C_in, int64_t KH, int64_t KW,
                     int64_t t0, int64_t t1, float *dst);
/* The same from any weight layout: w(o, i, k) = w[o * ws[0] + i * ws[1] + k * ws[2]], tap
 * k = kh * KW + kw (OIHW: {C_in * KH * KW, KH * KW, 1}; OHWI: {KH * KW * C_in, 1, C_in}). */
void etch_nchwc_pack_strided(const float *w, const int64_t ws[3], int64_t C_out, int64_t C_in,
                             int64_t KH, int64_t KW, int64_t t0, int64_t t1, float *dst);

/* The NCHWc pack conv.c's prepare function made for this call (checked against it), or NULL
 * (conv.c). */
const float *etch_opt_conv_prep_nchwc(const conv_shape *s);
/* The Winograd pack conv.c's prepare function made for this call, or NULL (conv.c). */
const float *etch_opt_conv_prep_wino(const conv_shape *s);
/* The depthwise pack ([C/8][KH*KW][8]) conv.c's prepare function made for this call, or NULL
 * (conv.c). */
const float *etch_opt_conv_prep_dw(const conv_shape *s);

/* One register tile: np (1..NCHWC_MR) output pixels, consecutive in the output (p0 + j),
 * times the oct (16 or 8) output channels of one tile; every pixel shares the window taps
 * [kh0, kh0 + nkh) x [kw0, kw0 + nkw) (the caller clips them at the image's borders; an empty
 * window gives the bias alone). Pixel j reads its window from px[j] on:
 *   out[pixel j][channel c] = bias[c] + sum over blocks b, taps kh, kw (in that order), lanes
 *                             l < cb of px[j][b*bs + kh*khs + kw*kws + l*ls] * w(...)
 * over the blocks [b0, b1); with `accumulate`, the sum starts from out[j][c] instead of the
 * bias (the same additions in the same order as one call over all blocks).
 * then clamped to [lo, hi] when act is set (relu: [0, +inf]; NaN passes through). Each value
 * depends only on its inputs and the ISA, never on np or the tile's place. */
typedef struct nchwc_tile {
    const float *px[NCHWC_MR]; /* input of pixel j at block 0, tap (kh0, kw0), lane 0 */
    const float *w;    /* the tile's packed weights (its start) */
    const float *bias; /* oct values (never NULL) */
    float *out;        /* blocked: pixel 0 of the tile's first block; NCHW: channel 0, pixel 0 */
    int64_t ls, bs, khs, kws;     /* input strides (floats): lane, block, kh, kw step */
    int64_t nb;                   /* input channel blocks */
    int64_t b0, b1;               /* the blocks summed by this call: [b0, b1) */
    bool accumulate;              /* blocked output only: start from the output's values
                                     (the sum over blocks before b0) instead of the bias */
    int64_t KW;                   /* the kernel's full width (weight indexing) */
    int64_t wbs;                  /* weight block stride: 8 * KH * KW * oct */
    int64_t kh0, kw0, nkh, nkw;   /* the window taps used */
    int64_t obs;                  /* blocked output: the second block's offset from the first;
                                     NCHW output: the channel plane stride */
    int cb_last;                  /* lanes of the last block (8 but for an NCHW input) */
    int oct;                      /* 16 or 8 */
    int np;                       /* pixels, 1..NCHWC_MR */
    int oc_valid;                 /* NCHW output: channels to store (<= oct) */
    bool out_nchw;                /* NCHW output: pixel stride 1, channel stride obs */
    bool act;                     /* clamp to [lo, hi] */
    float lo, hi;
    /* x86 tiles only (conv_nchwc.c runs the repetitions itself for the others): the tile is
     * run `reps` (>= 1) times, each time on the next np pixels: every px[j] advanced by pstep
     * floats and out by np pixels */
    int64_t reps, pstep;
    /* x86 tiles only, a hint: prefetch (into L2) the lines [pf, pf_end), pf_n of them per
     * window step (tap, or block of a 1x1); pf NULL: none. The driver points it at the packed
     * weights of the next pass, a slice per tile, so that they stream in spread over the
     * current pass instead of missing at its start. */
    const float *pf, *pf_end;
    int64_t pf_n;
} nchwc_tile;

typedef void (*nchwc_tile_fn)(const nchwc_tile *t);

/* The tile function of the active ISA; *reps: whether it runs nchwc_tile.reps itself. */
nchwc_tile_fn etch_nchwc_tile_active(bool *reps);
/* Run tile t's reps (>= 1) repetitions with fn: one call when fn_reps (fn runs them itself),
 * else one call per repetition, each on the next np pixels (etch_nchwc_tile_next). */
void etch_nchwc_tile_run(nchwc_tile_fn fn, bool fn_reps, const nchwc_tile *t);
/* Move a one-repetition tile to the next np pixels of a run: every px[j] by pstep floats, out
 * by np pixels. */
void etch_nchwc_tile_next(nchwc_tile *t, int64_t pstep);

/* The activation e (NULL: none) as the register tile applies it (act, clamped to [lo, hi]:
 * relu [0, +inf], clamp its bounds, none: act false); false for one it cannot apply (the
 * caller applies it after the tiles). */
bool etch_nchwc_tile_act(const etch_epilogue *e, bool *act, float *lo, float *hi);

/* The fields of a register tile for a 1x1 convolution between channel-blocked planes: input
 * planes in_ps floats apart, C_in channels (a multiple of 8; every block summed), a channel tile
 * of oct (8 or 16) outputs whose second block lies out_ps floats after its first. Everything
 * else is zeroed: w, bias, the activation and the pixels (etch_nchwc_tile_pixels) are the
 * caller's. */
void etch_nchwc_tile_1x1(nchwc_tile *tt, int64_t in_ps, int64_t C_in, int64_t oct,
                         int64_t out_ps);

/* n pixels in register tiles of as equal a width as can be: `extra` tiles of base + 1
 * pixels, then tiles of `base`. */
typedef struct nchwc_split {
    int64_t base, extra;
} nchwc_split;
nchwc_split etch_nchwc_split_pixels(int64_t n);

/* Packed weights the tiles that run next will read, prefetched into L2 by the tiles running
 * now (the x86 tiles' pf fields): `len` floats from `start`, whole lines, a slice per
 * register tile call over `calls` calls, spread over each call's `steps` window steps. */
typedef struct nchwc_prefetch {
    const float *next; /* the next line to prefetch */
    int64_t left;      /* floats still to prefetch from next on */
    int64_t slice;     /* floats per register tile call (whole lines) */
    int64_t per_step;  /* lines per window step */
} nchwc_prefetch;
nchwc_prefetch etch_nchwc_prefetch_plan(const float *start, int64_t len, int64_t calls,
                                        int64_t steps);
/* Hand the next `reps` register tile calls' slices to tt (none left: pf NULL). */
void etch_nchwc_prefetch_slice(nchwc_prefetch *p, nchwc_tile *tt, int64_t reps);

/* Run tile tt (all but its pixel fields set) over n pixels written consecutively to blocked
 * planes from out on, pixel i's input (its window's first tap) at in + i * in_step (8 for
 * consecutive pixels of blocked planes), in register tiles of equal width (two runs, widths
 * from etch_nchwc_split_pixels); with pf, each run takes its prefetch slices. */
void etch_nchwc_tile_pixels(nchwc_tile_fn fn, bool fn_reps, nchwc_tile *tt, const float *in,
                            int64_t in_step, float *out, int64_t n, nchwc_prefetch *pf);

/* The padded copy of image n of a convolution's NCHW input (C_in <= 8) as [H + 2 ph][W + 2 pw]
 * [C_in], zeros in the padding: what the channel-blocked convolution reads an image through
 * (each window row one run of KW * C_in lanes). dst holds C_in * (H + 2 ph) * (W + 2 pw)
 * floats; the rows are copied in parallel. */
void etch_nchwc_copy_interleaved(etch_kernel_context *ctx, const conv_shape *s, int64_t n,
                                 float *dst);

void etch_nchwc_tile_scalar(const nchwc_tile *t);
void etch_nchwc_tile_avx2(const nchwc_tile *t);
/* 16-wide tiles with a blocked output; the others go to etch_nchwc_tile_avx2 */
void etch_nchwc_tile_avx512(const nchwc_tile *t);
void etch_nchwc_tile_neon(const nchwc_tile *t);

/* ---- Winograd F(4x4, 3x3) (conv_wino.c) -----------------------------------------------------
 * A 3x3 convolution, stride 1, dilation 1, groups 1, input and output blocked, as 36
 * products in the transform domain (nchwc.h: the input and output transforms): 4 multiplies
 * per output where the direct convolution has 9, at the cost of rounding error a few times
 * larger (the transforms' coefficients reach 8 and 1/24) and 4x the packed weight.
 *
 * Transformed weight ("Winograd pack"): for each point k of 36 the NCHWc pack of the
 * [C_out, C_in, 1, 1] matrix U_k, U = G g G^T per output and input channel (computed in
 * double, rounded once). */
#define WINO_POINTS 36
/* Output tiles (4x4) a call needs at least: with fewer (resnet18's 7x7 layers have 4) the
 * transformed weight costs more to stream from memory than the multiplications it saves. */
#define WINO_MIN_TILES 16

/* Whether a convolution of this geometry takes the Winograd path (its weight is then prepared
 * as the Winograd pack). */
bool etch_wino_eligible(int64_t C_in, int64_t C_out, int64_t KH, int64_t KW, int64_t OH,
                        int64_t OW, int64_t sh, int64_t sw, int64_t dh, int64_t dw);
/* Floats of the Winograd pack; 0 when it would not fit in memory. */
size_t etch_wino_packed_floats(int64_t C_out, int64_t C_in);
/* Write the output channels [oc0, oc1) (of the padded count) of the Winograd pack of the
 * [C_out, C_in, 3, 3] weight w into dst (the whole pack's buffer). */
void etch_wino_pack(const float *w, int64_t C_out, int64_t C_in, int64_t oc0, int64_t oc1,
                    float *dst);
/* The same from any weight layout (ws as for etch_nchwc_pack_strided). */
void etch_wino_pack_strided(const float *w, const int64_t ws[3], int64_t C_out, int64_t C_in,
                            int64_t oc0, int64_t oc1, float *dst);
/* Run the call s (eligible; input and output blocked) on the Winograd pack u, with relu /
 * clamp (act 1 / 2, [lo, hi]) or another activation (post) applied. Returns false, having
 * written nothing, when scratch cannot hold the transforms of one output tile. */
bool etch_wino_conv(etch_kernel_context *ctx, const conv_shape *s, const float *u, int act,
                    float lo, float hi, const etch_epilogue *post);

#endif
