#!/usr/bin/python3
"""Perplexity of stories260K with a float32 and an int8 KV cache, through the etch runtime.

Usage: PYTHONPATH=python ETCH_LIB=build/libetch.so \\
       /usr/bin/python3 tests/llm_attention/kv_int8_ppl.py [--fixtures DIR] [--tokens N]

The held-out text: stories from etch.llm.storygen (the project's own grammar, seed 17;
stories260K was trained on TinyStories, not on these), one story a line, tokenized with
tok512.model (sentencepiece), each story preceded by BOS, concatenated until N tokens
(default 2048).  The text is cut into windows of the model's context (512 positions): each
window starts a fresh cache at position 0 with BOS, then the tokens are fed one per forward
call (the program returns the logits of the last position only), and every token after the
first of a window is scored by -log softmax(logits)[token] of the call before it.  PPL =
exp(mean NLL) over the same scored tokens for every file; the files: the default export
(float32 cache), --kv-cache int8, and --kv-cache int8 --fused-attention.  Prints one line per
file and the differences.
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402


def held_out(sp, n_tokens, seed=17):
    from etch.llm.storygen import generate
    ids = []
    for s in generate(100000, seed):
        ids += [1] + sp.encode(s)
        if len(ids) >= n_tokens:
            return ids[:n_tokens]
    return ids


def nll(mod, ids, ctx):
    total, count = 0.0, 0
    for w0 in range(0, len(ids), ctx):
        win = ids[w0:w0 + ctx]
        if win[0] != 1:
            win = [1] + win[:ctx - 1]
        for pos, tok in enumerate(win):
            if pos:
                total -= float(torch.log_softmax(logits.double(), -1)[tok])
                count += 1
            out = mod.forward(torch.tensor([[tok]]), torch.tensor([pos]))
            logits = (out[0] if isinstance(out, (list, tuple)) else out).clone()[0]
    return total, count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fixtures", default=os.path.join(HERE, "..", "..", "..", "shared",
                                                      "fixtures", "llm"))
    p.add_argument("--tokens", type=int, default=2048)
    a = p.parse_args()
    import sentencepiece
    import etch
    from etch.llm import export_llama
    from etch.llm.checkpoint import build_model
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(a.fixtures,
                                                                       "tok512.model"))
    ids = held_out(sp, a.tokens)
    model = build_model(os.path.join(a.fixtures, "stories260K.bin"), None)
    ctx = model.args.max_seq_len
    res = {}
    for name, fused, kv in (("float32", False, "float32"), ("int8", False, "int8"),
                            ("int8 fused", True, "int8")):
        e = export_llama(model, check_ops=False, fused_attention=fused, kv_cache=kv)
        total, count = nll(etch.runtime.load(e.buffer), ids, ctx)
        res[name] = math.exp(total / count)
        print("%-11s kv %5d bytes/token  PPL %.4f over %d scored tokens (%d held-out tokens)"
              % (name, e.kv_cache[1], res[name], count, len(ids)))
    for name in ("int8", "int8 fused"):
        print("dPPL %-10s %+.4f (%+.3f%%)" % (name, res[name] - res["float32"],
                                              100 * (res[name] / res["float32"] - 1)))


if __name__ == "__main__":
    main()
