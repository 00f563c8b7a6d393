"""Normalize capture artefacts into the portable operator set.

* ``detach`` / ``alias_copy`` / ``lift_fresh_copy``  -> their input (no-ops at inference)
* ``t_copy`` / ``transpose_copy``                     -> ``permute_copy``
* ``_reshape_alias_copy`` / ``_unsafe_view`` / ``squeeze_copy`` / ``unsqueeze_copy``
                                                      -> ``view_copy``
* ``native_batch_norm(training=False)``               -> ``_native_batch_norm_legit_no_training``
* ``split`` / ``unsafe_split`` / ``split_with_sizes`` / ``unbind``
                                                      -> one ``slice_copy`` / ``select_copy``
                                                         per used piece
* ``clone`` / ``_to_copy`` to another memory format     -> plain (values are the same)
* ``sum`` / ``mean`` over everything                 -> the ``dim`` overloads with dim=None
* ``index_copy``                                      -> ``index_put``
* a Python number in a Tensor argument                -> the Scalar overload, or a 0-d constant
* ``zeros_like`` / ``ones_like`` / ``full_like`` / ``new_*`` / ``empty_like`` / ``fill``
                                                      -> ``full``
"""

from __future__ import annotations

import torch

from .. import ops as _ops
from ..graph import ExportedGraph
from ._util import bind_args, getitem_users, replace_node

aten = torch.ops.aten

_PASSTHROUGH = {aten.detach.default, aten.alias_copy.default, aten.lift_fresh_copy.default}
_RESHAPES = {aten._reshape_alias_copy.default, aten._unsafe_view.default,
             aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.unsqueeze_copy.default}
if hasattr(aten.squeeze_copy, "dims"):
    _RESHAPES.add(aten.squeeze_copy.dims)
_SPLITS = {aten.unsafe_split.Tensor, aten.split_copy.Tensor,
           aten.unsafe_split_with_sizes.default, aten.split_with_sizes_copy.default}
_LIKE = {aten.zeros_like.default: 0, aten.ones_like.default: 1, aten.full_like.default: None,
         aten.empty_like.default: 0}
_NEW = {aten.new_zeros.default: 0, aten.new_ones.default: 1, aten.new_full.default: None,
        aten.new_empty.default: 0}


def run(eg: ExportedGraph) -> int:
    changed = 0
    for node in list(eg.graph.nodes):
        if node.op != "call_function":
            continue
        t = node.target
        if t in _PASSTHROUGH:
            node.replace_all_uses_with(node.args[0])
            eg.graph.erase_node(node)
        elif t is aten.t_copy.default:
            x = node.args[0]
            if len(eg.spec(x).shape) < 2:
                node.replace_all_uses_with(x)
                eg.graph.erase_node(node)
            else:
                replace_node(eg, node, aten.permute_copy.default, (x, [1, 0]))
        elif t is aten.transpose_copy.int:
            x, d0, d1 = node.args[:3]
            rank = len(eg.spec(x).shape)
            perm = list(range(rank))
            d0, d1 = d0 % rank, d1 % rank
            perm[d0], perm[d1] = perm[d1], perm[d0]
            replace_node(eg, node, aten.permute_copy.default, (x, perm))
        elif t in _RESHAPES:
            spec = eg.spec(node)
            if t in (aten._reshape_alias_copy.default, aten._unsafe_view.default):
                size = list(node.args[1])
            else:
                size = list(spec.sizes)
            replace_node(eg, node, aten.view_copy.default, (node.args[0], size))
        elif t is aten.native_batch_norm.default:
            a = bind_args(node)
            if a["training"]:
                continue
            if a["running_mean"] is None or a["running_var"] is None:
                continue
            replace_node(eg, node, _ops.native_batch_norm_no_training,
                         (a["input"], a["weight"], a["bias"], a["running_mean"],
                          a["running_var"], float(a["momentum"]), float(a["eps"])))
        elif t in _SPLITS or t is aten.unbind_copy.int:
            if _split(eg, node) is False:
                continue
        elif t in (aten.clone.default, aten._to_copy.default) and \
                node.kwargs.get("memory_format") not in (None, torch.contiguous_format,
                                                         torch.preserve_format):
            # channels_last & co change strides, not values; kernels write contiguous
            node.kwargs = {k: v for k, v in node.kwargs.items() if k != "memory_format"}
        elif t in (aten.sum.default, aten.mean.default):
            dim_op = aten.sum.dim_IntList if t is aten.sum.default else aten.mean.dim
            replace_node(eg, node, dim_op, (node.args[0], None, False),
                         {"dtype": node.kwargs.get("dtype")} if node.kwargs.get("dtype")
                         else {})
        elif t is aten.index_copy.default:
            x, dim, index, src = node.args[:4]
            dim %= len(eg.spec(x).shape)
            replace_node(eg, node, aten.index_put.default,
                         (x, [None] * dim + [index], src, False))
        elif isinstance(t, torch._ops.OpOverload) and _scalar_operands(eg, node):
            pass
        elif t in _LIKE or t in _NEW or t is aten.fill.Scalar:
            _full(eg, node)
        else:
            continue
        changed += 1
    if changed:
        eg.log.append("normalize: %d rewrites" % changed)
    return changed


def _scalar_operands(eg: ExportedGraph, node) -> bool:
    """A Python number in a Tensor argument (``add.Tensor(x, 1)``): switch to the Scalar
    overload when a portable one exists, else make the number a 0-d constant tensor (same
    type promotion as a wrapped number)."""
    schema = node.target._schema
    bound = bind_args(node)
    numbers = [a.name for a in schema.arguments
               if str(a.type) == "Tensor" and isinstance(bound.get(a.name), (int, float, bool))
               and not isinstance(bound.get(a.name), torch.fx.Node)]
    if not numbers:
        return False
    want = [(a.name, "Scalar" if a.name in numbers or str(a.type) == "number" else str(a.type))
            for a in schema.arguments]
    packet = node.target.overloadpacket
    for ov in packet.overloads():
        cand = getattr(packet, ov)
        cs = cand._schema
        have = [(a.name, "Scalar" if str(a.type) == "number" else str(a.type))
                for a in cs.arguments]
        if have == want and _ops.is_known_op(cand):
            args = [bound.get(a.name, a.default_value) for a in cs.arguments
                    if not a.kwarg_only]
            kwargs = {a.name: bound[a.name] for a in cs.arguments
                      if a.kwarg_only and a.name in bound}
            replace_node(eg, node, cand, args, kwargs)
            return True
    for name in numbers:
        v = bound[name]
        dtype = torch.bool if isinstance(v, bool) else \
            torch.int64 if isinstance(v, int) else torch.get_default_dtype()
        c = eg.add_constant(torch.tensor(v, dtype=dtype), node.name + "_" + name, node)
        bound[name] = c
    args = [bound.get(a.name, a.default_value) for a in schema.arguments if not a.kwarg_only]
    kwargs = {a.name: bound[a.name] for a in schema.arguments
              if a.kwarg_only and a.name in bound}
    node.args, node.kwargs = tuple(args), kwargs
    return True


def _split(eg: ExportedGraph, node) -> None:
    a = bind_args(node)
    x = a["self"]
    dim = a.get("dim", 0)
    shape = eg.spec(x).shape
    dim %= len(shape)
    if dim in eg.spec(x).dynamic and node.target is not aten.unbind_copy.int:
        return False
    users = getitem_users(node)
    if node.target is aten.unbind_copy.int:
        for i, g in users.items():
            with eg.graph.inserting_before(g):
                new = eg.graph.call_function(aten.select_copy.int, (x, dim, i))
            new.meta = dict(g.meta)
            g.replace_all_uses_with(new)
            eg.graph.erase_node(g)
    else:
        if "split_size" in a:
            size = a["split_size"]
            sizes = [min(size, shape[dim] - s) for s in range(0, shape[dim], size)] or [0]
        else:
            sizes = list(a["split_sizes"])
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        for i, g in users.items():
            with eg.graph.inserting_before(g):
                new = eg.graph.call_function(aten.slice_copy.Tensor,
                                             (x, dim, starts[i], starts[i] + sizes[i], 1))
            new.meta = dict(g.meta)
            g.replace_all_uses_with(new)
            eg.graph.erase_node(g)
    eg.graph.erase_node(node)


def _full(eg: ExportedGraph, node) -> None:
    a = bind_args(node)
    spec = eg.spec(node)
    if node.target is aten.fill.Scalar:
        value = node.args[1]      # the result does not depend on the input's values
    elif node.target in _LIKE:
        value = _LIKE[node.target]
    else:
        value = _NEW[node.target]
    if value is None:
        value = a["fill_value"]
    replace_node(eg, node, aten.full.default, (list(spec.sizes), value),
                 {"dtype": spec.dtype})
