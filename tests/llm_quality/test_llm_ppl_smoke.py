"""Smoke test of bench/llm_quality/llm_ppl.py (the perplexity report) on a tiny slice.

Runs `llm_ppl.py --smoke` (stories260K, the first 96 tokens of the GPL-3 text in 3 windows of
33 positions; etch float32 and 4w group 32 through libetch, llama.cpp F32 and Q4_0 through
node-llama-cpp) into the build directory, then checks, from its results.json and against
references computed here:
* the report was written (REPORT.md with the model's table and the targets table);
* etch float32 PPL == PyTorch float32 PPL within 1e-3 relative, and every etch log-probability
  within 1e-3 of PyTorch's (the script's own comparison column);
* llama.cpp F32 PPL == PyTorch float32 PPL within 1e-3 relative (the GGUF holds the same model);
* etch 4w group 32 PPL == the PPL of PyTorch's reference of the same quantization
  (etch.quantize(..., "4w", group_size=32, pad=True), computed here over the same windows)
  within 1e-3 relative: etch runs the quantized program as its reference formulas say;
* quantization acts: the 4w and Q4_0 log-probabilities differ from float32 (max |Δ log p| >
  1e-3), and their PPLs are finite, >= 1 and within a factor 4 of float32's;
* PPL recomputed here for PyTorch float32 over the same windows == the script's.

    test_llm_ppl_smoke.py --etch-lib LIB --node-modules DIR --fixtures DIR --work DIR
"""

import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "bench", "llm_quality", "llm_ppl.py")
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.dirname(SCRIPT))

failures = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)


def rel(a, b):
    return abs(a - b) / abs(b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--etch-lib", required=True)
    p.add_argument("--node-modules", required=True)
    p.add_argument("--fixtures", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--etch-lib", a.etch_lib,
                        "--node-modules", a.node_modules, "--fixtures", a.fixtures,
                        "--work", a.work, "--out-dir", a.work],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    print(r.stderr[-3000:])
    if r.returncode != 0:
        print("llm_ppl.py --smoke failed (exit %d)\n%s" % (r.returncode, r.stdout[-2000:]))
        return 1
    with open(os.path.join(a.work, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(a.work, "REPORT.md"), encoding="utf-8") as f:
        report = f.read()
    check("### stories260K" in report and "## Targets" in report and "| etch | 4w-g32" in report,
          "REPORT.md has the stories260K table and the targets")
    m = res["texts"][0]["models"][0]
    rows = {(x["engine"], x["scheme"]): x for x in m["rows"]}
    ref = rows[("PyTorch", "float32")]["ppl"]
    e32 = rows[("etch", "f32")]
    check(rel(e32["ppl"], ref) < 1e-3 and e32["max_abs_logprob_diff_vs_pytorch"] < 1e-3,
          "etch float32 PPL %.6f == PyTorch %.6f (rel %.2g), max |d log p| %.2g"
          % (e32["ppl"], ref, rel(e32["ppl"], ref), e32["max_abs_logprob_diff_vs_pytorch"]))
    l32 = rows[("llama.cpp", "F32")]
    check(rel(l32["ppl"], ref) < 1e-3,
          "llama.cpp F32 PPL %.6f == PyTorch %.6f (rel %.2g)"
          % (l32["ppl"], ref, rel(l32["ppl"], ref)))

    # PyTorch references over the same windows, computed here
    import torch
    import etch
    import llm_ppl
    from etch.llm.checkpoint import build_model
    from etch.llm.train import train_logits
    with open(llm_ppl.DEFAULT_TEXT, encoding="utf-8") as f:
        text = f.read()
    windows = llm_ppl.windows_for(os.path.join(a.fixtures, "tok512.model"), text, res["tokens"],
                                  m["context"], 1)
    check(sum(len(w) - 1 for w in windows) == m["tokens"] == 96 and len(windows) == 3,
          "the same 96 tokens in 3 windows")
    model = build_model(os.path.join(a.fixtures, "stories260K.bin"))
    q = etch.quantize(model, (torch.tensor([[1]]), torch.tensor([0])), "4w", group_size=32,
                      pad=True)

    def ppl_of(mod):
        tot, n = 0.0, 0
        with torch.no_grad():
            for w in windows:
                lp = train_logits(mod, torch.tensor([w])).double().log_softmax(-1)[0]
                for i in range(len(w) - 1):
                    tot += float(lp[i, w[i + 1]])
                    n += 1
        return math.exp(-tot / n)

    here = ppl_of(model)
    check(rel(here, ref) < 1e-9, "PyTorch float32 PPL recomputed here %.6f == the script's %.6f"
          % (here, ref))
    q_ref = ppl_of(q)
    e4 = rows[("etch", "4w-g32")]
    check(rel(e4["ppl"], q_ref) < 1e-3,
          "etch 4w group 32 PPL %.6f == PyTorch's etch.quantize reference %.6f (rel %.2g)"
          % (e4["ppl"], q_ref, rel(e4["ppl"], q_ref)))
    for key in (("etch", "4w-g32"), ("llama.cpp", "Q4_0")):
        x = rows[key]
        check(math.isfinite(x["ppl"]) and 1.0 <= x["ppl"] <= 4 * ref and
              x["max_abs_logprob_diff_vs_pytorch"] > 1e-3,
              "%s %s: PPL %.3f finite, >= 1, <= 4 x float32's %.3f, log-probabilities moved "
              "by up to %.3g (quantized)" % (key[0], key[1], x["ppl"], ref,
                                             x["max_abs_logprob_diff_vs_pytorch"]))
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
