"""The six models of the CPU benchmark, their fixed inputs, and their exports.

Each model is built with a fixed seed (random initialisation, nothing downloaded), put in eval
mode, and exported three times: to ``.pte`` with ``etch.export`` (every node a kernel call: the
CPU path), to ``.xnn.pte`` with ``etch.export(..., backend="xnnpack")`` (runs of nodes XNNPACK
computes become ``XnnpackBackend`` delegate calls, run by etch's own backend; the rest stays
kernel calls) and to ``.onnx`` with ``torch.onnx.export`` (opset 14).  Its one input (batch 1,
float32, seeded) is saved as ``.npy``, and PyTorch eager's output on it as ``<name>.ref.npy``.
Everything lands in ``bench/cpu/.work/`` and is reused while this file and the exporter's
sources are unchanged.

Before a model is timed, ``check`` runs etch (``etch run``) on both ``.pte`` files and ONNX
Runtime (``ort_bench.mjs --output``) on the saved input and compares the outputs with eager's; a
model whose plain export or ONNX export fails, or whose etch or ORT output disagrees, becomes an
error row of the benchmark.  A delegated export that fails or disagrees only drops the
``etch-xnn`` engine for that model (an error of that engine); the other engines are still
timed.

    /usr/bin/python3 bench/cpu/models.py [--models mlp,resnet18] [--force] [--etch PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORK = HERE / ".work"
sys.path.insert(0, str(REPO / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from etch import zoo  # noqa: E402

ONNX_OPSET = 14
TOLERANCE = 1e-4       # max |etch - eager| (and |ORT - eager|) allowed before a model is timed
ENGINES = ("etch", "etch-xnn", "ort", "torch")   # what check() can check ("torch" needs nothing)


@dataclass
class Spec:
    factory: Callable[[], nn.Module]
    shape: Tuple[int, ...]
    warmup: int          # per engine and round, at most
    iterations: int      # per engine and round, at most (calibration sizes a round to
                         # --target-s seconds within this cap)
    about: str


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return zoo.MLP()                        # 32 -> 64 -> 64 -> 10, ReLU


def _mobilenet_v2() -> nn.Module:
    return zoo.mobilenet_v2()               # torchvision, seeded, batch norms randomised


def _resnet18() -> nn.Module:
    return zoo.resnet18()


def _lenet() -> nn.Module:
    return zoo.lenet()                      # seeded, batch norms randomised


def _transformer() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024,
                                       dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)


class LlamaStack(nn.Module):
    """Four llama blocks (zoo.LlamaBlock: RMSNorm, RoPE, grouped-query causal attention,
    SwiGLU) over a whole sequence, no KV cache, then a final RMSNorm."""

    def __init__(self, layers=4, dim=256, n_heads=8, n_kv_heads=4, hidden=688, seq=64):
        super().__init__()
        self.layers = nn.ModuleList(zoo.LlamaBlock(dim, n_heads, n_kv_heads, hidden, seq)
                                    for _ in range(layers))
        self.norm = zoo.RMSNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def _llama() -> nn.Module:
    torch.manual_seed(0)
    m = LlamaStack()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():                   # RMSNorm weights start at one: make them count
        for mod in m.modules():
            if isinstance(mod, zoo.RMSNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=g) * 0.5 + 0.75)
    return m


MODELS: Dict[str, Spec] = {
    "mobilenet_v2": Spec(_mobilenet_v2, (1, 3, 224, 224), 20, 400,
                         "torchvision mobilenet_v2, random init, 1x3x224x224"),
    "resnet18": Spec(_resnet18, (1, 3, 224, 224), 10, 150,
                     "torchvision resnet18, random init, 1x3x224x224"),
    "lenet": Spec(_lenet, (1, 1, 28, 28), 200, 10000,
                  "etch.zoo LeNet (2 conv + batch norm, 3 linear), 1x1x28x28"),
    "mlp": Spec(_mlp, (1, 32), 1000, 20000, "etch.zoo MLP 32-64-64-10, 1x32"),
    "transformer": Spec(_transformer, (1, 64, 256), 20, 400,
                        "nn.TransformerEncoder, 4 layers, d=256, 8 heads, ff 1024, seq 64"),
    "llama": Spec(_llama, (1, 64, 256), 20, 400,
                  "4 llama blocks d=256, 8 heads / 4 kv heads, ff 688, seq 64, no KV cache"),
}


def names() -> List[str]:
    return list(MODELS)


def build(name: str) -> Tuple[nn.Module, torch.Tensor]:
    """(model in eval mode, its fixed input)."""
    spec = MODELS[name]
    model = spec.factory().eval()
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(spec.shape, generator=g, dtype=torch.float32)
    return model, x


def paths(name: str, work: Path = WORK) -> Dict[str, Path]:
    return {"pte": work / (name + ".pte"), "xnn": work / (name + ".xnn.pte"),
            "onnx": work / (name + ".onnx"),
            "input": work / (name + ".input.npy"), "ref": work / (name + ".ref.npy"),
            "stamp": work / (name + ".stamp.json")}


def _source_stamp() -> str:
    """Hash of what the exports depend on: this file and the exporter's sources."""
    h = hashlib.sha256()
    files = [Path(__file__).resolve()] + sorted((REPO / "python" / "etch").rglob("*.py"))
    for f in files:
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def default_etch() -> Path:
    return Path(os.environ.get("ETCH_BIN", REPO / "build" / "etch"))


def _calls(program) -> Dict[str, object]:
    """What the forward method runs: delegate calls (and the nodes inside them) and the kernel
    calls left outside them, per operator."""
    m = program.method("forward")
    ops = dict(sorted(m.op_calls.items(), key=lambda kv: (-kv[1], kv[0])))
    return {"delegate_calls": len(m.delegate_calls),
            "delegated_nodes": sum(nodes for _, _, nodes in m.delegate_calls),
            "kernel_calls": sum(ops.values()), "kernel_ops": ops}


def export(name: str, etch_bin: Path, force: bool = False, work: Path = WORK,
           log=print) -> Dict[str, object]:
    """Export one model (cached). Returns {"ok", "error", "stage", "etch_calls", "xnn", ...};
    "xnn" describes the delegated export: {"ok", "error", "stage", "delegate_calls",
    "delegated_nodes", "kernel_calls", "kernel_ops", "export_s"}."""
    import etch
    work.mkdir(parents=True, exist_ok=True)
    p = paths(name, work)
    stamp = _source_stamp()
    if not force and p["stamp"].exists():
        try:
            old = json.loads(p["stamp"].read_text())
        except ValueError:
            old = {}
        xnn = old.get("xnn")
        if old.get("stamp") == stamp and isinstance(xnn, dict) and \
                all(p[k].exists() for k in ("pte", "onnx", "input", "ref")) and \
                (p["xnn"].exists() or not xnn.get("ok")):
            return {"ok": True, "cached": True, "error": None, "stage": None,
                    "etch_calls": old.get("etch_calls"), "xnn": xnn}
    for k in ("pte", "xnn", "onnx", "stamp"):
        if p[k].exists():
            p[k].unlink()
    # the operator check loads the library the benchmarked CLI was built with
    lib = etch_bin.resolve().parent / "libetch.so"
    if lib.exists():
        os.environ.setdefault("ETCH_LIB", str(lib))
    model, x = build(name)
    with torch.no_grad():
        ref = model(x)
    np.save(p["input"], x.numpy())
    np.save(p["ref"], ref.numpy())
    t0 = time.time()
    try:
        program = etch.export(model, (x,))
        program.save(str(p["pte"]))
    except Exception as e:  # an exporter failure is a result, reported per model
        log("  %s: etch.export failed: %s: %s" % (name, type(e).__name__, e))
        return {"ok": False, "error": "etch.export: %s: %s" % (type(e).__name__,
                                                               _one_line(str(e))),
                "stage": "export-etch", "trace": traceback.format_exc()}
    etch_calls = _calls(program)
    t1 = time.time()
    etch_s = t1 - t0
    # the delegated twin of the same module: a failure here drops only the etch-xnn engine
    xnn: Dict[str, object] = {"ok": True, "error": None, "stage": None}
    try:
        model_x, _ = build(name)
        program_x = etch.export(model_x, (x,), backend="xnnpack")
        program_x.save(str(p["xnn"]))
        xnn.update(_calls(program_x))
    except Exception as e:
        log("  %s: etch.export(backend=\"xnnpack\") failed: %s: %s" % (name, type(e).__name__,
                                                                        e))
        xnn.update(ok=False, stage="export-etch-xnn", trace=traceback.format_exc(),
                   error="etch.export(backend=\"xnnpack\"): %s: %s"
                   % (type(e).__name__, _one_line(str(e))))
        if p["xnn"].exists():
            p["xnn"].unlink()
    xnn["export_s"] = round(time.time() - t1, 2)
    t1 = time.time()
    try:
        model2, _ = build(name)
        # grad enabled: keeps TransformerEncoderLayer off its fused fast path (no ONNX
        # symbolic for torch._transformer_encoder_layer_fwd)
        torch.onnx.export(model2, (x,), str(p["onnx"]), input_names=["x"],
                          output_names=["y"], opset_version=ONNX_OPSET,
                          do_constant_folding=True)
    except Exception as e:
        log("  %s: torch.onnx.export failed: %s: %s" % (name, type(e).__name__, e))
        return {"ok": False, "error": "torch.onnx.export: %s: %s" % (type(e).__name__,
                                                                    _one_line(str(e))),
                "stage": "export-onnx", "trace": traceback.format_exc()}
    t2 = time.time()
    stamped_xnn = {k: v for k, v in xnn.items() if k != "trace"}
    p["stamp"].write_text(json.dumps({"stamp": stamp, "etch_export_s": round(etch_s, 2),
                                      "onnx_export_s": round(t2 - t1, 2),
                                      "etch_calls": etch_calls, "xnn": stamped_xnn}))
    return {"ok": True, "cached": False, "error": None, "stage": None,
            "etch_export_s": etch_s, "onnx_export_s": t2 - t1, "etch_calls": etch_calls,
            "xnn": xnn}


def _one_line(s: str, limit: int = 300) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[:limit] + "..."


def _diff(out: np.ndarray, ref: np.ndarray) -> Optional[float]:
    if out.shape != ref.shape:
        return None
    return float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64))))


def _run_flags(etch_bin: Path) -> str:
    r = subprocess.run([str(etch_bin), "help", "run"], capture_output=True, text=True)
    return r.stdout + r.stderr


def _etch_run_diff(etch_bin: Path, pte: Path, inp: Path, ref: np.ndarray, kernels: str,
                   counts: Sequence[Optional[int]], tmp: str
                   ) -> Tuple[Optional[float], Optional[str]]:
    """`etch run` of one .pte at each thread count: (max abs diff over them, error)."""
    d: Optional[float] = 0.0
    for c in counts:
        cmd = [str(etch_bin), "run", str(pte), "--inputs", str(inp), "--output-dir", tmp]
        if kernels != "default":
            cmd += ["--kernels", kernels]
        if c is not None:
            cmd += ["--cpu-threads", str(c)]
        out = Path(tmp) / "output_0.npy"
        if out.exists():
            out.unlink()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not out.exists():
            return None, ("etch run %s%s failed (exit %d): %s"
                          % (pte.name, "" if c is None else " --cpu-threads %d" % c,
                             r.returncode, _one_line(r.stderr or r.stdout)))
        dc = _diff(np.load(out), ref)
        d = None if dc is None or d is None else max(d, dc)
    return d, None


def check(name: str, etch_bin: Path, node: str = "node", work: Path = WORK,
          tolerance: float = TOLERANCE, kernels: Optional[str] = None,
          threads: Sequence[int] = (1,), engines: Sequence[str] = ENGINES,
          xnn_ok: bool = True) -> Dict[str, object]:
    """Run etch on the plain and on the delegated .pte (at each thread count, where `etch run`
    takes --cpu-threads) and ONNX Runtime once on the saved input; compare with eager's output.
    Only the engines named are checked. The delegated file's result goes to "xnn_ok",
    "xnn_stage", "xnn_error", "xnn_max_abs_diff"; it never clears "ok"."""
    p = paths(name, work)
    ref = np.load(p["ref"])
    res: Dict[str, object] = {"ok": True, "error": None, "ref_max_abs": float(np.abs(ref).max())}
    flags = _run_flags(etch_bin)
    counts = sorted(set(threads)) if "--cpu-threads" in flags else [None]
    res["etch_kernels_checked"] = kernels if kernels and "--kernels" in flags else "default"
    res["etch_threads_checked"] = [c or 1 for c in counts]
    res["engines_checked"] = [e for e in ENGINES if e in engines and e != "torch"]
    kn = str(res["etch_kernels_checked"])
    with tempfile.TemporaryDirectory(prefix="etch-bench-") as tmp:
        if "etch" in engines:
            d, err = _etch_run_diff(etch_bin, p["pte"], p["input"], ref, kn, counts, tmp)
            if err:
                res.update(ok=False, stage="check-etch", error=err)
                return res
            res["etch_max_abs_diff"] = d
            if d is None or d > tolerance:   # recorded; ORT is still checked
                res.update(ok=False, stage="check-etch",
                           error="etch output differs from eager: max abs diff %s > %g"
                           % ("(shape mismatch)" if d is None else "%.3g" % d, tolerance))
        if "etch-xnn" in engines and xnn_ok:
            d, err = _etch_run_diff(etch_bin, p["xnn"], p["input"], ref, kn, counts, tmp)
            res["xnn_max_abs_diff"] = d
            if err:
                res.update(xnn_ok=False, xnn_stage="check-etch-xnn", xnn_error=err)
            elif d is None or d > tolerance:
                res.update(xnn_ok=False, xnn_stage="check-etch-xnn",
                           xnn_error="delegated etch output differs from eager: max abs diff "
                           "%s > %g" % ("(shape mismatch)" if d is None else "%.3g" % d,
                                        tolerance))
            else:
                res["xnn_ok"] = True
        if "ort" in engines:
            ort_out = Path(tmp) / "ort_output.npy"
            cmd = [node, str(HERE / "ort_bench.mjs"), "--model", str(p["onnx"]), "--input",
                   str(p["input"]), "--threads", "1", "--warmup", "0", "--iterations", "1",
                   "--output", str(ort_out)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or not ort_out.exists():
                if res["ok"]:
                    res.update(ok=False, stage="check-ort",
                               error="ort_bench.mjs failed (exit %d): %s"
                               % (r.returncode, _one_line(r.stderr or r.stdout)))
                return res
            res["ort_max_abs_diff"] = o = _diff(np.load(ort_out), ref)
            if res["ok"] and (o is None or o > tolerance):
                res.update(ok=False, stage="check-ort",
                           error="ONNX Runtime output differs from eager: max abs diff %s > %g"
                           % (o, tolerance))
    return res


def prepare(selected: List[str], etch_bin: Path, force: bool = False, node: str = "node",
            work: Path = WORK, log=print, kernels: Optional[str] = None,
            threads: Sequence[int] = (1,), engines: Sequence[str] = ENGINES
            ) -> Dict[str, Dict[str, object]]:
    """Export (cached; always all three files) and check each model for the engines named;
    {name: status}. status["xnn"] holds the delegated export's and check's result."""
    out = {}
    for name in selected:
        log("[models] %s: export%s" % (name, " (forced)" if force else ""))
        st = export(name, etch_bin, force=force, work=work, log=log)
        xnn = st.get("xnn") or {"ok": False, "stage": "export-etch-xnn",
                                "error": "no delegated export"}
        if st["ok"]:
            c = check(name, etch_bin, node=node, work=work, kernels=kernels, threads=threads,
                      engines=engines, xnn_ok=bool(xnn.get("ok")))
            for k in ("xnn_ok", "xnn_stage", "xnn_error", "xnn_max_abs_diff"):
                if k in c:
                    xnn[k[4:]] = c.pop(k)
            st.update(c)
        st["xnn"] = xnn
        if st.get("etch_max_abs_diff") is not None or xnn.get("max_abs_diff") is not None:
            def g(v):
                return "n/a" if v is None else "%.3g" % v
            log("[models] %s: max abs diff vs eager: etch %s, etch-xnn %s, ORT %s "
                "(|eager| max %s)" % (name, g(st.get("etch_max_abs_diff")),
                                      g(xnn.get("max_abs_diff")), g(st.get("ort_max_abs_diff")),
                                      g(st.get("ref_max_abs"))))
        if xnn.get("delegate_calls") is not None:
            log("[models] %s: delegated: %d delegate call(s) holding %d node(s), %d kernel "
                "call(s) left%s" % (name, xnn["delegate_calls"], xnn["delegated_nodes"],
                                    xnn["kernel_calls"],
                                    "" if not xnn["kernel_calls"] else " (%s)" % ", ".join(
                                        "%s x%d" % kv for kv in xnn["kernel_ops"].items())))
        if not st["ok"]:
            log("[models] %s: ERROR (%s): %s" % (name, st.get("stage"), st["error"]))
        elif "etch-xnn" in engines and not xnn.get("ok"):
            log("[models] %s: etch-xnn ERROR (%s): %s" % (name, xnn.get("stage"),
                                                          xnn.get("error")))
        out[name] = st
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset of: %s" % ", ".join(MODELS))
    ap.add_argument("--force", action="store_true", help="export again even if cached")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="engines whose output to check (default: %s)" % ",".join(ENGINES))
    ap.add_argument("--kernels", choices=("optimized", "portable"), default=None,
                    help="etch run --kernels for the check, where etch run has the flag")
    ap.add_argument("--etch", type=Path, default=default_etch(),
                    help="the etch CLI (default $ETCH_BIN or <repo>/build/etch)")
    args = ap.parse_args(argv)
    selected = [m for m in args.models.split(",") if m]
    bad = [m for m in selected if m not in MODELS]
    if bad:
        ap.error("unknown model(s) %s; choose from %s" % (", ".join(bad), ", ".join(MODELS)))
    if not args.etch.exists():
        ap.error("etch CLI not found at %s (build it, or pass --etch / set ETCH_BIN)"
                 % args.etch)
    engines = [e for e in args.engines.split(",") if e]
    if not engines or any(e not in ENGINES for e in engines):
        ap.error("--engines: a comma-separated subset of %s" % ",".join(ENGINES))
    st = prepare(selected, args.etch, force=args.force, kernels=args.kernels, threads=(1, 2),
                 engines=engines)
    return 0 if all(s["ok"] and ("etch-xnn" not in engines or s["xnn"].get("ok"))
                    for s in st.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
