"""``etch.inspect``: run a model in PyTorch eager and its program in etch side by side and
compare every operator's output.

    report = etch.inspect(model, "model.pte", (x,))      # prints the table, returns a report
    report.first_bad            # the first row whose SQNR fell below the threshold, or None
    report.layers_by_damage()   # layers sorted by the noise they add (quantized programs)

Two comparisons, each where it applies:

* **per operator** (the program was exported from this very model): every instruction's
  output against the value of the graph node it computes, by the node names of the program's
  debug information (``Chain.stacktrace``, :mod:`etch.debuginfo`).  The eager values come from
  capturing the model again (:func:`etch.capture.capture`: the same graph the exporter started
  from, with the same node names) and running that graph node by node with PyTorch (the
  reference interpreter of :class:`etch.graph.ExportedGraph`).  A delegate call is one row,
  its outputs compared with the nodes they stand for.
* **per layer** (any program with module paths, e.g. a quantized program against the float
  model it was quantized from): each module's output in eager (forward hooks) against the
  output of the last instruction computed in that module, in program order, with the same
  number of elements (in a static int8 program: through the quantize -> dequantize of that
  output which follows, as the next layer reads it).  A module whose work the program folded
  into the one before it (a batch norm after a convolution) is matched to that one: the eager
  value compared is the first of them and the folded ones that follow, whichever agrees best
  (``Layer.matched`` names it).
  ``damage`` is the noise-to-signal ratio a layer adds over the layer before it (in program
  order); ``layers_by_damage()`` sorts by it.

The etch side runs through :func:`etch.runtime.run_capturing` (public C API: caller-owned
arenas, the instruction observer reading each output right after it is written; fusion,
chained calls and the channel-blocked layout off).  A dynamically shaped intermediate tensor is
read at the shape its eager value has (the observer does not know its run-time shape; the
data of a resized tensor is contiguous at its planned offset).

Metrics per output, in float64: ``max_abs`` (largest absolute difference), ``rel`` (max_abs
over the largest magnitude of the reference), ``sqnr_db`` (10 log10 of signal power over error
power; inf when equal) and ``cosine``.  The first row (and layer) whose SQNR is below
``threshold_db`` (default 40 dB) is marked.  Before comparing, the inputs and the outputs are
checked against the program's (count, dtype, shape): a program that does not come from the
model is an :class:`InspectError`, not a table of garbage.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils import _pytree as pytree

from . import debuginfo as _debuginfo
from . import ops as _ops
from .runtime import DynamicTensor as _DynamicTensor

__all__ = ["inspect", "InspectError", "InspectReport", "Row", "Layer", "compare"]


class InspectError(ValueError):
    """The program and the model (or the inputs) do not belong together."""


# ---- metrics -------------------------------------------------------------------------------

@dataclass
class Metrics:
    max_abs: float
    rel: float
    sqnr_db: float
    cosine: float


def compare(ref: torch.Tensor, out: torch.Tensor) -> Metrics:
    """Error metrics of `out` against `ref` (same number of elements), in float64."""
    a = ref.detach().reshape(-1).to(torch.float64)
    b = out.detach().reshape(-1).to(torch.float64)
    if a.numel() == 0:
        return Metrics(0.0, 0.0, math.inf, 1.0)
    finite = torch.isfinite(a) & torch.isfinite(b)
    same_nonfinite = (~finite) & ((a == b) | (torch.isnan(a) & torch.isnan(b)))
    if not bool((finite | same_nonfinite).all()):
        return Metrics(math.inf, math.inf, -math.inf, float("nan"))
    a, b = a[finite], b[finite]
    if a.numel() == 0:
        return Metrics(0.0, 0.0, math.inf, 1.0)
    err = a - b
    max_abs = float(err.abs().max())
    scale = float(a.abs().max())
    rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    p_sig, p_err = float((a * a).sum()), float((err * err).sum())
    if p_err == 0:
        sqnr = math.inf
    elif p_sig == 0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(p_sig / p_err)
    na, nb = float(a.norm()), float(b.norm())
    if na == 0 and nb == 0:
        cos = 1.0
    elif na == 0 or nb == 0:
        cos = 0.0
    else:
        cos = float((a * b).sum()) / (na * nb)
    return Metrics(max_abs, rel, sqnr, cos)


def _nsr(sqnr_db: float) -> float:
    if sqnr_db == math.inf:
        return 0.0
    if sqnr_db == -math.inf:
        return math.inf
    return 10.0 ** (-sqnr_db / 10.0)


# ---- report --------------------------------------------------------------------------------

@dataclass
class Row:
    """One instruction compared with the graph node(s) it computes."""
    chain: int
    pc: int
    op: str                         # operator / backend id
    module: Optional[str]           # module path ("" = root)
    node: str                       # capture-time node name(s)
    shape: Tuple[int, ...]
    source: str                     # "file.py:42"
    metrics: Optional[Metrics]      # worst output's; None when not compared
    note: str = ""                  # why not compared
    marked: bool = False            # the first row below the threshold


@dataclass
class Layer:
    """One module's output in eager against etch's value at the end of that module."""
    module: str
    matched: str                    # the eager module whose output was compared
    pc: int                         # the instruction compared
    shape: Tuple[int, ...]
    metrics: Metrics
    damage: float = 0.0             # noise-to-signal ratio added over the layer before
    marked: bool = False


@dataclass
class InspectReport:
    method: str
    threshold_db: float
    rows: List[Row] = field(default_factory=list)
    layers: List[Layer] = field(default_factory=list)
    outputs: List[Metrics] = field(default_factory=list)   # the method's outputs
    notes: List[str] = field(default_factory=list)

    @property
    def first_bad(self) -> Optional[Row]:
        return next((r for r in self.rows if r.marked), None)

    @property
    def first_bad_layer(self) -> Optional[Layer]:
        return next((l for l in self.layers if l.marked), None)

    def layers_by_damage(self) -> List[Layer]:
        return sorted(self.layers, key=lambda l: -l.damage)

    def table(self) -> str:
        out: List[str] = []
        w = out.append
        w("method %s: %d instructions compared per operator, %d layers (threshold %.1f dB)"
          % (self.method, sum(r.metrics is not None for r in self.rows), len(self.layers),
             self.threshold_db))
        for i, m in enumerate(self.outputs):
            w("output %d: max_abs %s  rel %s  SQNR %s  cosine %.6f"
              % (i, _g(m.max_abs), _g(m.rel), _db(m.sqnr_db), m.cosine))
        for n in self.notes:
            w("note: " + n)
        if self.rows:
            w("")
            w("%-3s %5s  %-34s %-26s %-18s %-16s %10s %10s %9s %9s  %s"
              % ("", "pc", "operator", "module", "node", "shape", "max_abs", "rel", "SQNR dB",
                 "cosine", "source"))
            for r in self.rows:
                m = r.metrics
                metrics = ("%10s %10s %9s %9.6f" % (_g(m.max_abs), _g(m.rel), _db(m.sqnr_db),
                                                    m.cosine)) if m else \
                    "%-41s" % ("(%s)" % r.note)
                w("%-3s %5d  %-34s %-26s %-18s %-16s %s  %s"
                  % (">>" if r.marked else "", r.pc, _cut(r.op, 34),
                     _cut(_mod(r.module), 26), _cut(r.node, 18),
                     "x".join(map(str, r.shape)) or "-", metrics, r.source))
            bad = self.first_bad
            w("first operator below %.1f dB: %s" % (
                self.threshold_db, "none" if bad is None else "pc %d %s in %s (%s)"
                % (bad.pc, bad.op, _mod(bad.module), bad.node)))
        if self.layers:
            w("")
            w("layers, in program order (damage: the noise it adds over the layer before, in dB "
              "of its signal):")
            w("%-3s %-30s %-30s %-16s %9s %9s %10s" % ("", "module", "compared with", "shape",
                                                     "SQNR dB", "cosine", "damage dB"))
            for l in self.layers:
                w("%-3s %-30s %-30s %-16s %9s %9.6f %10s"
                  % (">>" if l.marked else "", _cut(_mod(l.module), 30),
                     _cut(_mod(l.matched), 30), "x".join(map(str, l.shape)),
                     _db(l.metrics.sqnr_db), l.metrics.cosine, _damage(l.damage)))
            w("layers by damage: " + ", ".join(
                "%s (%s)" % (_mod(l.module), _damage(l.damage) + " dB" if l.damage > 0 else "-")
                for l in self.layers_by_damage()))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()


def _g(x: float) -> str:
    return "%.3g" % x


def _db(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else "%.1f" % x


def _damage(d: float) -> str:
    """The added noise-to-signal ratio in dB (higher: more damage; "-": none added)."""
    if d <= 0:
        return "-"
    return "inf" if d == math.inf else "%.1f" % (10.0 * math.log10(d))


def _mod(m: Optional[str]) -> str:
    return "?" if m is None else (m or "<root>")


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "~"


# ---- the program's side --------------------------------------------------------------------

def _program_bytes(program_or_path) -> bytes:
    if hasattr(program_or_path, "buffer") and \
            not isinstance(program_or_path, (bytes, bytearray, memoryview)):
        return bytes(program_or_path.buffer)
    if isinstance(program_or_path, (str, os.PathLike)):
        path = os.fspath(program_or_path)
        if not os.path.isfile(path):
            raise FileNotFoundError("no program file %s" % path)
        with open(path, "rb") as f:
            return f.read()
    if isinstance(program_or_path, (bytes, bytearray, memoryview)):
        return bytes(program_or_path)
    raise TypeError("etch.inspect takes an etch.Program, a .pte path or its bytes, not %s"
                    % type(program_or_path).__name__)


def _instructions(plan):
    """(chain, pc, op name, NodeDebug or None, output value indices) per instruction."""
    from .serialize import schema as S
    out = []
    for c, ch in enumerate(plan.chains):
        st = list(ch.stacktrace or [])
        if len(st) != len(ch.instructions):
            st = [None] * len(ch.instructions)
        for pc, ins in enumerate(ch.instructions):
            d = _debuginfo.from_frame_list(st[pc]) if st[pc] is not None else None
            a = ins.instr_args
            outs: List[int] = []
            if isinstance(a, S.KernelCall):
                o = plan.operators[a.op_index]
                op = o.name + ("." + o.overload if o.overload else "")
                if a.args:
                    ret = plan.values[a.args[-1]].val
                    if isinstance(ret, S.TensorList):
                        outs = list(ret.items)
                    elif isinstance(ret, S.Tensor):
                        outs = [a.args[-1]]
            elif isinstance(a, S.DelegateCall):
                op = plan.delegates[a.delegate_index].id
                k = len(d.node.split(",")) if d is not None and d.node else 0
                outs = list(a.args[len(a.args) - k:]) if k and k <= len(a.args) else []
            else:
                op = type(a).__name__
            out.append((c, pc, op, d, outs))
    return out


def _check_io(plan, flat_inputs, eager_outs) -> None:
    from .serialize import schema as S
    why = []
    if len(plan.inputs) != len(flat_inputs):
        why.append("the program's method %s takes %d inputs, %d given"
                   % (plan.name, len(plan.inputs), len(flat_inputs)))
    else:
        for i, (vi, x) in enumerate(zip(plan.inputs, flat_inputs)):
            t = plan.values[vi].val
            if not isinstance(t, S.Tensor):
                why.append("program input %d is not a tensor" % i)
                continue
            dt = _ops.TORCH_DTYPE.get(int(t.scalar_type))
            sizes = list(t.sizes)
            dyn = t.shape_dynamism != S.TensorShapeDynamism.STATIC
            fits = len(sizes) == x.dim() and all(
                (s <= b if dyn else s == b) for s, b in zip(x.shape, sizes))
            if dt != x.dtype or not fits:
                why.append("input %d is %s %s, the program's is %s %s" % (
                    i, str(x.dtype).replace("torch.", ""), list(x.shape),
                    str(dt).replace("torch.", ""), sizes))
    if len(plan.outputs) != len(eager_outs):
        why.append("the model has %d outputs, the program %d"
                   % (len(eager_outs), len(plan.outputs)))
    else:
        for i, (vi, y) in enumerate(zip(plan.outputs, eager_outs)):
            t = plan.values[vi].val
            if isinstance(t, S.Tensor) and isinstance(y, torch.Tensor):
                dyn = t.shape_dynamism != S.TensorShapeDynamism.STATIC
                sizes = list(t.sizes)
                fits = len(sizes) == y.dim() and all(
                    (s <= b if dyn else s == b) for s, b in zip(y.shape, sizes))
                if not fits:
                    why.append("output %d of the model has shape %s, the program's %s"
                               % (i, list(y.shape), sizes))
    if why:
        raise InspectError("the program does not come from this model with these inputs: "
                           + "; ".join(why))


# ---- eager side ----------------------------------------------------------------------------

def _eager(model, flat_inputs, in_spec):
    """(flat outputs, {module path: (order, output)} of the first call of every submodule)."""
    seen: Dict[str, Tuple[int, Any]] = {}
    hooks = []
    for name, mod in model.named_modules():
        if not name:
            continue

        def hook(m, args, out, name=name):
            if name not in seen and isinstance(out, torch.Tensor):
                seen[name] = (len(seen), out.detach().clone())
        hooks.append(mod.register_forward_hook(hook))
    try:
        with torch.no_grad():
            args = pytree.tree_unflatten([x.clone() for x in flat_inputs], in_spec)
            out = model(*args)
    finally:
        for h in hooks:
            h.remove()
    leaves, _ = pytree.tree_flatten(out)
    return leaves, seen


def _node_values(model, flat_inputs, in_spec) -> Tuple[Optional[Dict[str, Any]], str]:
    """Every node's value of the captured graph, by name (or None and why not)."""
    from .capture import capture
    try:
        args = pytree.tree_unflatten(list(flat_inputs), in_spec)
        eg = capture(model, tuple(args))
        values = eg._interpret([x.clone() for x in flat_inputs])
    except Exception as e:      # the per-layer comparison may still work
        return None, "capturing the model failed (%s: %s): no per-operator comparison" % (
            type(e).__name__, e)
    by_name = {n.name: v for n, v in values.items()}
    targets = {n.name: _ops.op_name(n.target) if n.op == "call_function" else n.op
               for n in values}
    return {"values": by_name, "targets": targets}, ""


# ---- inspect -------------------------------------------------------------------------------

def inspect(model: torch.nn.Module, program_or_path, inputs, *, method: str = "forward",
            threshold_db: float = 40.0, data=None, kernels: str = "optimized",
            show: bool = True, file=None) -> InspectReport:
    """Compare `model` in PyTorch eager with its program run by etch on `inputs`, operator by
    operator and layer by layer (see the module docstring); prints the table (to `file`,
    default stdout) unless ``show=False``, and returns the :class:`InspectReport`.

    program_or_path: an :class:`etch.Program`, a ``.pte`` path or its bytes; data: the
    ``.ptd`` of a program with external constants; kernels: ``"optimized"`` or
    ``"portable"``.  Raises :class:`InspectError` when the program's inputs or outputs do not
    match the model's."""
    from . import runtime as _rt
    from .capture import _flatten_inputs
    from .serialize import pte as _pte
    if not isinstance(model, torch.nn.Module):
        raise TypeError("etch.inspect needs the nn.Module the program was exported from, not %s"
                        % type(model).__name__)
    if isinstance(threshold_db, bool) or not isinstance(threshold_db, (int, float)):
        raise TypeError("threshold_db must be a number of dB, not %r" % (threshold_db,))
    blob = _program_bytes(program_or_path)
    flat, in_spec = _flatten_inputs(inputs)
    was_training = model.training
    model.eval()
    try:
        eager_outs, module_outs = _eager(model, flat, in_spec)
        prog = _pte.read_pte(blob).program
        names = [p.name for p in prog.execution_plan]
        if method not in names:
            raise InspectError("the program has no method %r (methods: %s)"
                               % (method, ", ".join(names)))
        _check_io(next(p for p in prog.execution_plan if p.name == method), flat, eager_outs)
        ref, why = _node_values(model, flat, in_spec)
    finally:
        model.train(was_training)

    table: Dict[str, Any] = {}

    def wanted(plan):
        table["instrs"] = _instructions(plan)
        return {(c, pc): outs for c, pc, _, _, outs in table["instrs"] if outs}

    cap = _rt.run_capturing(blob, flat, wanted, method=method, data=data, kernels=kernels)
    instrs = table["instrs"]
    report = InspectReport(cap.method, float(threshold_db))
    if cap.method != method:
        report.notes.append("etch ran %s (the CPU twin: a backend %s delegates to is missing)"
                            % (cap.method, method))
    for i, (y, e) in enumerate(zip(cap.outputs, eager_outs)):
        if isinstance(y, torch.Tensor) and isinstance(e, torch.Tensor) and \
                y.numel() == e.numel():
            report.outputs.append(compare(e, y))
    with_debug = [t for t in instrs if t[3] is not None and t[3].node]
    if not with_debug:
        report.notes.append("the program carries no debug information (exported with "
                            "debug_info=False, or by another exporter): only the outputs are "
                            "compared")
    elif ref is None:
        report.notes.append(why)
    else:
        missing = [d.node for _, _, _, d, _ in with_debug
                   if any(n not in ref["values"] for n in d.node.split(","))]
        if missing:
            report.notes.append(
                "%d of the program's %d graph nodes are not in the model's graph (%s...): it "
                "was exported from another model (a quantized copy of this one?); compared "
                "per layer only" % (len(missing), len(with_debug), ", ".join(missing[:3])))
        else:
            _rows(report, instrs, cap, ref["values"])
    _layers(report, instrs, cap, module_outs)
    if show:
        print(report.table(), file=file or sys.stdout)
    return report


def _source(d) -> str:
    s = d.source if d is not None else None
    return "%s:%d" % (os.path.basename(s.filename), s.lineno) if s is not None else ""


def _rows(report: InspectReport, instrs, cap, values) -> None:
    marked = False
    for c, pc, op, d, outs in instrs:
        if not outs or d is None or not d.node:
            continue
        got = cap.values.get((c, pc)) or []
        names = d.node.split(",")
        if len(names) == 1 and len(outs) > 1:
            refs = values[names[0]]
            refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
        else:
            refs = [values[n] for n in names]
        worst, shape, note = None, (), ""
        for k, y in enumerate(got):
            r = refs[k] if k < len(refs) else None
            if isinstance(r, (tuple, list)) and len(r) >= 1 and len(got) == 1:
                r = r[0]
            if isinstance(y, _DynamicTensor) and isinstance(r, torch.Tensor):
                y = y.as_shape(r.shape)     # read at the shape eager computed
                if y is None:
                    note = note or "larger than the program's bound"
                    continue
            if y is None or isinstance(y, _DynamicTensor):
                note = note or "not read (unplanned or dynamic)"
                continue
            if not isinstance(r, torch.Tensor) or r.numel() != y.numel():
                note = note or "reference has another shape"
                continue
            if not (r.dtype.is_floating_point or r.dtype in (torch.int8, torch.uint8,
                                                             torch.int32)):
                continue    # indices, masks: not a numeric error
            m = compare(r, y)
            if k == 0:
                shape = tuple(y.shape)
            if worst is None or m.sqnr_db < worst.sqnr_db:
                worst = m
        row = Row(c, pc, op, d.module, d.node, shape, _source(d), worst,
                  note if worst is None else "")
        if worst is None and not row.note:
            row.note = "no numeric output"
        if worst is not None and not marked and worst.sqnr_db < report.threshold_db:
            row.marked = marked = True
        report.rows.append(row)


def _layers(report: InspectReport, instrs, cap, module_outs) -> None:
    # the last float instruction output computed in each module (or below it), program order
    named = set()
    for _, _, _, d, _ in instrs:
        if d is not None and d.module:
            named.add(d.module)
    order = sorted(module_outs, key=lambda n: module_outs[n][0])
    # modules with children are compared too, but not where their last value is a child's
    last: Dict[str, Tuple[int, int, torch.Tensor]] = {}
    for seq, (c, pc, _, d, outs) in enumerate(instrs):
        if d is None or d.module is None:
            continue
        got = cap.values.get((c, pc)) or []
        y = got[0] if got else None
        if isinstance(y, _DynamicTensor) and y.data.dtype.is_floating_point:
            y = (y, None)           # its shape: the eager module output's, below
        elif not isinstance(y, torch.Tensor) or not y.dtype.is_floating_point:
            continue
        parts = d.module.split(".") if d.module else []
        for k in range(1, len(parts) + 1):
            last[".".join(parts[:k])] = (seq, pc, y)
    def quantized_output(seq, y):
        """A layer's value as the next layer sees it: through the quantize -> dequantize of
        its output that follows it outside any module (static int8: the activation's
        quantization is part of the damage a layer does)."""
        for c, pc, op, d, outs in instrs[seq + 1:]:
            if not op.startswith(("quantized_decomposed::quantize_per_tensor",
                                  "quantized_decomposed::dequantize_per_tensor")) or \
                    (d is not None and d.module):
                break
            got = cap.values.get((c, pc)) or []
            z = got[0] if got else None
            if not isinstance(z, torch.Tensor) or z.numel() != y.numel():
                break
            if z.dtype.is_floating_point:
                return pc, z
        return None

    rows: List[Tuple[int, Layer]] = []
    for i, name in enumerate(order):
        if name not in last or name not in named:
            continue
        seq, pc, y = last[name]
        dyn = y[0] if isinstance(y, tuple) else None
        qo = quantized_output(seq, y) if dyn is None else None
        if qo is not None:
            pc, y = qo
        # this module and the modules right after it that the program does not name (folded
        # into it), whose output has this shape
        cands = [name]
        for nxt in order[i + 1:]:
            if nxt.startswith(name + "."):
                continue
            if nxt in named:
                break
            cands.append(nxt)
        best = None
        for cand in cands:
            e = module_outs[cand][1]
            yy = dyn.as_shape(e.shape) if dyn is not None else y
            if yy is None or e.numel() != yy.numel():
                continue
            m = compare(e, yy)
            if best is None or m.sqnr_db > best[1].sqnr_db:
                best = (cand, m, tuple(yy.shape))
        if best is None:
            continue
        rows.append((seq, Layer(name, best[0], pc, best[2], best[1])))
    # a parent whose last value is that of its last child repeats it: keep the child only
    kept: List[Tuple[int, Layer]] = []
    for seq, l in rows:
        if any(s == seq and o.module.startswith(l.module + ".") for s, o in rows):
            continue
        kept.append((seq, l))
    kept.sort(key=lambda t: t[0])
    prev = 0.0
    marked = False
    for _, l in kept:
        nsr = _nsr(l.metrics.sqnr_db)
        l.damage = max(nsr - prev, 0.0) if math.isfinite(nsr) else math.inf
        prev = nsr
        if not marked and l.metrics.sqnr_db < report.threshold_db:
            l.marked = marked = True
        report.layers.append(l)
