/* Node semantics of the XNNPACK graph: shape rules, load-time preparation, execution. */
#ifndef ETCH_BACKENDS_XNNPACK_XNN_OPS_H
#define ETCH_BACKENDS_XNNPACK_XNN_OPS_H

#include "backends/xnnpack/xnn_graph.h"
#include "etch/kernel.h"

/* At load: check each node's operands (kinds, datatypes, constant weights), infer every
 * intermediate's shape from the inputs' bounds and size it, convert non-fp32 weights to
 * float once, size the scratch. */
etch_status xnn_ops_prepare(xnn_graph *g, xnn_alloc *a);

/* Every node's output shape from the inputs' current dims (checked against the planned
 * capacities of intermediates; external outputs are for the caller to size). */
etch_status xnn_ops_reshape(xnn_graph *g);
/* Run every node (after xnn_ops_reshape, with external values bound). */
etch_status xnn_ops_execute(xnn_graph *g, etch_kernel_context *ctx);

#endif
