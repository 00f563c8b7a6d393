/* Channel-blocked (NCHW8c, etch/kernel.h) depthwise convolution, max pooling and the
 * global average (mean over H and W): the per-ISA row functions (conv_dw_nchwc.c for the
 * scalar ISA, conv_dw_nchwc_avx2.c, conv_dw_nchwc_neon.c; one body, nchwc_body.inc) and the
 * layout functions of the pooling and mean kernels (pool.c, norm.c).
 *
 * A blocked plane is one (image, channel block) pair: plane p = n * C/8 + cb holds H * W
 * pixels of 8 floats (element (h, w, c % 8) at (h * W + w) * 8 + c % 8). Every row function
 * computes each output element in a fixed order that depends only on its position, so any
 * split of [r0, r1) over threads gives the same bits. */
#ifndef ETCH_KERNELS_OPTIMIZED_NCHWC_H
#define ETCH_KERNELS_OPTIMIZED_NCHWC_H

#include "kernels/optimized/opt.h"

/* ---- depthwise convolution ------------------------------------------------------------------
 * Item r = plane * OH + oh: one output row of one channel block. Per output pixel: the bias
 * (0 without one), then one fused multiply-add (a multiply and an add for the scalar ISA) per
 * tap inside the input, kh-major then kw; then the activation: relu / clamp in registers
 * (act 1 / 2; NaN passes through), any other epilogue (post) over the finished row. */
typedef struct nchwc_dw_job {
    int64_t CB, IH, IW, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw;
    const float *in, *w, *bias; /* w: [C][1][KH][KW] as given; bias [C] or NULL */
    const float *wpk; /* the same weight as [C/8][KH*KW][8] (etch_opt_conv_prep_dw), or NULL */
    int64_t ips; /* floats from one input plane to the next; 0: IH * IW * 8 (a whole image) */
    int64_t ring, ring0; /* ring > 0: a plane's rows are a ring of `ring` rows of IW pixels,
                            input row ih at row (ih + ring0) % ring of it */
    float *out;
    int act; /* 0 none, 1 relu, 2 clamp to [lo, hi] */
    float lo, hi;
    const etch_epilogue *post; /* applied after the row when act == 0; NULL: none */
} nchwc_dw_job;

/* ---- max_pool2d_with_indices ------------------------------------------------------------------
 * Item r = plane * OH + oh. The portable kernel's window walk (rows then columns, clipped to
 * the input, dilation steps) keeping the first maximum or the last NaN; the index is
 * ih * W + iw within the plane (stored as int64, one per element, blocked like the values);
 * the caller checks H * W < 2^31. */
typedef struct nchwc_maxpool_job {
    int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
    const float *in;
    float *out;
    int64_t *idx;
} nchwc_maxpool_job;

/* ---- mean over H and W --------------------------------------------------------------------
 * Item = plane; out[plane * 8 + l] (the NCHW [N, C] / [N, C, 1, 1] output) = the sum of the
 * plane's H * W values of lane l in double, divided by H * W, rounded to float. chunked:
 * the portable mean's order (partial sums of 128 consecutive pixels added to the total);
 * otherwise one running sum in pixel order (the portable adaptive average pool's). */
typedef struct nchwc_mean_job {
    int64_t HW;
    const float *in;
    float *out;
    bool chunked;
} nchwc_mean_job;

/* ---- Winograd F(4x4, 3x3) transforms (conv_wino.c) -----------------------------------------
 * Output tile t = ty * TW + tx covers output rows 4ty..4ty+3, columns 4tx..4tx+3 and reads
 * the 6x6 input patch from row 4ty - ph, column 4tx - pw on (zeros outside the image). A
 * group holds the tiles [t0, t0 + nt); point k = 6 * i + j of the 6x6 transform domain is a
 * blocked "image" of nt pixels:
 *   v: [36][CB][nt][8]   input transform  B^T d B of each tile and input-channel block
 *   m: [36][KB][nt][8]   its product with the transformed weights (per point a 1x1 conv)
 * wino_in item r = cb * nt + (t - t0): one tile of one input block into v;
 * wino_out item r = kb * nt + (t - t0): A^T m A of one tile of one output block, plus the
 * bias, then the activation (act 1 relu / 2 clamp in registers, else post over the stored
 * rows), stored to the output pixels that exist. Each value depends only on its inputs and
 * the ISA. */
typedef struct nchwc_wino_job {
    int64_t IH, IW, OH, OW, ph, pw, TW, t0, nt, CB, KB;
    const float *in; /* one image, blocked [CB][IH][IW][8] */
    float *v, *m;
    float *out; /* one image, blocked [KB][OH][OW][8] */
    const float *bias; /* [KB * 8] or NULL */
    int act;
    float lo, hi;
    const etch_epilogue *post;
} nchwc_wino_job;

typedef struct nchwc_rows {
    void (*dw)(const nchwc_dw_job *j, int64_t r0, int64_t r1);
    void (*maxpool)(const nchwc_maxpool_job *j, int64_t r0, int64_t r1);
    void (*mean)(const nchwc_mean_job *j, int64_t p0, int64_t p1);
    void (*wino_in)(const nchwc_wino_job *j, int64_t r0, int64_t r1);
    void (*wino_out)(const nchwc_wino_job *j, int64_t r0, int64_t r1);
} nchwc_rows;

extern const nchwc_rows etch_opt_nchwc_rows_scalar;
extern const nchwc_rows etch_opt_nchwc_rows_avx2;
extern const nchwc_rows etch_opt_nchwc_rows_neon;
/* The row functions of the active ISA (AVX-512 machines use the AVX2 ones). */
const nchwc_rows *etch_opt_nchwc_rows(void);

/* Run the blocked global average over planes (pool.c and norm.c share it). */
void etch_opt_nchwc_mean(etch_kernel_context *ctx, const nchwc_mean_job *j, int64_t planes);
/* The blocked max pooling of j over its rows (N * C/8 * OH), in parallel (pool.c). */
void etch_opt_nchwc_maxpool(etch_kernel_context *ctx, const nchwc_maxpool_job *j, int64_t rows);

/* ---- layout functions (etch_kernels_register_layout) ------------------------------------------
 * max_pool2d_with_indices.out: self (0), out (6), indices (7) and the result list (8) blocked,
 * {0, 6, 7} tied, for a 4-D float self whose arguments the kernel takes (pool.c).
 * _adaptive_avg_pool2d.out: self (0) blocked when the output size is 1x1 (pool.c).
 * mean.out: self (0) blocked when a 4-D float self is reduced over dims {2, 3} (any order,
 * negative allowed), dtype None (norm.c). Outputs of the last two stay NCHW. */
void etch_opt_max_pool2d_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                uint64_t *may, uint64_t *tied);
void etch_opt_adaptive_avg_pool2d_layout(etch_kernel_context *ctx, etch_value **args,
                                         size_t nargs, uint64_t *may, uint64_t *tied);
void etch_opt_mean_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                          uint64_t *may, uint64_t *tied);

#endif
