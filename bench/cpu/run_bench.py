"""etch (CPU path and XNNPACK-delegated) vs ONNX Runtime vs PyTorch eager on the CPU, side by
side, in one go.

For each model (models.py), the four engines run at every thread count in alternating rounds,
each run in a fresh process and the order of the (thread count, engine) runs rotated every
round, so that machine noise falls on all engines and thread counts alike:

  etch      `etch bench FILE --inputs X.npy --cpu-threads N --kernels K --warmup W
            --iterations I --json`
  etch-xnn  the same command on FILE.xnn.pte, the export with backend="xnnpack": its delegate
            calls run in etch's own XnnpackBackend, the kernel calls left on etch's kernels
  ORT       `node ort_bench.mjs` (onnxruntime-node, intraOpNumThreads N, interOpNumThreads 1,
            graph optimization 'all', sequential execution)
  PyTorch   `py_bench.py --engine torch` (torch.set_num_threads(N), inference_mode)

A calibration run per engine (discarded) sizes each engine's iterations so one round takes
about --target-s seconds (between --min-iterations and the model's cap in models.py).  The
reported latency is the median of the per-iteration times pooled over the rounds; where an
engine reports only a per-round median (etch bench without per-iteration times), the row uses
the median of the per-round medians for all engines (results.json says which).
--engines picks a subset (default all four).

Writes results.json and RESULTS.md (default: next to this script; with --quick: .work/quick/).

    /usr/bin/python3 bench/cpu/run_bench.py [--quick] [--models a,b] [--threads 1,2]
                                            [--engines etch,etch-xnn,ort,torch]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402

ENGINES = models.ENGINES              # ("etch", "etch-xnn", "ort", "torch")
OLD_ENGINES = ("etch", "ort", "torch")  # what a results.json without config.engines measured
LABEL = {"etch": "etch", "etch-xnn": "etch-xnn", "ort": "ONNX Runtime", "torch": "PyTorch"}
SHORT = {"etch": "etch", "etch-xnn": "etch-xnn", "ort": "ORT", "torch": "PyTorch"}
ETCH_CLI = ("etch", "etch-xnn")           # timed by `etch bench`, report isa / ops
SPEEDUP_TARGET = {"resnet18": 1.7, "mobilenet_v2": 1.7}


class EngineError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------------------------- engines

# Linux carries a process's peak-RSS mark (getrusage ru_maxrss) across fork and exec, so a
# child started directly from this (torch-sized) process would report our peak as its own.
# A small shell in between forks the engine from its own small image: "$@"; exit $? keeps the
# shell from exec'ing the command in place.
_SPAWN = ["/bin/sh", "-c", '"$@"; exit $?', "sh"]


def _run_json(cmd: List[str], env: Optional[dict] = None, timeout: float = 900) -> dict:
    try:
        p = subprocess.Popen(_SPAWN + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
    except OSError as e:
        raise EngineError("cannot run %s: %s" % (cmd[0], e))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise EngineError("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    if p.returncode != 0:
        msg = " ".join((err.strip() or out.strip()).split())[-400:]
        raise EngineError("exit %d: %s" % (p.returncode, msg or "(no output)"))
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("{")]
    text = out.strip() if out.strip().startswith("{") else (lines[-1] if lines else "")
    try:
        obj = json.loads(text)
    except ValueError:
        raise EngineError("no JSON object in the output of %s: %r" % (" ".join(cmd[:3]),
                                                                       out[-300:]))
    if not isinstance(obj, dict) or "median_ms" not in obj:
        raise EngineError("unexpected JSON from %s: %r" % (cmd[0], text[:300]))
    return obj


class Runner:
    def __init__(self, args):
        self.args = args
        self.py = sys.executable or "/usr/bin/python3"

    def run(self, engine: str, name: str, threads: int, warmup: int, iterations: int) -> dict:
        p = models.paths(name)
        a = self.args
        env = dict(os.environ)
        if engine in ETCH_CLI and a.etch_runner == "cli":
            pte = p["xnn" if engine == "etch-xnn" else "pte"]
            cmd = [str(a.etch), "bench", str(pte), "--inputs", str(p["input"]),
                   "--cpu-threads", str(threads), "--kernels", a.kernels,
                   "--warmup", str(warmup), "--iterations", str(iterations), "--json"]
        elif engine in ETCH_CLI:
            env["ETCH_LIB"] = str(a.etch.resolve().parent / "libetch.so")
            cmd = [self.py, str(HERE / "py_bench.py"), "--engine", "etch-binding", "--model",
                   name, "--threads", str(threads), "--warmup", str(warmup), "--iterations",
                   str(iterations)] + (["--delegated"] if engine == "etch-xnn" else [])
        elif engine == "ort":
            cmd = [a.node, str(HERE / "ort_bench.mjs"), "--model", str(p["onnx"]), "--input",
                   str(p["input"]), "--threads", str(threads), "--warmup", str(warmup),
                   "--iterations", str(iterations)]
        else:
            env["OMP_NUM_THREADS"] = str(threads)
            env["PYTHONWARNINGS"] = "ignore"
            cmd = [self.py, str(HERE / "py_bench.py"), "--engine", "torch", "--model", name,
                   "--threads", str(threads), "--warmup", str(warmup), "--iterations",
                   str(iterations)]
        t0 = time.time()
        obj = _run_json(cmd, env=env, timeout=a.timeout)
        obj["wall_s"] = time.time() - t0
        return obj


# ---------------------------------------------------------------------------- measurement

def _busy_processes() -> int:
    """Compiler/linker processes running now (a hint that the machine was shared)."""
    n = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
        except OSError:
            continue
        if comm in ("cc1", "cc1plus", "ld", "collect2", "as", "clang", "clang-14", "ld.lld"):
            n += 1
    return n


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def measure_model(runner: Runner, name: str, threads: List[int], rounds: int, target_s: float,
                  min_iter: int, warm_frac: float, calibrate: bool = True,
                  engines=ENGINES, skip: Optional[Dict[str, str]] = None) -> List[dict]:
    """One row per thread count. The thread counts are interleaved: every round runs each
    engine at each thread count (the order rotated each round), so that the 1- and 2-thread
    figures see the same stretch of machine noise and their ratio is not a comparison of two
    different minutes. skip: {engine: why} for engines not to run on this model (an error of
    that engine in every row)."""
    spec = models.MODELS[name]
    skip = skip or {}
    rows = {th: {"model": name, "threads": th, "engines": {}, "errors": dict(skip), "notes": []}
            for th in threads}
    run_engines = [e for e in engines if e not in skip]
    plans = {th: {} for th in threads}
    for th in threads:
        row, plan = rows[th], plans[th]
        if not calibrate:       # --quick: a fixed small plan, no calibration processes
            it = max(min_iter, spec.iterations // 10)
            plan.update({e: (max(1, spec.warmup // 3), it) for e in run_engines})
        # calibration: one warm-up + one timed run per engine (discarded) sizes the rounds
        for e in (run_engines if calibrate else ()):
            try:
                c = runner.run(e, name, th, 1, 1)
                per = max(c["median_ms"], 1e-3) / 1e3
                it = int(max(min_iter, min(spec.iterations, round(target_s / per))))
                wu = int(max(1, min(spec.warmup, round(it * warm_frac))))
                plan[e] = (wu, it)
            except EngineError as err:
                row["errors"][e] = str(err)
                log("    %s, %d thread(s): calibration failed: %s" % (LABEL[e], th, err))
        row["plan"] = {e: {"warmup": w, "iterations": i} for e, (w, i) in plan.items()}
    per_round = {th: {e: [] for e in plans[th]} for th in threads}
    busy = []
    combos = [(th, e) for th in threads for e in run_engines]
    for r in range(rounds if combos else 0):
        k = r % len(combos)
        order = combos[k:] + combos[:k]
        for th, e in order:
            row = rows[th]
            if e not in plans[th] or e in row["errors"]:
                continue
            busy.append(_busy_processes())
            try:
                per_round[th][e].append(runner.run(e, name, th, *plans[th][e]))
            except EngineError as err:
                row["errors"][e] = "round %d: %s" % (r + 1, err)
                log("    %s, %d thread(s) failed: %s" % (LABEL[e], th, err))
        log("    round %d/%d: %s" % (r + 1, rounds, "  ".join(
            "%s/%dt %s ms" % (e, th, _fmt_ms(per_round[th][e][-1]["median_ms"]))
            for th in threads for e in run_engines
            if per_round[th].get(e) and len(per_round[th][e]) == r + 1)))
    out = []
    for th in threads:
        row = rows[th]
        row["busy_compilers_max"] = max(busy) if busy else 0
        pooled = all("times_ms" in res for e in per_round[th] if e not in row["errors"]
                     for res in per_round[th][e])
        row["stat"] = "median of pooled per-iteration times" if pooled else \
            "median of per-round medians"
        for e, results in per_round[th].items():
            if e in row["errors"] or not results:
                continue
            meds = [res["median_ms"] for res in results]
            samples = [t for res in results for t in res.get("times_ms", [])]
            info = {
                "median_ms": statistics.median(samples) if pooled else statistics.median(meds),
                "round_medians_ms": meds,
                "min_ms": min(res["min_ms"] for res in results),
                "max_ms": max(res["max_ms"] for res in results),
                "samples": len(samples) if pooled else len(meds),
                "load_ms": statistics.median(res.get("load_ms", float("nan"))
                                             for res in results),
                "peak_rss_kb": max(res.get("peak_rss_kb", 0) or 0 for res in results) or None,
            }
            if pooled and len(samples) >= 2:
                q = statistics.quantiles(samples, n=4)
                info["iqr_ms"] = [q[0], q[2]]
            if e in ETCH_CLI:
                last = results[-1]
                for key in ("isa", "kernels", "threads", "method"):
                    if key in last:
                        info[key] = last[key]
                info["ops"] = _merge_ops([res.get("ops") or [] for res in results])
            if e == "ort":
                info["version"] = results[-1].get("ort_version")
            if e == "torch":
                info["version"] = results[-1].get("torch_version")
            row["engines"][e] = info
        out.append(row)
    return out


def _merge_ops(runs: List[list]) -> list:
    """Average each operator's ms_per_run over the rounds; keyed by (op, impl, fused)."""
    acc: Dict[tuple, dict] = {}
    for ops in runs:
        for o in ops:
            if not isinstance(o, dict) or "op" not in o:
                continue
            # "/8c": the call reads or writes channel-blocked tensors; "/chainN": it runs N
            # calls as one (etch's chained calls), "/chained": one of those (its time is there)
            impl = (o.get("impl") or "") + ("/8c" if o.get("blocked") else "")
            chained = o.get("chained_calls", 1)
            if chained != 1:
                impl += "/chain%d" % chained if chained else "/chained"
            key = (o.get("op"), impl, str(o.get("fused")))
            a = acc.setdefault(key, {"op": o.get("op"), "impl": impl,
                                     "fused": o.get("fused"), "calls": o.get("calls"),
                                     "ms": [], "pct": []})
            a["ms"].append(float(o.get("ms_per_run", 0.0)))
            a["pct"].append(float(o.get("pct", 0.0)))
    out = []
    for a in acc.values():
        out.append({"op": a["op"], "impl": a["impl"], "fused": a["fused"], "calls": a["calls"],
                    "ms_per_run": statistics.mean(a["ms"]), "pct": statistics.mean(a["pct"])})
    out.sort(key=lambda o: -o["ms_per_run"])
    return out


# ------------------------------------------------------------------------------- machine

def machine_info(args) -> dict:
    info = {"date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "platform": platform.platform(), "cpu": None, "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("flags")), "")
        info["cpu_simd"] = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512bf16")
                            if (" %s " % f) in (flags + " ")]
    except OSError:
        pass

    def git(*a):
        try:
            return subprocess.run(["git", "-C", str(models.REPO)] + list(a), capture_output=True,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    info["etch_commit"] = git("rev-parse", "--short", "HEAD") or None
    dirty = git("status", "--porcelain", "--", "src", "include",
                "tools", "CMakeLists.txt", "cmake")
    info["etch_tree_dirty"] = bool(dirty)
    info["etch_binary"] = str(args.etch)
    info["etch_runner"] = args.etch_runner
    try:
        v = subprocess.run([str(args.etch), "--version"], capture_output=True, text=True,
                           timeout=30)
        info["etch_version"] = v.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        info["etch_version"] = None
    try:
        v = subprocess.run([args.node, "--version"], capture_output=True, text=True, timeout=30)
        info["node_version"] = v.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        info["node_version"] = None
    import torch
    info["torch_version"] = torch.__version__
    info["python"] = platform.python_version()
    info["loadavg_start"] = _loadavg()
    return info


# ------------------------------------------------------------------------------- reports

def _fmt_ms(v: Optional[float]) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return "%.1f" % v
    if v >= 1:
        return "%.2f" % v
    return "%.4f" % v


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def _ms(row: dict, e: str) -> Optional[float]:
    return row["engines"].get(e, {}).get("median_ms")


def _paired_speedup(one: dict, row: dict, e: str) -> Optional[float]:
    """The median over rounds of (1-thread round median / this row's round median): each
    round's two runs are minutes apart at most, so drifting machine load cancels."""
    a = one["engines"].get(e, {}).get("round_medians_ms") or []
    b = row["engines"].get(e, {}).get("round_medians_ms") or []
    ratios = [x / y for x, y in zip(a, b) if x and y]
    return statistics.median(ratios) if ratios else None


def _key(e: str) -> str:
    """An engine's prefix in the table's fields: etch_ms, etch_xnn_ms, ort_ms, torch_ms."""
    return e.replace("-", "_")


SPEEDUP_ENGINES = ("etch", "etch-xnn", "ort")


def summarize(rows: List[dict]) -> List[dict]:
    """Table rows: ratios (etch/ORT, etch/PyTorch, etch-xnn/etch, etch-xnn/ORT) and the 1→2
    thread speedups; None where an engine was not measured."""
    by = {(r["model"], r["threads"]): r for r in rows}
    table = []
    for r in rows:
        t = {"model": r["model"], "threads": r["threads"]}
        for e in ENGINES:
            t[_key(e) + "_ms"] = _ms(r, e)
        t["etch_over_ort"] = _ratio(t["etch_ms"], t["ort_ms"])
        t["etch_over_torch"] = _ratio(t["etch_ms"], t["torch_ms"])
        t["etch_xnn_over_etch"] = _ratio(t["etch_xnn_ms"], t["etch_ms"])
        t["etch_xnn_over_ort"] = _ratio(t["etch_xnn_ms"], t["ort_ms"])
        one = by.get((r["model"], 1))
        for e in SPEEDUP_ENGINES:
            k = _key(e)
            if r["threads"] != 1 and one is not None:
                t[k + "_speedup_vs_1t"] = _ratio(_ms(one, e), t[k + "_ms"])
                t[k + "_speedup_paired"] = _paired_speedup(one, r, e)
            else:
                t[k + "_speedup_vs_1t"] = t[k + "_speedup_paired"] = None
        t["errors"] = r.get("errors", {})
        table.append(t)
    return table


def _speedup(pooled: Optional[float], paired: Optional[float]) -> str:
    if not pooled:
        return "—"
    return "%.2fx" % pooled + (" (%.2fx)" % paired if paired else "")


def _engines_of(res: dict) -> List[str]:
    """The engines a results.json measured (one from before --engines: etch, ORT, PyTorch)."""
    return [e for e in ENGINES if e in (res.get("config", {}).get("engines") or OLD_ENGINES)]


def _delegation(st: dict) -> str:
    """'1 call, 67 nodes; 0 kernel calls' or the kernel calls left, for the correctness table."""
    x = st.get("xnn") or {}
    if x.get("delegate_calls") is None:
        return "—"
    s = "%d call%s, %d nodes; %d kernel call%s" % (
        x["delegate_calls"], "" if x["delegate_calls"] == 1 else "s", x["delegated_nodes"],
        x["kernel_calls"], "" if x["kernel_calls"] == 1 else "s")
    if x["kernel_calls"]:
        s += " (%s)" % ", ".join("`%s` x%d" % (op.replace("aten::", ""), n)
                                  for op, n in (x.get("kernel_ops") or {}).items())
    return s


def write_markdown(path: Path, res: dict) -> None:
    m = res["machine"]
    cfg = res["config"]
    engines = _engines_of(res)
    has = set(engines)
    xnn = "etch-xnn" in has
    L = []
    L.append("# CPU benchmark: %s" % " vs ".join(
        {"etch": "etch", "etch-xnn": "etch XNNPACK-delegated", "ort": "ONNX Runtime",
         "torch": "PyTorch eager"}[e] for e in engines))
    L.append("")
    L.append("Generated by `bench/cpu/run_bench.py`%s on %s. Batch 1, float32. How to rerun: "
             "`bench/cpu/README.md`." % (" --quick" if cfg["quick"] else "", m["date_utc"]))
    L.append("")
    L.append("Machine: %s, %s logical CPUs (%s); %s. %s at commit `%s`%s, runner `%s`, "
             "kernels `%s`, ISA `%s`. ONNX Runtime %s (onnxruntime-node, Node %s). PyTorch %s "
             "(Debian)." % (
                 m.get("cpu"), m.get("cpus"), ", ".join(m.get("cpu_simd") or []) or "no AVX2",
                 m.get("platform"), m.get("etch_version") or "etch", m.get("etch_commit"),
                 " plus uncommitted changes in the working tree" if m.get("etch_tree_dirty")
                 else "", cfg["etch_runner"], cfg["kernels"], res.get("isa") or "?",
                 res.get("ort_version") or "?", m.get("node_version"), m.get("torch_version")))
    L.append("")
    if xnn:
        L.append("Engines: **etch** runs the plain export (every node a kernel call: etch's CPU "
                 "path); **etch-xnn** runs the same module exported with `etch.export(model, "
                 "inputs, backend=\"xnnpack\")`, timed by the same `etch bench` command: its "
                 "delegate calls run in etch's own `XnnpackBackend`, the kernel calls the "
                 "lowering leaves (see the correctness table) on etch's `%s` kernels. "
                 "**etch-xnn/etch** <= 1.0: the delegated path is no slower than the CPU path."
                 % cfg["kernels"])
        L.append("")
    L.append("Method: per model, %d rounds; in each round every engine runs at every thread "
             "count in its own fresh process (its own warm-up, then timed iterations), the order "
             "of these runs rotated each round, so the thread counts are interleaved in time. "
             "%s Latency = %s. Speedup = 1-thread latency / 2-thread latency; in brackets the "
             "paired figure: the median over rounds of the ratio of the round's two medians." % (
                 cfg["rounds"], "Iterations: a fixed small plan (--quick)." if cfg["quick"] else
                 "Iterations per engine were sized by a discarded calibration run to about "
                 "%.1f s per round (see results.json `plan`)." % cfg["target_s"],
                 res.get("stat", "median")))
    L.append("")
    note = res.get("noise_note")
    if note:
        L.append("**Noise:** " + note)
        L.append("")
    la = max(m.get("loadavg_start", 0) or 0, m.get("loadavg_end", 0) or 0)
    if m.get("cpus") and la > m["cpus"]:
        L.append("**Caveat:** the load average (%.1f) exceeded the %d CPUs: the engines "
                 "competed with other work for the cores, so a second thread rarely found a "
                 "free core. The 2-thread rows and the 1t/2t speedups mostly measure that "
                 "contention (see the spread below, and compare ORT's own 1t/2t speedup); "
                 "PyTorch's OpenMP workers spin at barriers and suffer most. The 1-thread rows "
                 "are the more meaningful ones, and even they vary between rounds."
                 % (la, m["cpus"]))
        L.append("")

    def r2(v):
        return "—" if v is None else "%.2f" % v
    # (header, cell function) per column after model and threads
    cols = [("%s ms" % SHORT[e], (lambda t, e=e: _fmt_ms(t.get(_key(e) + "_ms"))))
            for e in engines]
    for a, b, key in (("etch", "ort", "etch_over_ort"), ("etch", "torch", "etch_over_torch"),
                      ("etch-xnn", "etch", "etch_xnn_over_etch"),
                      ("etch-xnn", "ort", "etch_xnn_over_ort")):
        if a in has and b in has:
            cols.append(("%s/%s" % (SHORT[a], SHORT[b]), (lambda t, key=key: r2(t.get(key)))))
    for e in SPEEDUP_ENGINES:
        if e in has:
            k = _key(e)
            cols.append(("%s 1t/2t speedup" % SHORT[e], (lambda t, k=k: _speedup(
                t.get(k + "_speedup_vs_1t"), t.get(k + "_speedup_paired")))))
    L.append("| model | threads | %s |" % " | ".join(h for h, _ in cols))
    L.append("|---|---:|%s" % ("---:|" * len(cols)))
    for t in res["table"]:
        L.append("| %s | %d | %s |" % (t["model"], t["threads"],
                                       " | ".join(f(t) for _, f in cols)))
    for name, st in res["models"].items():
        if not st.get("ok"):
            for th in cfg["threads"]:
                L.append("| %s | %d | **ERROR** (%s) |%s" % (
                    name, th, st.get("stage"), " |" * (len(cols) - 1)))
    L.append("")
    errs = [(t["model"], t["threads"], e, msg) for t in res["table"]
            for e, msg in t["errors"].items()]
    bad_models = [(n, st) for n, st in res["models"].items() if not st.get("ok")]
    if errs or bad_models:
        L.append("## Errors")
        L.append("")
        for n, st in bad_models:
            L.append("- **%s** (%s): %s" % (n, st.get("stage"), st.get("error")))
        for model, th, e, msg in errs:
            L.append("- **%s**, %d thread(s), %s: %s" % (model, th, LABEL[e], msg))
        L.append("")
    L.append("Spread: the lowest and highest per-round median of each engine (ms), a measure "
             "of the noise:")
    L.append("")
    L.append("| model | threads | %s |" % " | ".join(SHORT[e] for e in engines))
    L.append("|---|---:|%s" % ("---:|" * len(engines)))
    for r in res["rows"]:
        def spread(e):
            m = r["engines"].get(e, {}).get("round_medians_ms")
            return "—" if not m else "%s – %s" % (_fmt_ms(min(m)), _fmt_ms(max(m)))
        L.append("| %s | %d | %s |" % (r["model"], r["threads"],
                                       " | ".join(spread(e) for e in engines)))
    L.append("")
    L.append("## Targets")
    L.append("")
    for a, b, key in (("etch", "ort", "etch_over_ort"), ("etch-xnn", "etch", "etch_xnn_over_etch"),
                      ("etch-xnn", "ort", "etch_xnn_over_ort")):
        if a not in has or b not in has:
            continue
        for t in res["table"]:
            v = t.get(key)
            L.append("- %s, %d thread(s): %s/%s %s — %s" % (
                t["model"], t["threads"], SHORT[a], SHORT[b], "n/a" if v is None else "%.2f" % v,
                "n/a" if v is None else ("met (<= 1.0)" if v <= 1.0 else "**not met** (> 1.0)")))
    for t in res["table"]:
        need = SPEEDUP_TARGET.get(t["model"])
        if need and t["threads"] == 2 and "etch" in has:
            s = t["etch_speedup_vs_1t"]
            L.append("- %s: etch 2 threads vs 1: %s — %s" % (
                t["model"], "n/a" if s is None else _speedup(s, t.get("etch_speedup_paired")),
                "n/a" if s is None else ("met (>= %.1fx)" % need if s >= need
                                         else "**not met** (< %.1fx)" % need)))
    L.append("")
    L.append("## Correctness (before timing)")
    L.append("")
    L.append("Max abs difference from PyTorch eager on the benchmark input (tolerance %g):"
             % cfg["tolerance"])
    L.append("")
    if xnn:
        L.append("| model | input | etch | etch-xnn | etch run with | ONNX Runtime | "
                 "max abs eager output | etch-xnn: delegate calls, nodes in them; kernel calls "
                 "left |")
        L.append("|---|---|---:|---:|---|---:|---:|---|")
    else:
        L.append("| model | input | etch | etch run with | ONNX Runtime | max abs eager output |")
        L.append("|---|---|---:|---|---:|---:|")
    for name, st in res["models"].items():
        def d(v):
            return "—" if v is None else "%.2g" % v
        how = "%s kernels, %s thread(s)" % (
            st.get("etch_kernels_checked", "default"),
            "+".join(str(t) for t in st.get("etch_threads_checked") or [1]))
        shape = "x".join(str(s) for s in models.MODELS[name].shape) \
            if name in models.MODELS else "?"
        if xnn:
            x = st.get("xnn") or {}
            xd = d(x.get("max_abs_diff"))
            if x.get("ok") is False:
                xd = "**%s** (%s)" % ("failed" if x.get("max_abs_diff") is None else xd,
                                      x.get("stage"))
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, shape, d(st.get("etch_max_abs_diff")), xd, how,
                d(st.get("ort_max_abs_diff")), d(st.get("ref_max_abs")), _delegation(st)))
        else:
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                name, shape, d(st.get("etch_max_abs_diff")), how, d(st.get("ort_max_abs_diff")),
                d(st.get("ref_max_abs"))))
    L.append("")
    L.append("## Where etch spends its time (top 5 operators, `etch bench --json` ops)")
    L.append("")
    L.append("impl: `/8c` reads or writes channel-blocked tensors; `/chainN` runs N calls as one "
             "(a 1x1 -> depthwise -> 1x1 block, or depthwise -> 1x1), whose time it holds."
             + (" For etch-xnn, `XnnpackBackend` / `delegate` is one delegate call (its calls: "
                "how many the method makes)." if xnn else ""))
    L.append("")
    any_ops = False
    for name in res["models"]:
        rows = {r["threads"]: r for r in res["rows"] if r["model"] == name}
        if not rows:
            continue
        th1 = min(rows)
        for e in ETCH_CLI:
            if e not in has:
                continue
            ops = rows[th1].get("engines", {}).get(e, {}).get("ops") or []
            if not ops:
                continue
            any_ops = True
            others = {th: {(o["op"], o["impl"], str(o["fused"])): o
                           for o in rows[th]["engines"].get(e, {}).get("ops") or []}
                      for th in rows if th != th1}
            L.append("### %s" % (name if e == "etch" else "%s, %s" % (name, e)))
            L.append("")
            hdr = "| op | impl | fused | calls | ms/run %dt | %% %dt |" % (th1, th1)
            sep = "|---|---|---|---:|---:|---:|"
            for th in sorted(others):
                hdr += " ms/run %dt |" % th
                sep += "---:|"
            L.append(hdr)
            L.append(sep)
            for o in ops[:5]:
                line = "| %s | %s | %s | %s | %s | %.1f |" % (
                    o["op"], o.get("impl") or "", o.get("fused") or "", o.get("calls") or "",
                    _fmt_ms(o["ms_per_run"]), o["pct"])
                for th in sorted(others):
                    oo = others[th].get((o["op"], o["impl"], str(o["fused"])))
                    line += " %s |" % (_fmt_ms(oo["ms_per_run"]) if oo else "—")
                L.append(line)
            L.append("")
    if not any_ops:
        L.append("(no operator profile: the etch runner did not report ops)")
        L.append("")
    L.append("## Peak resident memory (MB, per process, largest over the rounds)")
    L.append("")
    L.append("| model | threads | %s |" % " | ".join(
        {"ort": "ORT (Node)", "torch": "PyTorch (Python)"}.get(e, e) for e in engines))
    L.append("|---|---:|%s" % ("---:|" * len(engines)))
    for r in res["rows"]:
        def mb(e):
            v = r["engines"].get(e, {}).get("peak_rss_kb")
            return "—" if not v else "%.1f" % (v / 1024)
        L.append("| %s | %d | %s |" % (r["model"], r["threads"],
                                       " | ".join(mb(e) for e in engines)))
    L.append("")
    L.append("The PyTorch and ORT figures include their interpreters (Python with torch "
             "imported, Node); etch's is the whole `etch` process.")
    L.append("")
    path.write_text("\n".join(L))


# ---------------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds of a fixed small plan (a tenth of each model's iteration cap), "
                         "no calibration; writes to .work/quick/ unless --out-dir is given "
                         "(a smoke test, not for the record)")
    ap.add_argument("--models", default=",".join(models.names()),
                    help="comma-separated subset of: %s" % ", ".join(models.names()))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (1,2)")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="comma-separated subset of: %s (default: all)" % ", ".join(ENGINES))
    ap.add_argument("--rounds", type=int, default=None, help="rounds per row (default 5)")
    ap.add_argument("--target-s", type=float, default=None,
                    help="seconds of timed iterations per engine and round (default 2)")
    ap.add_argument("--min-iterations", type=int, default=3,
                    help="at least this many timed iterations per engine and round")
    ap.add_argument("--kernels", choices=("optimized", "portable"), default="optimized",
                    help="etch kernels (etch bench --kernels)")
    ap.add_argument("--etch", type=Path, default=models.default_etch(),
                    help="the etch CLI (default $ETCH_BIN or <repo>/build/etch)")
    ap.add_argument("--etch-runner", choices=("cli", "binding"), default="cli",
                    help="time etch with `etch bench` (default) or, while that is missing, "
                         "through the Python binding")
    ap.add_argument("--node", default=os.environ.get("NODE", "node"), help="node executable")
    ap.add_argument("--out-dir", type=Path, default=None,
                    help="where results.json and RESULTS.md go (default bench/cpu/)")
    ap.add_argument("--force-export", action="store_true", help="re-export every model")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per engine process")
    ap.add_argument("--note", default=None,
                    help="a sentence for RESULTS.md about the conditions (e.g. a shared machine)")
    ap.add_argument("--render", type=Path, default=None, metavar="RESULTS_JSON",
                    help="only rewrite RESULTS.md (beside the file) from a results.json")
    args = ap.parse_args(argv)
    if args.render:
        try:
            res = json.loads(args.render.read_text())
            write_markdown(args.render.parent / "RESULTS.md", res)
        except (OSError, ValueError, KeyError) as e:
            ap.error("--render %s: %s" % (args.render, e))
        log("[bench] wrote %s" % (args.render.parent / "RESULTS.md"))
        return 0

    selected = [m for m in args.models.split(",") if m]
    bad = [m for m in selected if m not in models.MODELS]
    if bad or not selected:
        ap.error("unknown model(s) %s; choose from %s" % (", ".join(bad) or "(none)",
                                                           ", ".join(models.names())))
    engines = [e for e in ENGINES if e in args.engines.split(",")]
    bad = [e for e in args.engines.split(",") if e and e not in ENGINES]
    if bad or not engines:
        ap.error("--engines: unknown engine(s) %s; choose from %s" % (
            ", ".join(bad) or "(none)", ", ".join(ENGINES)))
    try:
        threads = sorted({int(t) for t in args.threads.split(",") if t})
    except ValueError:
        ap.error("--threads takes comma-separated integers, got %r" % args.threads)
    if not threads or any(t < 1 or t > 256 for t in threads):
        ap.error("--threads: each count must be in 1..256")
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    target = args.target_s if args.target_s is not None else (0.3 if args.quick else 2.0)
    if rounds < 1 or target <= 0 or args.min_iterations < 1 or args.timeout <= 0:
        ap.error("--rounds, --min-iterations must be >= 1; --target-s, --timeout > 0")
    if not args.etch.exists():
        ap.error("etch CLI not found at %s (build it: cmake --build build --target etch; or "
                 "pass --etch / set ETCH_BIN)" % args.etch)
    if "ort" in engines and shutil.which(args.node) is None and not Path(args.node).exists():
        ap.error("node not found (%s); install Node.js or pass --node" % args.node)
    if "ort" in engines and not (HERE / "node_modules" / "onnxruntime-node").exists():
        ap.error("onnxruntime-node is not installed: run `npm ci` in %s" % HERE)
    if args.etch_runner == "cli" and any(e in ETCH_CLI for e in engines):
        r = subprocess.run([str(args.etch), "help", "bench"], capture_output=True, text=True)
        if r.returncode != 0:
            ap.error("%s has no `bench` command (exit %d); rebuild etch, or use "
                     "--etch-runner binding" % (args.etch, r.returncode))
    out_dir = args.out_dir or (models.WORK / "quick" if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)

    t_start = time.time()
    machine = machine_info(args)
    log("[bench] %s, %s CPUs, etch %s, torch %s, node %s" % (
        machine["cpu"], machine["cpus"], machine["etch_commit"], machine["torch_version"],
        machine["node_version"]))
    status = models.prepare(selected, args.etch, force=args.force_export, node=args.node,
                            log=log, kernels=args.kernels, threads=threads, engines=engines)
    for st in status.values():
        st.pop("trace", None)
        (st.get("xnn") or {}).pop("trace", None)
    runner = Runner(args)
    rows = []
    for name in selected:
        if not status[name].get("ok"):
            continue
        skip = {}
        x = status[name].get("xnn") or {}
        if "etch-xnn" in engines and not x.get("ok"):
            skip["etch-xnn"] = "not timed: %s: %s" % (x.get("stage"), x.get("error"))
        log("[bench] %s, %s thread(s), interleaved" % (name, ",".join(map(str, threads))))
        rows.extend(measure_model(runner, name, threads, rounds, target, args.min_iterations,
                                  0.25, calibrate=not args.quick, engines=engines, skip=skip))
    machine["loadavg_end"] = _loadavg()
    table = summarize(rows)
    busy = max([r.get("busy_compilers_max", 0) for r in rows] or [0])
    noise = args.note or ""
    if busy:
        noise = (noise + " " if noise else "") + (
            "Compiler processes were running on this machine during the measurement (up to %d "
            "at once); load average %.1f at the start, %.1f at the end." % (
                busy, machine["loadavg_start"], machine["loadavg_end"]))
    stats = {r["stat"] for r in rows}
    etch_any = next((r["engines"][e] for e in ETCH_CLI for r in rows if e in r["engines"]), {})
    ort_any = next((r["engines"]["ort"] for r in rows if "ort" in r["engines"]), {})
    res = {
        "machine": machine,
        "config": {"quick": args.quick, "models": selected, "engines": engines,
                   "threads": threads,
                   "rounds": rounds, "target_s": target, "min_iterations": args.min_iterations,
                   "kernels": args.kernels, "etch_runner": args.etch_runner,
                   "tolerance": models.TOLERANCE, "onnx_opset": models.ONNX_OPSET},
        "isa": etch_any.get("isa"),
        "ort_version": ort_any.get("version"),
        "stat": " / ".join(sorted(stats)) if stats else None,
        "noise_note": noise or None,
        "models": status,
        "table": table,
        "rows": rows,
        "elapsed_s": round(time.time() - t_start, 1),
    }
    (out_dir / "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    write_markdown(out_dir / "RESULTS.md", res)
    log("[bench] wrote %s and %s (%.0f s)" % (out_dir / "results.json", out_dir / "RESULTS.md",
                                             res["elapsed_s"]))
    for t in table:
        log("  %-13s %dt  etch %s  etch-xnn %s  ORT %s  PyTorch %s  etch/ORT %s  "
            "etch-xnn/etch %s  etch-xnn/ORT %s" % (
                t["model"], t["threads"], _fmt_ms(t["etch_ms"]), _fmt_ms(t["etch_xnn_ms"]),
                _fmt_ms(t["ort_ms"]), _fmt_ms(t["torch_ms"]),
                *("—" if t[k] is None else "%.2f" % t[k]
                  for k in ("etch_over_ort", "etch_xnn_over_etch", "etch_xnn_over_ort"))))
    ok = all(st.get("ok") for st in status.values()) and not any(t["errors"] for t in table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
