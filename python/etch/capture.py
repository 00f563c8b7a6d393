"""Graph capture: ``nn.Module`` + example inputs -> :class:`~etch.graph.ExportedGraph` in
functional ATen form.

All capture goes through :func:`capture`.  With torch 1.13 (Debian's ``1.13.0a0``) it traces
with ``make_fx`` over ``functorch.functionalize(remove='mutations_and_views')``, so the graph
has no in-place ops and every view is a ``*_copy`` op, and decomposes operators that the
portable operator set lacks (:mod:`etch.decomp`).  Walls of 1.13 handled here:

* tracing happens under ``torch.enable_grad()`` with the model in eval mode; the fused
  inference fast paths of ``MultiheadAttention`` / ``TransformerEncoderLayer`` are switched off
  for the duration of the trace (functionalized tensors do not report ``requires_grad``, which
  would otherwise select them);
* parameters and buffers are lifted to inputs with
  ``torch.nn.utils.stateless.functional_call`` and become constants afterwards; a buffer the
  model writes to (``copy_`` into it after functionalization) becomes mutable state.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx
from torch.utils import _pytree as pytree

from . import debuginfo as _debuginfo
from . import decomp as _decomp
from . import ops as _ops
from . import symbolic as _sym
from .graph import ExportedGraph

__all__ = ["capture", "CaptureError"]


class CaptureError(RuntimeError):
    """The model could not be captured into a graph the exporter supports."""


@contextlib.contextmanager
def _no_fused_fast_paths():
    """Make nn.MultiheadAttention / nn.TransformerEncoderLayer take their composite path.

    Their fast-path checks call ``torch.overrides.has_torch_function(tensor_args)``; answering
    True for calls from ``torch.nn.modules`` sends them down the regular (decomposable) path.
    Every other caller sees the original function."""
    import torch.overrides as ov
    orig = ov.has_torch_function

    def patched(args):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("torch.nn.modules."):
            return True
        return orig(args)

    ov.has_torch_function = patched
    try:
        yield
    finally:
        ov.has_torch_function = orig


def _named_state(model: torch.nn.Module):
    """(name, tensor) for every parameter and buffer under every name."""
    seen = set()
    for kind in ("named_parameters", "named_buffers"):
        try:
            items = getattr(model, kind)(remove_duplicate=False)
        except TypeError:   # older signature
            items = getattr(model, kind)()
        for name, t in items:
            if name in seen or t is None:
                continue
            seen.add(name)
            yield name, t


def state_names(model: torch.nn.Module) -> List[str]:
    """The fully qualified names of the model's parameters and buffers."""
    return [name for name, _ in _named_state(model)]


def _state_of(model: torch.nn.Module) -> Tuple[List[str], List[torch.Tensor]]:
    """Every parameter and buffer under every name (tied weights appear under each name, so
    functional_call replaces all of them)."""
    names, tensors = [], []
    for name, t in _named_state(model):
        names.append(name)
        tensors.append(t.detach().clone())
    return names, tensors


def _flatten_inputs(example_inputs) -> Tuple[List[torch.Tensor], Any]:
    example_inputs = _ops.from_numpy(example_inputs, "example_inputs")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError("example_inputs must be a tensor (or numpy array) or a tuple of them, "
                        "not %s" % type(example_inputs).__name__)
    flat, spec = pytree.tree_flatten(tuple(example_inputs))
    flat = [_ops.from_numpy(x, "example input %d" % i) for i, x in enumerate(flat)]
    for i, x in enumerate(flat):
        if not isinstance(x, torch.Tensor):
            raise TypeError("example input %d is a %s; only tensor (or numpy array) inputs are "
                            "supported" % (i, type(x).__name__))
    return flat, spec


def _trace(model: torch.nn.Module, names: List[str], state: List[torch.Tensor],
           in_spec, flat_inputs: List[torch.Tensor], table: Dict) -> Tuple[torch.fx.GraphModule, Any]:
    import functorch
    from torch.fx.experimental.proxy_tensor import make_fx

    n_state = len(state)
    out_box: Dict[str, Any] = {}

    def fn(*flat):
        params = dict(zip(names, flat[:n_state]))
        args = pytree.tree_unflatten(list(flat[n_state:]), in_spec)
        out = torch.nn.utils.stateless.functional_call(model, params, tuple(args))
        leaves, spec = pytree.tree_flatten(out)
        out_box["spec"] = spec
        for i, x in enumerate(leaves):
            if not isinstance(x, torch.Tensor):
                raise CaptureError("output %d is a %s; only tensor outputs are supported"
                                   % (i, type(x).__name__))
        return leaves

    # Every node gets meta["debug"]: its module path and the model's source lines
    # (etch.debuginfo; the walk up the Python stack stops at fn, the model's caller).
    with _no_fused_fast_paths(), torch.enable_grad(), warnings.catch_warnings(), \
            _debuginfo.recording(model, fn.__code__):
        warnings.simplefilter("ignore")
        # Fresh copies: tracing runs the model for real, and writes into state (buffers
        # updated in forward) must touch neither the model nor the initial values.
        gm = make_fx(functorch.functionalize(fn, remove="mutations_and_views"),
                     decomposition_table=table, tracing_mode="real")(
                         *[t.clone() for t in state], *[x.clone() for x in flat_inputs])
    return gm, out_box.get("spec")


def _to_exported(gm: torch.fx.GraphModule, names: List[str], state: List[torch.Tensor],
                 flat_inputs: List[torch.Tensor], buffer_names: set, in_spec, out_spec,
                 symbols=(), points=None, corners=(0,)) -> ExportedGraph:
    # A graph of its own (no owning module: get_attr targets name our constants).
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(state) + len(flat_inputs):
        raise CaptureError("traced graph has %d inputs, expected %d"
                           % (len(placeholders), len(state) + len(flat_inputs)))
    constants: Dict[str, torch.Tensor] = {}
    mutable: Dict[str, torch.Tensor] = {}
    # Mutated state: functionalization writes the final value back with copy_.
    mutated = set()
    for n in graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default:
            dst = n.args[0]
            if dst in placeholders[:len(state)]:
                mutated.add(dst)
            elif dst in placeholders:
                raise CaptureError("the model writes into its input %s in place; return the "
                                   "new value instead" % dst.name)
    for ph, name, t in zip(placeholders, names, state):
        with graph.inserting_before(ph), warnings.catch_warnings():
            warnings.simplefilter("ignore")     # get_attr without an owning module: intended
            ga = graph.get_attr(name)
        ph.replace_all_uses_with(ga)
        graph.erase_node(ph)
        if ph in mutated:
            if name not in buffer_names:
                raise CaptureError("the model changes parameter %s in place" % name)
            mutable[name] = t.clone()
        else:
            constants[name] = t
    # Tensors the trace captured by value (torch.tensor(...) in forward and the like).
    for n in list(graph.nodes):
        if n.op == "get_attr" and n.target not in constants and n.target not in mutable:
            val = getattr(gm, n.target, None)
            if not isinstance(val, torch.Tensor):
                raise CaptureError("unsupported attribute %s in the traced graph" % n.target)
            constants[n.target] = val.detach()
    # Placeholders that were inputs keep their order; rename them input_<i>.
    for i, ph in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        ph.target = "input_%d" % i
    graph.lint()
    return ExportedGraph(graph, constants, flat_inputs, mutable=mutable, in_spec=in_spec,
                         out_spec=out_spec, symbols=symbols, points=points, corners=corners)


# ---- dynamic shapes: trace at several sizes, fit the size-dependent integers ---------------


def _symbols(dynamic_shapes, flat_inputs) -> List[_sym.Symbol]:
    syms = []
    for i, spec in enumerate(dynamic_shapes or []):
        if not spec:
            continue
        if not isinstance(spec, dict):
            raise TypeError("dynamic_shapes[%d] must be None or a dict {dim: max_size}, not %s"
                            % (i, type(spec).__name__))
        x = flat_inputs[i]
        for d, mx in sorted(spec.items()):
            if isinstance(d, bool) or not isinstance(d, int) or \
                    isinstance(mx, bool) or not isinstance(mx, int):
                raise TypeError("dynamic_shapes[%d]: expected {dim: max_size} with int keys "
                                "and values, got %r" % (i, spec))
            if not -x.dim() <= d < x.dim():
                raise ValueError("input %d has no dimension %d" % (i, d))
            d0 = d % x.dim()
            if int(mx) < 2:
                raise ValueError("input %d dimension %d: the upper bound must be at least 2"
                                 % (i, d))
            syms.append(_sym.Symbol(len(syms), i, d0, int(mx)))
    return syms


def _resize(x: torch.Tensor, d: int, size: int) -> torch.Tensor:
    """x with dimension d of the given size: cut, or tiled with its own values (keeps integer
    inputs such as token ids valid)."""
    n = x.shape[d]
    if size <= n:
        return x.narrow(d, 0, size).contiguous()
    reps = [1] * x.dim()
    reps[d] = -(-size // n)
    return x.repeat(*reps).narrow(d, 0, size).contiguous()


def _trace_points(symbols, flat_inputs):
    """Symbol values of the trace points: the 2**k corners of {max, low} (all-max first) and,
    when there is room, one point in between to check the fits.  Returns (envs, corners)."""
    import itertools
    lows = [max(1, (s.max + 1) // 2) if s.max >= 4 else s.max - 1 for s in symbols]
    corners = [tuple(c) for c in itertools.product(*[(s.max, lo)
                                                     for s, lo in zip(symbols, lows)])]
    envs = list(corners)
    if all(s.max - lo >= 2 for s, lo in zip(symbols, lows)):
        envs.append(tuple(lo + 1 for lo in lows))
    return envs, list(range(len(corners)))


def _inputs_at(symbols, flat_inputs, env):
    xs = list(flat_inputs)
    for s, v in zip(symbols, env):
        xs[s.input] = _resize(xs[s.input], s.dim, v)
    return xs


def _merge_graphs(graphs: List[torch.fx.Graph], envs, n_symbols: int, corners) -> None:
    """Check that the traces have the same structure and replace, in graphs[0], every
    integer argument that differs between them by its fitted SymExpr."""
    lists = [list(g.nodes) for g in graphs]
    n = len(lists[0])
    if any(len(l) != n for l in lists):
        raise CaptureError("the traced graph changes with the dynamic sizes (%s nodes); "
                           "the model's structure depends on them"
                           % "/".join(str(len(l)) for l in lists))
    pos = [{node: i for i, node in enumerate(l)} for l in lists]

    def merge(vals, where):
        a0 = vals[0]
        if isinstance(a0, torch.fx.Node):
            for j, v in enumerate(vals[1:], 1):
                if not isinstance(v, torch.fx.Node) or pos[j][v] != pos[0][a0]:
                    raise CaptureError("graph structure differs between sizes at %s" % where)
            return a0
        if isinstance(a0, (list, tuple)):
            if any(not isinstance(v, (list, tuple)) or len(v) != len(a0) for v in vals[1:]):
                raise CaptureError("argument of %s changes length with the dynamic sizes"
                                   % where)
            out = [merge([v[i] for v in vals], where) for i in range(len(a0))]
            return type(a0)(out)
        if isinstance(a0, dict):
            return {k: merge([v[k] for v in vals], where) for k in a0}
        if isinstance(a0, int) and not isinstance(a0, bool):
            if all(v == a0 for v in vals[1:]):
                return a0
            return _sym.fit(envs, [int(v) for v in vals], n_symbols, corners)
        if any(v != a0 for v in vals[1:]):
            raise CaptureError("argument %r of %s depends on the dynamic sizes in a way "
                               "etch cannot express" % (a0, where))
        return a0

    for i in range(n):
        nodes = [l[i] for l in lists]
        n0 = nodes[0]
        if any(m.op != n0.op or m.target != n0.target for m in nodes[1:]):
            raise CaptureError("graph structure differs between sizes at node %s" % n0.name)
        if n0.op != "call_function":
            continue
        n0.args = merge([m.args for m in nodes], n0.name)
        n0.kwargs = merge([m.kwargs for m in nodes], n0.name)


def capture(model: torch.nn.Module, example_inputs, *,
            dynamic_shapes: Optional[Sequence[Optional[Dict[int, int]]]] = None,
            progress: Optional[Callable[[str], None]] = None) -> ExportedGraph:
    """Capture `model` (called as ``model(*example_inputs)``) into an ExportedGraph in
    functional ATen form, decomposed towards the portable operator set."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("etch.export needs an nn.Module, got %s" % type(model).__name__)
    flat_inputs, in_spec = _flatten_inputs(example_inputs)
    if dynamic_shapes is not None:
        if isinstance(dynamic_shapes, dict):
            dynamic_shapes = [dynamic_shapes]
        dynamic_shapes = list(dynamic_shapes)
        if len(dynamic_shapes) != len(flat_inputs):
            raise ValueError("dynamic_shapes has %d entries for %d inputs"
                             % (len(dynamic_shapes), len(flat_inputs)))
    symbols = _symbols(dynamic_shapes, flat_inputs)
    envs, corners = _trace_points(symbols, flat_inputs) if symbols else ([()], [0])
    if symbols:
        flat_inputs = _inputs_at(symbols, flat_inputs, envs[0])    # at the upper bounds
    was_training = model.training
    model.eval()
    try:
        names, state = _state_of(model)
        buffer_names = {n for n, _ in model.named_buffers()}
        say = progress or (lambda s: None)
        table = _decomp.initial_table()
        tried = set()

        def trace(tbl):
            return _trace(model, names, state, in_spec, flat_inputs, tbl)

        say("tracing")
        gm, out_spec = trace(table)
        for _ in range(16):
            extra = _decomp.missing_decompositions(gm.graph, tried)
            if not extra:
                break
            tried |= set(extra)
            say("decomposing %s" % ", ".join(sorted(str(op) for op in extra)))
            trial = dict(table)
            trial.update(_decomp.table_for(extra))
            gm2, spec2 = trace(trial)
            if not _decomp.has_prims(gm2.graph):
                table, gm, out_spec = trial, gm2, spec2
                continue
            # Some decomposition lowers to prims (no kernels): keep only the good ones.
            for op in extra:
                trial = dict(table)
                trial.update(_decomp.table_for([op]))
                gm2, spec2 = trace(trial)
                if not _decomp.has_prims(gm2.graph):
                    table, gm, out_spec = trial, gm2, spec2
        if not symbols:
            return _to_exported(gm, names, state, flat_inputs, buffer_names, in_spec,
                                out_spec)
        graphs = [gm.graph]
        points = [flat_inputs]
        for k, env in enumerate(envs[1:], 1):
            say("tracing at sizes %s" % (", ".join("%s=%d" % (s, v)
                                                   for s, v in zip(symbols, env))))
            xs = _inputs_at(symbols, flat_inputs, env)
            try:
                gk, _ = _trace(model, names, state, in_spec, xs, table)
            except Exception as e:
                raise CaptureError("tracing with %s failed: %s" % (
                    ", ".join("input %d dim %d = %d" % (s.input, s.dim, v)
                              for s, v in zip(symbols, env)), e)) from e
            graphs.append(gk.graph)
            points.append(xs)
        _merge_graphs(graphs, envs, len(symbols), corners)
        eg = _to_exported(gm, names, state, flat_inputs, buffer_names, in_spec, out_spec,
                          symbols=symbols, points=points, corners=corners)
    finally:
        model.train(was_training)
    return eg
