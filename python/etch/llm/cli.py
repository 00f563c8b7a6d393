"""Command line of :mod:`etch.llm`.

    python3 -m etch.llm export --checkpoint PATH [--max-seq-len N] [--bos-id 1]
                               [--eos-ids 1,2] [--no-check] [--summary]
                               [--fused-attention] -o model.pte
    python3 -m etch.llm generate --checkpoint PATH [--prompt-ids 1,...] [--max-new-tokens N]
                                 [--max-seq-len N] [--token-by-token]

``export`` writes the program (progress on stderr).  ``generate`` runs the reference module
in eager PyTorch, greedy, and prints the generated ids (one line, comma separated): the
reference the C runner is checked against.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional


def _ids(s: str) -> List[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, got %r" % s)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m etch.llm",
                                description="llama checkpoints -> etch .pte programs")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export a checkpoint to a .pte program")
    e.add_argument("--checkpoint", required=True,
                   help="llama2.c .bin (version 0) or PyTorch checkpoint (.pt)")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--max-seq-len", type=int, default=None,
                   help="KV-cache positions (default: the checkpoint's)")
    e.add_argument("--bos-id", type=int, default=1)
    e.add_argument("--eos-ids", type=_ids, default=[1, 2],
                   help="ids that end generation (default 1,2: llama2.c's models end a story "
                        "with BOS)")
    e.add_argument("--no-check", action="store_true",
                   help="skip the operator check against libetch")
    e.add_argument("--summary", action="store_true", help="print the program summary")
    e.add_argument("--fused-attention", action="store_true",
                   help="attend with the etch-only operator etch::sdpa_kv (only the keys "
                        "up to the current position; the file then loads in etch only, not "
                        "in ExecuTorch)")
    g = sub.add_parser("generate", help="greedy generation in eager PyTorch (reference)")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--prompt-ids", type=_ids, default=[1])
    g.add_argument("--max-new-tokens", type=int, default=32)
    g.add_argument("--max-seq-len", type=int, default=None)
    g.add_argument("--stop-ids", type=_ids, default=[])
    g.add_argument("--token-by-token", action="store_true",
                   help="feed the prompt one token per call instead of one prefill")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from .checkpoint import build_model
    t0 = time.time()

    def say(msg: str) -> None:
        print("[%6.1fs] %s" % (time.time() - t0, msg), file=sys.stderr, flush=True)

    try:
        model = build_model(args.checkpoint, args.max_seq_len)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    a = model.args
    if args.cmd == "generate":
        from .model import greedy
        steps = min(len(args.prompt_ids) + args.max_new_tokens, a.max_seq_len)
        ids = greedy(model, args.prompt_ids, steps, stop_ids=args.stop_ids,
                     prefill=not args.token_by_token)
        print(",".join(str(i) for i in ids))
        return 0
    say("model: dim %d, hidden %d, %d layers, %d heads (%d kv), vocab %d, context %d, %s "
        "classifier" % (a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads, a.vocab_size,
                        a.max_seq_len, "shared" if a.shared_classifier else "separate"))
    from .export import export_llama
    try:
        exp = export_llama(model, bos_id=args.bos_id, eos_ids=args.eos_ids,
                           check_ops=False if args.no_check else "auto", progress=say,
                           fused_attention=args.fused_attention)
    except (OSError, ValueError, RuntimeError) as e:   # no libetch, operator check, ...
        print("error: %s" % e, file=sys.stderr)
        return 1
    exp.save(args.output)
    say("wrote %s (%d bytes)" % (args.output, len(exp.buffer)))
    if args.summary:
        print(exp.summary(), file=sys.stderr)
    return 0
