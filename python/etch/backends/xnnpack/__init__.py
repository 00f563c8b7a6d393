"""Lowering to ExecuTorch's ``XnnpackBackend`` (``etch.export(..., backend="xnnpack")``).

:func:`partition` finds runs of consecutive nodes that XNNPACK can compute (float32, static
shapes; :func:`etch.backends.xnnpack.lower.supported`), lowers each run to one XNNGraph payload
(:mod:`.lower`, serialized by :mod:`.payload` as ExecuTorch's serializer lays it out) and
replaces the run by one delegate node.  The emitter writes that node as a ``DelegateCall`` of a
``BackendDelegate`` whose processed blob (a segment of the ``.pte``) is the payload; the
delegate's arguments are the run's inputs, then its outputs.

The delegate node's target, :class:`XnnCall`, still computes the run with torch, so the
exported graph keeps running as the reference (``Program.graphs``).
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Tuple

import torch
import torch.fx

from ... import debuginfo as _debuginfo
from ... import ops as _ops
from .lower import Lowering, LoweringError, supported
from .payload import XnnGraph

aten = torch.ops.aten

__all__ = ["partition", "XnnCall", "BACKEND_ID", "supported", "XnnGraph", "LoweringError"]

BACKEND_ID = "XnnpackBackend"

# Nodes that move no data on the CPU path (views): a run neither starts nor ends with one.
_FREE = (_ops.alias, operator.getitem)


class _Ref:
    __slots__ = ("kind", "index")

    def __init__(self, kind: int, index: int):
        self.kind, self.index = kind, index     # kind 0: run input, 1: run node


class XnnCall:
    """The target of a delegate node: the payload, and the run it replaced (recomputed with
    torch when the graph is interpreted)."""

    backend_id = BACKEND_ID

    def __init__(self, payload: bytes, steps, outputs: List[int], num_nodes: int):
        self.payload = payload
        self.steps = steps                  # [(target, args, kwargs)] with _Ref leaves
        self.outputs = outputs              # step index of each output
        self.num_nodes = num_nodes          # XNNGraph nodes in the payload
        self.__name__ = "xnnpack_delegate"

    def __call__(self, *inputs):
        vals: List[Any] = []

        def load(a):
            if isinstance(a, _Ref):
                return inputs[a.index] if a.kind == 0 else vals[a.index]
            if isinstance(a, (list, tuple)):
                return type(a)(load(x) for x in a)
            if isinstance(a, dict):
                return {k: load(v) for k, v in a.items()}
            return a

        with torch.no_grad():
            for target, args, kwargs in self.steps:
                vals.append(target(*load(args), **load(kwargs)))
        return tuple(vals[i].contiguous() for i in self.outputs)

    def __repr__(self):
        return "xnnpack_delegate(%d nodes, %d bytes)" % (self.num_nodes, len(self.payload))


def is_delegate(n) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and isinstance(n.target,
                                                                                    XnnCall)


def _runs(eg) -> List[List[torch.fx.Node]]:
    nodes = [n for n in eg.graph.nodes if n.op == "call_function"]
    ok: Dict[torch.fx.Node, bool] = {}
    for i, n in enumerate(nodes):
        s = supported(eg, n)
        if s and n.target is aten.max_pool2d_with_indices.default:
            # its result 0 must be read right after it (by a getitem in the same run)
            nxt = nodes[i + 1] if i + 1 < len(nodes) else None
            s = (nxt is not None and nxt.target is operator.getitem and nxt.args[0] is n
                 and len(n.users) == 1)
        if n.target is operator.getitem:
            s = s and ok.get(n.args[0], False)
        ok[n] = s
    runs, cur = [], []
    for n in nodes:
        if ok[n]:
            cur.append(n)
        else:
            if cur:
                runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    out = []
    for r in runs:
        while r and r[0].target is _ops.alias:
            r = r[1:]
        while r and r[-1].target is _ops.alias:
            r = r[:-1]
        if any(n.target not in _FREE and n.target is not aten.permute_copy.default for n in r):
            out.append(r)
    return out


def _key(n):
    if n.target is operator.getitem:
        return (n.args[0], n.args[1])
    return (n, 0)


def _lower_run(eg, run: List[torch.fx.Node]) -> torch.fx.Node:
    inside = set(run)
    inputs: List[torch.fx.Node] = []
    for n in run:
        for a in _arg_nodes(n):
            if a not in inside and not eg.is_constant(a) and a not in inputs:
                inputs.append(a)
    outputs: List[Tuple[torch.fx.Node, int]] = []
    readers: Dict[Any, List[torch.fx.Node]] = {}
    for n in run:
        if n.target is aten.max_pool2d_with_indices.default:
            continue                     # read through its getitem
        outside = [u for u in n.users if u not in inside]
        if outside:
            k = _key(n)
            if k not in outputs:
                outputs.append(k)
            readers.setdefault(k, []).append(n)
    low = Lowering(eg, run, inputs, outputs)
    payload = low.g.blob()
    pos = {n: j for j, n in enumerate(run)}
    inpos = {x: i for i, x in enumerate(inputs)}

    def ref(a):
        if a in pos:
            return _Ref(1, pos[a])
        if a in inpos:
            return _Ref(0, inpos[a])
        return eg.constant_value(a)

    steps = [(n.target, torch.fx.node.map_arg(n.args, ref), torch.fx.node.map_arg(n.kwargs, ref))
             for n in run]
    out_steps = [pos[readers[k][0]] for k in outputs]
    call = XnnCall(payload, steps, out_steps, len(low.g.nodes))
    g = eg.graph
    with g.inserting_after(run[-1]):
        d = g.call_function(call, tuple(inputs))
    specs = []
    for k in outputs:
        s = eg.spec(k[0])
        specs.append(s[k[1]] if isinstance(s, tuple) else s)
    d.meta["spec"] = tuple(specs)
    d.meta["debug"] = _debuginfo.merged([_debuginfo.of(readers[k][0]) for k in outputs],
                                        [_debuginfo.of(n) for n in run])
    at = d
    for i, k in enumerate(outputs):
        with g.inserting_after(at):
            gi = g.call_function(operator.getitem, (d, i))
        gi.meta["spec"] = specs[i]
        _debuginfo.take(gi, readers[k][0])
        for n in readers[k]:
            n.replace_all_uses_with(gi)
        at = gi
    for n in reversed(run):
        g.erase_node(n)
    return d


def _arg_nodes(n) -> List[torch.fx.Node]:
    out: List[torch.fx.Node] = []
    torch.fx.node.map_arg((n.args, n.kwargs), out.append)
    return out


def partition(eg) -> int:
    """Lower every run of supported nodes of `eg` to an XnnpackBackend delegate node;
    returns the number of delegates made.  Quantized linears (8da4w, 4w, 8w, int8-dynamic)
    are fused first (:mod:`.qfuse`), so that they lower to XNNPACK's quantized nodes."""
    from .qfuse import fuse
    fuse(eg)
    made = 0
    for run in _runs(eg):
        _lower_run(eg, run)
        made += 1
    eg.graph.lint()
    eg.prune()
    return made
