"""Drop no-op nodes: operations that return their input unchanged (same shape, same dtype,
same values), so their users can read the input directly.

view/reshape to the same shape, identity permute, expand to the same shape, ``_to_copy`` to
the same dtype, full-range ``slice``, ``cat`` of one tensor, ``repeat`` by ones, zero padding,
multiplication / division by 1 and addition / subtraction of 0 (Scalar forms, and Tensor forms
with a constant that does not broadcast the input), ``pow`` by 1."""

from __future__ import annotations

import torch

from .. import symbolic as _sym
from ..graph import ExportedGraph
from ._util import bind_args

aten = torch.ops.aten


def _same(eg, node, x) -> bool:
    """node's result has x's shape and dtype."""
    if not isinstance(x, torch.fx.Node):
        return False
    a, b = eg.spec(node), eg.spec(x)
    if a is not None and any(v is _sym.UNKNOWN for v in getattr(a, "sizes", ())):
        return False        # two unknown sizes need not be equal
    return a is not None and b is not None and hasattr(a, "shape") and hasattr(b, "shape") \
        and a.shape == b.shape and a.dtype == b.dtype and a.sizes == b.sizes


def _const_is(eg, n, value) -> bool:
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        return n == value
    if not eg.is_constant(n):
        return False
    c = eg.constant_value(n)
    return bool((c == value).all()) if c.numel() else False


def _identity_input(eg: ExportedGraph, node):
    """The node the result equals, or None."""
    t = node.target
    if t in (aten.view_copy.default, aten.expand_copy.default, aten.permute_copy.default,
             aten._to_copy.default, aten.slice_copy.Tensor, aten.repeat.default,
             aten.constant_pad_nd.default, aten.clone.default):
        x = node.args[0]
        if not _same(eg, node, x):
            return None
        if t is aten.permute_copy.default:
            dims = [d % max(len(eg.spec(x).shape), 1) for d in node.args[1]]
            return x if dims == sorted(dims) else None
        if t is aten._to_copy.default:
            mf = node.kwargs.get("memory_format")
            return x if mf in (None, torch.preserve_format, torch.contiguous_format) else None
        if t is aten.slice_copy.Tensor:
            a = bind_args(node)
            return x if a.get("step", 1) == 1 else None
        if t is aten.clone.default:
            return None     # copies are the views pass's business
        return x
    if t is aten.cat.default and len(node.args[0]) == 1:
        x = node.args[0][0]
        return x if _same(eg, node, x) else None
    if t in (aten.mul.Scalar, aten.div.Scalar):
        x, s = node.args[0], node.args[1]
        return x if s == 1 and _same(eg, node, x) else None
    if t in (aten.add.Scalar, aten.sub.Scalar):
        x, s = node.args[0], node.args[1]
        return x if s == 0 and _same(eg, node, x) else None
    if t is aten.pow.Tensor_Scalar:
        x, s = node.args[0], node.args[1]
        return x if s == 1 and _same(eg, node, x) else None
    if t in (aten.mul.Tensor, aten.div.Tensor):
        x, c = node.args[0], node.args[1]
        if _const_is(eg, c, 1) and _same(eg, node, x):
            return x
        if t is aten.mul.Tensor and _const_is(eg, x, 1) and _same(eg, node, c):
            return c
        return None
    if t in (aten.add.Tensor, aten.sub.Tensor):
        x, c = node.args[0], node.args[1]
        if _const_is(eg, c, 0) and _same(eg, node, x):
            return x
        if t is aten.add.Tensor and _const_is(eg, x, 0) and _same(eg, node, c):
            return c
        return None
    return None


def run(eg: ExportedGraph) -> int:
    dropped = 0
    for node in list(eg.graph.nodes):
        if node.op != "call_function":
            continue
        x = _identity_input(eg, node)
        if x is None:
            continue
        node.replace_all_uses_with(x)
        eg.graph.erase_node(node)
        dropped += 1
    if dropped:
        eg.log.append("noop: dropped %d nodes" % dropped)
    return dropped
