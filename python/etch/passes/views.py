"""Remove redundant copies and views.

Every tensor a kernel writes is contiguous, so a reshape (``view_copy``), a ``clone`` or a
permutation that only moves size-1 dimensions leaves the bytes as they are.  Such nodes become
``etch_ir.alias(source, size)``: a value that shares its source's memory.  At emission an
alias of a statically shaped, memory-planned source is *elided* (a second Tensor value with the
same allocation, no instruction); one whose shape is only known at run time is emitted as
``executorch_prim::et_view.default``.  Aliases of aliases collapse to the root, so the memory
planner sees one storage per root.

Not aliased: views of mutable state (a later write would show through), and graph outputs that
are constants (they get a copy so that the output has memory of its own)."""

from __future__ import annotations

import torch

from .. import ops as _ops
from ..graph import ExportedGraph
from ._util import is_call

aten = torch.ops.aten


def _moves_only_unit_dims(shape, perm) -> bool:
    """True when permuting `shape` by `perm` keeps the order of the non-unit dimensions
    (the bytes do not move)."""
    kept = [d for d in perm if shape[d] != 1]
    return kept == sorted(kept)


def _root(n):
    while is_call(n, _ops.alias):
        n = n.args[0]
    return n


def run(eg: ExportedGraph) -> int:
    changed = 0
    for node in list(eg.graph.nodes):
        if node.op != "call_function":
            continue
        t = node.target
        spec = eg.spec(node)
        if t is aten.view_copy.default:
            pass
        elif t is aten.clone.default:
            mf = node.kwargs.get("memory_format")
            if mf not in (None, torch.preserve_format, torch.contiguous_format):
                continue
        elif t is aten.permute_copy.default:
            if not _moves_only_unit_dims(eg.spec(node.args[0]).shape,
                                         [d % len(spec.shape) for d in node.args[1]]):
                continue
        elif t is _ops.alias:
            if not is_call(node.args[0], _ops.alias):
                continue
        else:
            continue
        src = _root(node.args[0])
        if not isinstance(src, torch.fx.Node) or eg.is_mutable(src) or eg.is_constant(src):
            continue
        if eg.spec(src).dtype != spec.dtype:
            continue
        with eg.graph.inserting_before(node):
            new = eg.graph.call_function(_ops.alias, (src, list(spec.sizes)))
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        eg.graph.erase_node(node)
        changed += 1
    changed += _materialize_outputs(eg)
    if changed:
        eg.log.append("views: %d views/copies became aliases" % changed)
    return changed


def _materialize_outputs(eg: ExportedGraph) -> int:
    """Outputs that are constants (or aliases of constants) get a copy of their own."""
    outs = eg.outputs
    changed = 0
    for i, o in enumerate(outs):
        if isinstance(o, torch.fx.Node) and (eg.is_constant(_root(o)) or eg.is_mutable(_root(o))):
            with eg.graph.inserting_before(eg.output_node):
                c = eg.graph.call_function(aten.clone.default, (o,))
            c.meta = dict(o.meta)
            outs[i] = c
            changed += 1
    if changed:
        eg.set_outputs(outs)
    return changed
