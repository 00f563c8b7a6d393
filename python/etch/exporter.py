"""``etch.export``: nn.Module -> :class:`~etch.program.Program`.

Pipeline: capture (:mod:`etch.capture`) -> passes (:mod:`etch.passes`) -> emission with
memory planning (:mod:`etch.emit`) -> operator check against the C runtime
(:mod:`etch.opcheck`) -> :class:`~etch.program.Program` (serialized on demand).
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Optional, Sequence

import torch

from . import decomp as _decomp
from . import passes as _passes
from .capture import capture
from .emit import ConstantTable, emit_method
from .program import Program

__all__ = ["export", "ExportError"]


class ExportError(RuntimeError):
    pass


def export(model: torch.nn.Module, example_inputs, *,
           dynamic_shapes: Optional[Sequence[Optional[Dict[int, int]]]] = None,
           allow_etch_ops: bool = False, check_ops=True, optimize: bool = True,
           external_data=None, backend: Optional[str] = None, fallback: bool = False,
           progress: Optional[Callable[[str], None]] = None,
           graph_passes: Sequence[Callable] = (), debug_info: bool = True) -> Program:
    """Export `model` for etch / ExecuTorch runtimes.

    model: an ``nn.Module`` (TypeError otherwise).
    example_inputs: a tensor or numpy array, or a tuple of them (the method is called with
        them; numpy arrays become tensors of the same dtype).
    dynamic_shapes: per input, None or ``{dim: max_size}``.
    allow_etch_ops: permit operators outside ExecuTorch's namespaces (listed by summary()).
    check_ops: ``True`` (the default; ``"auto"`` means the same) — fail unless every
        operator is registered in the C library with a signature matching its call; when no
        library is found (lookup order: :mod:`etch._lib`) that is an error too
        (:class:`etch._lib.LibraryNotFoundError`, an ``OSError``); ``False`` — skip the check.
    external_data: a ``.ptd`` file name: every constant tensor is stored there instead of in
        the ``.pte`` (keyed by its parameter's or buffer's name), and ``Program.save`` writes
        it beside the program, merging with an existing file (:mod:`etch.external_data`).
    backend: ``None`` (every node a kernel call) or ``"xnnpack"``: runs of float32 nodes that
        XNNPACK computes become ``XnnpackBackend`` delegate calls, their payloads laid out as
        ExecuTorch's XNNPACK serializer lays them out (:mod:`etch.backends.xnnpack`); the rest
        stays kernel calls.
    graph_passes: functions called with the :class:`~etch.graph.ExportedGraph` after the
        optimizing passes, in order (each may rewrite it; shapes are propagated again after
        each): how :mod:`etch.llm.et_ops` puts ExecuTorch's LLM operators in a llama graph.
    debug_info: record, for every instruction, the capture-time name of the graph node it
        computes, its module path (``features.3.conv.1``) and the model's source lines, in
        the program's ``Chain.stacktrace`` (:mod:`etch.debuginfo`; ``etch info``, ``etch
        bench`` and :func:`etch.inspect` show them).  ``False`` leaves the stack traces out
        (the file then depends on nothing but the model: no source paths).
    fallback: with a backend, also write the plain-operator version of the method as
        ``<name>__cpu``, which etch's runtime loads in its place when the backend is missing or
        unavailable (``python/README.md``, "Delegated methods and their CPU twins").
    """
    if check_ops not in (True, False, "auto"):
        raise ValueError("check_ops must be True, False or \"auto\", not %r" % (check_ops,))
    if external_data is not None:
        if not isinstance(external_data, (str, os.PathLike)) or not os.fspath(external_data):
            raise TypeError("external_data must be a .ptd file name, not %r" % (external_data,))
        external_data = os.fspath(external_data)
    from .backends import BACKENDS, CPU_TWIN_SUFFIX
    if backend is not None and backend not in BACKENDS:
        raise ValueError("backend %r: expected None or one of %s"
                         % (backend, ", ".join(BACKENDS)))
    if fallback and backend is None:
        raise ValueError("fallback=True needs a backend (the CPU twin of what?)")
    say = progress or (lambda s: None)
    lib = None
    if check_ops:   # before the capture: a missing library fails at once
        from . import _lib
        lib, tried = _lib.lookup()
        if lib is None:
            raise _lib.LibraryNotFoundError(_lib.not_found_message(
                tried, "or export without the operator check (--no-check, check_ops=False): "
                "the program may then fail to load on a runtime that lacks an operator"))
    eg = capture(model, example_inputs, dynamic_shapes=dynamic_shapes, progress=say)
    eg.propagate()
    if optimize:
        _passes.optimize(eg, progress=say)
    else:
        from .passes import normalize, views, dce
        for fn in (normalize.run, dce.run, views.run, dce.run):
            fn(eg)
            eg.propagate()
        eg.prune()
    for fn in graph_passes:
        fn(eg)
        eg.propagate()
    missing = _decomp.unsupported_ops(eg.graph)
    if missing:
        raise ExportError("no portable kernel for: %s" % ", ".join(missing))
    say("emitting")
    if external_data is not None:
        from .capture import state_names
        constants = ConstantTable(external=True, state_names=state_names(model))
    else:
        constants = ConstantTable()
    graphs = {}
    twin = None
    if backend is not None:
        from .backends import xnnpack
        if fallback:
            twin = eg.copy()
            twin.name = eg.name + CPU_TWIN_SUFFIX
        say("lowering to %s" % xnnpack.BACKEND_ID)
        xnnpack.partition(eg)
    methods = [emit_method(eg, constants, debug_info=debug_info)]
    graphs[eg.name] = eg
    if twin is not None:
        methods.append(emit_method(twin, constants, debug_info=debug_info))
        graphs[twin.name] = twin
    program = Program(methods, constants, eg.log, graphs=graphs, external_data=external_data)
    # A model from etch.quantize carries its report (layers quantized, layers kept float).
    program.quantization = getattr(model, "etch_quantization", None)
    if not allow_etch_ops and program.etch_only_operators:
        raise ExportError("etch-only operators (pass allow_etch_ops=True to keep them): %s"
                          % ", ".join(program.etch_only_operators))
    if check_ops:
        from . import opcheck
        say("checking operators")
        opcheck.check_program(program.program, opcheck.registry(lib),
                              opcheck.dtype_support(lib))
    say("serializing")
    program.buffer  # noqa: B018  (serialize now so errors surface here)
    return program
