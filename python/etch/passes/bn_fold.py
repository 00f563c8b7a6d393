"""Fold inference batch norm into the convolution or linear layer before it.

``bn(conv(x, W, b))`` with constant W, b, statistics and affine parameters becomes
``conv(x, W', b')`` where, per output channel c, ``s = gamma / sqrt(var + eps)``,
``W'[c] = W[c] * s`` and ``b' = (b - mean) * s + beta``.  The same holds for a linear layer
captured as ``addmm(b, x, Wt)`` / ``mm(x, Wt)`` (Wt already transposed and folded into a
constant), with the scale applied to Wt's columns.  Transposed convolutions scale the weight's
second dimension, group by group.  The convolution must have no other user."""

from __future__ import annotations

import torch

from .. import debuginfo as _debuginfo
from .. import ops as _ops
from ..graph import ExportedGraph
from ._util import bind_args, getitem_users, is_call

aten = torch.ops.aten


def _only_user_is(node, user) -> bool:
    return len(node.users) == 1 and user in node.users


def run(eg: ExportedGraph) -> int:
    folded = 0
    for bn in list(eg.graph.nodes):
        if not is_call(bn, _ops.native_batch_norm_no_training):
            continue
        a = bind_args(bn)
        src = a["input"]
        stats = [a["weight"], a["bias"], a["running_mean"], a["running_var"]]
        if not all(s is None or eg.is_constant(s) for s in stats):
            continue
        users = getitem_users(bn)
        if set(users) - {0} or len(bn.users) != len(users):
            continue        # mean/invstd results used: keep the op
        out = users.get(0)
        if out is None:
            continue
        if not _only_user_is(src, bn):
            continue
        mean = eg.constant_value(a["running_mean"]).double()
        var = eg.constant_value(a["running_var"]).double()
        gamma = eg.constant_value(a["weight"]).double() if a["weight"] is not None \
            else torch.ones_like(mean)
        beta = eg.constant_value(a["bias"]).double() if a["bias"] is not None \
            else torch.zeros_like(mean)
        scale = gamma / torch.sqrt(var + a["eps"])
        shift = beta - mean * scale
        if is_call(src, aten.convolution.default):
            new = _fold_conv(eg, src, scale, shift)
        elif is_call(src, aten.addmm.default, aten.mm.default):
            new = _fold_linear(eg, src, scale, shift)
        else:
            new = None
        if new is None:
            continue
        _debuginfo.take(new, out)     # the folded call computes the batch norm's output
        out.replace_all_uses_with(new)
        eg.graph.erase_node(out)
        eg.graph.erase_node(bn)
        folded += 1
    if folded:
        eg.prune()
        eg.log.append("bn_fold: folded %d batch norms" % folded)
    return folded


def _fold_conv(eg, conv, scale, shift):
    a = bind_args(conv)
    w_node, b_node = a["weight"], a["bias"]
    if not eg.is_constant(w_node) or not (b_node is None or eg.is_constant(b_node)):
        return None
    w = eg.constant_value(w_node)
    dtype = w.dtype
    if not dtype.is_floating_point:
        return None
    wd = w.double()
    groups = a["groups"]
    if a["transposed"]:
        cin = wd.shape[0]
        cout_g = wd.shape[1]
        k = wd.shape[2:]
        wd = (wd.reshape(groups, cin // groups, cout_g, *k) *
              scale.reshape(groups, 1, cout_g, *([1] * len(k)))).reshape(wd.shape)
    else:
        wd = wd * scale.reshape(-1, *([1] * (wd.dim() - 1)))
    bias = eg.constant_value(b_node).double() if b_node is not None \
        else torch.zeros(scale.shape, dtype=torch.float64)
    bias = bias * scale + shift
    new_w = eg.add_constant(wd.to(dtype), conv.name + "_w", conv)
    new_b = eg.add_constant(bias.to(dtype), conv.name + "_b", conv)
    args = list(conv.args)
    args[1] = new_w
    if len(args) > 2:
        args[2] = new_b
    conv.args = tuple(args)
    conv.kwargs = {k: (new_b if k == "bias" else v) for k, v in conv.kwargs.items()}
    return conv


def _fold_linear(eg, mm, scale, shift):
    a = bind_args(mm)
    if mm.target is aten.addmm.default:
        b_node, x, w_node = a["self"], a["mat1"], a["mat2"]
        if a.get("beta", 1) != 1 or a.get("alpha", 1) != 1:
            return None
        if not eg.is_constant(b_node):
            return None
        bias = eg.constant_value(b_node).double()
    else:
        b_node, x, w_node = None, a["self"], a["mat2"]
        bias = torch.zeros(scale.shape, dtype=torch.float64)
    if not eg.is_constant(w_node):
        return None
    w = eg.constant_value(w_node)
    if w.dim() != 2 or w.shape[1] != scale.numel() or not w.dtype.is_floating_point:
        return None
    if bias.numel() not in (1, scale.numel()):
        return None
    dtype = w.dtype
    new_w = eg.add_constant((w.double() * scale.reshape(1, -1)).to(dtype), mm.name + "_w", mm)
    new_b = eg.add_constant((bias.reshape(-1) * scale + shift).to(dtype), mm.name + "_b", mm)
    with eg.graph.inserting_before(mm):
        new = eg.graph.call_function(aten.addmm.default, (new_b, x, new_w))
    new.meta = dict(mm.meta)
    mm.replace_all_uses_with(new)
    eg.graph.erase_node(mm)
    return new
