"""The decomposition table: which ATen operators are broken into simpler ones at capture.

torch 1.13 has no ``core_aten_decompositions``; the rule here is "keep what ExecuTorch's
portable kernels implement, decompose the rest":

* operators whose out-variant is in the portable set (:data:`etch.ops.PORTABLE_OPS`) stay;
* operators that a normalization pass rewrites into portable ones (:data:`NORMALIZED`) stay;
* anything else that has a decomposition in ``torch._decomp`` is decomposed; capture retraces
  until nothing more can be decomposed (:func:`missing_decompositions`).

A small initial table avoids most retraces for common models.
"""

from __future__ import annotations

import operator
from typing import Dict, Iterable, List, Set

import torch
import torch.fx
from torch._decomp import decomposition_table, get_decompositions

from . import ops as _ops

aten = torch.ops.aten

# Rewritten by etch.passes.normalize into portable operators (or removed).
NORMALIZED = {
    aten.t_copy.default, aten.transpose_copy.int, aten._reshape_alias_copy.default,
    aten._unsafe_view.default, aten.detach.default, aten.alias_copy.default,
    aten.lift_fresh_copy.default, aten.native_batch_norm.default, aten.unsafe_split.Tensor,
    aten.unsafe_split_with_sizes.default, aten.split_copy.Tensor,
    aten.split_with_sizes_copy.default, aten.unbind_copy.int, aten.empty.memory_format,
    aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.unsqueeze_copy.default,
    aten.expand_copy.default, aten.copy_.default, aten.zeros_like.default,
    aten.ones_like.default, aten.full_like.default, aten.new_zeros.default,
    aten.new_ones.default, aten.new_full.default, aten.new_empty.default,
    aten.empty_like.default, aten.clone.default, aten._to_copy.default,
    aten.index_copy.default, aten.sum.default, aten.mean.default,
}
if hasattr(aten, "squeeze_copy") and hasattr(aten.squeeze_copy, "dims"):
    NORMALIZED.add(aten.squeeze_copy.dims)

# Decomposed from the first trace on (all lack a portable kernel).
_INITIAL = [
    aten.silu, aten.hardswish, aten.hardsigmoid, aten.softplus, aten.mish, aten.addcmul,
    aten.addcdiv, aten.logsumexp, aten.std, aten.selu, aten.celu, aten.relu6,
    aten.hardshrink, aten.softshrink, aten.log_sigmoid_forward, aten.rsub.Tensor,
    aten.masked_fill.Tensor, aten.baddbmm, aten.addmv, aten.dot, aten.mv, aten.linalg_vector_norm,
    aten.norm, aten.im2col, aten.diag_embed, aten.prelu,
]


def initial_table() -> Dict:
    return dict(get_decompositions([op for op in _INITIAL]))


def _is_supported(target) -> bool:
    if target is operator.getitem or isinstance(target, _ops.IROp):
        return True
    if target in NORMALIZED:
        return True
    if _ops.is_known_op(target):
        return True
    if _ops.op_name(target) in _ops.PRIM_OPS:   # e.g. _local_scalar_dense (a SymInt argument)
        return True
    # Custom operators (llama::, quantized_decomposed::, a user's own namespace) are kept when
    # they have an out-variant; whether a runtime has them is the operator check's business,
    # and etch-only namespaces need allow_etch_ops.
    name = _ops.op_name(target)
    return not name.startswith(("aten::", "prims::")) and _ops.out_variant(target) is not None


def missing_decompositions(graph: torch.fx.Graph, tried: Set) -> List:
    """Operators in `graph` that are neither portable nor normalized but have a
    decomposition not tried yet."""
    out = []
    for n in graph.nodes:
        if n.op != "call_function" or _is_supported(n.target):
            continue
        t = n.target
        if t in decomposition_table and t not in tried and t not in out:
            out.append(t)
    return out


def unsupported_ops(graph: torch.fx.Graph) -> List[str]:
    """Names of operators that no kernel of the portable set implements, even after
    decomposition (reported by the exporter before it writes anything)."""
    names = []
    for n in graph.nodes:
        if n.op == "call_function" and not _is_supported(n.target):
            name = _ops.op_name(n.target)
            if name not in names:
                names.append(name)
    return names


_NOT_FUNCTIONAL = {aten.view.default, aten.as_strided.default, aten._unsafe_view.default}


def has_prims(graph: torch.fx.Graph) -> bool:
    """True when a decomposition produced what the exporter cannot use: torch prims (no
    kernels), or in-place ops and views (decompositions run after functionalization)."""
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        name = _ops.op_name(n.target)
        if name.startswith("prims::") or n.target in _NOT_FUNCTIONAL:
            return True
        base = name.split("::")[-1].split(".")[0]
        if base.endswith("_") and not base.startswith("_") and name != "aten::copy_":
            return True
    return False


def table_for(ops: Iterable) -> Dict:
    return {op: decomposition_table[op] for op in ops if op in decomposition_table}
