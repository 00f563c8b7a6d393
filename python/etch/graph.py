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

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

from . import ops as _ops
from . import symbolic as _sym

__all__ = ["TensorSpec", "ExportedGraph", "node_users_in_order", "is_tensor_spec"]


@dataclass(frozen=True)
class TensorSpec:
    """Shape (the upper bound for dynamic dimensions) and dtype of a tensor value.

    ``sym`` gives each dimension's size as a function of the method's dynamic dimensions: an
    int (static), a :class:`~etch.symbolic.SymExpr`, or ``UNKNOWN`` (dynamic, not a
    polynomial); None means all static."""
    shape: Tuple[int, ...]
    dtype: torch.dtype
    sym: Optional[Tuple[Any, ...]] = None

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        return cls(tuple(int(s) for s in t.shape), t.dtype)

    @property
    def sizes(self) -> Tuple[Any, ...]:
        """Per dimension: int, SymExpr or UNKNOWN."""
        return self.sym if self.sym is not None else self.shape

    @property
    def dynamic(self) -> Tuple[int, ...]:
        if self.sym is None:
            return ()
        return tuple(d for d, s in enumerate(self.sym) if not isinstance(s, int))

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
                 symbols: Sequence[_sym.Symbol] = (),
                 points: Optional[Sequence[Sequence[torch.Tensor]]] = None,
                 corners: Sequence[int] = (0,)):
        self.graph = graph
        self.constants = dict(constants)
        self.mutable = dict(mutable or {})
        self.example_inputs = [t.detach().clone() for t in example_inputs]
        self.name = name
        self.in_spec = in_spec
        self.out_spec = out_spec
        # Dynamic dimensions and the input sets the graph is evaluated at to find shapes
        # (points[0] is the example at the upper bounds; see etch.symbolic).
        self.symbols = list(symbols)
        self.points = [list(p) for p in points] if points else [self.example_inputs]
        self.corners = list(corners)
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
                           symbols=self.symbols, points=self.points, corners=self.corners)
        eg.log = list(self.log)
        return eg

    def call_nodes(self) -> List[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op == "call_function"]

    def __str__(self) -> str:
        return str(self.graph)

    # ---- reference interpreter -------------------------------------------------------------

    def sym_env(self, inputs: Sequence[torch.Tensor]) -> List[int]:
        """The value of every symbol for these inputs."""
        return [int(inputs[s.input].shape[s.dim]) for s in self.symbols]

    def run(self, inputs: Sequence[torch.Tensor], state: Optional[Dict[str, torch.Tensor]] = None,
            record: bool = False) -> List[Any]:
        """Run the graph with torch; returns the flat outputs.  `state` (name -> tensor)
        holds mutable state and is updated in place (default: a copy of the initial values).
        With `record`, every node's value is kept in ``node.meta["value"]``."""
        values = self._interpret(inputs, state)
        if record:
            for n, v in values.items():
                n.meta["value"] = v
        out = torch.fx.node.map_arg(self.output_node.args[0], values.__getitem__)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def _interpret(self, inputs: Sequence[torch.Tensor],
                   state: Optional[Dict[str, torch.Tensor]] = None) -> Dict[Any, Any]:
        if state is None:
            state = {k: v.clone() for k, v in self.mutable.items()}
        env = self.sym_env(inputs) if self.symbols else []
        values: Dict[torch.fx.Node, Any] = {}
        it = iter(inputs)

        def load(a):
            a = torch.fx.node.map_arg(a, values.__getitem__)
            return _sym.evaluate(a, env) if env else a

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
                        v = _contiguous(n.target(*args, **kwargs))
                elif n.op == "output":
                    break
                else:
                    raise NotImplementedError("node kind %s" % n.op)
                values[n] = v
        return values

    def propagate(self) -> None:
        """Set ``meta['spec']`` (TensorSpec / tuple of TensorSpec / Python value) on every node
        by running the graph on the example inputs (and, with dynamic dimensions, on every
        trace point, fitting each size to the symbols)."""
        runs = [self._interpret(p) for p in self.points]
        envs = [self.sym_env(p) for p in self.points] if self.symbols else None
        for n in self.graph.nodes:
            if n.op == "output":
                continue
            vals = [r[n] for r in runs]
            n.meta["spec"] = _combine(vals, envs, len(self.symbols), self.corners)

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


def _contiguous(v):
    """Kernels write contiguous outputs; so does the reference interpreter (torch's *_copy
    ops may keep a view's strides)."""
    if isinstance(v, torch.Tensor):
        return v.contiguous()
    if isinstance(v, tuple):
        return tuple(_contiguous(x) for x in v)
    if isinstance(v, list):
        return [_contiguous(x) for x in v]
    return v


def _combine(vals: List[Any], envs, n_symbols: int, corners) -> Any:
    v0 = vals[0]
    if isinstance(v0, torch.Tensor):
        spec = TensorSpec.of(v0)
        if envs is None or all(tuple(v.shape) == tuple(v0.shape) for v in vals[1:]):
            return spec
        sym = tuple(_sym.fit(envs, [int(v.shape[d]) for v in vals], n_symbols, corners)
                    for d in range(v0.dim()))
        shape = tuple(max(int(v.shape[d]) for v in vals) for d in range(v0.dim()))
        return TensorSpec(shape, v0.dtype, sym)
    if isinstance(v0, (tuple, list)):
        return tuple(_combine([v[i] for v in vals], envs, n_symbols, corners)
                     for i in range(len(v0)))
    return v0
