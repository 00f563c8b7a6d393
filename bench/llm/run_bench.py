#!/usr/bin/python3
"""etch vs llama.cpp on llama shapes with random fp32 weights: prefill and decode tokens/s, time
to first token and peak RSS, run side by side in one run on the same weights.

    /usr/bin/python3 bench/llm/run_bench.py [--quick] [--etch build/etch] [--reps 3]
        [--shapes stories15M,stories110M] [--threads 1,2] [--prompt-tokens 128]
        [--new-tokens 64] [--out-dir bench/llm] [--work bench/llm/.work]

For each shape: random weights (fixed seed, separate classifier) are written once as a llama2.c
``.bin`` checkpoint, exported with ``python3 -m etch.llm export`` to a ``.pte`` and written as
GGUF (F32) with bench/llm/gguf_writer.py; all three are cached under --work.  Then for each
thread count, etch (``etch llm``) and llama.cpp (bench/llm/llamacpp_bench.mjs on
node-llama-cpp's prebuilt CPU library) are run alternately, --reps times each, every run a
fresh process, on the same prompt ids (BOS + a fixed English text in the llama2 vocabulary)
and the same number of greedy decode tokens (EOS ignored).  Medians are reported.

Measures (both engines, the same definitions):
  prefill tok/s  prompt tokens / (start of the generation call -> prompt logits ready)
                 (llama.cpp: -> first token, which adds one greedy sample)
  TTFT           start of the generation call -> first token sampled
  decode tok/s   (N - 1) / (first token -> N-th token): N - 1 single-token forward calls
  peak RSS       ru_maxrss of the process (os.wait4); llama.cpp's includes the Node.js runtime
                 (its baseline, ``node -e ''``, is reported beside it)
Model load time is reported but not part of TTFT.

Writes results.json and RESULTS.md into --out-dir (default bench/llm; --quick: --work/quick).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.environ.get("ETCH_FIXTURES", os.path.join(os.path.dirname(REPO), "shared",
                                                        "fixtures"))
TOKENIZER = os.path.join(FIXTURES, "llm", "llama2_tokenizer_32000.model")
sys.path.insert(0, HERE)

# llama2.c's shapes; hidden_dim by its rule (4 * dim, 2/3 of it, up to a multiple of 32)
SHAPES = {
    "stories15M": dict(dim=288, n_layers=6, n_heads=6, vocab_size=32000, max_seq_len=256),
    "stories110M": dict(dim=768, n_layers=12, n_heads=12, vocab_size=32000, max_seq_len=1024),
}
# the context the benchmark builds (KV cache positions, both engines)
BENCH_CONTEXT = {"stories15M": 256, "stories110M": 512}
WEIGHTS_VERSION = 1   # bump when the random weights' recipe changes (invalidates the cache)

PROMPT_TEXT = (
    "Once upon a time, in a small village at the edge of a great forest, there lived a girl "
    "named Lily who loved to read books about the stars. Every night she climbed the hill "
    "behind her house with her old dog Max and a blanket, and she looked up at the sky until "
    "her eyes grew heavy. One evening, a bright light fell from the sky and landed in the "
    "field near the river. Lily ran down the hill as fast as she could, and Max barked and "
    "followed her through the tall grass. When they reached the river, they saw a tiny robot "
    "sitting on a rock, blinking its green eyes and humming a quiet song. The robot said that "
    "it had come from a planet far away, and that it had lost its way home. Lily promised to "
    "help it find the right star, so they sat together on the rock and counted the lights "
    "one by one until the sun came up over the mountains and the birds began to sing.")


def hidden_dim(dim: int) -> int:
    h = int(2 * (4 * dim) / 3)
    return 32 * ((h + 31) // 32)


def say(msg: str) -> None:
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def die(msg: str) -> None:
    print("run_bench: error: %s" % msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# weights, .pte and GGUF

def model_args(shape: str, context: int):
    from etch.llm.model import ModelArgs
    s = SHAPES[shape]
    return ModelArgs(dim=s["dim"], hidden_dim=hidden_dim(s["dim"]), n_layers=s["n_layers"],
                     n_heads=s["n_heads"], n_kv_heads=s["n_heads"],
                     vocab_size=s["vocab_size"], max_seq_len=context,
                     shared_classifier=False)


def random_state(args, seed: int):
    """Random fp32 weights: the embedding N(0, 1), every matrix N(0, 1/fan_in) (activations keep
    their scale, so the logits are well separated and greedy choices are stable), RMSNorm
    weights 1 + N(0, 0.1)."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int):
        return (rng.standard_normal((rows, cols), dtype=np.float32)
                * np.float32(1.0 / np.sqrt(cols)))

    def norm(n: int):
        return 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)

    d, h, v = args.dim, args.hidden_dim, args.vocab_size
    kv = args.n_kv_heads * (d // args.n_heads)
    st = {"tok_embeddings.weight": rng.standard_normal((v, d), dtype=np.float32)}
    for l in range(args.n_layers):
        p = "layers.%d." % l
        st[p + "attention_norm.weight"] = norm(d)
        st[p + "attention.wq.weight"] = mat(d, d)
        st[p + "attention.wk.weight"] = mat(kv, d)
        st[p + "attention.wv.weight"] = mat(kv, d)
        st[p + "attention.wo.weight"] = mat(d, d)
        st[p + "ffn_norm.weight"] = norm(d)
        st[p + "feed_forward.w1.weight"] = mat(h, d)
        st[p + "feed_forward.w2.weight"] = mat(d, h)
        st[p + "feed_forward.w3.weight"] = mat(h, d)
    st["norm.weight"] = norm(d)
    st["output.weight"] = mat(v, d)
    return st


def write_llama2c_bin(path: str, args, st) -> None:
    """llama2.c version 0 checkpoint (negative vocab: separate classifier), as
    etch.llm.checkpoint reads it."""
    import numpy as np
    L = args.n_layers
    hd = args.dim // args.n_heads
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<7i", args.dim, args.hidden_dim, L, args.n_heads, args.n_kv_heads,
                            -args.vocab_size, args.max_seq_len))

        def put(a):
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())

        put(st["tok_embeddings.weight"])
        for name in ("attention_norm.weight", "attention.wq.weight", "attention.wk.weight",
                     "attention.wv.weight", "attention.wo.weight", "ffn_norm.weight",
                     "feed_forward.w1.weight", "feed_forward.w2.weight",
                     "feed_forward.w3.weight"):
            for l in range(L):
                put(st["layers.%d.%s" % (l, name)])
        put(st["norm.weight"])
        put(np.zeros((2, args.max_seq_len, hd // 2), np.float32))  # RoPE tables (unused)
        put(st["output.weight"])
    os.replace(tmp, path)


def exporter_fingerprint() -> str:
    """A hash of the exporter's sources (python/etch/**/*.py): a cached .pte is remade when they
    change."""
    import hashlib
    h = hashlib.sha256()
    root = os.path.join(REPO, "python", "etch")
    for d, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(d, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def prepare_shape(shape: str, work: str, seed: int, context: int, etch_lib: Optional[str],
                  fused_attention: bool = False) -> Tuple[str, str, dict]:
    """(pte, gguf, info), made once and cached under `work` (fused_attention: the .pte is
    exported with --fused-attention, the etch-only etch::sdpa_kv operator)."""
    from gguf_writer import write_llama_gguf
    args = model_args(shape, context)
    stem = os.path.join(work, "%s-seed%d-ctx%d-v%d%s" % (shape, seed, context, WEIGHTS_VERSION,
                                                         "-fused" if fused_attention else ""))
    ckpt, pte, gguf, stamp = stem + ".bin", stem + ".pte", stem + ".gguf", stem + ".json"
    info = dict(shape=shape, dim=args.dim, hidden_dim=args.hidden_dim, n_layers=args.n_layers,
                n_heads=args.n_heads, n_kv_heads=args.n_kv_heads, vocab_size=args.vocab_size,
                context=context, seed=seed, classifier="separate", dtype="float32",
                exporter=exporter_fingerprint())
    if fused_attention:
        info["fused_attention"] = True
    if os.path.exists(stamp) and all(os.path.exists(p) for p in (pte, gguf)):
        with open(stamp) as f:
            if json.load(f).get("info") == info:
                say("%s: cached %s, %s" % (shape, os.path.basename(pte), os.path.basename(gguf)))
                return pte, gguf, info
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    st = random_state(args, seed)
    n_params = sum(a.size for a in st.values())
    write_llama2c_bin(ckpt, args, st)
    say("%s: %.1fM random parameters, checkpoint written (%.1fs)"
        % (shape, n_params / 1e6, time.time() - t0))
    size = write_llama_gguf(gguf, args, st, TOKENIZER, context_length=context,
                            name="%s-random-seed%d" % (shape, seed))
    say("%s: GGUF written, %d bytes (%.1fs)" % (shape, size, time.time() - t0))
    del st
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint", ckpt, "-o", pte,
           "--max-seq-len", str(context), "--eos-ids", "2"]
    if fused_attention:
        cmd.append("--fused-attention")
    if etch_lib:
        env["ETCH_LIB"] = etch_lib
    else:
        cmd.append("--no-check")
    say("%s: exporting the .pte: %s" % (shape, " ".join(cmd[1:])))
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0:
        die("exporting %s failed (exit %d):\n%s" % (shape, r.returncode, r.stdout[-4000:]))
    say("%s: .pte written, %d bytes (%.1fs)" % (shape, os.path.getsize(pte), time.time() - t0))
    os.unlink(ckpt)   # the .pte and the GGUF hold the weights; the checkpoint is not needed
    with open(stamp, "w") as f:
        json.dump({"info": info, "parameters": int(n_params)}, f)
    return pte, gguf, info


# etch's quantization schemes and llama.cpp's block type of the same bit width they run against
QUANT_PEER = {"4w": "q4_0", "8da4w": "q4_0", "8w": "q8_0"}
QUANT_GROUP = 32   # etch's group size for the 4-bit schemes: Q4_0's block of 32, fp16 scales


def prepare_quant(shape: str, work: str, seed: int, context: int, etch_lib: Optional[str],
                  scheme: str) -> Tuple[str, str, dict]:
    """(pte, gguf, info) of `scheme` (4w, 8da4w, 8w) and its llama.cpp peer (Q4_0 / Q8_0) on
    prepare_shape's random weights (the same seed and recipe), cached under `work`. The token
    embedding is quantized too (4 bits in groups of 32, or 8 bits per row), as llama.cpp's
    mixtures do; the 4-bit schemes use groups of 32 (--pad-groups where a width is no
    multiple)."""
    from gguf_writer import write_llama_gguf
    args = model_args(shape, context)
    gq = QUANT_PEER[scheme]
    base = os.path.join(work, "%s-seed%d-ctx%d-v%d" % (shape, seed, context, WEIGHTS_VERSION))
    pte, gguf, stamp = (base + "-%s.pte" % scheme, base + "-%s.gguf" % gq,
                        base + "-%s.json" % scheme)
    ckpt = base + "-%s.bin" % scheme
    emb = "4,%d" % QUANT_GROUP if gq == "q4_0" else "8"
    info = dict(shape=shape, seed=seed, context=context, scheme=scheme, gguf_quant=gq,
                group_size=QUANT_GROUP if gq == "q4_0" else None, embedding_quantize=emb,
                exporter=exporter_fingerprint())
    if os.path.exists(stamp) and all(os.path.exists(p_) for p_ in (pte, gguf)):
        with open(stamp) as f:
            if json.load(f).get("info") == info:
                say("%s %s: cached" % (shape, scheme))
                return pte, gguf, info
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    st = random_state(args, seed)
    write_llama2c_bin(ckpt, args, st)
    if not os.path.exists(gguf):
        size = write_llama_gguf(gguf, args, st, TOKENIZER, context_length=context,
                                name="%s-random-seed%d-%s" % (shape, seed, gq), quant=gq)
        say("%s: %s GGUF written, %d bytes (%.1fs)" % (shape, gq, size, time.time() - t0))
    del st
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint", ckpt, "-o", pte,
           "--max-seq-len", str(context), "--eos-ids", "2", "--quantize", scheme,
           "--embedding-quantize", emb]
    if gq == "q4_0":
        cmd += ["--group-size", str(QUANT_GROUP), "--pad-groups"]
    if etch_lib:
        env["ETCH_LIB"] = etch_lib
    else:
        cmd.append("--no-check")
    say("%s: exporting %s: %s" % (shape, scheme, " ".join(cmd[1:])))
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    os.unlink(ckpt)
    if r.returncode != 0:
        die("exporting %s %s failed (exit %d):\n%s" % (shape, scheme, r.returncode,
                                                      r.stdout[-4000:]))
    say("%s: %s .pte written, %d bytes (%.1fs)" % (shape, scheme, os.path.getsize(pte),
                                                   time.time() - t0))
    with open(stamp, "w") as f:
        json.dump({"info": info}, f)
    return pte, gguf, info


def decode_bytes_per_token(info: dict, bits: float, position: float) -> int:
    """Bytes one decode step reads: every linear weight (the layers' q, k, v, o, w1, w2, w3 and
    the classifier) at `bits` per weight including its scales, the norms, one embedding row
    (negligible) and the fp32 KV cache up to `position` (keys and values of every layer)."""
    d, h, L, V = info["dim"], info["hidden_dim"], info["n_layers"], info["vocab_size"]
    kv_dim = d * info["n_kv_heads"] // info["n_heads"]
    linear = L * (2 * d * d + 2 * d * kv_dim + 3 * d * h) + V * d
    return int(linear * bits / 8 + L * 2 * position * kv_dim * 4 + (2 * L + 1) * d * 4)


# bits per weight read, scales included: 4-bit groups of 32 with fp16 scales (etch 4w/8da4w,
# llama.cpp Q4_0), int8 with one fp32 scale per row (etch 8w: the scales are negligible) or
# blocks of 32 with fp16 scales (Q8_0)
BITS = {"4w": 4.5, "8da4w": 4.5, "8w": 8.0, "q4_0": 4.5, "q8_0": 8.5}


def stream_bandwidth(bench_quant: str, mib: int) -> Dict[int, float]:
    """GB/s of a streaming read of `mib` MiB read again and again, 1 and 2 threads
    (bench/quant/bench_quant --stream-mib), measured now; {} when the tool is missing."""
    if not os.access(bench_quant, os.X_OK):
        say("no %s: decode is not stated as a fraction of the bandwidth" % bench_quant)
        return {}
    r = subprocess.run([bench_quant, "--stream-mib", str(max(mib, 1)), "--reps", "20"],
                       capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            out[j["threads"]] = j["stream_gb_s"]
    return out


def prompt_ids(n: int) -> Tuple[List[int], str]:
    """BOS + the first n - 1 ids of PROMPT_TEXT, and the text that encodes to exactly those
    ids (checked by a round trip), which is what `etch llm --prompt` gets."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    if not sp.Load(TOKENIZER):
        die("cannot load %s" % TOKENIZER)
    ids = sp.EncodeAsIds(PROMPT_TEXT)
    if n - 1 > len(ids):
        die("--prompt-tokens %d: the fixed prompt has only %d tokens (+ BOS)" % (n, len(ids)))
    body = ids[:n - 1]
    text = sp.DecodeIds(body)
    if sp.EncodeAsIds(text) != body:
        die("the prompt's first %d tokens do not survive a decode/encode round trip" % (n - 1))
    return [sp.bos_id()] + body, text


def decode_text(ids: List[int]) -> str:
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    sp.Load(TOKENIZER)
    return sp.DecodeIds(ids)


# ---------------------------------------------------------------------------------------------
# running

# A minimal launcher between this (large: numpy, sentencepiece) process and the measured one.
# On Linux a process's ru_maxrss keeps the high-water mark of the memory it had before exec:
# a child forked from here would start from this process's RSS.  The launcher, a bare
# `python3 -S` of a few MB, spawns the command and reports the command's own ru_maxrss
# (from wait4) on its last stderr line.
_LAUNCHER = r"""
import os, sys
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ)
_, status, ru = os.wait4(pid, 0)
sys.stderr.write("\n@@maxrss_kb %d\n" % ru.ru_maxrss)
sys.stderr.flush()
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_process(cmd: List[str], timeout: float, env=None) -> Tuple[int, str, str, int, float]:
    """(exit status, stdout, stderr, peak RSS bytes of `cmd` from wait4's ru_maxrss, wall
    seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        rc = 124
    wall = time.monotonic() - t0
    err_s = err.decode("utf-8", "replace")
    rss = 0
    m = re.search(r"\n@@maxrss_kb (\d+)\n$", err_s)
    if m:
        rss = int(m.group(1)) * 1024
        err_s = err_s[:m.start()]
    elif rc == 0:
        die("the launcher reported no ru_maxrss for %s" % cmd[0])
    return rc, out.decode("utf-8", "replace"), err_s, rss, wall


def run_etch(etch: str, pte: str, text: str, n_prompt: int, n_new: int, threads: int,
             timeout: float) -> dict:
    cmd = [etch, "llm", "--model", pte, "--tokenizer", TOKENIZER, "--prompt", text,
           "--max-new-tokens", str(n_new), "--temperature", "0", "--ignore-eos",
           "--cpu-threads", str(threads)]
    rc, out, err, rss, wall = run_process(cmd, timeout)
    if rc != 0:
        die("etch failed (exit %d): %s\n%s" % (rc, " ".join(cmd[:6]) + " ...", err[-3000:]))
    m = re.search(r"PyTorchObserver (\{.*\})", err)
    if not m:
        die("etch printed no PyTorchObserver line:\n%s" % err[-3000:])
    s = json.loads(m.group(1))
    if s["prompt_tokens"] != n_prompt:
        die("etch prefilled %d tokens, llama.cpp gets %d: the tokenizers disagree on the prompt"
            % (s["prompt_tokens"], n_prompt))
    if s["generated_tokens"] != n_new:
        die("etch generated %d tokens, %d asked" % (s["generated_tokens"], n_new))
    start = s["inference_start_ms"]
    prefill_ms = s["prompt_eval_end_ms"] - start
    ttft_ms = s["first_token_ms"] - start
    decode_ms = s["inference_end_ms"] - s["first_token_ms"]
    return dict(prefill_ms=prefill_ms, ttft_ms=ttft_ms, decode_ms=decode_ms,
                prefill_tok_s=n_prompt / (prefill_ms / 1000) if prefill_ms > 0 else None,
                decode_tok_s=(n_new - 1) / (decode_ms / 1000) if decode_ms > 0 else None,
                load_ms=s["model_load_end_ms"] - s["model_load_start_ms"],
                peak_rss_bytes=rss, self_reported_peak_rss_bytes=s.get("peak_rss_bytes"),
                wall_s=wall, text=out, observer=s)


def run_llamacpp(node_modules: str, gguf: str, ids: List[int], n_new: int, threads: int,
                 context: int, timeout: float) -> dict:
    cmd = ["node", os.path.join(HERE, "llamacpp_bench.mjs"), "--model", gguf, "--prompt-ids",
           ",".join(map(str, ids)), "--new-tokens", str(n_new), "--threads", str(threads),
           "--context", str(context), "--node-modules", node_modules]
    rc, out, err, rss, wall = run_process(cmd, timeout)
    if rc != 0:
        die("llama.cpp (node) failed (exit %d):\n%s" % (rc, err[-3000:]))
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        die("llamacpp_bench.mjs printed no JSON line:\n%s\n%s" % (out[-2000:], err[-2000:]))
    r = res["runs"][0]
    if r["generated_tokens"] != n_new:
        die("llama.cpp generated %d tokens, %d asked" % (r["generated_tokens"], n_new))
    if res["context_threads"] != threads:
        die("llama.cpp ran %s threads, %d asked" % (res["context_threads"], threads))
    perf = r.get("llama_perf", {})
    return dict(prefill_ms=r["prefill_ms"], ttft_ms=r["ttft_ms"], decode_ms=r["decode_ms"],
                prefill_tok_s=r["prefill_tok_s"], decode_tok_s=r["decode_tok_s"],
                load_ms=res["load_ms"], load_library_ms=res.get("load_library_ms"),
                peak_rss_bytes=rss,
                self_reported_peak_rss_bytes=res["peak_rss_bytes"], wall_s=wall,
                tokens=r["tokens"], llama_perf=perf,
                perf_prefill_tok_s=(perf["prompt_eval_tokens"] / perf["prompt_eval_ms"] * 1000
                                    if perf.get("prompt_eval_ms") else None),
                perf_decode_tok_s=(perf["eval_runs"] / perf["eval_ms"] * 1000
                                   if perf.get("eval_ms") else None),
                perf_prompt_eval_ms=perf.get("prompt_eval_ms"),
                info={k: res[k] for k in ("node_llama_cpp", "llama_cpp_release", "build_type",
                                          "ggml_cpu_variant", "ggml_cpu_library",
                                          "system_info", "kv_cache_types", "context_size")})


def median(rows: List[dict], key: str):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


METRICS = ("prefill_tok_s", "decode_tok_s", "ttft_ms", "prefill_ms", "decode_ms", "load_ms",
           "load_library_ms", "peak_rss_bytes", "self_reported_peak_rss_bytes")


def summarize(rows: List[dict]) -> dict:
    out = {k: median(rows, k) for k in METRICS}
    for k in ("perf_prefill_tok_s", "perf_decode_tok_s", "perf_prompt_eval_ms"):
        if any(k in r for r in rows):
            out[k] = median(rows, k)
    return out


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    fl = set(line.split(":", 1)[1].split())
                    keep = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
                            "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni"]
                    return " ".join(k for k in keep if k in fl)
    except OSError:
        pass
    return ""


def git_commit() -> str:
    try:
        c = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no",
                                "--", "src", "include", "tools", "python/etch"],
                               capture_output=True, text=True).stdout.strip()
        return c + (" (+ uncommitted changes in src/include/tools/python)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ensure_node_modules(node_modules: Optional[str]) -> str:
    if node_modules:
        nm = os.path.abspath(node_modules)
    else:
        nm = os.path.join(HERE, "node_modules")
    if not os.path.exists(os.path.join(nm, "node-llama-cpp", "package.json")):
        if node_modules:
            die("no node-llama-cpp under %s" % nm)
        if not shutil.which("npm"):
            die("npm is not installed (needed to install node-llama-cpp from the lock)")
        say("installing node-llama-cpp from package-lock.json (npm ci)")
        r = subprocess.run(["npm", "ci", "--omit=optional", "--ignore-scripts", "--no-audit",
                            "--no-fund", "--prefer-offline"], cwd=HERE)
        if r.returncode != 0:
            die("npm ci failed in %s (is the npm registry or its cache reachable?)" % HERE)
    return nm


# ---------------------------------------------------------------------------------------------
# report

def fmt(v, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "mb":
        return "%.0f" % (v / 2**20)
    if kind == "ms":
        return "%.0f" % v if v >= 100 else "%.1f" % v
    return "%.1f" % v if v < 1000 else "%.0f" % v


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return "%.2f" % (a / b)


def markdown(res: dict) -> str:
    m = res["machine"]
    c = res["config"]
    L = []
    L.append("# etch vs llama.cpp: LLM benchmark results")
    L.append("")
    L.append("Made by `bench/llm/run_bench.py`%s on %s (UTC)." %
             (" --quick" if c["quick"] else "", res["date"]))
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    L.append("| CPU | %s, %d logical cores (flags: %s) |" % (m["cpu_model"], m["cpus"],
                                                            m["cpu_flags"]))
    L.append("| etch | commit %s, `%s`; `--cpu-threads`: \"%s\" |"
             % (m["etch_commit"], m["etch_binary"], m.get("etch_cpu_threads_help", "")))
    L.append("| llama.cpp | node-llama-cpp %s (prebuilt, %s), ggml CPU backend loaded: "
             "**%s** (`%s`) |" % (m["node_llama_cpp"], m["llama_cpp_release"],
                                 m["ggml_cpu_variant"], os.path.basename(m["ggml_cpu_library"])))
    L.append("| llama.cpp system info | `%s` |" % m["llama_system_info"].strip(" |"))
    L.append("| Node.js baseline RSS | %s MB (`node -e ''`; part of every llama.cpp RSS below) |"
             % fmt(m["node_baseline_rss_bytes"], "mb"))
    L.append("| load average | %s at the start, %s at the end; engines run at niceness %s |"
             % (m["loadavg_start"], m["loadavg_end"], m.get("niceness", "?")))
    L.append("| run | %d prompt tokens (BOS + fixed English text, llama2 32000 vocabulary), %d "
             "greedy decode tokens (EOS ignored), %d repetitions per engine alternating, "
             "medians |" % (c["prompt_tokens"], c["new_tokens"], c["reps"]))
    L.append("| weights | random fp32 (seed %d), separate classifier, KV cache fp32 in both "
             "engines, n_kv_heads = n_heads |" % c["seed"])
    if c.get("note"):
        L.append("| note | %s |" % c["note"])
    L.append("")
    for sh in res["shapes"]:
        i = sh["info"]
        L.append("## %s shape: dim %d, hidden %d, %d layers, %d heads, vocab %d, context %d"
                 % (i["shape"], i["dim"], i["hidden_dim"], i["n_layers"], i["n_heads"],
                    i["vocab_size"], i["context"]))
        L.append("")
        L.append("%.1fM parameters; `.pte` %.0f MB, GGUF %.0f MB." %
                 (sh["parameters"] / 1e6, sh["pte_bytes"] / 2**20, sh["gguf_bytes"] / 2**20))
        L.append("")
        L.append("| threads | metric | etch | llama.cpp | llama.cpp, Node.js wall clock "
                 "| etch / llama.cpp |")
        L.append("|---|---|---:|---:|---:|---:|")
        node_rss = m["node_baseline_rss_bytes"]
        for t in sh["threads"]:
            e, l = t["etch"]["median"], t["llama.cpp"]["median"]
            n = t["threads"]
            rows = [
                ("prefill tok/s", e["prefill_tok_s"], l.get("perf_prefill_tok_s"),
                 l["prefill_tok_s"], ""),
                ("decode tok/s", e["decode_tok_s"], l.get("perf_decode_tok_s"),
                 l["decode_tok_s"], ""),
                ("time to first token, ms", e["ttft_ms"], l.get("perf_prompt_eval_ms"),
                 l["ttft_ms"], "ms"),
                ("peak RSS, MB", e["peak_rss_bytes"],
                 l["peak_rss_bytes"] - node_rss if l["peak_rss_bytes"] else None,
                 l["peak_rss_bytes"], "mb"),
            ]
            for name, ev, lv, jv, kind in rows:
                L.append("| %d | %s | %s | %s | %s | **%s** |" % (
                    n, name, fmt(ev, kind), fmt(lv, kind), fmt(jv, kind), ratio(ev, lv)))
            L.append("| %d | model load, ms | %s | - | %s (library %s) | - |" % (
                n, fmt(e["load_ms"], "ms"), fmt(l["load_ms"], "ms"),
                fmt(l.get("load_library_ms"), "ms")))
        L.append("")
        agree = ["%d thread%s: %s" % (t["threads"], "" if t["threads"] == 1 else "s",
                                      t["greedy_agreement"]) for t in sh["threads"]]
        L.append("Greedy continuations (etch's text vs llama.cpp's tokens decoded): %s."
                 % "; ".join(agree))
        L.append("")
        if sh.get("quant"):
            L += quant_markdown(sh, node_rss)
    L.append("## How the figures are measured")
    L.append("")
    L.append("Every run is a fresh process: `etch llm --model M.pte --tokenizer "
             "llama2_tokenizer_32000.model --prompt TEXT --max-new-tokens N --temperature 0 "
             "--ignore-eos --cpu-threads T` (its `PyTorchObserver` line gives the timestamps; "
             "its prompt is the text that sentencepiece encodes to exactly the prompt ids, and "
             "the run fails unless etch prefilled that many tokens) and `node "
             "llamacpp_bench.mjs` (node-llama-cpp on the CPU, `gpu: false`, context of the same "
             "size, batch = the prompt, fp32 KV cache, flash attention off, timestamps around "
             "`LlamaContextSequence.evaluate`, the prompt ids passed in).")
    L.append("")
    L.append("Columns: **etch** from its `PyTorchObserver` statistics (measured inside the C "
             "runner); **llama.cpp** from llama.cpp's own counters (`llama_perf_context`: "
             "prompt eval time, eval time; what llama.cpp's tools report), the comparison the "
             "ratios use; **llama.cpp, Node.js wall clock** around node-llama-cpp's "
             "`evaluate`, which adds the Node.js/N-API round trip of every token.")
    L.append("")
    L.append("* prefill tok/s = prompt tokens / (generation start -> prompt logits ready); "
             "llama.cpp: prompt tokens / prompt eval time (Node.js: -> first token)")
    L.append("* decode tok/s = (N - 1) / (first token -> N-th token): N - 1 single-token "
             "forward calls (and samples); llama.cpp: eval runs / eval time")
    L.append("* time to first token = generation start -> first token sampled (model load "
             "excluded); llama.cpp: prompt eval time (the sample is not in it); Node.js: "
             "-> first token")
    L.append("* model load: etch = opening the runner (mmap the program, load the method, size "
             "the buffers); llama.cpp = `getLlama` (the addon and ggml's backends: the "
             "\"library\" part) + `loadModel` (mmap) + `createContext`")
    L.append("* peak RSS = `ru_maxrss` of the engine's process from `wait4` (through a small "
             "launcher, so the driver's own memory does not leak into it); both engines mmap the "
             "weights, so the touched weights count. The llama.cpp column is the Node.js "
             "process's figure minus the Node.js baseline (`node -e ''`), an estimate; the "
             "Node.js column is the process's figure.")
    L.append("* ratios are etch / llama.cpp: above 1 means etch is faster for tok/s, slower "
             "for time to first token and bigger for RSS.")
    L.append("")
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------

def run_quant_rows(a, sh: dict, shape: str, ctx: int, etch: str, etch_lib: Optional[str],
                   node_modules: str, ids: List[int], text: str, threads: List[int]) -> None:
    """The quantized rows of a shape: each scheme against its llama.cpp peer, alternating, as
    the float rows; decode also as a fraction of a streaming read measured now over a buffer
    of the bytes one decode step reads."""
    info = sh["info"]
    position = a.prompt_tokens + a.new_tokens / 2
    sh["quant"] = []
    for q in a.quant_list:
        pte, gguf, qinfo = prepare_quant(shape, a.work, a.seed, ctx, etch_lib, q)
        gq = QUANT_PEER[q]
        eb = decode_bytes_per_token(info, BITS[q], position)
        lb = decode_bytes_per_token(info, BITS[gq], position)
        bw = stream_bandwidth(a.bench_quant, (eb + (1 << 20) - 1) >> 20)
        row = dict(scheme=q, gguf_quant=gq, info=qinfo, pte_bytes=os.path.getsize(pte),
                   gguf_bytes=os.path.getsize(gguf), etch_bytes_per_token=eb,
                   llama_bytes_per_token=lb, kv_cache_bytes=2 * info["n_layers"] * ctx *
                   info["dim"] * info["n_kv_heads"] // info["n_heads"] * 4,
                   stream_gb_s={str(k): v for k, v in bw.items()}, threads=[])
        for t in threads:
            rows = {"etch": [], "llama.cpp": []}
            for rep in range(a.reps):
                e = run_etch(etch, pte, text, len(ids), a.new_tokens, t, a.timeout)
                l = run_llamacpp(node_modules, gguf, ids, a.new_tokens, t, ctx, a.timeout)
                say("%s %s/%s t=%d rep %d: etch decode %s prefill %s tok/s; llama.cpp decode "
                    "%s prefill %s tok/s" % (shape, q, gq, t, rep + 1,
                                             fmt(e["decode_tok_s"], ""),
                                             fmt(e["prefill_tok_s"], ""),
                                             fmt(l.get("perf_decode_tok_s"), ""),
                                             fmt(l.get("perf_prefill_tok_s"), "")))
                rows["etch"].append(e)
                rows["llama.cpp"].append(l)
            strip = lambda r: {k: v for k, v in r.items() if k not in ("text", "tokens")}
            row["threads"].append({
                "threads": t,
                "etch": {"median": summarize(rows["etch"]),
                         "runs": [strip(r) for r in rows["etch"]]},
                "llama.cpp": {"median": summarize(rows["llama.cpp"]),
                              "runs": [strip(r) for r in rows["llama.cpp"]]}})
        sh["quant"].append(row)


def quant_markdown(sh: dict, node_rss: int) -> List[str]:
    L = ["### Quantized: etch's schemes against llama.cpp's blocks of the same weights", "",
         "etch `4w`/`8da4w`: int4 in groups of 32 with fp16 scales (the token embedding 4-bit in "
         "groups of 32), against `Q4_0`; `8w`: int8 per output channel (embedding 8-bit per "
         "row), against `Q8_0`. llama.cpp's figures from its own counters; RSS of llama.cpp "
         "without the Node.js baseline. **bw**: decode tok/s x bytes read per token / a "
         "streaming read of a buffer that size measured in the same run with the same thread "
         "count (bench/quant `--stream-mib`; the weights fit this machine's L3, so the stream "
         "and the decode both read from cache).", "",
         "| threads | etch | llama.cpp | decode tok/s etch | llama.cpp | ratio | prefill tok/s "
         "etch | llama.cpp | ratio | peak RSS MB etch | llama.cpp | .pte MB | GGUF MB | .pte / "
         "GGUF | bytes/token MB etch | stream GB/s | bw etch | bw llama.cpp |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sh.get("quant", []):
        for t in r["threads"]:
            e, l = t["etch"]["median"], t["llama.cpp"]["median"]
            n = t["threads"]
            bw = r["stream_gb_s"].get(str(n))
            ed, ld = e["decode_tok_s"], l.get("perf_decode_tok_s")
            fe = "%.0f%%" % (100 * ed * r["etch_bytes_per_token"] / (bw * 1e9)) \
                if bw and ed else "-"
            fl = "%.0f%%" % (100 * ld * r["llama_bytes_per_token"] / (bw * 1e9)) \
                if bw and ld else "-"
            lr = l["peak_rss_bytes"] - node_rss if l["peak_rss_bytes"] else None
            L.append("| %d | %s | %s | %s | %s | **%s** | %s | %s | **%s** | %s | %s | %s | %s "
                     "| %s | %.1f | %s | %s | %s |" % (
                         n, r["scheme"], r["gguf_quant"].upper(), fmt(ed, ""), fmt(ld, ""),
                         ratio(ed, ld), fmt(e["prefill_tok_s"], ""),
                         fmt(l.get("perf_prefill_tok_s"), ""),
                         ratio(e["prefill_tok_s"], l.get("perf_prefill_tok_s")),
                         fmt(e["peak_rss_bytes"], "mb"), fmt(lr, "mb"),
                         "%.1f" % (r["pte_bytes"] / 2**20), "%.1f" % (r["gguf_bytes"] / 2**20),
                         ratio(r["pte_bytes"], r["gguf_bytes"]),
                         r["etch_bytes_per_token"] / 2**20, "%.1f" % bw if bw else "-", fe, fl))
    L.append("")
    return L


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a short run: stories15M only, 32 prompt tokens, 16 new tokens, "
                        "1 repetition; results under --work/quick unless --out-dir is given")
    p.add_argument("--etch", default=os.path.join(REPO, "build", "etch"),
                   help="the etch CLI (default: build/etch)")
    p.add_argument("--etch-lib", default=None,
                   help="libetch.so for the exporter's operator check (default: beside --etch)")
    p.add_argument("--shapes", default="stories15M,stories110M")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--work", default=os.path.join(HERE, ".work"),
                   help="cache of the weights, .pte and GGUF files")
    p.add_argument("--out-dir", default=None,
                   help="where results.json and RESULTS.md go (default: bench/llm)")
    p.add_argument("--node-modules", default=None,
                   help="a node_modules holding node-llama-cpp (default: bench/llm/node_modules, "
                        "installed with npm ci from the lock when missing)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per engine run")
    p.add_argument("--prepare-only", action="store_true",
                   help="only make the cached weights, .pte and GGUF files")
    p.add_argument("--note", default="", help="a line for RESULTS.md (e.g. machine load)")
    p.add_argument("--fused-attention", action="store_true",
                   help="export etch's .pte with --fused-attention (the etch-only attention "
                        "operator etch::sdpa_kv) instead of ExecuTorch's operators")
    p.add_argument("--context", type=int, default=None,
                   help="KV-cache positions for every shape (default: %s)"
                        % ", ".join("%s %d" % kv for kv in BENCH_CONTEXT.items()))
    p.add_argument("--quant", default="",
                   help="also run these etch schemes (comma list of 4w, 8da4w, 8w) against "
                        "llama.cpp's Q4_0 (4w, 8da4w) / Q8_0 (8w) GGUF of the same weights")
    p.add_argument("--bench-quant", default=os.path.join(REPO, "bench", "quant", "bench_quant"),
                   help="bench/quant's binary, for the streaming-read bandwidth (make -C "
                        "bench/quant)")
    p.add_argument("--etch-commit", default=None,
                   help="the commit the etch binary was built from (default: this checkout's "
                        "HEAD, marked when src/include/tools/python have uncommitted changes)")
    a = p.parse_args(argv)
    a.quant_list = [q.strip() for q in a.quant.split(",") if q.strip()]

    if a.quick:
        a.shapes = "stories15M" if a.shapes == p.get_default("shapes") else a.shapes
        a.reps = 1 if a.reps == p.get_default("reps") else a.reps
        a.prompt_tokens = 32 if a.prompt_tokens == p.get_default("prompt_tokens") \
            else a.prompt_tokens
        a.new_tokens = 16 if a.new_tokens == p.get_default("new_tokens") else a.new_tokens
    if a.context is not None:
        if not 2 <= a.context <= 1 << 20:
            die("--context must be in 2..%d" % (1 << 20))
        for s_ in BENCH_CONTEXT:
            BENCH_CONTEXT[s_] = a.context
    out_dir = a.out_dir or (os.path.join(a.work, "quick") if a.quick else HERE)
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    for s in shapes:
        if s not in SHAPES:
            die("unknown shape %r (known: %s)" % (s, ", ".join(SHAPES)))
    try:
        threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        die("--threads: expected comma-separated integers, got %r" % a.threads)
    if not threads or any(t < 1 or t > 256 for t in threads):
        die("--threads: each count must be in 1..256")
    if a.reps < 1:
        die("--reps must be at least 1")
    quant = a.quant_list
    for q in quant:
        if q not in QUANT_PEER:
            die("--quant: unknown scheme %r (known: %s)" % (q, ", ".join(QUANT_PEER)))
    if a.prompt_tokens < 2 or a.new_tokens < 2:
        die("--prompt-tokens and --new-tokens must be at least 2")
    for s in shapes:
        if a.prompt_tokens + a.new_tokens > BENCH_CONTEXT[s]:
            die("%d + %d tokens do not fit the %s context (%d)"
                % (a.prompt_tokens, a.new_tokens, s, BENCH_CONTEXT[s]))
    etch = os.path.abspath(a.etch)
    if not os.access(etch, os.X_OK):
        die("no etch CLI at %s (build it: cmake --build build --target etch, or pass --etch)"
            % etch)
    etch_lib = a.etch_lib
    if etch_lib is None:
        cand = os.path.join(os.path.dirname(etch), "libetch.so")
        etch_lib = cand if os.path.exists(cand) else None
    if not os.path.exists(TOKENIZER):
        die("no tokenizer at %s (set ETCH_FIXTURES)" % TOKENIZER)
    if not shutil.which("node"):
        die("node is not installed")
    sys.path.insert(0, os.path.join(REPO, "python"))
    if a.prepare_only:
        for shape in shapes:
            prepare_shape(shape, a.work, a.seed, BENCH_CONTEXT[shape], etch_lib,
                          a.fused_attention)
            for q in quant:
                prepare_quant(shape, a.work, a.seed, BENCH_CONTEXT[shape], etch_lib, q)
        return 0
    node_modules = ensure_node_modules(a.node_modules)

    # does this etch run kernels on several threads? (its help says so while it does not)
    h = subprocess.run([etch, "llm", "--help"], capture_output=True, text=True)
    m_thr = re.search(r"--cpu-threads N\s+(.*?)\n\s+--", h.stdout + h.stderr, re.S)
    etch_threads_help = " ".join(m_thr.group(1).split()) if m_thr else ""
    ids, text = prompt_ids(a.prompt_tokens)
    say("prompt: %d ids (BOS + %d), %d characters" % (len(ids), len(ids) - 1, len(text)))
    rc, _, _, node_rss, _ = run_process(["node", "-e", ""], 60)
    machine = dict(cpu_model=cpu_model(), cpus=os.cpu_count() or 0, cpu_flags=cpu_flags(),
                   kernel=platform.release(), etch_commit=a.etch_commit or git_commit(),
                   etch_binary=os.path.relpath(etch, REPO) if etch.startswith(REPO) else etch,
                   node=subprocess.run(["node", "--version"], capture_output=True,
                                       text=True).stdout.strip(),
                   node_baseline_rss_bytes=node_rss, loadavg_start=loadavg(),
                   etch_cpu_threads_help=etch_threads_help, niceness=os.nice(0))
    res = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
               machine=machine,
               config=dict(quick=a.quick, reps=a.reps, prompt_tokens=a.prompt_tokens,
                           new_tokens=a.new_tokens, seed=a.seed, threads=threads,
                           fused_attention=a.fused_attention, quant=quant,
                           prompt_ids=ids, note=a.note),
               shapes=[])
    llama_info = None
    for shape in shapes:
        ctx = BENCH_CONTEXT[shape]
        pte, gguf, info = prepare_shape(shape, a.work, a.seed, ctx, etch_lib,
                                        a.fused_attention)
        with open(os.path.splitext(pte)[0] + ".json") as f:
            n_params = json.load(f)["parameters"]
        sh = dict(info=info, parameters=n_params, pte_bytes=os.path.getsize(pte),
                  gguf_bytes=os.path.getsize(gguf), threads=[])
        for t in threads:
            rows = {"etch": [], "llama.cpp": []}
            for rep in range(a.reps):
                e = run_etch(etch, pte, text, len(ids), a.new_tokens, t, a.timeout)
                say("%s t=%d rep %d etch:      prefill %s tok/s, decode %s tok/s, TTFT %s ms, "
                    "RSS %s MB" % (shape, t, rep + 1, fmt(e["prefill_tok_s"], ""),
                                  fmt(e["decode_tok_s"], ""), fmt(e["ttft_ms"], "ms"),
                                  fmt(e["peak_rss_bytes"], "mb")))
                l = run_llamacpp(node_modules, gguf, ids, a.new_tokens, t, ctx, a.timeout)
                say("%s t=%d rep %d llama.cpp: prefill %s tok/s, decode %s tok/s, TTFT %s ms, "
                    "RSS %s MB (%s)" % (shape, t, rep + 1, fmt(l["prefill_tok_s"], ""),
                                        fmt(l["decode_tok_s"], ""), fmt(l["ttft_ms"], "ms"),
                                        fmt(l["peak_rss_bytes"], "mb"),
                                        l["info"]["ggml_cpu_variant"]))
                llama_info = l["info"]
                rows["etch"].append(e)
                rows["llama.cpp"].append(l)
            # do both engines continue the prompt the same way?
            etch_text = rows["etch"][0]["text"]
            ll_text = decode_text(ids[1:] + rows["llama.cpp"][0]["tokens"])
            n = 0
            while n < min(len(etch_text), len(ll_text)) and etch_text[n] == ll_text[n]:
                n += 1
            if etch_text == ll_text:
                agreement = "identical"
            else:
                gen = len(etch_text) - len(text)
                agreement = ("first %d of %d generated characters identical"
                             % (max(n - len(text), 0), max(gen, 0)))
            strip = lambda r: {k: v for k, v in r.items() if k not in ("text", "tokens")}
            sh["threads"].append({
                "threads": t,
                "etch": {"median": summarize(rows["etch"]),
                         "runs": [strip(r) for r in rows["etch"]]},
                "llama.cpp": {"median": summarize(rows["llama.cpp"]),
                              "runs": [strip(r) for r in rows["llama.cpp"]]},
                "greedy_agreement": agreement,
                "etch_text": etch_text[len(text):],
                "llama_cpp_text": ll_text[len(text):],
            })
        if quant:
            run_quant_rows(a, sh, shape, ctx, etch, etch_lib, node_modules, ids, text, threads)
        res["shapes"].append(sh)
    machine["loadavg_end"] = loadavg()
    machine.update(node_llama_cpp=llama_info["node_llama_cpp"],
                   llama_cpp_release="%s %s" % (llama_info["llama_cpp_release"].get("repo", ""),
                                                llama_info["llama_cpp_release"].get("release",
                                                                                    "")),
                   ggml_cpu_variant=llama_info["ggml_cpu_variant"],
                   ggml_cpu_library=llama_info["ggml_cpu_library"],
                   llama_system_info=llama_info["system_info"])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "RESULTS.md"), "w") as f:
        f.write(markdown(res))
    say("wrote %s and %s" % (os.path.join(out_dir, "results.json"),
                             os.path.join(out_dir, "RESULTS.md")))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
