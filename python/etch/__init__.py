"""etch: export PyTorch models to ``.pte`` programs and run them on the etch C runtime.

    import etch
    program = etch.export(model, (x,))          # nn.Module + example inputs -> Program
    program.save("model.pte")                   # external_data="w.ptd": weights in w.ptd
    print(program.summary())
    y = etch.runtime.load("model.pte").forward(x)
    open("model.bpte", "wb").write(etch.bundle(program, [((x,), (y,))]))

Subpackages load on first use, so ``from etch import serialize`` (pure Python, no torch) stays
light: ``etch.serialize`` reads and writes .pte/.ptd/.bpte files; ``etch.export``,
``etch.bundle``, ``etch.Program``, ``etch.runtime`` and ``etch.quantize`` (:mod:`etch.quant`:
``quantized_decomposed`` int8 / int4 schemes) and ``etch.prune`` (magnitude pruning, 2:4 / block /
unstructured) need torch; ``etch.inspect(model, program, inputs)`` (:mod:`etch.inspector`)
compares every operator's output in etch with PyTorch eager.
"""

from __future__ import annotations

import importlib
import os as _os
import sys as _sys


def _drop_cwd_from_path() -> None:
    """``python -m etch ...`` / ``-m etch.llm ...`` put the current directory first on the
    import path, so a ``torch.py`` or ``numpy.py`` there would be imported instead of the real
    one (and run). This package is imported before its ``__main__``, so the entry goes here;
    the CLI looks up the models it names with the current directory last
    (``etch.cli.load_factory``). Other programs that import etch keep their path."""
    argv = list(getattr(_sys, "orig_argv", []))
    target = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if (target == "etch" or target.startswith("etch.")) and _sys.path and \
            _sys.path[0] in ("", _os.getcwd()):
        del _sys.path[0]


_drop_cwd_from_path()

__version__ = "0.1.0"

__all__ = ["export", "bundle", "Program", "runtime", "serialize", "ExportError",
           "save_external_data", "quantize", "prepare_qat", "convert_qat", "quant", "prune",
           "apply_prune_masks", "inspect", "InspectError"]

_LAZY = {
    "export": ("etch.exporter", "export"),
    "ExportError": ("etch.exporter", "ExportError"),
    "Program": ("etch.program", "Program"),
    "bundle": ("etch.bundling", "bundle"),
    "save_external_data": ("etch.external_data", "save_external_data"),
    "quantize": ("etch.quant", "quantize"),
    "prepare_qat": ("etch.quant", "prepare_qat"),
    "convert_qat": ("etch.quant", "convert_qat"),
    "prune": ("etch.quant.prune", "prune"),
    "apply_prune_masks": ("etch.quant.prune", "apply_prune_masks"),
    "inspect": ("etch.inspector", "inspect"),
    "InspectError": ("etch.inspector", "InspectError"),
}


def __getattr__(name):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    if name in ("runtime", "serialize", "passes", "capture", "memory_plan", "ops", "opcheck",
                "llm", "zoo", "quant", "debuginfo", "inspector"):
        return importlib.import_module("etch." + name)
    raise AttributeError("module 'etch' has no attribute %r" % name)
