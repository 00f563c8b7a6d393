"""Perplexity of etch's quantized LLM exports against llama.cpp's Q8_0 / Q4_0 of the same weights.

    /usr/bin/python3 bench/llm_quality/llm_ppl.py            # the committed REPORT.md (~3 min)
    /usr/bin/python3 bench/llm_quality/llm_ppl.py --smoke --work DIR --out-dir DIR   # seconds

Models: stories260K (../shared/fixtures/llm: llama2.c's checkpoint, trained on TinyStories) and
the repository's default model (models/default: trained on the project's own generated stories;
only its model.pte is committed, so its float32 weights are recovered from the program's
constants by pte_weights.py, checked by re-exporting them to a byte-identical model.pte).

Text: a real English text neither model was trained on, from a Debian package installed here
(default: /usr/share/common-licenses/GPL-3, base-files: the GNU GPL version 3, legal prose).
Each model's tokenizer encodes it; the first --tokens ids are scored, in windows of the model's
context (BOS + up to context - 1 text tokens, every window from position 0): every text token
is predicted from BOS and the text tokens before it in its window.  PPL = exp(-mean log p).

Rows (the same token windows for every row of a model):
* PyTorch float32: etch.llm's reference module (all positions in one pass): the reference;
* etch float32, 8w, 8da4w (group 32), 4w group 32 and 128: ``python3 -m etch.llm export
  --quantize S [--group-size G --pad-groups]``, run by libetch through etch.runtime
  (python/etch/runtime.py) one token at a time (forward(token, pos) -> logits of that
  position, KV cache in the program); log-softmax of etch's logits in float64;
* llama.cpp F32, Q8_0, Q4_0: bench/llm/gguf_writer.py of the same checkpoint (Q8_0 / Q4_0 with
  the tensor types of llama.cpp's quantizer), run by node-llama-cpp (llamacpp_logprobs.mjs:
  controlledEvaluate, next-token probabilities at every position).
ΔPPL of a row = its PPL minus its own engine's float32 PPL.  Targets (issue 17): etch's ΔPPL at
4 bits <= llama.cpp Q4_0's, at 8 bits <= Q8_0's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "bench", "llm"))
sys.path.insert(0, HERE)

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"     # Debian's base-files

# scheme -> (export flags, bits, description)
ETCH_SCHEMES = {
    "f32": ([], 32, "float32"),
    "8w": (["--quantize", "8w"], 8, "int8 weights per channel"),
    "8da4w": (["--quantize", "8da4w", "--group-size", "32", "--pad-groups"], 4,
              "int8 dynamic activations + int4 weights, group 32"),
    "4w-g32": (["--quantize", "4w", "--group-size", "32", "--pad-groups"], 4,
               "int4 weights, group 32"),
    "4w-g128": (["--quantize", "4w", "--group-size", "128", "--pad-groups"], 4,
                "int4 weights, group 128"),
    "4w-g32-asym": (["--quantize", "4w", "--group-size", "32", "--asymmetric", "--pad-groups"],
                    4, "int4 weights, group 32, asymmetric (a zero point per group)"),
}
# name -> (gguf_writer quant, bits, output.weight type override, description)
LLAMACPP_TYPES = {
    "F32": ("f32", 32, "", ""),
    "Q8_0": ("q8_0", 8, "", ""),
    "Q4_0": ("q4_0", 4, "", ""),
    "Q4_0-out4": ("q4_0", 4, "q4_0", "diagnostic: output.weight Q4_0 too, not llama.cpp's "
                  "quantizer's Q8_0"),
}
# the committed report: (text, models scored on it, what it is)
TEXTS = [
    (os.path.join(HERE, "text", "stories.txt"), "stories260K,default",
     "five short children's stories written for this report (bench/llm_quality/text/"
     "stories.txt, in the style both models were trained on, in no training set)"),
    (DEFAULT_TEXT, "stories260K",
     "the GNU General Public License version 3 as Debian's base-files package installs it: "
     "legal prose, far from both models' training text"),
]


def log(msg: str) -> None:
    print("[llm_ppl] %s" % msg, file=sys.stderr, flush=True)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(cmd: Sequence[str], env=None) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env)
    if r.returncode != 0:
        raise SystemExit("llm_ppl: command failed (exit %d): %s\n%s\n%s"
                         % (r.returncode, " ".join(cmd)[:500], r.stdout[-2000:],
                            r.stderr[-3000:]))
    return r


# -- models -------------------------------------------------------------------------------------

def models(fixtures: str) -> Dict[str, dict]:
    """name -> {checkpoint, tokenizer, export flags, origin}; the default model's checkpoint is
    recovered from models/default/model.pte (cached by its sha256)."""
    return {
        "stories260K": {
            "checkpoint": os.path.join(fixtures, "stories260K.bin"),
            "tokenizer": os.path.join(fixtures, "tok512.model"),
            "export": [],
            "origin": "llama2.c's stories260K (TinyStories), ../shared/fixtures/llm",
        },
        "default": {
            "pte": os.path.join(REPO, "models", "default", "model.pte"),
            "tokenizer": os.path.join(REPO, "models", "default", "tokenizer.model"),
            "export": ["--bos-id", "1", "--eos-ids", "1,2"],
            "origin": "the repository's default model (models/default; trained by "
                      "python/etch/llm/train.py on python/etch/llm/storygen.py's stories)",
        },
    }


def default_checkpoint(m: dict, work: str, lib: str) -> str:
    import pte_weights
    from etch.llm.model import ModelArgs
    pte = m["pte"]
    digest = sha256(pte)
    out = os.path.join(work, "default-%s.pt" % digest[:16])
    if not os.path.exists(out):
        md = pte_weights.read_metadata(pte, lib_path=lib)
        # the shape models/default/build.sh trains (dim 128, 4 layers, 4 heads, SwiGLU 352)
        args = ModelArgs(dim=128, hidden_dim=352, n_layers=md["get_n_layers"], n_heads=4,
                         n_kv_heads=4, vocab_size=md["get_vocab_size"],
                         max_seq_len=md["get_max_context_len"])
        worst = pte_weights.recover_checkpoint(pte, args, out, lib_path=lib)
        log("default model: weights recovered from %s (PyTorch vs etch logits within %.2g)"
            % (os.path.relpath(pte, REPO), worst))
    m["pte_sha256"] = digest
    return out


# -- text and windows ---------------------------------------------------------------------------

def windows_for(tokenizer: str, text: str, n_tokens: int, context: int, bos: int):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    if not sp.Load(tokenizer):
        raise SystemExit("llm_ppl: %s is not a sentencepiece model" % tokenizer)
    ids = sp.EncodeAsIds(text)
    if len(ids) < n_tokens:
        raise SystemExit("llm_ppl: the text has %d tokens in %s, fewer than --tokens %d"
                         % (len(ids), os.path.basename(tokenizer), n_tokens))
    ids = ids[:n_tokens]
    per = context - 1
    return [[bos] + ids[i:i + per] for i in range(0, len(ids), per)]


# -- engines ------------------------------------------------------------------------------------

def torch_logprobs(checkpoint: str, windows) -> List[List[float]]:
    import torch
    from etch.llm.checkpoint import build_model
    from etch.llm.train import train_logits
    model = build_model(checkpoint)
    out = []
    with torch.no_grad():
        for w in windows:
            lp = train_logits(model, torch.tensor([w])).double().log_softmax(-1)[0]
            out.append([float(lp[i, w[i + 1]]) for i in range(len(w) - 1)])
    return out


def etch_logprobs(pte: str, windows, lib: str, threads: int) -> List[List[float]]:
    """etch's next-token log-probabilities: the program run by libetch one position at a time
    (forward(tokens [1, 1], start_pos [1]) -> the logits of that position)."""
    import torch
    from etch import runtime
    m = runtime.load(pte, lib_path=lib, num_threads=threads)
    out = []
    for w in windows:
        lp = []
        for i in range(len(w) - 1):
            logits = m.forward(torch.tensor([[w[i]]], dtype=torch.long),
                               torch.tensor([i], dtype=torch.long))
            lp.append(float(logits.double().log_softmax(-1)[0, w[i + 1]]))
        out.append(lp)
    m.close()
    return out


def llamacpp_logprobs(gguf: str, windows, node_modules: str, work: str, threads: int):
    spec = os.path.join(work, "windows-%d.json" % os.getpid())
    with open(spec, "w") as f:
        json.dump({"windows": windows}, f)
    try:
        r = run(["node", os.path.join(HERE, "llamacpp_logprobs.mjs"), "--model", gguf,
                 "--windows", spec, "--node-modules", node_modules, "--threads", str(threads)])
    finally:
        os.unlink(spec)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    lps = [[(-math.inf if v is None else v) for v in w] for w in out["logprobs"]]
    info = {k: out[k] for k in ("node_llama_cpp", "llama_cpp_release", "ggml_cpu_variant",
                                "kv_cache_types")}
    rel = info["llama_cpp_release"]
    if isinstance(rel, dict):       # node-llama-cpp: {"repo": ..., "release": ...}
        info["llama_cpp_release"] = "%s %s" % (rel.get("repo", "?"), rel.get("release", "?"))
    return lps, info


def ppl(logprobs) -> float:
    flat = [v for w in logprobs for v in w]
    return math.exp(-sum(flat) / len(flat))


# -- one model ----------------------------------------------------------------------------------

def export_pte(checkpoint: str, flags: List[str], extra: List[str], out: str, lib: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), ETCH_LIB=lib,
               PYTHONDONTWRITEBYTECODE="1")
    run([sys.executable, "-m", "etch.llm", "export", "--checkpoint", checkpoint, "-o", out]
        + extra + flags, env=env)


def evaluate_model(name: str, m: dict, a, text: str, text_name: str, lib: str) -> dict:
    import gguf_writer
    import run_bench
    from etch.llm.checkpoint import load_checkpoint
    ckpt = m.get("checkpoint") or default_checkpoint(m, a.work, lib)
    args, state = load_checkpoint(ckpt)
    context = min(args.max_seq_len, a.window) if a.window else args.max_seq_len
    windows = windows_for(m["tokenizer"], text, a.tokens, context, 1)
    n_scored = sum(len(w) - 1 for w in windows)
    log("%s on %s: %d tokens scored in %d windows of up to %d"
        % (name, text_name, n_scored, len(windows), context))
    res = {"model": name, "text": text_name, "origin": m["origin"], "context": context,
           "windows": len(windows),
           "tokens": n_scored, "args": {k: getattr(args, k) for k in (
               "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
               "max_seq_len")}, "rows": []}
    t0 = time.time()
    ref = torch_logprobs(ckpt, windows)
    res["rows"].append({"engine": "PyTorch", "scheme": "float32", "bits": 32,
                        "ppl": ppl(ref), "seconds": time.time() - t0})
    key = hashlib.sha256((sha256(ckpt) + run_bench.exporter_fingerprint()).encode()).hexdigest()
    for scheme in a.schemes:
        if scheme not in ETCH_SCHEMES:
            continue
        flags, bits, desc = ETCH_SCHEMES[scheme]
        pte = os.path.join(a.work, "%s-%s-%s.pte" % (name, scheme, key[:12]))
        t0 = time.time()
        if not os.path.exists(pte):
            export_pte(ckpt, flags, m["export"], pte, lib)
        te = time.time() - t0
        t0 = time.time()
        lp = etch_logprobs(pte, windows, lib, a.threads)
        row = {"engine": "etch", "scheme": scheme, "bits": bits, "desc": desc,
               "ppl": ppl(lp), "file_bytes": os.path.getsize(pte), "export_seconds": te,
               "seconds": time.time() - t0,
               "max_abs_logprob_diff_vs_pytorch": max(abs(x - y) for w1, w2 in zip(lp, ref)
                                                      for x, y in zip(w1, w2))}
        if scheme == "f32" and "pte_sha256" in m:
            row["same_bytes_as_committed"] = sha256(pte) == m["pte_sha256"]
        res["rows"].append(row)
        log("%s etch %s: PPL %.4f (%.0f s)" % (name, scheme, row["ppl"], row["seconds"]))
    for tname, (quant, bits, out_type, desc) in LLAMACPP_TYPES.items():
        if tname not in a.schemes:
            continue
        gguf = os.path.join(a.work, "%s-%s-%s.gguf" % (name, tname, key[:12]))
        types: Dict[str, int] = {}
        gguf_writer.write_llama_gguf(gguf, args, state, m["tokenizer"], quant=quant,
                                     output_type=out_type, tensor_types=types)
        t0 = time.time()
        lp, info = llamacpp_logprobs(gguf, windows, a.node_modules, a.work, a.threads)
        mix = {}
        for n, t in types.items():
            mix.setdefault(gguf_writer.GGML_TYPE_NAMES[t], []).append(
                n.split(".", 2)[-1] if n.startswith("blk.") else n)
        row = {"engine": "llama.cpp", "scheme": tname, "bits": bits, "desc": desc,
               "ppl": ppl(lp),
               "file_bytes": os.path.getsize(gguf), "seconds": time.time() - t0,
               "tensor_types": {k: sorted(set(v)) for k, v in mix.items()},
               "max_abs_logprob_diff_vs_pytorch": max(abs(x - y) for w1, w2 in zip(lp, ref)
                                                      for x, y in zip(w1, w2))}
        res["rows"].append(row)
        res["llama_cpp"] = info
        log("%s llama.cpp %s: PPL %.4f" % (name, tname, row["ppl"]))
    base = {}
    for r in res["rows"]:
        if r["bits"] == 32:
            base[r["engine"]] = r["ppl"]
    for r in res["rows"]:
        if r["engine"] in base:
            r["dppl"] = r["ppl"] - base[r["engine"]]
    return res


def targets(res: dict) -> List[dict]:
    """Each etch scheme against llama.cpp's type of the same bit width."""
    ll = {r["bits"]: r for r in res["rows"]
          if r["engine"] == "llama.cpp" and r["scheme"] in ("Q8_0", "Q4_0")}
    out = []
    for r in res["rows"]:
        if r["engine"] == "etch" and r["bits"] < 32 and r["bits"] in ll and "dppl" in r:
            peer = ll[r["bits"]]
            out.append({"text": res["text"], "model": res["model"], "etch": r["scheme"],
                        "llama.cpp": peer["scheme"],
                        "etch_dppl": r["dppl"], "llamacpp_dppl": peer["dppl"],
                        "met": r["dppl"] <= peer["dppl"]})
    return out


# -- report -------------------------------------------------------------------------------------

def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _type_name(t) -> str:
    import gguf_writer
    return gguf_writer.GGML_TYPE_NAMES.get(t, str(t)) if isinstance(t, int) else str(t)


def _row_line(r) -> str:
    return "| %s | %s | %d | %.4f | %s | %s | %s |" % (
        r["engine"], r["scheme"] + (" (%s)" % r["desc"] if r.get("desc") else ""), r["bits"],
        r["ppl"], "%+.4f" % r["dppl"] if r["bits"] < 32 else "—",
        "{:,}".format(r["file_bytes"]) if "file_bytes" in r else "—",
        "%.2g" % r["max_abs_logprob_diff_vs_pytorch"]
        if "max_abs_logprob_diff_vs_pytorch" in r else "—")


def write_report(out_dir: str, results: dict) -> str:
    ll = results.get("llama_cpp", {})
    L = ["# LLM perplexity: etch's quantized exports vs llama.cpp's Q8_0 / Q4_0", ""]
    L.append("Written by `bench/llm_quality/llm_ppl.py` (%s, commit %s, %s, %d cores; the "
             "machine was shared with other jobs, timings are not the point here). Every figure "
             "in the tables is from this run; `results.json` holds them all."
             % (results["date"], results["commit"], results["machine"]["cpu"],
                results["machine"]["cores"] or 0))
    L.append("")
    L.append("**Protocol.** Each model's tokenizer encodes the text; the first %d tokens are "
             "scored, in windows of the model's context: BOS + up to context − 1 text tokens, "
             "each window from position 0, every text token predicted from BOS and the tokens "
             "before it in its window. PPL = exp(−mean log p). ΔPPL = PPL − the same engine's "
             "float32 PPL (so both engines' deltas start from their own float, which agree to "
             "1e-4 or better)." % results["tokens"])
    L.append("")
    L.append("**Rows.** *PyTorch* = etch.llm's reference module, all positions in one pass (the "
             "float reference). *etch* = `python3 -m etch.llm export --checkpoint C [--quantize "
             "S --group-size G [--asymmetric] --pad-groups]`, the `.pte` run by libetch through "
             "`etch.runtime` one token at a time (`forward(token, pos)` returns that position's "
             "logits; log-softmax of etch's float32 logits in float64). *llama.cpp* = "
             "`bench/llm/gguf_writer.py` of the same checkpoint (F32, or Q8_0 / Q4_0 with the "
             "tensor types of llama.cpp's own quantizer), run by node-llama-cpp %s (%s, ggml CPU "
             "variant %s, KV cache %s) through `llamacpp_logprobs.mjs` (`controlledEvaluate`, "
             "the next-token probabilities at every position). Rows marked *diagnostic* are not "
             "targets." % (ll.get("node_llama_cpp", "?"), ll.get("llama_cpp_release", "?"),
                           ll.get("ggml_cpu_variant", "?"),
                           "/".join(_type_name(t) for t in ll.get("kv_cache_types", ["?"]))))
    L.append("")
    for sec in results["texts"]:
        L.append("## Text: %s" % sec["name"])
        L.append("")
        L.append("`%s`: %s; %d characters." % (sec["path"], sec["what"], sec["chars"]))
        L.append("")
        for res in sec["models"]:
            a = res["args"]
            L.append("### %s" % res["model"])
            L.append("")
            L.append("%s: dim %d, hidden %d, %d layers, %d heads (%d kv), vocabulary %d, "
                     "context %d. %d tokens scored in %d windows of up to %d positions."
                     % (res["origin"], a["dim"], a["hidden_dim"], a["n_layers"], a["n_heads"],
                        a["n_kv_heads"], a["vocab_size"], a["max_seq_len"], res["tokens"],
                        res["windows"], res["context"]))
            L.append("")
            L.append("| engine | scheme | bits | PPL | ΔPPL | file bytes | max abs Δ log p vs "
                     "PyTorch |")
            L.append("|---|---|---:|---:|---:|---:|---:|")
            L.extend(_row_line(r) for r in res["rows"])
            L.append("")
            for r in res["rows"]:
                if "same_bytes_as_committed" in r:
                    L.append("The float32 `.pte` exported from the recovered checkpoint is %s "
                             "the committed `models/default/model.pte` (sha256 %s…)."
                             % ("byte-identical to" if r["same_bytes_as_committed"] else
                                "NOT identical to", res.get("pte_sha256", "?")[:16]))
                    L.append("")
            for r in res["rows"]:
                if r["engine"] == "llama.cpp" and r["bits"] < 32:
                    L.append("* llama.cpp %s tensor types: %s." % (r["scheme"], "; ".join(
                        "%s: %s" % (k, ", ".join(v))
                        for k, v in sorted(r["tensor_types"].items()))))
            L.append("")
    L.append("## Targets")
    L.append("")
    L.append("etch's ΔPPL at 4 bits no worse than llama.cpp Q4_0's, at 8 bits no worse than "
             "Q8_0's (issue 17).")
    L.append("")
    L.append("| text | model | etch | ΔPPL | llama.cpp | ΔPPL | etch no worse? |")
    L.append("|---|---|---|---:|---|---:|---|")
    for t_ in results["targets"]:
        L.append("| %s | %s | %s | %+.4f | %s | %+.4f | %s |"
                 % (t_["text"], t_["model"], t_["etch"], t_["etch_dppl"], t_["llama.cpp"],
                    t_["llamacpp_dppl"], "yes" if t_["met"] else "**no**"))
    L.append("")
    notes = os.path.join(HERE, "NOTES.md")
    if os.path.exists(notes) and not results.get("smoke"):
        with open(notes, encoding="utf-8") as f:
            L.append(f.read().rstrip("\n"))
        L.append("")
    path = os.path.join(out_dir, "REPORT.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(L))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", default="",
                   help="score this text only (default: the report's texts: text/stories.txt "
                        "for both models, %s for stories260K)" % DEFAULT_TEXT)
    p.add_argument("--tokens", type=int, default=2048, help="text tokens scored per model")
    p.add_argument("--window", type=int, default=0,
                   help="window length incl. BOS (default: each model's context)")
    p.add_argument("--models", default="all",
                   help="comma-separated stories260K,default (default: each text's own list)")
    p.add_argument("--schemes", default=",".join(list(ETCH_SCHEMES) + list(LLAMACPP_TYPES)))
    p.add_argument("--fixtures", default=os.path.join(REPO, "..", "shared", "fixtures", "llm"))
    p.add_argument("--etch-lib", default=os.environ.get("ETCH_LIB") or
                   os.path.join(REPO, "build", "libetch.so"))
    p.add_argument("--node-modules",
                   default=os.path.join(REPO, "build", "tests", "llm_bench", "node",
                                        "node_modules"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default=os.path.join(HERE, ".work"))
    p.add_argument("--out-dir", default=HERE)
    p.add_argument("--smoke", action="store_true",
                   help="stories260K, the first 96 tokens of %s in windows of 33, f32 / 4w-g32 "
                        "/ F32 / Q4_0" % DEFAULT_TEXT)
    p.add_argument("--report-only", action="store_true",
                   help="rewrite REPORT.md from the results.json in --out-dir (with NOTES.md)")
    a = p.parse_args(argv)
    if a.report_only:
        with open(os.path.join(a.out_dir, "results.json")) as f:
            log("wrote %s" % write_report(a.out_dir, json.load(f)))
        return 0
    if a.smoke:
        a.models, a.tokens, a.window = "stories260K", 96, 33
        a.text = a.text or DEFAULT_TEXT
        if a.schemes == p.get_default("schemes"):
            a.schemes = "f32,4w-g32,F32,Q4_0"
    a.schemes = [s for s in a.schemes.split(",") if s]
    bad = [s for s in a.schemes if s not in ETCH_SCHEMES and s not in LLAMACPP_TYPES]
    if bad:
        p.error("unknown scheme(s) %s (known: %s)" % (", ".join(bad), ", ".join(
            list(ETCH_SCHEMES) + list(LLAMACPP_TYPES))))
    if a.tokens < 2 or a.threads < 1 or (a.window and a.window < 2):
        p.error("--tokens and --window must be at least 2, --threads at least 1")
    if not os.path.isfile(a.etch_lib):
        p.error("no libetch at %s (build etch_shared, or --etch-lib)" % a.etch_lib)
    if any(s in LLAMACPP_TYPES for s in a.schemes) and not os.path.isfile(
            os.path.join(a.node_modules, "node-llama-cpp", "package.json")):
        p.error("node-llama-cpp is not installed in %s (ctest -R llm_bench.npm installs it; "
                "or --node-modules)" % a.node_modules)
    if a.text:
        texts = [(a.text, "stories260K,default" if a.models == "all" else a.models,
                  "a text given with --text")]
    else:
        texts = [(t, a.models if a.models != "all" else ms_, w) for t, ms_, w in TEXTS]
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out_dir, exist_ok=True)
    ms = models(os.path.abspath(a.fixtures))
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "commit": git_commit(), "machine": machine(), "tokens": a.tokens,
               "smoke": a.smoke, "texts": [], "targets": []}
    for path, names, what in texts:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            p.error("cannot read the text: %s" % e)
        sec = {"name": os.path.basename(path), "path": path, "what": what,
               "chars": len(text), "models": []}
        for n in [x for x in names.split(",") if x]:
            if n not in ms:
                p.error("unknown model %s (known: %s)" % (n, ", ".join(ms)))
            res = evaluate_model(n, ms[n], a, text, sec["name"], a.etch_lib)
            if "pte_sha256" in ms[n]:
                res["pte_sha256"] = ms[n]["pte_sha256"]
            if "llama_cpp" in res:
                results["llama_cpp"] = res["llama_cpp"]
            sec["models"].append(res)
            results["targets"] += targets(res)
        results["texts"].append(sec)
    path = write_report(a.out_dir, results)
    log("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
