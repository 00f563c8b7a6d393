"""The GGUF written by bench/llm/gguf_writer.py holds the model etch runs: llama.cpp
(node-llama-cpp's prebuilt CPU library, through bench/llm/llamacpp_bench.mjs) generates the same
greedy tokens.

1. stories260K (../shared/fixtures/llm: llama2.c checkpoint, its 512-token sentencepiece vocab,
   5 layers, 8 heads, 4 kv heads, shared classifier) from BOS, 258 tokens:
   llama.cpp's ids == etch.llm's eager reference (python3 -m etch.llm generate), their text ==
   the published greedy text == the text of `etch llm` on the exported .pte.
2. A random model on the 32000-token llama2 vocabulary with a separate classifier (the
   benchmark's recipe at a small size), a 40-token prompt prefilled in one batch, 24 tokens:
   llama.cpp's ids == the eager reference.

Both would fail if the Q/K rows needed the permutation llama.cpp's convert script applies to
Hugging Face checkpoints (rotary pairs vs halves), or if a tensor were transposed or misnamed.

    test_gguf_llamacpp.py --etch ETCH --node-modules DIR --fixtures DIR --work DIR [--no-check]
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "bench", "llm")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "python"))

failures = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)


def finish():
    """The exit status: 1 (saying how many) when a check failed, else 0."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        print("command failed (exit %d): %s\n%s\n%s" % (r.returncode, " ".join(cmd)[:400],
                                                       r.stdout[-3000:], r.stderr[-3000:]))
        sys.exit(1)
    return r


def reference_ids(ckpt, prompt, n_new):
    r = run([sys.executable, "-m", "etch.llm", "generate", "--checkpoint", ckpt,
             "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(n_new)])
    return [int(x) for x in r.stdout.strip().split(",") if x]


def llamacpp_ids(node_modules, gguf, prompt, n_new, context):
    r = run(["node", os.path.join(BENCH, "llamacpp_bench.mjs"), "--model", gguf,
             "--prompt-ids", ",".join(map(str, prompt)), "--new-tokens", str(n_new),
             "--context", str(context), "--threads", "1", "--node-modules", node_modules])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print("llama.cpp: node-llama-cpp %s, ggml CPU variant %s (%s), KV cache types %s"
          % (out["node_llama_cpp"], out["ggml_cpu_variant"], out["ggml_cpu_library"],
             out["kv_cache_types"]))
    return out["runs"][0]["tokens"]


def first_difference(a, b):
    """'identical', or where a and b first differ."""
    if a == b:
        return "identical"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "first difference at %d" % i
    return "lengths %d and %d" % (len(a), len(b))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--etch", required=True)
    p.add_argument("--node-modules", required=True)
    p.add_argument("--fixtures", required=True, help="../shared/fixtures/llm")
    p.add_argument("--work", required=True)
    p.add_argument("--no-check", action="store_true",
                   help="export without the operator check (sanitizer builds)")
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.node_modules, "node-llama-cpp", "package.json")):
        print("node-llama-cpp is not installed in %s (the llm_bench.npm test installs it)"
              % a.node_modules)
        return 1
    for f in ("stories260K.bin", "tok512.model", "stories260K_greedy.txt",
              "llama2_tokenizer_32000.model"):
        if not os.path.exists(os.path.join(a.fixtures, f)):
            print("missing fixture %s in %s" % (f, a.fixtures))
            return 1
    os.makedirs(a.work, exist_ok=True)
    import sentencepiece as spm
    from etch.llm.checkpoint import load_checkpoint
    from gguf_writer import write_llama_gguf
    import run_bench

    # 1. stories260K from BOS
    ckpt = os.path.join(a.fixtures, "stories260K.bin")
    tok = os.path.join(a.fixtures, "tok512.model")
    with open(os.path.join(a.fixtures, "stories260K_greedy.txt"), encoding="utf-8") as f:
        expected_text = f.read()
    n_new = 258
    args, state = load_checkpoint(ckpt)
    gguf = os.path.join(a.work, "stories260K.gguf")
    write_llama_gguf(gguf, args, state, tok)
    ll = llamacpp_ids(a.node_modules, gguf, [1], n_new, args.max_seq_len)
    ref = reference_ids(ckpt, [1], n_new)
    check(len(ll) == n_new and ll == ref,
          "stories260K: llama.cpp's %d greedy ids == etch.llm's eager reference (%s)"
          % (n_new, first_difference(ll, ref)))
    sp = spm.SentencePieceProcessor()
    sp.Load(tok)
    text = sp.DecodeIds(ll)
    check(text == expected_text,
          "stories260K: llama.cpp's text == stories260K_greedy.txt (%s)"
          % first_difference(text, expected_text))
    pte = os.path.join(a.work, "stories260K.pte")
    cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint", ckpt, "-o", pte]
    run(cmd + (["--no-check"] if a.no_check else []))
    r = run([a.etch, "llm", "--model", pte, "--tokenizer", tok, "--temperature", "0",
             "--max-new-tokens", str(n_new)])
    check(r.stdout == text,
          "stories260K: `etch llm` text == llama.cpp's text (%s)"
          % first_difference(r.stdout, text))

    # 2. a random model on the 32000-token vocabulary, separate classifier, prompt in one batch
    big_tok = os.path.join(a.fixtures, "llama2_tokenizer_32000.model")
    run_bench.TOKENIZER = big_tok
    args2 = run_bench.model_args("stories15M", 128)
    args2.dim, args2.n_layers, args2.n_heads, args2.n_kv_heads = 64, 2, 4, 4
    args2.hidden_dim = run_bench.hidden_dim(64)
    st = run_bench.random_state(args2, 7)
    ckpt2 = os.path.join(a.work, "random32000.bin")
    run_bench.write_llama2c_bin(ckpt2, args2, st)
    gguf2 = os.path.join(a.work, "random32000.gguf")
    write_llama_gguf(gguf2, args2, st, big_tok)
    prompt, _ = run_bench.prompt_ids(40)
    ll2 = llamacpp_ids(a.node_modules, gguf2, prompt, 24, 128)
    ref2 = reference_ids(ckpt2, prompt, 24)
    check(len(ll2) == 24 and ll2 == ref2,
          "random 32000-vocabulary model: llama.cpp's 24 greedy ids after a 40-token prompt == "
          "etch.llm's eager reference (%s)" % first_difference(ll2, ref2))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
