"""Constant folding: a call whose tensor inputs are all constants (or that has none, such as
``full``/``arange``) is evaluated now and replaced by a new constant.  Weight transposes,
reshapes of parameters and constant masks disappear this way.

Not folded: random or uninitialised results, writes into mutable state, the dequantizing
operators of ``quantized_decomposed`` (``dequantize_*``, ``embedding_byte``, ``embedding_4bit``:
folding them would store the quantized weights as float again), and results that would
blow up the file (more than ``MAX_GROWTH`` times the bytes of the inputs and above
``SMALL_BYTES``; an ``expand`` of a bias to a whole activation, for instance)."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from .. import ops as _ops
from .. import symbolic as _sym
from ..graph import ExportedGraph

SMALL_BYTES = 64 * 1024
MAX_GROWTH = 2.0
_NEVER = ("rand", "bernoulli", "normal", "uniform", "dropout", "empty", "copy_", "multinomial")
_KEEP_QUANTIZED = ("dequantize", "embedding_")


def _foldable_target(t) -> bool:
    if t is operator.getitem:
        return False
    if t is _ops.alias:
        return True
    name = _ops.op_name(t)
    if name.startswith("quantized_decomposed::") and \
            name.split("::", 1)[1].startswith(_KEEP_QUANTIZED):
        return False
    return not any(k in name for k in _NEVER)


def _nbytes(v) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def run(eg: ExportedGraph) -> int:
    folded = 0
    for node in list(eg.graph.nodes):
        if node.op != "call_function" or not _foldable_target(node.target):
            continue
        if _sym.has_sym((node.args, node.kwargs)):
            continue            # depends on the input sizes
        deps = []
        torch.fx.node.map_arg((node.args, node.kwargs), deps.append)
        if not all(eg.is_constant(d) for d in deps):
            continue
        args = torch.fx.node.map_arg(node.args, eg.constant_value)
        kwargs = torch.fx.node.map_arg(node.kwargs, eg.constant_value)
        in_bytes = sum(_nbytes(eg.constant_value(d)) for d in set(deps))
        spec = eg.spec(node)
        out_bytes = _spec_bytes(spec)
        if out_bytes > SMALL_BYTES and out_bytes > MAX_GROWTH * in_bytes:
            continue
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        if isinstance(value, torch.Tensor):
            c = eg.add_constant(value, node.name, node)
            node.replace_all_uses_with(c)
            eg.graph.erase_node(node)
        elif isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
            for user in list(node.users):
                if user.op == "call_function" and user.target is operator.getitem:
                    c = eg.add_constant(value[user.args[1]], user.name, user)
                    user.replace_all_uses_with(c)
                    eg.graph.erase_node(user)
            if node.users:
                continue
            eg.graph.erase_node(node)
        else:
            continue
        folded += 1
    if folded:
        eg.prune()
        eg.log.append("constant_fold: folded %d calls" % folded)
    return folded


def _spec_bytes(spec: Any) -> int:
    if spec is None:
        return 0
    if isinstance(spec, tuple):
        return sum(_spec_bytes(s) for s in spec)
    return getattr(spec, "nbytes", 0)
