"""Fuse a bias add into the producer: ``add(convolution(x, W, b), c)`` with a constant
per-output-channel ``c`` becomes ``convolution(x, W, b + c)``, and ``add(mm(x, W), c)`` /
``add(addmm(b, x, W), c)`` with a constant per-column ``c`` becomes ``addmm(b + c, x, W)``.
The producer must have no other user; ``add`` may have its operands either way round
(``alpha`` must be 1)."""

from __future__ import annotations

import torch

from .. import debuginfo as _debuginfo
from ..graph import ExportedGraph
from ._util import bind_args, is_call

aten = torch.ops.aten


def _channel_bias(eg, c_node, out_shape, channel_dim):
    """The constant as a 1-D per-channel vector when it only varies along `channel_dim` of
    the result (and does not broadcast the result to a larger shape), else None."""
    if not eg.is_constant(c_node):
        return None
    c = eg.constant_value(c_node)
    rank = len(out_shape)
    if c.dim() > rank:
        return None
    shape = [1] * (rank - c.dim()) + list(c.shape)
    ch = out_shape[channel_dim]
    for d, s in enumerate(shape):
        if d == channel_dim:
            if s not in (1, ch):
                return None
        elif s != 1:
            return None
    return c.reshape(-1).expand(ch) if c.numel() == 1 else c.reshape(ch)


def run(eg: ExportedGraph) -> int:
    fused = 0
    for add in list(eg.graph.nodes):
        if not is_call(add, aten.add.Tensor):
            continue
        a = bind_args(add)
        if a.get("alpha", 1) != 1:
            continue
        for prod, other in ((a["self"], a["other"]), (a["other"], a["self"])):
            if not isinstance(prod, torch.fx.Node) or len(prod.users) != 1:
                continue
            out_spec = eg.spec(add)
            if eg.spec(prod) is None or out_spec.shape != eg.spec(prod).shape or \
                    out_spec.dtype != eg.spec(prod).dtype:
                continue
            if is_call(prod, aten.convolution.default):
                fuse = _fuse_conv
            elif is_call(prod, aten.mm.default, aten.addmm.default) and len(out_spec.shape) == 2:
                fuse = _fuse_mm
            else:
                continue
            c = _channel_bias(eg, other, out_spec.shape, 1)
            new = fuse(eg, prod, c) if c is not None else None
            if new is None:
                continue
            _debuginfo.take(new, add)     # the fused call computes the add's output
            add.replace_all_uses_with(new)
            eg.graph.erase_node(add)
            fused += 1
            break
    if fused:
        eg.prune()
        eg.log.append("fuse_bias: fused %d bias adds" % fused)
    return fused


def _fuse_conv(eg, conv, c):
    a = bind_args(conv)
    w = eg.constant_value(a["weight"]) if eg.is_constant(a["weight"]) else None
    if w is None:
        return None
    b_node = a["bias"]
    if b_node is not None and not eg.is_constant(b_node):
        return None
    bias = eg.constant_value(b_node) if b_node is not None else torch.zeros(c.shape, dtype=c.dtype)
    new_b = eg.add_constant((bias + c).to(w.dtype), conv.name + "_bias", conv)
    args = list(conv.args)
    args[2] = new_b
    conv.args = tuple(args)
    return conv


def _fuse_mm(eg, mm, c):
    a = bind_args(mm)
    if mm.target is aten.addmm.default:
        if a.get("beta", 1) != 1 or a.get("alpha", 1) != 1 or not eg.is_constant(a["self"]):
            return None
        b = eg.constant_value(a["self"])
        if b.numel() not in (1, c.numel()):
            return None
        new_bias = (b.reshape(-1) + c).to(b.dtype)
        x, w = a["mat1"], a["mat2"]
    else:
        x, w = a["self"], a["mat2"]
        new_bias = c.clone()
    b_node = eg.add_constant(new_bias.contiguous(), mm.name + "_bias", mm)
    with eg.graph.inserting_before(mm):
        new = eg.graph.call_function(aten.addmm.default, (b_node, x, w))
    new.meta = dict(mm.meta)
    mm.replace_all_uses_with(new)
    eg.graph.erase_node(mm)
    return new
