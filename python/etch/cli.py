"""Command line: ``python3 -m etch export MODULE:FACTORY --input 1x3x224x224:float32 -o out.pte``.

    python3 -m etch export torchvision.models:resnet18 --input 1x3x224x224:float32 -o r18.pte
    python3 -m etch export mymodels.py:make_model --input 1x16:int64:0..512 -o m.pte \\
        --bundle m.bpte --summary

The same as the ``etch-export`` console script, without the word ``export``:
``etch-export model.pt --input 1x16:float32 -o m.pte``.

MODULE is an importable module or a path to a ``.py`` file; FACTORY a callable in it that
returns the ``nn.Module`` (called without arguments; ``--kwargs '{"num_classes": 10}'`` passes
keyword arguments), or an ``nn.Module`` instance; a module name is looked up on the import path
with the current directory last (a file there never shadows an installed module).  Instead of
MODULE:FACTORY, a file written by ``torch.save(model, FILE)``: a whole module is a pickle, and
loading one runs code stored in the file, so it is refused unless ``--trust-pickle`` says the
file is trusted (a file of plain tensors loads without running any).  Each ``--input``
is ``SHAPE:DTYPE`` with an optional ``:LOW..HIGH`` value range (random example data, seeded);
``--dynamic 0:1:16`` says that input 0's dimension 1 varies up to 16.

``--quantize SCHEME`` (``8w``, ``4w``, ``8da4w``, ``int8-dynamic``: :func:`etch.quantize`)
quantizes the model first, with ``--group-size G``, ``--asymmetric``, ``--pad-groups`` and
``--embedding-quantize BITS[,GROUP]``; ``--calibration DIR_OR_NPZ`` gives calibration batches
(:func:`load_calibration`; checked against the inputs; ``int8`` needs them, the other schemes
refuse them), ``--observer minmax|histogram`` for ``int8``.

``python3 -m etch inspect MODULE:FACTORY PROGRAM.pte --input ...`` runs the model in PyTorch
eager and the program in etch on the same (seeded) inputs and prints :func:`etch.inspect`'s
table: per operator and per layer the max abs / relative error, SQNR and cosine, the first
operator (and layer) below ``--threshold`` dB marked, the layers sorted by damage.  The exit
status is 0 whether or not something was marked; 1 when the program does not come from the
model (or another error).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import json
import os
import sys
import time
from typing import List, Optional

__all__ = ["main", "export_main", "parse_input_spec", "load_factory", "load_calibration"]

_DTYPES = {
    "float32": "float32", "float": "float32", "f32": "float32", "float16": "float16",
    "half": "float16", "f16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64", "int64": "int64", "long": "int64",
    "int32": "int32", "int": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool",
}


_MODEL_FILE_EXTS = (".pt", ".pth", ".pkl")


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


def load_factory(target: str, kwargs: Optional[dict] = None, trust_pickle: bool = False):
    """'pkg.module:factory', 'path/file.py:factory' or a model file saved with
    ``torch.save(model, FILE)`` -> the nn.Module. Such a file is first read as tensors and
    plain containers only (:func:`etch.safe_load.load_tensors`: nothing in the file runs); a
    whole pickled module needs ``trust_pickle=True``, since unpickling it runs the file's
    code."""
    import torch
    if ":" not in target or os.path.isfile(target):
        if target.endswith(".py"):
            raise ValueError("%s: name the factory in it too, as %s:FACTORY" % (target, target))
        if not os.path.exists(target):
            if ":" not in target and (os.path.sep in target or
                                      os.path.splitext(target)[1] in _MODEL_FILE_EXTS):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), target)
            raise ValueError("expected MODULE:FACTORY or a model file saved with "
                             "torch.save(model, FILE), got %r" % target)
        if kwargs:
            raise ValueError("--kwargs is for a FACTORY; %s is a saved model" % target)
        import pickle
        from .safe_load import load_tensors
        try:
            obj = load_tensors(target)
        except pickle.UnpicklingError as e:
            if not trust_pickle:
                raise ValueError(
                    "%s is not a file of plain tensors: loading it would run code stored in "
                    "the file (a whole module saved with torch.save is a pickle). Pass "
                    "--trust-pickle if you trust it, or give MODULE:FACTORY (%s)"
                    % (target, str(e).splitlines()[0] if str(e) else type(e).__name__)
                ) from None
            # a whole pickled module, trusted by the caller; its classes must be importable
            obj = torch.load(target, map_location="cpu")
        if not isinstance(obj, torch.nn.Module):
            raise TypeError("%s holds a %s, not an nn.Module (a state dict needs the model's "
                            "code: give MODULE:FACTORY)" % (target, type(obj).__name__))
        return obj
    mod_name, attr = target.rsplit(":", 1)
    if mod_name.endswith(".py") or os.path.sep in mod_name:
        path = os.path.abspath(mod_name)
        if not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), mod_name)
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        # the current directory last: a file there never shadows an installed module
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())
        module = importlib.import_module(mod_name)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError("%s has no %s" % (mod_name, attr))
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

    def end_line(self) -> None:
        """End a stage line left open on a terminal (before an error message)."""
        if self.tty and self._last:
            self.stream.write("\n")
            self.stream.flush()
            self._last = ""

    def done(self, msg: str) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write("[%6.1fs] %s\n" % (time.monotonic() - self.t0, msg))
        self.stream.flush()
        self._last = ""


def load_calibration(path: str, n_inputs: int):
    """Calibration batches from ``path``: an ``.npz`` file with one array per input (named
    ``input_0``, ``input_1``, ... or numpy's ``arr_0``, ``arr_1``, ...), each ``[N, *shape of
    that input]``: N batches; or a folder of such files (sorted by name, each holding one or
    more batches the same way), or of ``.npy`` files for a model with one input.  Returns a
    list of input tuples."""
    import numpy as np
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith((".npz", ".npy")))
        if not files:
            raise ValueError("calibration folder %s has no .npz or .npy files" % path)
    elif os.path.exists(path):
        files = [path]
    else:
        raise FileNotFoundError(errno.ENOENT, "calibration data: %s" % os.strerror(errno.ENOENT),
                                path)
    batches = []
    for f in files:
        if f.endswith(".npy"):
            if n_inputs != 1:
                raise ValueError("calibration file %s: a .npy holds one input, the model "
                                 "takes %d (use .npz with input_0 ...)" % (f, n_inputs))
            arrays = [_load_array_file(np, f)[None]]
        else:
            z = _load_array_file(np, f)
            names = None
            for pre in ("input_", "arr_"):
                if all("%s%d" % (pre, i) in z for i in range(n_inputs)):
                    names = ["%s%d" % (pre, i) for i in range(n_inputs)]
                    break
            if names is None:
                raise ValueError("calibration file %s: expected arrays input_0 .. input_%d "
                                 "(or arr_0 ...), found %s"
                                 % (f, n_inputs - 1, ", ".join(z) or "none"))
            arrays = [z[n] for n in names]
        n = {a.shape[0] if a.ndim else None for a in arrays}
        if len(n) != 1 or None in n:
            raise ValueError("calibration file %s: every array needs the same leading batch "
                             "count, got shapes %s" % (f, [a.shape for a in arrays]))
        for k in range(n.pop()):
            batches.append(tuple(a[k] for a in arrays))
    return batches


def _load_array_file(np, f: str) -> dict:
    """The arrays of the calibration file f (an .npy: {None: array}; an .npz: name -> array),
    every member read now; a ValueError naming the file for anything that is not a numpy
    .npy / .npz of plain arrays (truncated, not a zip, pickled objects)."""
    import zipfile
    try:
        with open(f, "rb") as fh:     # np.load leaks its own handle when the zip is bad
            z = np.load(fh, allow_pickle=False)
            if isinstance(z, np.ndarray):
                return {None: z}
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError("not an .npy or .npz file")
            with z:
                return {name: z[name] for name in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        kind = "a .npy" if f.endswith(".npy") else "an .npz"
        raise ValueError("calibration file %s is not %s of plain numpy arrays (%s)"
                         % (f, kind, str(e) or type(e).__name__)) from None


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


def _load_target(args, prog: "_Progress"):
    """The model of `args.target` (seeded, with --kwargs), after checking --input was given."""
    prog("loading %s" % args.target)
    import torch
    torch.manual_seed(args.seed)
    model = load_factory(args.target, json.loads(args.kwargs) if args.kwargs else None,
                         trust_pickle=args.trust_pickle)
    if not args.input:
        raise ValueError("give at least one --input SHAPE:DTYPE")
    return model


def _cmd_export(args, prog: "_Progress") -> int:
    import torch
    import etch
    model = _load_target(args, prog)
    if args.bundle and args.external_data:
        raise ValueError("--bundle and --external-data cannot be combined: a bundled program "
                         "carries its constants (etch verify takes no .ptd)")
    inputs = tuple(parse_input_spec(s, args.seed + i) for i, s in enumerate(args.input))
    dynamic = _parse_dynamic(args.dynamic, len(inputs))
    if args.quantize is not None:
        calibration = None
        if args.calibration:
            calibration = load_calibration(args.calibration, len(inputs))
        prog("quantizing (%s)" % args.quantize)
        model = etch.quantize(model, inputs, args.quantize, calibration,
                              group_size=args.group_size, symmetric=not args.asymmetric,
                              embedding=args.embedding_quantize, pad=args.pad_groups,
                              observer=args.observer or "minmax")
    elif args.calibration or args.group_size or args.embedding_quantize or args.asymmetric \
            or args.pad_groups or args.observer:
        raise ValueError("--calibration, --observer, --group-size, --asymmetric, --pad-groups "
                         "and --embedding-quantize need --quantize SCHEME")
    program = etch.export(model, inputs, dynamic_shapes=dynamic,
                          allow_etch_ops=args.allow_etch_ops,
                          check_ops=not args.no_check,
                          external_data=args.external_data, backend=args.backend,
                          fallback=args.fallback, progress=prog,
                          debug_info=not args.no_debug_info)
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
        data = etch.bundle(program, [inputs], rtol=args.rtol, atol=args.atol,
                           verify=not args.no_check)
        with open(args.bundle, "wb") as f:
            f.write(data)
        prog.done("wrote %s (verify with: etch verify %s --rtol %g --atol %g)"
                  % (args.bundle, args.bundle, args.rtol, args.atol))
    if args.summary:
        print(program.summary())
    return 0


def _add_trust_arg(e: argparse.ArgumentParser) -> None:
    e.add_argument("--trust-pickle", action="store_true",
                   help="load a model file saved whole with torch.save(model, FILE): "
                        "unpickling it runs code stored in the file")


def _add_export_args(e: argparse.ArgumentParser) -> None:
    e.add_argument("target", metavar="MODULE:FACTORY",
                   help="a module or .py file and the callable in it returning the model")
    e.add_argument("--input", action="append", default=[], metavar="SHAPE:DTYPE[:LOW..HIGH]",
                   help="one example input, e.g. 1x3x224x224:float32 (repeat per input)")
    e.add_argument("-o", "--output", required=True, help="the .pte file to write")
    e.add_argument("--dynamic", action="append", default=[], metavar="INPUT:DIM:MAX",
                   help="a dynamic dimension and its upper bound")
    e.add_argument("--kwargs", help="JSON keyword arguments for FACTORY")
    _add_trust_arg(e)
    e.add_argument("--bundle", metavar="FILE.bpte", help="also write a bundled program")
    e.add_argument("--external-data", metavar="FILE.ptd",
                   help="keep the constant weights in FILE.ptd beside the .pte (merged into "
                        "an existing one, whose entries must agree)")
    e.add_argument("--rtol", type=float, default=1e-4)
    e.add_argument("--atol", type=float, default=1e-5)
    e.add_argument("--allow-etch-ops", action="store_true",
                   help="permit operators only etch knows (listed in --summary)")
    e.add_argument("--no-check", action="store_true",
                   help="skip what needs libetch: the check against the operators it "
                        "registers, and running the --bundle cases through it (without "
                        "this flag a missing libetch is an error)")
    e.add_argument("--backend", choices=("xnnpack",), default=None,
                   help="lower what the backend computes (float32 runs of nodes) to "
                        "XnnpackBackend delegate calls; the rest stays kernel calls")
    e.add_argument("--fallback", action="store_true",
                   help="with --backend: also write the plain-operator twin NAME__cpu, run "
                        "where the backend is missing")
    e.add_argument("--summary", action="store_true", help="print the program summary")
    e.add_argument("--no-debug-info", action="store_true",
                   help="leave out the per-instruction debug information (module path, graph "
                        "node and source line of each instruction, in Chain.stacktrace; "
                        "etch info --instructions shows it)")
    e.add_argument("--quantize", metavar="SCHEME", default=None,
                   help="quantize first: int8 (static: int8 weights per channel, uint8 "
                        "activations per tensor from --calibration), 8w (int8 weights per "
                        "channel), 4w (int4 weights, "
                        "group-wise), 8da4w (int4 weights + int8 dynamic per-token "
                        "activations), int8-dynamic (int8 weights + int8 dynamic per-token "
                        "activations); layers left float are named by --summary")
    e.add_argument("--group-size", type=int, default=None,
                   help="4w / 8da4w: columns per scale, 32, 64, 128 or 256 (default 128)")
    e.add_argument("--asymmetric", action="store_true",
                   help="4w / 8da4w: a zero point per group")
    e.add_argument("--pad-groups", action="store_true",
                   help="4w / 8da4w: pad in_features that the group size does not divide "
                        "with zero columns (instead of an error)")
    e.add_argument("--embedding-quantize", metavar="BITS[,GROUP]", default=None,
                   help="also quantize nn.Embedding tables: 8 or 4 bits, GROUP columns per "
                        "scale (default one scale per row), e.g. 4,32")
    e.add_argument("--calibration", metavar="DIR_OR_NPZ", default=None,
                   help="calibration batches: an .npz with input_0, ... each [N, *shape], or "
                        "a folder of them (checked against the --input shapes and dtypes)")
    e.add_argument("--observer", choices=("minmax", "histogram"), default=None,
                   help="int8: the activation observer (default minmax)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _cmd_inspect(args, prog: "_Progress") -> int:
    import torch
    import etch
    model = _load_target(args, prog)
    inputs = tuple(parse_input_spec(s, args.seed + i) for i, s in enumerate(args.input))
    prog("running eager and etch")
    prog.end_line()
    etch.inspect(model, args.program, inputs, method=args.method,
                 threshold_db=args.threshold, data=args.data, kernels=args.kernels)
    return 0


def _add_inspect_args(e: argparse.ArgumentParser) -> None:
    e.add_argument("target", metavar="MODULE:FACTORY",
                   help="the model the program was exported from (or, for a quantized "
                        "program, the float model it was quantized from: compared per layer)")
    e.add_argument("program", metavar="PROGRAM.pte", help="the program to compare")
    e.add_argument("--input", action="append", default=[], metavar="SHAPE:DTYPE[:LOW..HIGH]",
                   help="one input, random from --seed, e.g. 1x3x224x224:float32 (repeat "
                        "per input)")
    e.add_argument("--kwargs", help="JSON keyword arguments for FACTORY")
    _add_trust_arg(e)
    e.add_argument("--method", default="forward", help="the method to run (default forward)")
    e.add_argument("--data", metavar="FILE.ptd", help="the program's external data")
    e.add_argument("--threshold", type=float, default=40.0, metavar="DB",
                   help="mark the first operator / layer whose SQNR is below DB (default 40)")
    e.add_argument("--kernels", choices=("optimized", "portable"), default="optimized",
                   help="the kernels etch runs (default optimized)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("-q", "--quiet", action="store_true", help="no progress display")


def _run_export(args, prog_name: str) -> int:
    progress = _Progress(quiet=args.quiet)
    try:
        if getattr(args, "cmd", None) == "inspect":
            return _cmd_inspect(args, progress)
        return _cmd_export(args, progress)
    except KeyboardInterrupt:
        progress.end_line()
        sys.stderr.write("%s: interrupted\n" % prog_name)
        return 130
    except Exception as ex:  # report, do not dump a traceback at the user
        if os.environ.get("ETCH_DEBUG"):
            raise
        progress.end_line()
        sys.stderr.write("%s: error: %s\n" % (prog_name, _one_line(ex)))
        return 1


def _one_line(ex: BaseException) -> str:
    """The message of `ex` (a FileNotFoundError shows its file); OperatorCheckError keeps its
    list of problems, one per line."""
    if isinstance(ex, OSError) and ex.filename is not None and ex.strerror:
        return "%s: %s" % (ex.strerror, ex.filename)
    return str(ex) or type(ex).__name__


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m etch export ...``."""
    import etch
    p = argparse.ArgumentParser(prog="python3 -m etch", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version="etch %s" % etch.__version__)
    sub = p.add_subparsers(dest="cmd")
    e = sub.add_parser("export", help="export an nn.Module to a .pte program",
                       description="Export an nn.Module to a .pte program.")
    _add_export_args(e)
    i = sub.add_parser("inspect", help="compare a program with its model, operator by operator",
                       description="Run MODULE:FACTORY in PyTorch eager and PROGRAM.pte in "
                                   "etch on the same inputs and print, per operator and per "
                                   "layer, the module path, shape, max abs / relative error, "
                                   "SQNR (dB) and cosine, the first below --threshold marked, "
                                   "and the layers sorted by damage (etch.inspect).")
    _add_inspect_args(i)
    args = p.parse_args(argv)
    if args.cmd not in ("export", "inspect"):
        p.print_help(sys.stderr)
        return 2
    return _run_export(args, "etch " + args.cmd)


def export_main(argv: Optional[List[str]] = None) -> int:
    """The ``etch-export`` console script: ``etch-export MODULE:FACTORY --input ... -o F``,
    the arguments of ``python3 -m etch export``."""
    import etch
    p = argparse.ArgumentParser(prog="etch-export",
                                description="Export an nn.Module to a .pte program "
                                            "(the same as python3 -m etch export).")
    p.add_argument("--version", action="version", version="etch %s" % etch.__version__)
    _add_export_args(p)
    return _run_export(p.parse_args(argv), "etch-export")
