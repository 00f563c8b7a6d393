"""The result of an export: a ``.pte`` program in memory.

``Program.buffer`` is the file's bytes (the same input always gives the same bytes),
``Program.save(path)`` writes them, ``Program.summary()`` describes the program: operators and
how often each is called, planned memory against its lower bound, constants.  A program
exported with ``external_data=`` keeps its constants in a ``.ptd`` (:mod:`etch.external_data`):
``Program.data_buffer`` is that file's bytes, and ``save`` writes it beside the ``.pte``.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from . import ops as _ops
from .emit import ConstantTable, EmittedMethod, ExternalConstant
from .serialize import pte as _pte
from .serialize import schema as S

__all__ = ["Program"]


class Program:
    def __init__(self, methods: List[EmittedMethod], constants: ConstantTable,
                 pass_log: Optional[List[str]] = None, graphs: Optional[Dict] = None,
                 external_data: Optional[str] = None):
        self.methods = list(methods)
        # the .ptd file name given to export (None: constants live in the .pte)
        self.external_data = external_data
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
        return _pte.ProgramData(constants=list(self.constants.blobs), mutable=mutable,
                                delegate_blobs=list(self.constants.delegate_blobs))

    @property
    def buffer(self) -> bytes:
        if self._buffer is None:
            self._buffer = _pte.serialize_program(self.program, self.data)
        return self._buffer

    @property
    def external_constants(self) -> List[ExternalConstant]:
        """The constants stored in the .ptd (empty unless exported with external_data=)."""
        return list(self.constants.external.values())

    @property
    def data_buffer(self) -> Optional[bytes]:
        """The bytes of this program's .ptd alone, or None without external data."""
        if self.external_data is None:
            return None
        from .external_data import serialize_external
        return serialize_external(self.external_constants)

    def data_path_for(self, path) -> Optional[str]:
        """Where save(path) writes the .ptd: external_data, relative to the .pte's folder
        unless absolute."""
        if self.external_data is None:
            return None
        return os.path.join(os.path.dirname(os.path.abspath(os.fspath(path))),
                            os.fspath(self.external_data))

    def save(self, path, data_path=None, *, overwrite_data: bool = False) -> None:
        """Write the .pte to `path`; with external data also the .ptd, at `data_path` or
        :meth:`data_path_for` (merged into an existing file, whose entries must agree, unless
        `overwrite_data`: see :mod:`etch.external_data`)."""
        data = self.buffer
        if self.external_data is not None:
            from .external_data import save_external_data
            save_external_data(data_path if data_path is not None else self.data_path_for(path),
                               [self], merge=not overwrite_data)
        elif data_path is not None:
            raise ValueError("data_path given, but the program keeps its constants inside the "
                             ".pte (export it with external_data=...)")
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
            if m.delegate_calls:
                lines.append("  delegates:")
                for backend, size, nodes in m.delegate_calls:
                    lines.append("    %s: %d nodes, %d bytes" % (backend, nodes, size))
        lines.append("constants: %d tensors, %d bytes" % (self.num_constants, self.constant_bytes))
        if self.external_data is not None:
            ext = self.external_constants
            lines.append("external constants (%s): %d tensors, %d bytes"
                         % (self.external_data, len(ext), sum(len(c.data) for c in ext)))
        if self.etch_only_operators:
            lines.append("etch-only operators (not portable to ExecuTorch): %s"
                         % ", ".join(self.etch_only_operators))
        quant = getattr(self, "quantization", None)
        if quant is not None:
            lines.extend(quant.lines())
        for entry in self.pass_log:
            lines.append("pass " + entry)
        return "\n".join(lines)

    def __repr__(self):
        return "<etch.Program %d bytes, operators: %s>" % (len(self.buffer),
                                                          ", ".join(self.operators))
