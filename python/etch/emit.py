"""Emission: an optimized :class:`~etch.graph.ExportedGraph` -> one ``ExecutionPlan`` of the
``.pte`` schema (values, instructions, operators, planned memory) plus its constant data.

Each ``call_function`` node becomes one ``KernelCall`` of its out-variant (:mod:`etch.ops`)
with the arguments in the out-schema's order, every default filled in, the out tensors in the
``out`` slots and one return slot (§5.4): the out tensor again, or a ``TensorList`` of the outs
when there are several.  Argument encodings follow §5.4/§5.8: ``int[]`` -> ``IntList`` of
``Int`` values, ``Scalar`` -> ``Int``/``Double``/``Bool``, dtypes / memory formats / layouts ->
``Int``, ``None`` -> ``Null`` (an empty ``BYTE[0]`` tensor where a non-optional tensor is None).

Elided aliases get their own ``Tensor`` value with the allocation of their source and no
instruction.  Dynamically shaped aliases become ``executorch_prim::et_view.default`` calls
whose out tensor is also given its source's allocation (et_view then points it at that very
memory; a planned out keeps runtimes that require data on every argument happy).  Memory planning (:mod:`etch.memory_plan`) covers inputs, outputs, mutable state
and every intermediate; all of them live in arena 1.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

from . import debuginfo as _debuginfo
from . import ops as _ops
from . import symbolic as _sym
from .graph import ExportedGraph, TensorSpec
from .memory_plan import MemoryPlan, Storage, plan_memory
from .serialize import schema as S

aten = torch.ops.aten

__all__ = ["emit_method", "EmittedMethod", "EmitError", "ConstantTable", "ExternalConstant"]


class EmitError(RuntimeError):
    pass


class ConstantTable:
    """Constant tensor blobs shared by all methods of a program (index 0 = placeholder);
    identical bytes share an index.  `mutable` holds the initial values of mutable state
    (one entry per state tensor; index 0 = placeholder).

    With ``external=True`` constants go to `external` instead (key -> ExternalConstant, for a
    ``.ptd``): the key is the tensor's fully qualified name when it is one of the model's
    parameters or buffers (`state_names`), else (a constant the exporter made, such as a
    folded batch-norm weight) ``_etch_constant.<hash>`` of its dtype, shape and bytes, so that
    several programs exported from one model name every tensor alike."""

    def __init__(self, external: bool = False, state_names=()):
        self.blobs: List[bytes] = [b""]
        self._index: Dict[bytes, int] = {}
        self.mutable: List[bytes] = [b""]
        self.is_external = external
        self.state_names = frozenset(state_names)
        self.external: Dict[str, "ExternalConstant"] = {}
        self.delegate_blobs: List[bytes] = []    # processed delegate payloads (segments)

    def add_delegate_blob(self, data: bytes) -> int:
        """Index of a delegate payload among the program's delegate blobs."""
        self.delegate_blobs.append(bytes(data))
        return len(self.delegate_blobs) - 1

    def add_external(self, name: str, t: torch.Tensor) -> str:
        """Record `t` for the .ptd; returns its key."""
        data = _tensor_bytes(t)
        scalar_type = _ops.scalar_type(t.dtype)
        sizes = tuple(int(d) for d in t.shape)
        if name not in self.state_names:
            h = hashlib.sha256(repr((scalar_type, sizes)).encode() + data).hexdigest()
            name = "_etch_constant." + h[:24]
        have = self.external.get(name)
        if have is None:
            self.external[name] = ExternalConstant(name, scalar_type, sizes, data)
        elif (have.scalar_type, have.sizes, have.data) != (scalar_type, sizes, data):
            raise EmitError("constant %s has two different values in one program" % name)
        return name

    def add_mutable(self, t: torch.Tensor) -> int:
        self.mutable.append(_tensor_bytes(t))
        return len(self.mutable) - 1

    def add(self, t: torch.Tensor) -> int:
        data = _tensor_bytes(t)
        idx = self._index.get(data)
        if idx is None:
            idx = len(self.blobs)
            self.blobs.append(data)
            self._index[data] = idx
        return idx

    @property
    def nbytes(self) -> int:
        return sum(len(b) for b in self.blobs)


@dataclass(frozen=True)
class ExternalConstant:
    """A constant stored outside the .pte (an entry of its .ptd)."""
    key: str
    scalar_type: int
    sizes: Tuple[int, ...]
    data: bytes


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


@dataclass
class EmittedMethod:
    plan: S.ExecutionPlan
    memory: MemoryPlan
    op_calls: Dict[str, int] = field(default_factory=dict)   # operator -> KernelCalls
    num_instructions: int = 0
    # one entry per DelegateCall: (backend id, payload bytes, nodes in the payload)
    delegate_calls: List[Tuple[str, int, int]] = field(default_factory=list)


# ---- container metadata (ExecuTorch's compact pytree strings; opaque to the runtime) ------


def _tree_str(spec) -> str:
    from torch.utils._pytree import LeafSpec
    if spec is None or isinstance(spec, LeafSpec):
        return "$"
    kids = spec.children_specs
    counts = "".join("#%d" % c.num_leaves for c in kids)
    inner = ",".join(_tree_str(c) for c in kids)
    if spec.type in (tuple,):
        return "T%d%s(%s)" % (len(kids), counts, inner)
    if spec.type in (list,):
        return "L%d%s(%s)" % (len(kids), counts, inner)
    if spec.type in (dict,):
        keys = ",".join("'%s':%s" % (k, _tree_str(c)) for k, c in zip(spec.context, kids))
        return "D%d%s(%s)" % (len(kids), counts, keys)
    return "T%d%s(%s)" % (len(kids), counts, inner)


def _container_meta(eg: ExportedGraph) -> S.ContainerMetadata:
    n_in = eg.in_spec.num_leaves if eg.in_spec is not None else len(eg.input_nodes)
    inp = "T2#%d#0(%s,D0())" % (n_in, _tree_str(eg.in_spec) if eg.in_spec is not None
                                 else "T%d%s(%s)" % (n_in, "#1" * n_in, ",".join("$" * n_in)))
    out = _tree_str(eg.out_spec) if eg.out_spec is not None else "$"
    return S.ContainerMetadata(inp, out)


# ---- value table -----------------------------------------------------------------------


class _Values:
    def __init__(self):
        self.values: List[S.EValue] = []
        self._cache: Dict[Any, int] = {}

    def add(self, val, key=None) -> int:
        if key is not None and key in self._cache:
            return self._cache[key]
        idx = len(self.values)
        self.values.append(S.EValue(val))
        if key is not None:
            self._cache[key] = idx
        return idx

    def null(self) -> int:
        return self.add(S.Null(), ("null",))

    def int(self, v: int) -> int:
        return self.add(S.Int(int(v)), ("int", int(v)))

    def double(self, v: float) -> int:
        v = float(v)
        return self.add(S.Double(v), ("double", v.hex()))

    def bool(self, v: bool) -> int:
        return self.add(S.Bool(bool(v)), ("bool", bool(v)))

    def string(self, v: str) -> int:
        return self.add(S.String(v), ("str", v))

    def int_list(self, items: Sequence[int]) -> int:
        idx = [self.int(v) for v in items]
        return self.add(S.IntList(idx), ("intlist", tuple(idx)))

    def empty_tensor(self) -> int:
        return self.add(S.Tensor(scalar_type=S.ScalarType.BYTE, sizes=[0], dim_order=[0]),
                        ("empty_tensor",))


def _tensor(spec: TensorSpec, alloc: Optional[Tuple[int, int]] = None,
            buffer_idx: int = 0) -> S.Tensor:
    rank = len(spec.shape)
    return S.Tensor(
        scalar_type=S.ScalarType(_ops.scalar_type(spec.dtype)),
        sizes=list(spec.shape),
        dim_order=list(range(rank)),
        data_buffer_idx=buffer_idx,
        allocation_info=S.AllocationDetails.at(*alloc) if alloc is not None else None,
        shape_dynamism=S.TensorShapeDynamism.DYNAMIC_BOUND if spec.dynamic
        else S.TensorShapeDynamism.STATIC)


# ---- instruction selection ----------------------------------------------------------------


def _root(n):
    while isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is _ops.alias:
        n = n.args[0]
    return n


def _is_elided_alias(eg: ExportedGraph, n: torch.fx.Node) -> bool:
    if not (n.op == "call_function" and n.target is _ops.alias):
        return False
    return not eg.spec(n).is_dynamic and not eg.spec(_root(n)).is_dynamic


@dataclass
class _Instr:
    node: torch.fx.Node
    variant: _ops.OutVariant
    reads: List[Any] = field(default_factory=list)     # storage keys
    writes: List[Any] = field(default_factory=list)


def _flat_nodes(a) -> List[torch.fx.Node]:
    out: List[torch.fx.Node] = []
    torch.fx.node.map_arg(a, out.append)
    return out


# Operators whose result is a scalar (an Int value of the program, not a tensor in planned
# memory): ``aten::_local_scalar_dense`` turns a one-element tensor into the SymInt argument of
# an operator such as llama::update_cache (its start_pos), as ExecuTorch's ``.item()`` does.
_SCALAR_RESULT = {aten._local_scalar_dense.default:
                  _ops.OutVariant("aten::_local_scalar_dense",
                                  aten._local_scalar_dense.default._schema)}


def _is_scalar_node(n: Any) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in _SCALAR_RESULT


def _inplace_updates(eg: ExportedGraph) -> Tuple[Dict[torch.fx.Node, torch.fx.Node], set]:
    """Writes into mutable state that can happen in the state's own memory.

    ``r = index_put(state, indices, values)`` followed by the write-back ``copy_(state, r)``,
    where nothing else reads the state, is emitted as ``aten::index_put_`` on the state and the
    write-back disappears: a KV-cache update then touches only the rows it writes instead of
    copying the whole cache twice per call.  Readers of ``r`` read the state (the same value).
    Returns ({index_put node: state node}, {copy_ nodes to drop})."""
    updates: Dict[torch.fx.Node, torch.fx.Node] = {}
    dropped = set()
    for c in eg.graph.nodes:
        if not (c.op == "call_function" and c.target is aten.copy_.default):
            continue
        state, r = c.args[0], c.args[1]
        if not (eg.is_mutable(state) and isinstance(r, torch.fx.Node)
                and r.op == "call_function" and r.target is aten.index_put.default
                and r.args[0] is state and set(state.users) == {r, c}
                and state not in _flat_nodes((r.args[1:], r.kwargs))
                and eg.spec(r) == eg.spec(state)):
            continue
        updates[r] = state
        dropped.add(c)
    return updates, dropped


_INDEX_PUT_INPLACE = _ops.OutVariant("aten::index_put_", aten.index_put_.default._schema)


def _delegate_of(node: torch.fx.Node):
    """The lowered call of a delegate node (etch.backends), or None."""
    t = node.target
    return t if getattr(t, "backend_id", None) and hasattr(t, "payload") else None


def _variant(node: torch.fx.Node) -> _ops.OutVariant:
    d = _delegate_of(node)
    if d is not None:   # no operator: a DelegateCall (named for the fusion scans only)
        return _ops.OutVariant("delegate:" + d.backend_id, None)
    if node.target in _SCALAR_RESULT:
        return _SCALAR_RESULT[node.target]
    if node.target is aten.copy_.default:
        # Write-back into mutable state: clone.out(src, out=state) copies the new value into
        # the state's planned memory (a portable kernel, where copy_ is not everywhere).
        return _ops.OutVariant("aten::clone.out", aten.clone.out._schema)
    v = _ops.out_variant(node.target)
    if v is None:
        raise EmitError("no out-variant kernel for %s (node %s)"
                        % (_ops.op_name(node.target), node.name))
    return v


# Operators whose optimized kernels take a following activation as their epilogue at method
# load (src/optimize/fusion.c; KF lines of src/kernels/optimized/table_conv.inc, table_gemm.inc)
# and the activations they take.
FUSING_PRODUCERS = frozenset(["aten::convolution.out", "aten::mm.out", "aten::addmm.out",
                              "aten::bmm.out", "aten::linear.out"])
FUSED_ACTIVATIONS = frozenset(["aten::relu.out", "aten::clamp.out", "aten::hardtanh.out",
                               "aten::gelu.out", "aten::silu.out", "aten::sigmoid.out"])


def fusible_pairs(instrs: List[_Instr], spans: Dict[Any, List[int]],
                  outputs: Sequence[Any], eg: ExportedGraph) -> List[int]:
    """Indices t where instruction t (a fusing producer writing one floating tensor v) and
    t + 1 (an activation reading v) can become one kernel call: v is read by t + 1 alone
    (its storage lives exactly from t to t + 1) and is no method output."""
    pairs: List[int] = []
    for t in range(len(instrs) - 1):
        p, a = instrs[t], instrs[t + 1]
        if p.variant.name not in FUSING_PRODUCERS or a.variant.name not in FUSED_ACTIVATIONS:
            continue
        if len(p.writes) != 1 or p.writes[0] in p.reads:
            continue
        v = p.writes[0]
        n, i = v
        spec = eg.spec(n)
        if isinstance(spec, tuple):
            spec = spec[i]
        if spec.dtype != torch.float32:     # the runtime fuses Float producers only
            continue
        if v not in a.reads or spans.get(v) != [t, t + 1] or v in outputs:
            continue
        pairs.append(t)
    return pairs


def _conv_kind(eg: ExportedGraph, n: torch.fx.Node) -> Optional[str]:
    """"pw" for a 1x1 convolution (stride 1, no padding, groups 1), "dw" for a depthwise 3x3
    one (padding 1, stride 1 or 2 both ways, dilation 1), "stem" for a network's first
    convolution (groups 1, at most 8 input channels that stay NCHW: fewer than 8, or the
    program's input; output channels a multiple of 8; dilation 1 across), else None: the
    convolutions the optimized kernel runs as blocks (src/kernels/optimized/conv_chain.c)."""
    a = list(n.args) + [None] * (9 - len(n.args))
    w, stride, pad, dil, transposed, groups = a[1], a[3], a[4], a[5], a[6], a[8]
    spec = eg.spec(w)
    shape = getattr(spec, "shape", None)
    if transposed or not isinstance(groups, int) or shape is None or len(shape) != 4:
        return None

    def pair(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * 2 if len(v) == 1 else v

    stride, pad, dil = pair(stride), pair(pad), pair(dil)
    if shape[2:] == (1, 1) and groups == 1 and stride == [1, 1] and pad == [0, 0]:
        return "pw"
    if (shape[1] == 1 and groups == shape[0] and shape[2:] == (3, 3) and pad == [1, 1] and
            dil == [1, 1] and stride[0] == stride[1] and stride[0] in (1, 2)):
        return "dw"
    x = a[0]
    if (groups == 1 and shape[1] <= 8 and shape[0] % 8 == 0 and dil[1] == 1 and
            (shape[1] % 8 != 0 or getattr(x, "op", None) == "placeholder")):
        return "stem"
    return None


def chain_blocks(instrs: List[_Instr], spans: Dict[Any, List[int]], outputs: Sequence[Any],
                 eg: ExportedGraph, pairs: Sequence[int]) -> List[Tuple[int, int]]:
    """(first, last) instructions of the 1x1 (or stem) -> depthwise 3x3 -> 1x1 blocks and
    depthwise -> 1x1 pairs that the runtime may run as one kernel call (etch/kernel.h, chained
    calls): each convolution (with the activation fused into it, `pairs`) writes one value that
    only the next convolution reads; `last` is the block's last instruction (its fused
    activation's). The chained kernel writes the block's result while it still reads the
    block's input, so the caller keeps that input alive to `last`, and the runtime can chain
    the block whatever else the plan puts where."""
    fused = set(pairs)
    units = {}  # conv instruction -> (last instruction, written key, kind)
    for t, ins in enumerate(instrs):
        if ins.variant.name != "aten::convolution.out":
            continue
        end = t + 1 if t in fused else t
        kind = _conv_kind(eg, ins.node)
        if kind and len(instrs[end].writes) == 1:
            units[t] = (end, instrs[end].writes[0], kind)

    def follows(t: int) -> Optional[int]:
        """The convolution right after unit t that alone reads its result, or None (its
        reads live on to its own fused activation, if it has one)."""
        end, out, _ = units[t]
        q = end + 1
        if q not in units or out in outputs or spans.get(out) != [end, units[q][0]] or \
                out not in instrs[q].reads:
            return None
        return q

    blocks: List[Tuple[int, int]] = []
    t = 0
    while t < len(instrs):
        if t not in units:
            t += 1
            continue
        run = [t]
        while len(run) < 3 and follows(run[-1]) is not None:
            run.append(follows(run[-1]))
        kinds = [units[u][2] for u in run]
        if kinds[:3] in (["pw", "dw", "pw"], ["stem", "dw", "pw"]):
            run = run[:3]
        elif kinds[:2] == ["dw", "pw"]:
            run = run[:2]
        else:
            t += 1
            continue
        blocks.append((run[0], units[run[-1]][0]))
        t = units[run[-1]][0] + 1
    return blocks


def emit_method(eg: ExportedGraph, constants: ConstantTable,
                alignment: int = 16, debug_info: bool = True) -> EmittedMethod:
    """Emit one method; constant tensors go into `constants`.  With `debug_info`, the chain
    carries one ``FrameList`` per instruction (``Chain.stacktrace``, :mod:`etch.debuginfo`):
    the module path, capture-time node name and source lines of the node it computes."""
    g = eg.graph

    inplace, dropped = _inplace_updates(eg)

    # ---- storage of every tensor-valued node (key: (root node, result index)) ----
    def key_of(n: torch.fx.Node, i: int = 0):
        if n in inplace:
            return key_of(inplace[n])
        if n.op == "call_function" and n.target is operator.getitem:
            return key_of(n.args[0], n.args[1])
        if n.op == "call_function" and n.target is _ops.alias:
            return key_of(_root(n))
        if n.op == "call_function" and n.target is aten.copy_.default:
            return key_of(n.args[0])
        return (n, i)

    instrs: List[_Instr] = []
    for n in g.nodes:
        if n.op != "call_function" or n.target is operator.getitem or _is_elided_alias(eg, n):
            continue
        if n in dropped:
            continue
        ins = _Instr(n, _INDEX_PUT_INPLACE if n in inplace else _variant(n))
        for d in _flat_nodes((n.args, n.kwargs)):
            if not eg.is_constant(d) and not _is_scalar_node(d):
                ins.reads.append(key_of(d))
        spec = eg.spec(n)
        if _is_scalar_node(n):
            pass    # an Int value, no planned memory
        elif n.target is aten.copy_.default or n.target is _ops.alias or n in inplace:
            ins.writes.append(key_of(n))
        elif isinstance(spec, tuple):
            ins.writes.extend((n, i) for i in range(len(spec)))
        else:
            ins.writes.append((n, 0))
        instrs.append(ins)

    last = max(len(instrs) - 1, 0)
    spans: Dict[Any, List[int]] = {}

    def touch(k, t):
        s = spans.setdefault(k, [t, t])
        s[0] = min(s[0], t)
        s[1] = max(s[1], t)

    # Inputs stay intact for the whole method: execute() may run again without new inputs
    # (etch run --num-executions does), so their memory is never reused.
    for n in eg.input_nodes:
        touch((n, 0), 0)
        touch((n, 0), last)
    for n in g.nodes:
        if n.op == "get_attr" and eg.is_mutable(n):
            touch((n, 0), 0)
            touch((n, 0), last)
    for t, ins in enumerate(instrs):
        for k in ins.writes + ins.reads:
            touch(k, t)
    for o in eg.outputs:
        if isinstance(o, torch.fx.Node):
            touch(key_of(o), last)
    # A producer and the activation that the runtime fuses into it are one step: the fused
    # kernel writes the activation's output while it still reads its own inputs, so those
    # inputs live on to the activation (and never share memory with its output).
    out_keys = [key_of(o) for o in eg.outputs if isinstance(o, torch.fx.Node)]
    pairs = fusible_pairs(instrs, spans, out_keys, eg)
    for t in pairs:
        for k in instrs[t].reads:
            touch(k, t + 1)
    # Likewise a convolution block the runtime runs as one call: its input lives to the end
    # of the block (and never shares memory with the block's result).
    for first, last in chain_blocks(instrs, spans, out_keys, eg, pairs):
        for k in instrs[first].reads:
            touch(k, last)

    def nbytes_of(k) -> int:
        n, i = k
        spec = eg.spec(n)
        if isinstance(spec, tuple):
            spec = spec[i]
        return spec.nbytes

    storages = [Storage(k, nbytes_of(k), s[0], s[1]) for k, s in spans.items()]
    mem = plan_memory(storages, alignment)
    offset = {s.key: s.offset for s in mem.storages}

    # ---- values ----
    V = _Values()
    tensor_idx: Dict[Any, int] = {}       # (node, i) -> value index

    def spec_at(n, i=0) -> TensorSpec:
        spec = eg.spec(n)
        return spec[i] if isinstance(spec, tuple) else spec

    def tensor_value(n: torch.fx.Node, i: int = 0) -> int:
        """The Tensor value of result i of n (created on first use)."""
        if n.op == "call_function" and n.target is operator.getitem:
            return tensor_value(n.args[0], n.args[1])
        if (n, i) in tensor_idx:
            return tensor_idx[(n, i)]
        if _is_scalar_node(n):      # the Int the kernel call writes (its return slot)
            tensor_idx[(n, i)] = idx = V.add(S.Int(int(eg.spec(n) or 0)))
            return idx
        spec = spec_at(n, i)
        if eg.is_constant(n) and constants.is_external:
            t = _tensor(spec)
            t.extra_tensor_info = S.ExtraTensorInfo(
                fully_qualified_name=constants.add_external(n.target, eg.constant_value(n)),
                location=S.TensorDataLocation.EXTERNAL)
            idx = V.add(t)
        elif eg.is_constant(n):
            idx = V.add(_tensor(spec, buffer_idx=constants.add(eg.constant_value(n))))
        elif n.op == "call_function" and n.target is aten.copy_.default:
            idx = tensor_value(n.args[0])
        elif n in inplace:
            idx = tensor_value(inplace[n])
        elif eg.is_mutable(n):
            k = key_of(n, i)
            idx = V.add(_tensor(spec, (1, offset[k]),
                                buffer_idx=constants.add_mutable(eg.mutable[n.target])))
        else:
            k = key_of(n, i)
            idx = V.add(_tensor(spec, (1, offset[k])))
        tensor_idx[(n, i)] = idx
        return idx

    inputs = [tensor_value(n) for n in eg.input_nodes]

    op_index: Dict[str, int] = {}
    operators: List[S.Operator] = []
    instructions: List[S.Instruction] = []
    prologue: List[S.Instruction] = []
    op_calls: Dict[str, int] = {}
    delegates: List[S.BackendDelegate] = []
    delegate_calls: List[Tuple[str, int, int]] = []

    def call(name: str, args: List[int], into: List[S.Instruction]) -> None:
        if name not in op_index:
            op_index[name] = len(operators)
            nm, _, ov = name.partition(".")
            operators.append(S.Operator(nm, ov))
        op_calls[name] = op_calls.get(name, 0) + 1
        into.append(S.Instruction(S.KernelCall(op_index[name], args)))

    # Sizes that depend on the dynamic dimensions are computed at the start of the method:
    # aten::sym_size.int reads a dimension of an input, executorch_prim ops do the arithmetic.
    sym_cache: Dict[Any, int] = {}

    def fresh_int(v: int = 0) -> int:
        return V.add(S.Int(int(v)))

    def sym_value(x) -> int:
        if isinstance(x, bool):
            return V.bool(x)
        if isinstance(x, int):
            return V.int(x)
        if x is _sym.UNKNOWN:
            raise EmitError("a size that is not a polynomial of the dynamic dimensions is "
                            "needed as an argument")
        if x.is_constant:
            return V.int(x.constant)
        if x in sym_cache:
            return sym_cache[x]
        total = None
        for mono, coef in sorted(x.terms.items(), key=lambda kv: sorted(kv[0])):
            if not mono:
                term = V.int(coef)
            else:
                term = None
                for k in sorted(mono):
                    sv = symbol_value(k)
                    if term is None:
                        term = sv
                    else:
                        r = fresh_int()
                        call("executorch_prim::mul.Scalar", [term, sv, r], prologue)
                        term = r
                if coef != 1:
                    r = fresh_int()
                    call("executorch_prim::mul.Scalar", [term, V.int(coef), r], prologue)
                    term = r
            if total is None:
                total = term
            else:
                r = fresh_int()
                call("executorch_prim::add.Scalar", [total, term, r], prologue)
                total = r
        sym_cache[x] = total
        return total

    def symbol_value(k: int) -> int:
        key = ("symbol", k)
        if key not in sym_cache:
            s = eg.symbols[k]
            r = fresh_int(s.max)
            call("aten::sym_size.int", [inputs[s.input], V.int(s.dim), r], prologue)
            sym_cache[key] = r
        return sym_cache[key]

    debug: List[Any] = []       # per instruction of `instructions`: its node's NodeDebug
    for ins in instrs:
        n, var = ins.node, ins.variant
        debug.append(_debuginfo.of(n))
        d = _delegate_of(n)
        if d is not None:
            # arguments: the delegate's inputs, then its outputs (ExecuTorch's convention)
            spec = eg.spec(n)
            args = [tensor_value(a) for a in n.args] + [tensor_value(n, i)
                                                        for i in range(len(spec))]
            ref = S.BackendDelegateDataReference(S.DataLocation.SEGMENT,
                                                 constants.add_delegate_blob(d.payload))
            delegates.append(S.BackendDelegate(d.backend_id, ref, []))
            delegate_calls.append((d.backend_id, len(d.payload), d.num_nodes))
            instructions.append(S.Instruction(S.DelegateCall(len(delegates) - 1, args)))
            continue
        if n.target is aten.copy_.default:
            state = tensor_value(n.args[0])
            call(var.name, [tensor_value(n.args[1]), V.null(), state, state], instructions)
            continue
        args = _bind(n)
        spec = eg.spec(n)
        results = list(range(len(spec))) if isinstance(spec, tuple) else [0]
        kernel_args: List[int] = []
        outs: List[int] = []
        k = 0
        for a in var.schema.arguments:
            if _ops._is_out_arg(a):
                if str(a.type).startswith("List[Tensor"):
                    items = [tensor_value(n, i) for i in results]
                    idx = V.add(S.TensorList(items))
                    k = len(results)
                else:
                    idx = tensor_value(n, results[k])
                    k += 1
                outs.append(idx)
                kernel_args.append(idx)
                continue
            if a.name in args:
                v = args[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                raise EmitError("%s: no value for argument %r" % (n.name, a.name))
            kernel_args.append(_encode(V, v, a, tensor_value, sym_value))
        if outs:
            ret = outs[0] if len(outs) == 1 else V.add(S.TensorList(outs))
        else:
            ret = tensor_value(n)
        kernel_args.append(ret)
        call(var.name, kernel_args, instructions)

    # Elided aliases that nothing above touched (e.g. outputs): make sure they have values.
    outputs = []
    for o in eg.outputs:
        if not isinstance(o, torch.fx.Node):
            raise EmitError("output %r is not a tensor" % (o,))
        outputs.append(tensor_value(o))

    stacktrace = None
    if debug_info:
        assert len(debug) == len(instructions)
        stacktrace = [_debuginfo.frame_list(None) for _ in prologue] + \
            [_debuginfo.frame_list(d) for d in debug]
    plan = S.ExecutionPlan(
        name=eg.name,
        container_meta_type=_container_meta(eg),
        values=V.values,
        inputs=inputs,
        outputs=outputs,
        chains=[S.Chain(inputs=[], outputs=[], instructions=prologue + instructions,
                        stacktrace=stacktrace)],
        operators=operators,
        delegates=delegates,
        non_const_buffer_sizes=[0, mem.arena_size],
    )
    return EmittedMethod(plan, mem, op_calls, len(prologue) + len(instructions),
                         delegate_calls)


def _bind(node: torch.fx.Node) -> Dict[str, Any]:
    schema = _ops.schema_of(node.target)
    out: Dict[str, Any] = {}
    for i, a in enumerate(schema.arguments):
        if a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif not a.kwarg_only and i < len(node.args):
            out[a.name] = node.args[i]
    return out


def _encode(V: _Values, v: Any, arg, tensor_value, sym_value) -> int:
    """Value index for argument `v` of schema argument `arg`."""
    t = arg.type
    ts = str(t)
    optional = ts.startswith("Optional[")
    base = ts[len("Optional["):-1] if optional else ts
    if isinstance(v, torch.fx.Node):
        return tensor_value(v)
    if v is None:
        if base == "Tensor" and not optional:
            return V.empty_tensor()
        return V.null()
    if base.startswith("List["):
        elem = base[len("List["):-1]
        if isinstance(v, (int, float, bool)) and not isinstance(v, (list, tuple)):
            v = [v] * (arg.N or 1)
        v = list(v)
        if elem in ("int", "SymInt"):
            unknown = [i for i, x in enumerate(v) if x is _sym.UNKNOWN]
            if len(unknown) > 1:
                raise EmitError("argument %s has %d sizes that are not polynomials of the "
                                "dynamic dimensions" % (arg.name, len(unknown)))
            items = [V.int(-1) if x is _sym.UNKNOWN else sym_value(_int(x)) for x in v]
            return V.add(S.IntList(items), ("intlist", tuple(items)))
        if elem == "float":
            return V.add(S.DoubleList([float(x) for x in v]))
        if elem == "bool":
            return V.add(S.BoolList([bool(x) for x in v]))
        if elem == "Tensor":
            return V.add(S.TensorList([tensor_value(x) for x in v]))
        if elem == "Optional[Tensor]":
            return V.add(S.OptionalTensorList([-1 if x is None else tensor_value(x) for x in v]))
        raise EmitError("unsupported list type %s for argument %s" % (ts, arg.name))
    if isinstance(v, torch.dtype):
        return V.int(_ops.scalar_type(v))
    if isinstance(v, torch.memory_format):
        return V.int(_ops.MEMORY_FORMAT[v])
    if isinstance(v, torch.layout):
        return V.int(_ops.LAYOUT[v])
    if isinstance(v, torch.device):
        return V.null()
    if isinstance(v, bool):
        return V.bool(v)
    if isinstance(v, _sym.SymExpr):
        return sym_value(v)
    if isinstance(v, int):
        if base == "float":
            return V.double(float(v))
        return V.int(v)
    if isinstance(v, float):
        if base in ("int", "SymInt"):
            return V.int(int(v))
        return V.double(v)
    if isinstance(v, str):
        return V.string(v)
    raise EmitError("cannot encode %r for argument %s (%s)" % (v, arg.name, ts))


def _int(x):
    if isinstance(x, _sym.SymExpr):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise EmitError("expected an int in an int list, got %r" % (x,))
    return x
