"""The exporter's one internal graph representation: a ``torch.fx.Graph`` in functional ATen
form plus the tensors it refers to.

* ``placeholder`` nodes are the method's tensor inputs, in call order;
* ``get_attr`` nodes are constants (``ExportedGraph.constants[target]``) or mutable state
  (``ExportedGraph.mutable[target]``: a planned buffer whose initial value is given);
* ``call_function`` nodes call ATen ``OpOverload``s, ``operator.getitem`` (one result of a
  multi-result operator) or one of the exporter's IR operators (:mod:`etch.ops`);
  ``aten.copy_.default(state, value)`` writes a new value into mutable state;
* the ``output`` node lists the method's outputs (flat).

Shapes and dtypes come from running the graph on the example inputs (:meth:`propagate`), which
stores a :class:`TensorSpec` (or a tuple of them) in ``node.meta["spec"]``.  Passes keep the
graph runnable, so every pass can be checked by running the graph before and after it.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import ops as _ops

__all__ = ["TensorSpec", "ExportedGraph", "node_users_in_order", "is_tensor_spec"]


@dataclass(frozen=True)
class TensorSpec:
    """Static shape (the upper bound for dynamic dimensions) and dtype of a tensor value.
    ``dynamic`` lists the dimensions whose size may change at run time."""
    shape: Tuple[int, ...]
    dtype: torch.dtype
    dynamic: Tuple[int, ...] = ()

    @classmethod
    def of(cls, t: torch.Tensor, dynamic: Sequence[int] = ()) -> "TensorSpec":
        return cls(tuple(int(s) for s in t.shape), t.dtype, tuple(dynamic))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * torch.empty((), dtype=self.dtype).element_size()

    @property
    def is_dynamic(self) -> bool:
        return bool(self.dynamic)


def is_tensor_spec(x) -> bool:
    return isinstance(x, TensorSpec)


def node_users_in_order(node: torch.fx.Node) -> List[torch.fx.Node]:
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    return sorted(node.users, key=order.__getitem__)


class ExportedGraph:
    """A captured method: graph + constants + mutable state + example inputs."""

    def __init__(self, graph: torch.fx.Graph, constants: Dict[str, torch.Tensor],
                 example_inputs: Sequence[torch.Tensor], *, name: str = "forward",
                 mutable: Optional[Dict[str, torch.Tensor]] = None,
                 in_spec: Any = None, out_spec: Any = None,
                 dynamic_shapes: Optional[Sequence[Optional[Dict[int, int]]]] = None):
        self.graph = graph
        self.constants = dict(constants)
        self.mutable = dict(mutable or {})
        self.example_inputs = [t.detach().clone() for t in example_inputs]
        self.name = name
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.dynamic_shapes = list(dynamic_shapes) if dynamic_shapes else \
            [None] * len(self.example_inputs)
        self.log: List[str] = []   # what passes did, for summaries

    # ---- structure -----------------------------------------------------------------------

    @property
    def input_nodes(self) -> List[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"]

    @property
    def output_node(self) -> torch.fx.Node:
        for n in reversed(self.graph.nodes):
            if n.op == "output":
                return n
        raise ValueError("graph has no output node")

    @property
    def outputs(self) -> List[Any]:
        args = self.output_node.args[0]
        return list(args) if isinstance(args, (list, tuple)) else [args]

    def set_outputs(self, outs: Sequence[Any]) -> None:
        self.output_node.args = (list(outs),)

    def is_constant(self, n: Any) -> bool:
        return isinstance(n, torch.fx.Node) and n.op == "get_attr" and n.target in self.constants

    def is_mutable(self, n: Any) -> bool:
        return isinstance(n, torch.fx.Node) and n.op == "get_attr" and n.target in self.mutable

    def constant_value(self, n: torch.fx.Node) -> torch.Tensor:
        return self.constants[n.target]

    def add_constant(self, value: torch.Tensor, hint: str, before: torch.fx.Node) -> torch.fx.Node:
        """A new get_attr node for `value`, inserted before `before`."""
        base = "_c_" + "".join(c if c.isalnum() or c == "_" else "_" for c in hint)
        name, k = base, 0
        while name in self.constants or name in self.mutable:
            k += 1
            name = "%s_%d" % (base, k)
        self.constants[name] = value.detach().contiguous()
        with self.graph.inserting_before(before):
            node = self.graph.get_attr(name)
        node.meta["spec"] = TensorSpec.of(value)
        return node

    def prune(self) -> None:
        """Forget constants and state no node refers to."""
        used = {n.target for n in self.graph.nodes if n.op == "get_attr"}
        self.constants = {k: v for k, v in self.constants.items() if k in used}
        self.mutable = {k: v for k, v in self.mutable.items() if k in used}

    def copy(self) -> "ExportedGraph":
        g = torch.fx.Graph()
        env: Dict[torch.fx.Node, torch.fx.Node] = {}
        for n in self.graph.nodes:
            env[n] = g.node_copy(n, lambda x: env[x])
            env[n].meta = dict(n.meta)
        eg = ExportedGraph(g, self.constants, self.example_inputs, name=self.name,
                           mutable={k: v.clone() for k, v in self.mutable.items()},
                           in_spec=self.in_spec, out_spec=self.out_spec,
                           dynamic_shapes=self.dynamic_shapes)
        eg.log = list(self.log)
        return eg

    def call_nodes(self) -> List[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op == "call_function"]

    def __str__(self) -> str:
        return str(self.graph)

    # ---- reference interpreter -------------------------------------------------------------

    def run(self, inputs: Sequence[torch.Tensor], state: Optional[Dict[str, torch.Tensor]] = None,
            record: bool = False) -> List[Any]:
        """Run the graph with torch; returns the flat outputs.  `state` (name -> tensor)
        holds mutable state and is updated in place (default: a copy of the initial values).
        With `record`, every node's value is kept in ``node.meta["value"]``."""
        if state is None:
            state = {k: v.clone() for k, v in self.mutable.items()}
        env: Dict[torch.fx.Node, Any] = {}
        it = iter(inputs)

        def load(a):
            return torch.fx.node.map_arg(a, lambda n: env[n])

        with torch.no_grad():
            for n in self.graph.nodes:
                if n.op == "placeholder":
                    v = next(it)
                elif n.op == "get_attr":
                    v = state[n.target] if n.target in state else self.constants[n.target]
                elif n.op == "call_function":
                    args, kwargs = load(n.args), load(n.kwargs)
                    if n.target is torch.ops.aten.copy_.default and self.is_mutable(n.args[0]):
                        state[n.args[0].target].copy_(args[1])
                        v = state[n.args[0].target]
                    else:
                        v = n.target(*args, **kwargs)
                elif n.op == "output":
                    out = load(n.args[0])
                    return list(out) if isinstance(out, (list, tuple)) else [out]
                else:
                    raise NotImplementedError("node kind %s" % n.op)
                env[n] = v
                if record:
                    n.meta["value"] = v
        raise ValueError("graph has no output node")

    def propagate(self) -> None:
        """Set ``meta['spec']`` (TensorSpec / tuple of TensorSpec / Python value) on every node
        by running the graph on the example inputs."""
        dyn = {}
        for n, d in zip(self.input_nodes, self.dynamic_shapes):
            dyn[n] = tuple(sorted(d)) if d else ()
        env: Dict[torch.fx.Node, Any] = {}
        state = {k: v.clone() for k, v in self.mutable.items()}
        it = iter(self.example_inputs)

        def load(a):
            return torch.fx.node.map_arg(a, lambda n: env[n])

        with torch.no_grad():
            for n in self.graph.nodes:
                if n.op == "placeholder":
                    v = next(it)
                elif n.op == "get_attr":
                    v = state[n.target] if n.target in state else self.constants[n.target]
                elif n.op == "call_function":
                    args, kwargs = load(n.args), load(n.kwargs)
                    if n.target is torch.ops.aten.copy_.default and self.is_mutable(n.args[0]):
                        v = state[n.args[0].target]
                        v.copy_(args[1])
                    else:
                        v = n.target(*args, **kwargs)
                elif n.op == "output":
                    break
                env[n] = v
                n.meta["spec"] = _spec_of(v, dyn.get(n, ()))

    def spec(self, n: Any) -> Any:
        if not isinstance(n, torch.fx.Node):
            return n
        return n.meta.get("spec")

    # ---- helpers for passes --------------------------------------------------------------

    def replace_all_uses(self, old: torch.fx.Node, new: Any) -> None:
        if isinstance(new, torch.fx.Node):
            old.replace_all_uses_with(new)
        else:
            for user in list(old.users):
                user.args = torch.fx.node.map_arg(user.args, lambda x: new if x is old else x)
                user.kwargs = torch.fx.node.map_arg(user.kwargs,
                                                    lambda x: new if x is old else x)

    def op_counts(self) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for n in self.call_nodes():
            k = _ops.op_name(n.target)
            counts[k] = counts.get(k, 0) + 1
        return counts


def _spec_of(v: Any, dynamic=()) -> Any:
    if isinstance(v, torch.Tensor):
        return TensorSpec.of(v, dynamic)
    if isinstance(v, (tuple, list)):
        return tuple(_spec_of(x) for x in v)
    return v
