"""Time one model in one process and print ONE JSON line (same keys as ort_bench.mjs):

    {"engine", "model", "threads", "warmup", "iterations", "load_ms", "times_ms": [...],
     "median_ms", "min_ms", "max_ms", ...}

Engines:
  torch   PyTorch eager: the model rebuilt by models.py (same seed, same weights as the
          exports), torch.set_num_threads(N), torch.inference_mode(), the saved input.
  etch-binding
          etch through the ctypes binding (python/etch/runtime.py) with num_threads = N: a
          stand-in used only while the `etch bench` command is missing (run_bench.py
          --etch-runner binding); each iteration includes setting the input and Python's
          call overhead, so it is slower than `etch bench` for small models. With
          --delegated it loads the XNNPACK-delegated export (<model>.xnn.pte) instead.

    /usr/bin/python3 bench/cpu/py_bench.py --engine torch --model resnet18 --threads 2 \
        --warmup 2 --iterations 8
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

import models


def _time(fn, warmup: int, iterations: int):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def bench_torch(name: str, threads: int, warmup: int, iterations: int) -> dict:
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model, _ = models.build(name)
    x = torch.from_numpy(np.load(models.paths(name)["input"]))
    load_ms = (time.perf_counter() - t0) * 1e3
    with torch.inference_mode():
        times = _time(lambda: model(x), warmup, iterations)
    return {"load_ms": load_ms, "times_ms": times, "torch_version": torch.__version__,
            "torch_threads": torch.get_num_threads()}


def bench_etch_binding(name: str, threads: int, warmup: int, iterations: int,
                       delegated: bool = False) -> dict:
    import numpy as np
    import torch
    from etch import runtime
    p = models.paths(name)
    t0 = time.perf_counter()
    mod = runtime.load(str(p["xnn" if delegated else "pte"]), num_threads=threads)
    x = torch.from_numpy(np.load(p["input"]))
    m = mod._method(None)
    lib = mod._lib
    load_ms = (time.perf_counter() - t0) * 1e3
    mod.run_method(None, x)              # sets the input once (copied into planned memory)

    def run():
        st = lib.etch_method_execute(m)
        if st != 0:
            raise RuntimeError("execute failed: status %d" % st)
    times = _time(run, warmup, iterations)
    return {"load_ms": load_ms, "times_ms": times}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="time one model with PyTorch eager (or the etch "
                                 "binding) and print one JSON line")
    ap.add_argument("--engine", choices=("torch", "etch-binding"), default="torch")
    ap.add_argument("--model", required=True, choices=models.names())
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--delegated", action="store_true",
                    help="etch-binding: the XNNPACK-delegated export (<model>.xnn.pte)")
    args = ap.parse_args(argv)
    if args.threads < 1 or args.warmup < 0 or args.iterations < 1:
        ap.error("--threads and --iterations must be >= 1, --warmup >= 0")
    if not models.paths(args.model)["input"].exists():
        ap.error("%s: no saved input; run models.py first" % args.model)
    if args.engine == "torch":
        res = bench_torch(args.model, args.threads, args.warmup, args.iterations)
    else:
        res = bench_etch_binding(args.model, args.threads, args.warmup, args.iterations,
                                 delegated=args.delegated)
    t = res["times_ms"]
    out = {"engine": args.engine + ("-delegated" if args.delegated else ""), "model": args.model, "threads": args.threads,
           "warmup": args.warmup, "iterations": args.iterations,
           "median_ms": statistics.median(t), "min_ms": min(t), "max_ms": max(t)}
    out.update(res)
    out["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
