"""Helpers shared by the exporter tests."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402

import etch  # noqa: E402
from etch import _lib  # noqa: E402


def lib_path():
    return _lib.find_library()


def cli_path():
    p = os.environ.get("ETCH_CLI") or str(REPO / "build" / "etch")
    return p if os.path.exists(p) else None


def needs_lib(test):
    return unittest.skipUnless(lib_path(), "libetch not built (set ETCH_LIB)")(test)


def needs_cli(test):
    return unittest.skipUnless(cli_path(), "etch CLI not built (set ETCH_CLI)")(test)


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max|a - e| / max(max|e|, 1e-6), the zoo's acceptance measure."""
    a, e = actual.double(), expected.double()
    return float((a - e).abs().max() / max(float(e.abs().max()), 1e-6))


def run_cli(*args, **kw):
    return subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True, **kw)


def python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def graph_of(model, *inputs):
    """Capture + propagate, for pass tests."""
    from etch.capture import capture
    eg = capture(model.eval(), inputs)
    eg.propagate()
    return eg


def count(eg, name_prefix: str) -> int:
    return sum(v for k, v in eg.op_counts().items() if k.startswith(name_prefix))
