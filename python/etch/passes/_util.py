"""Small helpers shared by the passes."""

from __future__ import annotations

from typing import Any, Dict

import torch
import torch.fx

from .. import ops as _ops


def bind_args(node: torch.fx.Node) -> Dict[str, Any]:
    """Arguments of a call by schema name, defaults filled in."""
    schema = _ops.schema_of(node.target)
    out: Dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        if a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif not a.kwarg_only and i < len(node.args):
            out[a.name] = node.args[i]
        elif a.default_value is not None or a.has_default_value():
            out[a.name] = a.default_value
    return out


def is_call(n: Any, *targets) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in targets


def getitem_users(node: torch.fx.Node) -> Dict[int, torch.fx.Node]:
    """index -> getitem node for a multi-result node (missing = unused)."""
    import operator
    return {u.args[1]: u for u in node.users
            if u.op == "call_function" and u.target is operator.getitem}


def shape_of(eg, n) -> tuple:
    return eg.spec(n).shape


def replace_node(eg, old: torch.fx.Node, target, args, kwargs=None) -> torch.fx.Node:
    """Insert target(*args) before `old`, move old's users and metadata to it, erase old."""
    with eg.graph.inserting_before(old):
        new = eg.graph.call_function(target, tuple(args), dict(kwargs or {}))
    new.meta = dict(old.meta)
    old.replace_all_uses_with(new)
    eg.graph.erase_node(old)
    return new
