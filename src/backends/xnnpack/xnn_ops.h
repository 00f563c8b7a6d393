/* Node semantics of the XNNPACK graph: shape rules, load-time preparation, execution. */
#ifndef ETCH_BACKENDS_XNNPACK_XNN_OPS_H
#define ETCH_BACKENDS_XNNPACK_XNN_OPS_H

#include "backends/xnnpack/xnn_graph.h"
#include "etch/kernel.h"

/* At load: check each node's operands (kinds, datatypes, constant weights), infer every
 * intermediate's shape from the inputs' bounds and size it, convert non-fp32 weights to
 * float once, size the scratch. */
etch_status xnn_ops_prepare(xnn_graph *g, xnn_alloc *a);

/* At load, after xnn_ops_prepare's shapes and weights (xnn_layout.c): choose each value's
 * layout (XL_*) so that runs of convolutions, element-wise nodes, pooling and concatenation
 * over channels stay channel-blocked, mark the nodes that run the blocked kernels and prepare
 * their weights for them. */
etch_status xnn_layout_plan(xnn_graph *g, xnn_alloc *a);
/* Which layout node n reads input k in (the value is converted into scratch when its own
 * differs); a rank-4 fp32 value's layout is its own otherwise. */
int xnn_layout_wanted(const xnn_graph *g, const xnn_node *n, uint32_t k);
/* Whether n is an element-wise node (one or two same-shaped inputs), a pooling or a channel
 * concatenation that may run on channel-blocked values as they are. */
bool xnn_layout_tied(const xnn_graph *g, const xnn_node *n);
/* The conv_shape of a blocked convolution node at its current dims (in, out, w: NULL). */
struct conv_shape;
void xnn_layout_conv_shape(const xnn_graph *g, const xnn_node *n, struct conv_shape *s);
/* The block a node with block_len > 0 ends, at the current dims and data pointers. */
struct etch_conv_block;
void xnn_layout_block(const xnn_graph *g, const xnn_node *last, struct etch_conv_block *b);

/* Quantized fully connected / convolution nodes on the integer kernels (xnn_quant.c). At load,
 * after the node's shapes: plan node n (n->qn set when it fits: its weights packed or repacked,
 * never converted to float). */
etch_status xnn_quant_prepare(xnn_graph *g, xnn_node *n, xnn_alloc *a);
/* Scratch bytes the plan of n needs at the current shapes (n->qn set). */
size_t xnn_quant_scratch(const xnn_graph *g, const xnn_node *n);
/* What the caller hands xnn_quant_run: float rows of input 0 (the layout and type converted as
 * usual), a float bias, a float output buffer (converted to the output's type afterwards). */
enum { XQ_IO_FLOAT_IN = 1u, XQ_IO_FLOAT_OUT = 2u, XQ_IO_FLOAT_BIAS = 4u };
unsigned xnn_quant_io(const xnn_node *n);
/* Run n (n->qn set): xf / bias / yf as xnn_quant_io asks (NULL otherwise), scratch of at least
 * xnn_quant_scratch bytes (sized at load for the bounds). Integer outputs are written to the output value's data, clamped to
 * the node's output range; float ones to yf, unclamped. */
etch_status xnn_quant_run(xnn_graph *g, xnn_node *n, etch_kernel_context *ctx, const float *xf,
                          const float *bias, float *yf, void *scratch);

/* Every node's output shape from the inputs' current dims (checked against the planned
 * capacities of intermediates; external outputs are for the caller to size). */
etch_status xnn_ops_reshape(xnn_graph *g);
/* Run every node (after xnn_ops_reshape, with external values bound). */
etch_status xnn_ops_execute(xnn_graph *g, etch_kernel_context *ctx);

#endif
