"""The result of an export: a ``.pte`` program in memory.

``Program.buffer`` is the file's bytes (the same input always gives the same bytes),
``Program.save(path)`` writes them, ``Program.summary()`` describes the program: operators and
how often each is called, planned memory against its lower bound, constants.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from . import ops as _ops
from .emit import ConstantTable, EmittedMethod
from .serialize import pte as _pte
from .serialize import schema as S

__all__ = ["Program"]


class Program:
    def __init__(self, methods: List[EmittedMethod], constants: ConstantTable,
                 pass_log: Optional[List[str]] = None, graphs: Optional[Dict] = None):
        self.methods = list(methods)
        # method name -> the ExportedGraph it was emitted from (reference computations)
        self.graphs = dict(graphs or {})
        self.constants = constants
        self.pass_log = list(pass_log or [])
        self._buffer: Optional[bytes] = None

    # ---- the file ----------------------------------------------------------------------

    @property
    def program(self) -> S.Program:
        return S.Program(version=0, execution_plan=[m.plan for m in self.methods])

    @property
    def data(self) -> _pte.ProgramData:
        mutable = list(self.constants.mutable) if len(self.constants.mutable) > 1 else []
        return _pte.ProgramData(constants=list(self.constants.blobs), mutable=mutable)

    @property
    def buffer(self) -> bytes:
        if self._buffer is None:
            self._buffer = _pte.serialize_program(self.program, self.data)
        return self._buffer

    def save(self, path) -> None:
        data = self.buffer
        tmp = "%s.tmp%d" % (os.fspath(path), os.getpid())
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    # ---- facts -------------------------------------------------------------------------

    def method(self, name: str = "forward") -> EmittedMethod:
        for m in self.methods:
            if m.plan.name == name:
                return m
        raise KeyError(name)

    @property
    def operators(self) -> List[str]:
        names: List[str] = []
        for m in self.methods:
            for op in m.plan.operators:
                full = op.name + ("." + op.overload if op.overload else "")
                if full not in names:
                    names.append(full)
        return names

    @property
    def etch_only_operators(self) -> List[str]:
        return [n for n in self.operators if not _ops.is_portable_name(n)]

    @property
    def planned_bytes(self) -> int:
        return sum(sum(m.plan.non_const_buffer_sizes) for m in self.methods)

    @property
    def constant_bytes(self) -> int:
        return sum(len(b) for b in dict.fromkeys(self.constants.blobs))

    @property
    def num_constants(self) -> int:
        return len(self.constants.blobs) - 1

    def memory_report(self) -> Dict[str, Dict[str, float]]:
        """Per method: planned bytes, lower bound, naive sum, ratio."""
        return {m.plan.name: {"planned": m.memory.arena_size, "lower_bound": m.memory.lower_bound,
                              "naive": m.memory.naive_size, "ratio": round(m.memory.ratio, 4)}
                for m in self.methods}

    def summary(self) -> str:
        lines = ["etch program: %d bytes, %d method(s)" % (len(self.buffer), len(self.methods))]
        for m in self.methods:
            p = m.plan
            mem = m.memory
            lines.append("method %s: %d inputs, %d outputs, %d values, %d instructions"
                         % (p.name, len(p.inputs), len(p.outputs), len(p.values),
                            m.num_instructions))
            lines.append("  planned memory: %d bytes (lower bound %d, ratio %.3f; naive %d)"
                         % (mem.arena_size, mem.lower_bound, mem.ratio, mem.naive_size))
            lines.append("  operators:")
            for name, n in m.op_calls.items():
                tag = "" if _ops.is_portable_name(name) else "   [etch-only]"
                lines.append("    %-50s x%d%s" % (name, n, tag))
        lines.append("constants: %d tensors, %d bytes" % (self.num_constants, self.constant_bytes))
        if self.etch_only_operators:
            lines.append("etch-only operators (not portable to ExecuTorch): %s"
                         % ", ".join(self.etch_only_operators))
        for entry in self.pass_log:
            lines.append("pass " + entry)
        return "\n".join(lines)

    def __repr__(self):
        return "<etch.Program %d bytes, operators: %s>" % (len(self.buffer),
                                                          ", ".join(self.operators))
