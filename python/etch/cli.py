"""Command line: ``python3 -m etch export MODULE:FACTORY --input 1x3x224x224:float32 -o out.pte``.

    python3 -m etch export torchvision.models:resnet18 --input 1x3x224x224:float32 -o r18.pte
    python3 -m etch export mymodels.py:make_model --input 1x16:int64:0..512 -o m.pte \\
        --bundle m.bpte --summary

MODULE is an importable module or a path to a ``.py`` file; FACTORY a callable in it that
returns the ``nn.Module`` (called without arguments; ``--kwargs '{"num_classes": 10}'`` passes
keyword arguments), or an ``nn.Module`` instance.  Each ``--input`` is ``SHAPE:DTYPE`` with an
optional ``:LOW..HIGH`` value range (random example data, seeded); ``--dynamic 0:1:16`` says that
input 0's dimension 1 varies up to 16.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from typing import List, Optional

__all__ = ["main", "parse_input_spec", "load_factory"]

_DTYPES = {
    "float32": "float32", "float": "float32", "f32": "float32", "float16": "float16",
    "half": "float16", "f16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


def parse_input_spec(spec: str, seed: int = 0):
    """'1x3x224x224:float32[:LOW..HIGH]' -> an example tensor."""
    import torch
    parts = spec.split(":")
    if not 1 <= len(parts) <= 3:
        raise ValueError("input spec %r: expected SHAPE:DTYPE[:LOW..HIGH]" % spec)
    shape_s = parts[0].strip()
    try:
        shape = [int(s) for s in shape_s.lower().split("x")] if shape_s not in ("", "scalar") \
            else []
    except ValueError:
        raise ValueError("input spec %r: bad shape %r" % (spec, shape_s)) from None
    dname = _DTYPES.get(parts[1].strip().lower() if len(parts) > 1 else "float32")
    if dname is None:
        raise ValueError("input spec %r: unknown dtype %r" % (spec, parts[1]))
    dtype = getattr(torch, dname)
    lo, hi = None, None
    if len(parts) == 3:
        try:
            lo_s, hi_s = parts[2].split("..")
            lo, hi = float(lo_s), float(hi_s)
        except ValueError:
            raise ValueError("input spec %r: range must be LOW..HIGH" % spec) from None
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float32)
        if lo is not None:
            t = torch.rand(shape, generator=g) * (hi - lo) + lo
        return t.to(dtype)
    lo = 0 if lo is None else int(lo)
    hi = 10 if hi is None else int(hi)
    return torch.randint(lo, hi, shape, generator=g, dtype=dtype)


def load_factory(target: str, kwargs: Optional[dict] = None):
    """'pkg.module:factory' or 'path/file.py:factory' -> the nn.Module."""
    import torch
    if ":" not in target:
        raise ValueError("expected MODULE:FACTORY, got %r" % target)
    mod_name, attr = target.rsplit(":", 1)
    if mod_name.endswith(".py") or os.path.sep in mod_name:
        path = os.path.abspath(mod_name)
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(mod_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, torch.nn.Module):
        return obj
    model = obj(**(kwargs or {}))
    if not isinstance(model, torch.nn.Module):
        raise TypeError("%s returned %s, not an nn.Module" % (target, type(model).__name__))
    return model


class _Progress:
    """Stage lines with elapsed time on stderr (rewritten in place on a terminal)."""

    def __init__(self, stream=None, quiet=False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = ""

    def __call__(self, stage: str) -> None:
        if self.quiet:
            return
        line = "[%6.1fs] %s" % (time.monotonic() - self.t0, stage)
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._last = line

    def done(self, msg: str) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write("[%6.1fs] %s\n" % (time.monotonic() - self.t0, msg))
        self.stream.flush()


def _parse_dynamic(specs: List[str], n_inputs: int):
    if not specs:
        return None
    out = [None] * n_inputs
    for s in specs:
        try:
            i, d, m = (int(x) for x in s.split(":"))
        except ValueError:
            raise ValueError("--dynamic %r: expected INPUT:DIM:MAX" % s) from None
        if not 0 <= i < n_inputs:
            raise ValueError("--dynamic %r: no input %d" % (s, i))
        out[i] = dict(out[i] or {})
        out[i][d] = m
    return out


def _cmd_export(args) -> int:
    prog = _Progress(quiet=args.quiet)
    prog("loading %s" % args.target)
    import torch
    import etch
    torch.manual_seed(args.seed)
    model = load_factory(args.target, json.loads(args.kwargs) if args.kwargs else None)
    if not args.input:
        raise ValueError("give at least one --input SHAPE:DTYPE")
    if args.bundle and args.external_data:
        raise ValueError("--bundle and --external-data cannot be combined: a bundled program "
                         "carries its constants (etch verify takes no .ptd)")
    inputs = tuple(parse_input_spec(s, args.seed + i) for i, s in enumerate(args.input))
    dynamic = _parse_dynamic(args.dynamic, len(inputs))
    program = etch.export(model, inputs, dynamic_shapes=dynamic,
                          allow_etch_ops=args.allow_etch_ops,
                          check_ops=False if args.no_check else "auto",
                          external_data=args.external_data, progress=prog)
    program.save(args.output)
    if args.external_data:
        prog.done("wrote %s (%d constants; run with: etch run %s --data %s)"
                  % (program.data_path_for(args.output), len(program.external_constants),
                     args.output, program.data_path_for(args.output)))
    prog.done("wrote %s (%d bytes; planned memory %d bytes; %d constant bytes)"
              % (args.output, len(program.buffer), program.planned_bytes,
                 program.constant_bytes))
    if args.bundle:
        prog("bundling")
        data = etch.bundle(program, [inputs], rtol=args.rtol, atol=args.atol)
        with open(args.bundle, "wb") as f:
            f.write(data)
        prog.done("wrote %s (verify with: etch verify %s --rtol %g --atol %g)"
                  % (args.bundle, args.bundle, args.rtol, args.atol))
    if args.summary:
        print(program.summary())
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m etch", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd")
    e = sub.add_parser("export", help="export an nn.Module to a .pte program")
    e.add_argument("target", metavar="MODULE:FACTORY")
    e.add_argument("--input", action="append", default=[], metavar="SHAPE:DTYPE[:LOW..HIGH]",
                   help="one example input, e.g. 1x3x224x224:float32 (repeat per input)")
    e.add_argument("-o", "--output", required=True, help="the .pte file to write")
    e.add_argument("--dynamic", action="append", default=[], metavar="INPUT:DIM:MAX",
                   help="a dynamic dimension and its upper bound")
    e.add_argument("--kwargs", help="JSON keyword arguments for FACTORY")
    e.add_argument("--bundle", metavar="FILE.bpte", help="also write a bundled program")
    e.add_argument("--external-data", metavar="FILE.ptd",
                   help="keep the constant weights in FILE.ptd beside the .pte (merged into "
                        "an existing one, whose entries must agree)")
    e.add_argument("--rtol", type=float, default=1e-4)
    e.add_argument("--atol", type=float, default=1e-5)
    e.add_argument("--allow-etch-ops", action="store_true",
                   help="permit operators only etch knows (listed in --summary)")
    e.add_argument("--no-check", action="store_true",
                   help="skip the check against the operators libetch registers")
    e.add_argument("--summary", action="store_true", help="print the program summary")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    args = p.parse_args(argv)
    if args.cmd != "export":
        p.print_help()
        return 2
    try:
        return _cmd_export(args)
    except Exception as ex:  # report, do not dump a traceback at the user
        if os.environ.get("ETCH_DEBUG"):
            raise
        sys.stderr.write("\netch export: error: %s\n" % ex)
        return 1
