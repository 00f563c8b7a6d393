"""Planned-memory analysis of an emitted .pte, independent of the exporter's planner.

It reads the file with the serializer's reader and follows the bytes: an instruction *writes*
the tensors in its return slot (the out tensor, or the TensorList of outs) and *reads* every
other tensor argument (``executorch_prim::et_view`` only reads: its out is a view of self).  Each write starts a *definition* of the written byte range; a read
uses the latest earlier definition that covers the value's first byte (a tensor value that no
instruction writes, such as an elided view, resolves to whatever wrote its bytes last; method
inputs and never-written state are defined before instruction 0).  A definition is live from
its write to its last use; method outputs and method inputs (which must survive for a repeated
execute() without new inputs) to the end.  Where the runtime may fuse instruction k (a float
convolution/mm/addmm/bmm/linear whose one result is read by instruction k + 1 alone) with the
activation k + 1 (relu, clamp, hardtanh, gelu, silu, sigmoid), the fused call reads k's inputs
while writing k + 1's output, so the definitions k reads live at least to k + 1.

    lower bound = max over instructions of the sum of aligned sizes of live definitions

and the plan is correct when no two definitions that are live together overlap in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from etch.serialize import read_pte, schema as S

ALIGN = 16

# The runtime's fusion pairs (src/optimize/fusion.c), written out again here so that the
# analysis does not take them from the planner it checks.
PRODUCERS = {"aten::convolution.out", "aten::mm.out", "aten::addmm.out", "aten::bmm.out",
             "aten::linear.out"}
ACTIVATIONS = {"aten::relu.out", "aten::clamp.out", "aten::hardtanh.out", "aten::gelu.out",
               "aten::silu.out", "aten::sigmoid.out"}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class Definition:
    value: int
    offset: int
    size: int           # aligned bytes
    start: int
    end: int


@dataclass
class PlanFacts:
    arena: int          # non_const_buffer_sizes[1]
    lower_bound: int
    naive: int          # sum of aligned sizes of all planned tensor values with distinct writes
    definitions: List[Definition]
    overlaps: List[str]

    @property
    def ratio(self) -> float:
        return self.arena / self.lower_bound if self.lower_bound else 1.0


def analyze(data: bytes, method: str = "forward") -> PlanFacts:
    pf = read_pte(data)
    plan = pf.program.method(method)
    values = plan.values
    sizes = plan.non_const_buffer_sizes
    arena = sizes[1] if len(sizes) > 1 else 0

    def planned(i) -> Optional[Tuple[int, int]]:
        t = values[i].val
        if not isinstance(t, S.Tensor) or t.allocation_info is None:
            return None
        assert t.allocation_info.memory_id == 1, "all planned tensors live in arena 1"
        return t.allocation_info.memory_offset, _align(t.nbytes)

    def tensors_in(i) -> List[int]:
        v = values[i].val
        if isinstance(v, S.Tensor):
            return [i]
        if isinstance(v, (S.TensorList, S.OptionalTensorList)):
            return [j for j in v.items if j >= 0 and isinstance(values[j].val, S.Tensor)]
        return []

    names = [o.name + ("." + o.overload if o.overload else "") for o in plan.operators]
    instrs = []
    ops_at: List[int] = []
    for ins in plan.chains[0].instructions:
        call = ins.instr_args
        if not isinstance(call, S.KernelCall):
            raise AssertionError("only KernelCalls expected, got %r" % type(call).__name__)
        ops_at.append(call.op_index)
        if names[call.op_index] == "executorch_prim::et_view.default":
            # out becomes a view of self's bytes (§5.4): no new definition
            instrs.append((tensors_in(call.args[0]), []))
            continue
        writes = tensors_in(call.args[-1])
        reads = [j for a in call.args[:-1] for j in tensors_in(a) if j not in writes]
        instrs.append((reads, writes))
    last = max(len(instrs) - 1, 0)

    defs: List[Definition] = []
    by_offset_history: Dict[int, List[Definition]] = {}   # write order

    def define(v, at) -> Optional[Definition]:
        p = planned(v)
        if p is None or p[1] == 0:
            return None
        d = Definition(v, p[0], p[1], at, at)
        defs.append(d)
        by_offset_history.setdefault(p[0], []).append(d)
        return d

    def current(v) -> Optional[Definition]:
        """The latest definition covering value v's first byte."""
        p = planned(v)
        if p is None or p[1] == 0:
            return None
        best = None
        for d in reversed(defs):
            if d.offset <= p[0] < d.offset + d.size:
                best = d
                break
        if best is None:                 # read before any write: input or state
            best = define(v, 0)
        return best

    read_defs: List[List[Definition]] = [[] for _ in instrs]   # what instruction k reads
    readers: Dict[int, set] = {}                               # id(definition) -> instrs
    written: List[List[Definition]] = [[] for _ in instrs]
    for v in plan.inputs:
        d = define(v, 0)
        if d is not None:        # inputs must survive for a repeated execute()
            d.end = max(len(instrs) - 1, 0)
    for k, (reads, writes) in enumerate(instrs):
        for v in reads:
            d = current(v)
            if d is not None:
                d.end = max(d.end, k)
                read_defs[k].append(d)
                readers.setdefault(id(d), set()).add(k)
        for v in writes:
            d = define(v, k)
            if d is not None:
                written[k].append(d)
    outs = set()
    for v in plan.outputs:
        for j in tensors_in(v):
            d = current(j)
            if d is not None:
                d.end = last
                outs.add(id(d))
    # A fusible pair (a producer whose only reader is the activation right after it, see
    # FUSING_PRODUCERS in python/etch/emit.py) is one step: the fused kernel writes the
    # activation's output while reading the producer's inputs, so those live to the activation.
    for k in range(len(instrs) - 1):
        if names[ops_at[k]] not in PRODUCERS or names[ops_at[k + 1]] not in ACTIVATIONS:
            continue
        if len(written[k]) != 1 or len(instrs[k][1]) != 1:
            continue
        v = written[k][0]
        if values[v.value].val.scalar_type != S.ScalarType.FLOAT or id(v) in outs or \
                readers.get(id(v)) != {k + 1}:
            continue
        for d in read_defs[k]:
            d.end = max(d.end, k + 1)

    bound = 0
    for k in range(len(instrs) or 1):
        live = [d for d in defs if d.start <= k <= d.end]
        bound = max(bound, sum(d.size for d in live))
    overlaps = []
    for i, a in enumerate(defs):
        for b in defs[i + 1:]:
            if a.start <= b.end and b.start <= a.end and \
                    a.offset < b.offset + b.size and b.offset < a.offset + a.size and \
                    not (a.offset == b.offset and a.start == b.start):
                overlaps.append("values %d [%d,+%d) live %d..%d and %d [%d,+%d) live %d..%d"
                                % (a.value, a.offset, a.size, a.start, a.end,
                                   b.value, b.offset, b.size, b.start, b.end))
    naive = sum(d.size for d in defs)
    return PlanFacts(arena, bound, naive, defs, overlaps)
