/* Optimized convolution and pooling kernels (entry points listed in table_conv.inc), and the
 * per-ISA row kernels of the depthwise 3x3 convolution they dispatch to. */
#ifndef ETCH_KERNELS_OPTIMIZED_OPT_CONV_H
#define ETCH_KERNELS_OPTIMIZED_OPT_CONV_H

#include "kernels/optimized/opt.h"

ETCH_OPT_KERNEL(convolution_out);
ETCH_OPT_KERNEL(max_pool2d_with_indices_out);
ETCH_OPT_KERNEL(avg_pool2d_out);
ETCH_OPT_KERNEL(adaptive_avg_pool2d_out);
/* Load-time prepare of aten::convolution.out (etch_kernels_register_prepare): a constant
 * weight packed, group by group, as the GEMM's A operand for the active ISA (conv.c). */
size_t etch_opt_convolution_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                    void *buf, size_t cap);

/* ---- one convolution call, as the paths of conv.c see it -------------------------------- */
typedef struct conv_shape {
    int64_t N, C_in, C_out, cin_g, cout_g, groups;
    int64_t IH, IW, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw; /* 1-D: IH = OH = KH = 1 */
    const float *in, *w, *bias;                             /* bias may be NULL */
    float *out;
    const etch_epilogue *epi; /* the fused activation (NULL: none) */
    const void *prep;         /* conv.c: its prepared weight, checked against this call */
} conv_shape;

/* The shape and pointers of chained call c (conv.c): its arguments parsed as the kernel does,
 * s->epi, s->prep (its prepared weight when it fits) set; false when the kernel's fast paths
 * cannot take them (or the output is not a bound, contiguous 4-D tensor of the computed
 * shape clear of the call's inputs). */
bool etch_opt_conv_call_shape(const etch_kernel_call *c, conv_shape *s);

/* The prepared weight of a channel-blocked call prepared outside the runtime (a backend, at
 * init): for the call s describes (its geometry and groups; s->in, s->out, s->w unused), from
 * the 4-D weight w(o, i, k) = w[o * ws[0] + i * ws[1] + k * ws[2]] (tap k = kh * KW + kw; OIHW
 * is {cin_g * KH * KW, KH * KW, 1}): the Winograd pack when s is etch_wino_eligible at its
 * output size (*wino set), else the NCHWc pack (groups == 1, C_in or C_out a multiple of 8),
 * or the depthwise pack (groups == C_in == C_out, a multiple of 8). Returns the bytes it needs
 * (buf NULL) or wrote into buf (64-aligned, cap bytes); 0 when s is none of these or cap is
 * short. With s->prep = buf, etch_opt_conv_nchwc / etch_opt_conv_dw_nchwc use it and never
 * read s->w, except the Winograd path, which falls back to the direct convolution on the OIHW
 * s->w when scratch is short (call etch_wino_conv first to keep that in hand). ctx may be
 * NULL (one thread). */
size_t etch_opt_conv_prepare_blocked(etch_kernel_context *ctx, const conv_shape *s,
                                     const float *w, const int64_t ws[3], bool *wino,
                                     void *buf, size_t cap);

/* Chain function of aten::convolution.out (etch_kernels_register_chain) and the run of a
 * chain it accepted (the kernel calls it when etch_kernel_chain_length > 1): the 1x1 ->
 * depthwise 3x3 -> 1x1 blocks of conv_chain.c. */
size_t etch_opt_convolution_chain(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                  size_t n);
void etch_opt_conv_chain_run(etch_kernel_context *ctx);

/* An inverted-residual block run as one by a caller outside the runtime's chains (a backend):
 * the same band loop, bitwise the calls one by one. s: the expand 1x1 or a stem (with has_e),
 * the depthwise 3x3, the project 1x1, every one's prep made by etch_opt_conv_prepare_blocked
 * (s[k].epi its activation), the tensors channel-blocked but a stem's NCHW input; s[0].in (or
 * s[1].in) the block's input, s[2].out its result; the intermediates are not written. With
 * add_r, the result is add_z = y + r (r + y unless y_first) with add_epi after it, y (s[2].out)
 * unwritten. */
typedef struct etch_conv_block {
    conv_shape s[3];
    bool has_e;
    const float *add_r;
    float *add_z;
    bool y_first;
    const etch_epilogue *add_epi;
} etch_conv_block;
/* Whether the block fits the band loop and is worth it (what the runtime's chain function
 * asks); *stem: s[0] is a stem. */
bool etch_opt_conv_block_ok(const etch_conv_block *b, bool *stem);
/* Run it: false, having written nothing, when it does not fit or scratch is short (then run
 * the calls one by one). */
bool etch_opt_conv_block_run(etch_kernel_context *ctx, const etch_conv_block *b);

/* Layout function of aten::convolution.out (etch_kernels_register_layout), conv.c. A 2-D
 * float convolution (not transposed) may take its input (args[0]) and output (args[9],
 * args[10]) channel-blocked (NCHW8c, etch/kernel.h):
 *   groups == 1:  output blocked when C_out % 8 == 0; input blocked when C_in % 8 == 0, in
 *                 any combination with the output (the first layer reads an NCHW image);
 *   depthwise (groups == C_in == C_out, C % 8 == 0): input and output both or neither;
 *   other grouped convolutions: neither.
 * Any kernel size, stride, padding and dilation; bias optional; the weight any float tensor
 * (a constant or not). The kernel then runs etch_opt_conv_nchwc / etch_opt_conv_dw_nchwc,
 * which must cover every such call. */
void etch_opt_convolution_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                 uint64_t *may, uint64_t *tied);

/* ---- channel-blocked convolution (conv_nchwc*.c) -------------------------------------------
 * groups == 1; input NCHW (in_blocked false) or NCHW8c (C_in % 8 == 0), output NCHW8c
 * (out_blocked; C_out % 8 == 0) or NCHW (then in_blocked is true); s->bias and s->epi applied.
 * s->prep is whatever etch_opt_convolution_prepare made for this call site at load (it sees
 * etch_kernel_blocked_args(ctx) then, so it can pack for this path) or NULL: the path checks
 * it before use. A Winograd pack (conv_nchwc.h: 3x3 stride 1 with enough output tiles) runs
 * the Winograd convolution, or the direct one when scratch cannot hold its transforms. Records a failure on ctx (never reads or writes out of bounds) when it
 * cannot run, e.g. too little scratch. */
void etch_opt_conv_nchwc(etch_kernel_context *ctx, const conv_shape *s, bool in_blocked,
                         bool out_blocked);

/* ---- channel-blocked depthwise convolution (conv_dw_nchwc*.c) -------------------------------
 * groups == C_in == C_out, C % 8 == 0, input and output NCHW8c; any kernel size, stride,
 * padding, dilation; s->bias and s->epi applied. */
void etch_opt_conv_dw_nchwc(etch_kernel_context *ctx, const conv_shape *s);
/* The same for a caller that stores both tensors blocked itself (a backend): no check of the
 * runtime's blocked arguments. */
void etch_opt_conv_dw_nchwc_blocked(etch_kernel_context *ctx, const conv_shape *s);

/* ---- depthwise 3x3, padding 1, stride 1 or 2 (conv_dw*.c) ---------------------------------
 * One output row: out[ow] = bias + sum over kh, kw of w[kh*3+kw] * r[kh][ow*stride - 1 + kw],
 * summed kh-major then kw (fused multiply-adds in the SIMD versions); a NULL r[kh] is a
 * padding row and is skipped, as are columns outside [0, W).
 *
 * The SIMD row functions compute out[ow0, ow1) in vector blocks, where [ow0, ow1) must hold
 * only interior columns (1 <= ow and ow*stride + 1 <= W - 1); a range that is not a whole
 * number of blocks ends with a block overlapping the previous one. They return where they
 * stopped (ow0 when the range is shorter than their narrowest block); the caller finishes the
 * row with etch_opt_dw3x3_cols_scalar. Each element's value depends only on its position and
 * the ISA (never on how a row or the planes are split), so every thread split gives identical
 * results. */
typedef struct etch_dw3x3_row {
    const float *r[3]; /* input rows for kh = 0, 1, 2 (NULL: padding) */
    const float *w;    /* the channel's 9 weights, row-major */
    float bias;
    float *out;
    int64_t W;  /* input row length */
    int stride; /* 1 or 2 */
} etch_dw3x3_row;

void etch_opt_dw3x3_cols_scalar(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1);
int64_t etch_opt_dw3x3_cols_avx2(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1);
int64_t etch_opt_dw3x3_cols_avx512(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1);
int64_t etch_opt_dw3x3_cols_neon(const etch_dw3x3_row *a, int64_t ow0, int64_t ow1);

/* ---- max pooling rows (pool*.c) -------------------------------------------------------------
 * One output row of max_pool2d over a contiguous float plane (H x W), windows kh x kw with
 * stride (sh, sw), padding (ph, pw), dilation 1: out[ow] / idx[ow] for ow in [ow0, ow1), which
 * must be interior columns (every window column inside [0, W)); rows h0..h1 (h1 exclusive,
 * already clipped). Same choice as the portable kernel: the first maximum, or the last NaN. */
typedef struct etch_maxpool_row {
    const float *plane;
    int64_t W, h0, h1, kw, sw, pw;
    float *out;
    int64_t *idx;
} etch_maxpool_row;

int64_t etch_opt_maxpool_cols_avx2(const etch_maxpool_row *a, int64_t ow0, int64_t ow1);
int64_t etch_opt_maxpool_cols_neon(const etch_maxpool_row *a, int64_t ow0, int64_t ow1);

#endif
