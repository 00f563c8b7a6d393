/*
 * The XNNPACK delegate payload as ExecuTorch's XnnpackBackend serializes it, read into a graph
 * etch executes with its own kernels (no XNNPACK library).
 *
 * Payload layouts (all little endian):
 *   - with a header ("XH00" at byte 4; ExecuTorch >= 0.2): u16 header length at 8 (30), then
 *     u32 flatbuffer offset, u32 flatbuffer size, u32 constant data offset, u64 constant data
 *     size; constants are referenced by ConstantDataOffset (offset into the
 *     constant data, or a named_key looked up in the program's named data / a .ptd);
 *   - without one (2023 files): the XNNGraph flatbuffer at byte 0, constants inline in its
 *     deprecated constant_buffer table.
 * Everything is verified before use: ids, ranks, dims, constant ranges and sizes, node inputs
 * and outputs (each intermediate written once, before it is read), datatypes per node kind.
 */
#ifndef ETCH_BACKENDS_XNNPACK_XNN_GRAPH_H
#define ETCH_BACKENDS_XNNPACK_XNN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/backend.h"
#include "etch/kernel.h"

#define XNN_MAX_DIMS 6
#define XNN_INVALID_ID 0xffffffffu
#define XNN_FLAG_EXTERNAL_INPUT 1u
#define XNN_FLAG_EXTERNAL_OUTPUT 2u

/* XNNDatatype, as numbered in the schema. */
enum {
    XDT_INVALID = 0,
    XDT_FP32 = 1,
    XDT_FP16 = 2,
    XDT_QINT8 = 3,
    XDT_QUINT8 = 4,
    XDT_QINT32 = 5,
    XDT_QCINT8 = 6,
    XDT_QCINT32 = 7,
    XDT_QCINT4 = 8,
    XDT_QDINT8 = 9,
    XDT_QBINT4 = 10,
};

/* XNodeUnion members, numbered as in the schema (union type byte). */
enum {
    XN_ADD = 1, XN_FULLY_CONNECTED, XN_SOFTMAX, XN_SIGMOID, XN_STATIC_TRANSPOSE, XN_CLAMP,
    XN_CONV2D, XN_DIV, XN_RESIZE_BILINEAR, XN_CONSTANT_PAD, XN_AVG_POOL, XN_MINIMUM,
    XN_DEPTHWISE_CONV2D, XN_MAX_POOL, XN_MULTIPLY, XN_SUBTRACT, XN_FLOOR, XN_CONVERT,
    XN_GLOBAL_AVG_POOL, XN_STATIC_RESHAPE, XN_ARGMAX_POOL, XN_SQRT, XN_CEILING, XN_HARDSWISH,
    XN_LEAKY_RELU, XN_MAXIMUM, XN_NEGATE, XN_SQUARE, XN_ELU, XN_ABS, XN_PRELU, XN_CONCAT2,
    XN_CONCAT3, XN_CONCAT4, XN_STATIC_SLICE, XN_SDPA, XN_BMM, XN_CONCAT5, XN_CONV_TRANSPOSE2D,
    XN_RSQRT, XN_LOG, XN_GELU, XN_TANH, XN_EXP, XN_SIN,
    XN_KIND_COUNT
};
const char *xnn_node_kind_name(int kind);
const char *xnn_datatype_name(int dt);

/* Quantization of a value. */
enum { XQ_NONE = 0, XQ_PER_CHANNEL = 1, XQ_PER_TENSOR = 2, XQ_PER_TOKEN = 3, XQ_BLOCKWISE = 4 };
typedef struct xnn_quant {
    int kind;
    float scale;          /* per tensor */
    int32_t zero_point;   /* per tensor */
    const float *scales;  /* per channel: [dims[channel_dim]]; blockwise: [channels * blocks] */
    uint32_t num_scales;
    int32_t channel_dim;
    int32_t group_size;      /* blockwise */
    int32_t num_nonbatch_dims; /* per token (dynamic) */
} xnn_quant;

/* How an fp32 rank-4 value (logically NHWC, as XNNPACK sees it) is stored while executing:
 * as is, channel-blocked [N][C/8][H][W][8] (C a multiple of 8; the layout etch's fastest
 * convolutions read and write: kernels/optimized/nchwc.h), or NCHW. Chosen at load
 * (xnn_layout.c); external and constant values are always NHWC. */
enum { XL_NHWC = 0, XL_BLK = 1, XL_NCHW = 2 };

typedef struct xnn_value {
    int dtype;                  /* XDT_* */
    uint8_t layout;             /* XL_* */
    uint32_t rank;
    int64_t bound[XNN_MAX_DIMS]; /* serialized dims: the shape, or its upper bound */
    int64_t dims[XNN_MAX_DIMS];  /* current shape (set by reshape at execute) */
    uint32_t flags;              /* XNN_FLAG_EXTERNAL_* */
    uint32_t external_id;
    bool is_constant;            /* names constant data */
    const uint8_t *constant;     /* its bytes (NULL while measuring named data) */
    size_t constant_size;
    uint8_t *data;               /* where the value lives while executing */
    size_t capacity;             /* bytes behind data (intermediates) */
    int64_t offset;              /* planned offset in the arena (-1: none) */
    int32_t producer, last_use;  /* node indices (-1: none) */
    int32_t alias_of;            /* shares this earlier value's storage (-1: none; set at load
                                    for reshapes and fused clamps, xnn_layout.c) */
    /* per token (qdint8): scales and zero points of the current rows, computed at execute */
    float *row_scale;
    int32_t *row_zp;
    int64_t max_rows;
    xnn_quant q;
} xnn_value;

typedef struct xnn_node {
    int kind;
    uint32_t index; /* in the payload's xnodes */
    uint32_t in[5];
    uint32_t nin;
    uint32_t out[2];
    uint32_t nout;
    uint32_t flags;
    float out_min, out_max; /* output clamp (±inf when absent) */
    /* kind-specific parameters */
    uint32_t pad[4];        /* top, right, bottom, left */
    uint32_t kh, kw, sh, sw, dh, dw;
    uint32_t groups, gic, goc, adj_h, adj_w;
    uint32_t perm[XNN_MAX_DIMS];
    uint32_t pre[XNN_MAX_DIMS], post[XNN_MAX_DIMS];
    int64_t shape[XNN_MAX_DIMS]; /* reshape: new shape; slice: sizes */
    int64_t offsets[XNN_MAX_DIMS];
    uint32_t num_dims;
    uint32_t axis;
    float alpha;      /* leaky relu slope, elu alpha, pad value */
    uint32_t new_h, new_w;
    /* weights prepared at init: a float copy of a quantized / fp16 filter and bias, and the
     * float filter packed for the SGEMM (one per group; NULL: packed at every call) */
    float *wf, *bf;
    struct etch_sgemm_packed *wp;
    /* a convolution run on the channel-blocked kernels (blk): its weight prepared for them
     * (etch_opt_conv_prepare_blocked; wino: the Winograd pack) */
    bool blk, wino;
    void *prep;
    /* a quantized product run on the integer kernels (xnn_quant.c; NULL: the float path) */
    struct xnn_qnode *qn;
    /* an inverted-residual block run as one (1x1 or stem -> depthwise -> 1x1 [-> residual
     * add], consecutive nodes, xnn_layout.c): its last node has block_len > 0 and runs the
     * nodes from block_first on; the others have in_block set and are skipped */
    uint32_t block_first, block_len;
    bool in_block;
    etch_epilogue epi; /* the output range as the blocked kernels' activation (block nodes) */
    size_t scratch; /* bytes of scratch this node needs at the largest shapes */
} xnn_node;

typedef struct xnn_graph {
    xnn_value *values;
    uint32_t nvalues;
    xnn_node *nodes;
    uint32_t nnodes;
    uint32_t *inputs;  /* value indices in the DelegateCall's argument order */
    uint32_t ninputs;
    uint32_t *outputs;
    uint32_t noutputs;
    uint8_t *arena;    /* intermediates */
    size_t arena_size;
    uint8_t *scratch;  /* per-node scratch (dequantized operands, im2col tiles) */
    size_t scratch_size;
    /* the inputs' dims the shapes were last derived for (ninputs x XNN_MAX_DIMS), valid when
     * shaped: an execute with the same input dims skips xnn_ops_reshape */
    int64_t *shaped_dims;
    bool shaped;
} xnn_graph;

/* Allocation through the init context's allocator, counting the bytes (alignment included). */
typedef struct xnn_alloc {
    const etch_backend_init_context *ctx;
    size_t used;
    bool measure; /* pool_size: bulk buffers are only counted */
} xnn_alloc;
void *xnn_alloc_bytes(xnn_alloc *a, size_t size, size_t align);
/* The arena, scratch and converted weights: when measuring, counted and not allocated (the
 * pointer returned is not to be dereferenced). */
void *xnn_alloc_bulk(xnn_alloc *a, size_t size, size_t align);
void *xnn_alloc_zeroed(xnn_alloc *a, size_t size, size_t align);

/* Parse and verify the payload, prepare weights, plan memory, all from a->ctx's allocator.
 * A context without named_data measures (pool_size): constants held in named data are then
 * not read, and nothing derived from their bytes is computed. Errors: etch_last_error(). */
etch_status xnn_graph_load(const uint8_t *blob, size_t size, const etch_backend_init_context *ctx,
                           xnn_alloc *a, xnn_graph *g);

/* Bytes of one element row of `dt` for n elements (4-bit types round up). */
size_t xnn_dtype_bytes(int dt, int64_t n);
int64_t xnn_numel(const int64_t *dims, uint32_t rank);
/* Whether a and b have the same current shape. */
bool xnn_same_dims(const xnn_value *a, const xnn_value *b);

#endif
