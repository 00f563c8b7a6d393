"""Side-by-side model latency on an AVX-512 machine (bench/avx512/run.sh calls this).

For each model of the payload (PAYLOAD/models/NAME.pte, with NAME.onnx when ONNX Runtime's side
is wanted): first a check that every engine's output on the saved input agrees with PyTorch
eager's (NAME.ref.npy, saved by bench/cpu/models.py) within bench/cpu's tolerance; then
rounds in which every (threads, engine) pair runs once as its own process, the order rotated
each round so that all of them see the same stretch of machine noise. Engines: etch under
each instruction set asked for (`etch bench --json` with ETCH_ISA set) and ONNX Runtime
(ort_time.py). Reports the median of the pooled per-run times, etch's AVX-512/AVX2 ratio,
etch/ONNX Runtime, and each engine's speedup over its own 1-thread time.

    python3 compare.py PAYLOAD OUT_PREFIX [--isas avx512,avx2] [--threads 1,2,4]
                       [--rounds R] [--target-s S]
writes OUT_PREFIX.json and OUT_PREFIX.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-4  # bench/cpu/models.py's: max |engine - eager| before a model is timed


def run_json(cmd, env=None, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(map(str, cmd[:3])), r.returncode,
                                                 (r.stderr or r.stdout).strip()[-400:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


class Engines:
    def __init__(self, payload: Path, isas, py: str):
        self.etch = payload / "bin" / "etch"
        self.isas = isas
        self.py = py

    def names(self, has_onnx: bool):
        return ["etch-" + i for i in self.isas] + (["ort"] if has_onnx else [])

    def cmd(self, engine, pte, onnx, inp, threads, warmup, iters):
        if engine == "ort":
            return [self.py, str(HERE / "ort_time.py"), str(onnx), str(inp), "--threads",
                    str(threads), "--warmup", str(warmup), "--iterations", str(iters)], None
        env = dict(os.environ, ETCH_ISA=engine[len("etch-"):])
        return [str(self.etch), "bench", str(pte), "--inputs", str(inp), "--cpu-threads",
                str(threads), "--warmup", str(warmup), "--iterations", str(iters),
                "--json"], env

    def check(self, engine, pte, onnx, inp, ref, tmp: Path):
        """max |output - eager| on the saved input."""
        tmp.mkdir(parents=True, exist_ok=True)
        if engine == "ort":
            out = tmp / "ort.npy"
            run_json([self.py, str(HERE / "ort_time.py"), str(onnx), str(inp), "--warmup",
                      "0", "--iterations", "1", "--output", str(out)])
        else:
            d = tmp / engine
            env = dict(os.environ, ETCH_ISA=engine[len("etch-"):])
            r = subprocess.run([str(self.etch), "run", str(pte), "--inputs", str(inp),
                                "--output-dir", str(d)], capture_output=True, text=True,
                               env=env, timeout=300)
            if r.returncode != 0:
                raise RuntimeError("etch run exited %d: %s" % (r.returncode, r.stderr[-400:]))
            out = d / "output_0.npy"
        got, want = np.load(out), np.load(ref)
        if got.shape != want.shape:
            raise RuntimeError("output shape %s, eager's %s" % (got.shape, want.shape))
        return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("payload", type=Path)
    ap.add_argument("out_prefix")
    ap.add_argument("--isas", default="avx512,avx2")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target-s", type=float, default=0.8)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if a.rounds < 1 or a.target_s <= 0 or not threads or min(threads) < 1:
        ap.error("--rounds, --target-s and every --threads value must be positive")
    eng = Engines(a.payload, [i for i in a.isas.split(",") if i], a.python)
    results = {"commit": (a.payload / "commit").read_text().strip()
               if (a.payload / "commit").exists() else None,
               "rounds": a.rounds, "target_s": a.target_s, "tolerance": TOLERANCE,
               "models": {}}
    for pte in sorted((a.payload / "models").glob("*.pte")):
        name = pte.stem
        onnx, inp = pte.with_suffix(".onnx"), pte.with_name(name + ".input.npy")
        ref = pte.with_name(name + ".ref.npy")
        engines = eng.names(onnx.exists())
        res = {"engines": engines, "check": {}, "errors": {}, "times": {}, "plan": {}}
        results["models"][name] = res
        for e in engines:
            try:
                d = eng.check(e, pte, onnx, inp, ref, Path(a.out_prefix + ".tmp") / name)
                res["check"][e] = d
                if d > TOLERANCE:
                    res["errors"][e] = "max |output - eager| %.3g over %.0e" % (d, TOLERANCE)
            except Exception as err:  # a failing engine becomes an error row, the rest run
                res["errors"][e] = "check: %s" % err
        live = [e for e in engines if e not in res["errors"]]
        for th in threads:
            for e in live:
                try:
                    c, env = eng.cmd(e, pte, onnx, inp, th, 1, 3)
                    per = max(run_json(c, env)["median_ms"], 1e-3) / 1e3
                    it = int(max(10, min(2000, round(a.target_s / per))))
                    res["plan"]["%s/%d" % (e, th)] = (max(1, it // 10), it)
                except Exception as err:
                    res["errors"]["%s/%d" % (e, th)] = "calibration: %s" % err
        combos = [(th, e) for th in threads for e in live
                  if "%s/%d" % (e, th) in res["plan"]]
        for r in range(a.rounds):
            k = r % max(1, len(combos))
            for th, e in combos[k:] + combos[:k]:
                key = "%s/%d" % (e, th)
                if key in res["errors"]:
                    continue
                try:
                    c, env = eng.cmd(e, pte, onnx, inp, th, *res["plan"][key])
                    res["times"].setdefault(key, []).extend(run_json(c, env)["times_ms"])
                except Exception as err:
                    res["errors"][key] = "round %d: %s" % (r + 1, err)
            print("  %s round %d/%d done" % (name, r + 1, a.rounds), flush=True)
        res["median_ms"] = {k: statistics.median(v) for k, v in res["times"].items()
                            if k not in res["errors"]}
    Path(a.out_prefix + ".json").write_text(json.dumps(results, indent=1))
    Path(a.out_prefix + ".md").write_text(report(results, eng.isas, threads))
    print(report(results, eng.isas, threads))
    return 0


def report(results, isas, threads) -> str:
    L = ["Median of the pooled per-run times (ms), %d rounds; each (engine, threads) its own "
         "process per round, the order rotated each round." % results["rounds"], ""]
    for name, res in results["models"].items():
        med = res.get("median_ms", {})
        L.append("### %s" % name)
        L.append("")
        L.append("Max |output - PyTorch eager| on the saved input: " + ", ".join(
            "%s %.2e" % (e, d) for e, d in res["check"].items()))
        L.append("")
        cols = res["engines"]
        hdr = ["threads"] + ["%s ms" % e for e in cols]
        if len(isas) >= 2:
            hdr.append("%s / %s" % (isas[0], isas[1]))
        if "ort" in cols:
            hdr.append("etch-%s / ort" % isas[0])
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        for th in threads:
            g = {e: med.get("%s/%d" % (e, th)) for e in cols}
            row = [str(th)] + ["%.3f" % g[e] if g[e] else "-" for e in cols]
            a0 = g.get("etch-" + isas[0])
            a1 = g.get("etch-" + isas[1]) if len(isas) > 1 else None
            if len(isas) >= 2:
                row.append("%.3f" % (a0 / a1) if a0 and a1 else "-")
            if "ort" in cols:
                row.append("%.3f" % (a0 / g["ort"]) if a0 and g["ort"] else "-")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
        sp = []
        for e in cols:
            base = med.get("%s/%d" % (e, threads[0]))
            if base:
                sp.append("%s " % e + ", ".join(
                    "%dt %.2fx" % (th, base / med["%s/%d" % (e, th)]) for th in threads[1:]
                    if med.get("%s/%d" % (e, th))))
        L.append("Speedup over %d thread(s): %s" % (threads[0], "; ".join(sp)))
        for k, v in res["errors"].items():
            L.append("")
            L.append("ERROR %s: %s" % (k, v))
        L.append("")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
