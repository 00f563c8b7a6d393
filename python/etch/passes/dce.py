"""Dead-code elimination: remove calls whose results nobody uses (the graph is functional,
so only writes into mutable state have effects), then constants and state nobody reads."""

from __future__ import annotations

import torch

from ..graph import ExportedGraph

_EFFECTS = {torch.ops.aten.copy_.default}


def run(eg: ExportedGraph) -> int:
    removed = 0
    for node in reversed(list(eg.graph.nodes)):
        if node.op in ("placeholder", "output"):
            continue
        if node.users:
            continue
        if node.op == "call_function" and node.target in _EFFECTS and eg.is_mutable(node.args[0]):
            continue
        eg.graph.erase_node(node)
        removed += 1
    before = len(eg.constants) + len(eg.mutable)
    eg.prune()
    removed += before - len(eg.constants) - len(eg.mutable)
    if removed:
        eg.log.append("dce: removed %d nodes/constants" % removed)
    return removed
