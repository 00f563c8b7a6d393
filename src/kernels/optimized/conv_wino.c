/*
 * Winograd F(4x4, 3x3) convolution on channel-blocked tensors (contract: conv_nchwc.h). Each
 * 4x4 output tile is A^T [U (.) (B^T d B)] A over its 6x6 input patch d; the element-wise
 * product, summed over input channels, is for each of the 36 transform points a 1x1
 * convolution of the tiles, run by the blocked convolution's register tile (nchwc_tile).
 *
 * Per group of tiles (every tile of an image when scratch allows), three parallel loops:
 *   1. the input transform, per (input block, tile), into v  [36][C/8][tiles][8]
 *   2. per (point, 16-channel output tile, pixel chunk), the 1x1 product into m
 *      [36][K/8][tiles][8], its input channels in passes whose weights stay in L1
 *   3. the output transform, per (output block, tile), plus the bias and the activation
 * Under one ISA every value is computed the same way whatever the thread split or the group
 * size (tests/optimized_nchwc checks the bits).
 */
#include <string.h>

#include "kernels/optimized/conv_nchwc.h"
#include "kernels/optimized/nchwc.h"

#define WINO_CHUNK 96          /* tiles per work item of the products */
#define WINO_DEPTH_BYTES 32768 /* packed weight of one channel tile summed per pass, at most */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

bool etch_wino_eligible(int64_t C_in, int64_t C_out, int64_t KH, int64_t KW, int64_t OH,
                        int64_t OW, int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
    return C_in > 0 && C_out > 0 && C_in % 8 == 0 && C_out % 8 == 0 && KH == 3 && KW == 3 &&
           sh == 1 && sw == 1 && dh == 1 && dw == 1 && OH > 0 && OW > 0 &&
           ((OH + 3) / 4) * ((OW + 3) / 4) >= WINO_MIN_TILES;
}

size_t etch_wino_packed_floats(int64_t C_out, int64_t C_in) {
    const size_t one = etch_nchwc_packed_floats(C_out, C_in, 1, 1);
    if (!one || (double)one * WINO_POINTS > 0x1p38)
        return 0;
    return one * WINO_POINTS;
}

/* y = G x for one column x of a 3x3 kernel: G, 6x3, is
 *   [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1] */
static void wino_g(double x0, double x1, double x2, double *y) {
    const double s = x0 + x2;
    y[0] = x0 / 4;
    y[1] = -(s + x1) / 6;
    y[2] = -(s - x1) / 6;
    y[3] = x0 / 24 + x1 / 12 + x2 / 6;
    y[4] = x0 / 24 - x1 / 12 + x2 / 6;
    y[5] = x2;
}

/* U = G g G^T of one 3x3 kernel, in double, point k = 6 * a + b at u[k] */
static void wino_u(const float *g, double *u) {
    double gt[3][6]; /* column q of G g at gt[q] */
    for (int q = 0; q < 3; q++)
        wino_g(g[q], g[3 + q], g[6 + q], gt[q]);
    for (int a = 0; a < 6; a++) {
        double row[6];
        wino_g(gt[0][a], gt[1][a], gt[2][a], row);
        for (int b = 0; b < 6; b++)
            u[a * 6 + b] = row[b];
    }
}

void etch_wino_pack(const float *w, int64_t C_out, int64_t C_in, int64_t oc0, int64_t oc1,
                    float *dst) {
    const int64_t ws[3] = {C_in * 9, 9, 1};
    etch_wino_pack_strided(w, ws, C_out, C_in, oc0, oc1, dst);
}

void etch_wino_pack_strided(const float *w, const int64_t ws[3], int64_t C_out, int64_t C_in,
                            int64_t oc0, int64_t oc1, float *dst) {
    const int64_t Cp = (C_out + 7) / 8 * 8, per = Cp * C_in; /* floats per point */
    oc1 = imin(oc1, Cp);
    double u[NCHWC_OCT][WINO_POINTS];
    /* a run of output channels within one 16-channel tile at a time, so that each point
     * receives whole runs of consecutive floats */
    for (int64_t oc = oc0; oc < oc1;) {
        const int64_t t = oc / NCHWC_OCT, c0 = oc % NCHWC_OCT;
        const int64_t oct = imin(NCHWC_OCT, Cp - t * NCHWC_OCT);
        const int64_t n = imin(oct - c0, oc1 - oc);
        for (int64_t ic = 0; ic < C_in; ic++) {
            for (int64_t c = 0; c < n; c++) {
                if (oc + c < C_out) {
                    float g[9];
                    for (int k = 0; k < 9; k++)
                        g[k] = w[(oc + c) * ws[0] + ic * ws[1] + k * ws[2]];
                    wino_u(g, u[c]);
                } else
                    memset(u[c], 0, sizeof u[c]);
            }
            /* the NCHWc pack of a 1x1 weight: tile t, block ic / 8, lane ic % 8, channel c */
            float *d = dst + t * NCHWC_OCT * C_in + (ic / 8) * 8 * oct + (ic % 8) * oct + c0;
            for (int k = 0; k < WINO_POINTS; k++)
                for (int64_t c = 0; c < n; c++)
                    d[k * per + c] = (float)u[c][k];
        }
        oc += n;
    }
}

/* ---- the products: per point, a 1x1 convolution of the tiles ------------------------------- */

typedef struct wino_job {
    nchwc_wino_job tj; /* the transforms' view of the group */
    const float *u;    /* the Winograd pack */
    int64_t C, Cp, ntk, chunks, depth_blocks;
    nchwc_tile_fn fn;
    bool fn_reps;
} wino_job;

static const float wino_zeros[NCHWC_OCT];

static void wino_products(void *arg, int64_t i0, int64_t i1) {
    const wino_job *j = (const wino_job *)arg;
    const int64_t nt = j->tj.nt, CB = j->tj.CB, KB = j->tj.KB;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t ch = i % j->chunks, r = i / j->chunks, tl = r % j->ntk, k = r / j->ntk;
        const int64_t oct = imin(NCHWC_OCT, j->Cp - tl * NCHWC_OCT);
        const int64_t base = nt / j->chunks, rem = nt % j->chunks;
        const int64_t p0 = ch * base + imin(ch, rem), p1 = p0 + base + (ch < rem ? 1 : 0);
        const float *in = j->tj.v + k * CB * nt * 8;
        float *out = j->tj.m + (k * KB + tl * 2) * nt * 8;
        nchwc_tile tt;
        etch_nchwc_tile_1x1(&tt, nt * 8, CB * 8, oct, nt * 8);
        tt.w = j->u + k * j->Cp * j->C + tl * NCHWC_OCT * j->C;
        tt.bias = wino_zeros;
        const int64_t ntl = (p1 - p0 + NCHWC_MR - 1) / NCHWC_MR; /* register tiles */
        /* The next item's weights, when they differ from these, prefetched into L2 over this
         * item's register tiles: with few tiles (a 14x14 output has 16) each weight is used
         * by 3 register tiles, and its first use otherwise waits on memory. */
        nchwc_prefetch pf = {NULL, 0, 0, 0};
        if (j->fn_reps && ch == j->chunks - 1 && (tl + 1 < j->ntk || k + 1 < WINO_POINTS)) {
            const int64_t nk = tl + 1 < j->ntk ? k : k + 1, ntl2 = tl + 1 < j->ntk ? tl + 1 : 0;
            const int64_t passes = (CB + j->depth_blocks - 1) / j->depth_blocks;
            pf = etch_nchwc_prefetch_plan(j->u + nk * j->Cp * j->C + ntl2 * NCHWC_OCT * j->C,
                                          imin(NCHWC_OCT, j->Cp - ntl2 * NCHWC_OCT) * j->C,
                                          ntl * passes, j->depth_blocks);
        }
        for (int64_t b0 = 0; b0 < CB; b0 += j->depth_blocks) {
            tt.b0 = b0;
            tt.b1 = imin(CB, b0 + j->depth_blocks);
            tt.accumulate = b0 > 0;
            etch_nchwc_tile_pixels(j->fn, j->fn_reps, &tt, in + p0 * 8, 8, out + p0 * 8,
                                   p1 - p0, &pf);
        }
    }
}

static void wino_in(void *arg, int64_t r0, int64_t r1) {
    const wino_job *j = (const wino_job *)arg;
    etch_opt_nchwc_rows()->wino_in(&j->tj, r0, r1);
}

static void wino_out(void *arg, int64_t r0, int64_t r1) {
    const wino_job *j = (const wino_job *)arg;
    etch_opt_nchwc_rows()->wino_out(&j->tj, r0, r1);
}

bool etch_wino_conv(etch_kernel_context *ctx, const conv_shape *s, const float *u, int act,
                    float lo, float hi, const etch_epilogue *post) {
    if (!etch_wino_eligible(s->C_in, s->C_out, s->KH, s->KW, s->OH, s->OW, s->sh, s->sw, s->dh,
                            s->dw) ||
        s->groups != 1 || s->N <= 0)
        return false;
    const int64_t TW = (s->OW + 3) / 4, T = (s->OH + 3) / 4 * TW;
    const int64_t CB = s->C_in / 8, KB = s->C_out / 8;
    /* scratch: v and m for a group of tiles, the whole image if it fits */
    const double per_tile = (double)WINO_POINTS * (double)(s->C_in + s->C_out) * sizeof(float);
    int64_t G = T;
    float *v = NULL;
    while (!v) {
        if ((double)G * per_tile < 0x1p40)
            v = (float *)etch_kernel_temp_try(ctx, (size_t)((double)G * per_tile), 64);
        if (!v && G == 1)
            return false;
        if (!v)
            G = (G + 1) / 2;
    }
    float *m = v + G * WINO_POINTS * s->C_in;
    const int64_t groups = (T + G - 1) / G;
    G = (T + groups - 1) / groups; /* balanced groups */

    wino_job j;
    memset(&j, 0, sizeof j);
    j.tj.IH = s->IH;
    j.tj.IW = s->IW;
    j.tj.OH = s->OH;
    j.tj.OW = s->OW;
    j.tj.ph = s->ph;
    j.tj.pw = s->pw;
    j.tj.TW = TW;
    j.tj.CB = CB;
    j.tj.KB = KB;
    j.tj.v = v;
    j.tj.m = m;
    j.tj.bias = s->bias;
    j.tj.act = act;
    j.tj.lo = lo;
    j.tj.hi = hi;
    j.tj.post = post;
    j.u = u;
    j.C = s->C_in;
    j.Cp = s->C_out;
    j.ntk = (s->C_out + NCHWC_OCT - 1) / NCHWC_OCT;
    j.fn = etch_nchwc_tile_active(&j.fn_reps);
    const int64_t per_pass = imin(CB, WINO_DEPTH_BYTES / (8 * NCHWC_OCT * 4));
    const int64_t passes = (CB + per_pass - 1) / per_pass;
    j.depth_blocks = (CB + passes - 1) / passes;
    for (int64_t n = 0; n < s->N; n++) {
        j.tj.in = s->in + n * s->C_in * s->IH * s->IW;
        j.tj.out = s->out + n * s->C_out * s->OH * s->OW;
        for (int64_t t0 = 0; t0 < T; t0 += G) {
            j.tj.t0 = t0;
            j.tj.nt = imin(G, T - t0);
            j.chunks = (j.tj.nt + WINO_CHUNK - 1) / WINO_CHUNK;
            etch_kernel_parallel_for(ctx, CB * j.tj.nt, 16, wino_in, &j);
            etch_kernel_parallel_for(ctx, WINO_POINTS * j.ntk * j.chunks, 1, wino_products, &j);
            etch_kernel_parallel_for(ctx, KB * j.tj.nt, 16, wino_out, &j);
        }
    }
    return true;
}
