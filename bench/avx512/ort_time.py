"""ONNX Runtime's side of bench/avx512 (Python's onnxruntime, as the AVX-512 machine has it):
load an .onnx with N intra-op threads, run it on one .npy input (warmup + K timed runs) and
print one JSON line {"times_ms": [...], "median_ms", "min_ms", "load_ms", "ort_version"}.
The session options are bench/cpu/ort_bench.mjs's: sequential execution, one inter-op thread,
all graph optimizations.

    python3 ort_time.py MODEL.onnx INPUT.npy --threads N [--warmup W] [--iterations K]
                        [--output OUT.npy]
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--output")
    a = ap.parse_args()
    if a.threads < 1 or a.warmup < 0 or a.iterations < 1:
        ap.error("--threads and --iterations take at least 1, --warmup at least 0")
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3
    feeds = {sess.get_inputs()[0].name: np.load(a.input)}
    out = None
    for _ in range(a.warmup):
        out = sess.run(None, feeds)
    times = []
    for _ in range(a.iterations):
        t = time.perf_counter()
        out = sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    if a.output:
        np.save(a.output, out[0])
    print(json.dumps({"times_ms": times, "median_ms": statistics.median(times),
                      "min_ms": min(times), "load_ms": load_ms,
                      "ort_version": ort.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
