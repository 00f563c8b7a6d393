"""Command line of :mod:`etch.llm`.

    python3 -m etch.llm export (--checkpoint PATH | --hf DIR) [--max-seq-len N] [--bos-id 1]
                               [--eos-ids 1,2] [--no-check] [--summary]
                               [--fused-attention | --executorch-llm-ops]
                               [--backend xnnpack] [--no-chat-template]
                               [--quantize 4w|8da4w|8w|int8-dynamic] [--group-size G]
                               [--asymmetric] [--pad-groups] [--quantize-output SCHEME]
                               [--embedding-quantize BITS[,GROUP]] [--kv-cache int8]
                               -o model.pte
    python3 -m etch.llm generate (--checkpoint PATH | --hf DIR) [--prompt-ids 1,...]
                                 [--max-new-tokens N] [--max-seq-len N] [--token-by-token]

``export`` writes the program (progress on stderr).  ``--hf DIR`` reads a Hugging Face model
folder (:mod:`etch.llm.hf`): config.json, the weights, generation_config.json, tokenizer.json
(checked against the vocabulary) and the chat template of tokenizer_config.json
(:mod:`etch.llm.chat`, stored as ``get_chat_template``).  ``--quantize`` quantizes the
linear layers (:func:`etch.quantize`; under a 4-bit scheme the classifier at 8 bits unless
``--quantize-output`` says otherwise), ``--embedding-quantize`` the token embedding,
``--kv-cache int8`` stores the KV cache as int8 (a float32 scale and an int8 zero point per
position and kv head).  ``generate`` runs the reference module
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


DEFAULT_MAX_SEQ_LEN = 2048      # etch.llm.hf.DEFAULT_MAX_SEQ_LEN (not imported: torch)


def _source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="llama2.c .bin (version 0) or PyTorch checkpoint (.pt)")
    src.add_argument("--hf", metavar="DIR",
                     help="Hugging Face model folder (LlamaForCausalLM, Qwen2ForCausalLM): "
                          "config.json, *.safetensors or pytorch_model.bin, tokenizer.json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m etch.llm",
                                description="llama checkpoints -> etch .pte programs")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export a checkpoint to a .pte program")
    _source(e)
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--max-seq-len", type=int, default=None,
                   help="KV-cache positions (default: the checkpoint's; --hf: "
                        "max_position_embeddings, at most %d)" % DEFAULT_MAX_SEQ_LEN)
    e.add_argument("--bos-id", type=int, default=None,
                   help="BOS id, -1 for none (default 1; --hf: the config's when the "
                        "tokenizer adds BOS, else -1)")
    e.add_argument("--eos-ids", type=_ids, default=None,
                   help="ids that end generation (default 1,2: llama2.c's models end a story "
                        "with BOS; --hf: eos_token_id of generation_config.json or "
                        "config.json)")
    e.add_argument("--no-chat-template", action="store_true",
                   help="--hf: do not store the chat template (get_chat_template)")
    e.add_argument("--no-check", action="store_true",
                   help="skip the operator check against libetch")
    e.add_argument("--summary", action="store_true", help="print the program summary")
    e.add_argument("--fused-attention", action="store_true",
                   help="attend with the etch-only operator etch::sdpa_kv (only the keys "
                        "up to the current position; the file then loads in etch only, not "
                        "in ExecuTorch)")
    e.add_argument("--executorch-llm-ops", action="store_true",
                   help="attend with ExecuTorch's LLM custom operators: llama::update_cache "
                        "writes the KV cache ([1, S, n_kv, head_dim] per layer) and "
                        "llama::custom_sdpa reads only the keys up to the current position, "
                        "as ExecuTorch's llama export with --use_sdpa_with_kv_cache; the file "
                        "loads in etch and in ExecuTorch runtimes that link its custom ops "
                        "library (extension/llm/custom_ops); not with --fused-attention or "
                        "--kv-cache int8")
    e.add_argument("--backend", choices=["xnnpack"], default=None,
                   help="lower what XNNPACK computes (the float linears, norms, rotary "
                        "arithmetic) to XnnpackBackend payloads, as ExecuTorch's llama export "
                        "with -X does; attention and the KV cache stay operators")
    e.add_argument("--quantize", metavar="SCHEME", default=None,
                   help="quantize the linear layers: 4w (int4 weights, group-wise), 8da4w "
                        "(int4 weights + int8 dynamic per-token activations), 8w (int8 "
                        "weights per channel), int8-dynamic (int8 weights and activations)")
    e.add_argument("--group-size", type=int, default=None,
                   help="4w / 8da4w: columns per scale, 32, 64, 128 or 256 (default 128)")
    e.add_argument("--asymmetric", action="store_true",
                   help="4w / 8da4w: a zero point per group")
    e.add_argument("--pad-groups", action="store_true",
                   help="4w / 8da4w: pad in_features that the group size does not divide "
                        "with zero columns (instead of an error)")
    e.add_argument("--quantize-output", default="auto",
                   choices=("auto", "same", "8w", "int8-dynamic", "4w", "8da4w"),
                   help="the classifier's scheme: auto (default: 8w under 4w / 8da4w, as "
                        "llama.cpp's Q4_0 keeps its output at 8 bits; else as --quantize), "
                        "same (as --quantize), or a scheme")
    e.add_argument("--embedding-quantize", metavar="BITS[,GROUP]", default=None,
                   help="quantize the token embedding: 8 or 4 bits, GROUP columns per scale "
                        "(default: one scale per row), e.g. 4,32")
    e.add_argument("--kv-cache", default="float32", choices=("float32", "int8"),
                   help="KV cache storage: float32 (default) or int8 (per position and kv "
                        "head: int8 values, a float32 scale and an int8 zero point; with "
                        "--fused-attention read by etch::sdpa_kv_q8, else dequantized with "
                        "ExecuTorch's dequantize_per_token before attention)")
    g = sub.add_parser("generate", help="greedy generation in eager PyTorch (reference)")
    _source(g)
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

    hf = None
    try:
        if args.hf:
            from .hf import build_hf_model, load_hf
            hf = load_hf(args.hf, args.max_seq_len)
            model = build_hf_model(hf)
        else:
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
    bos_id = 1 if args.bos_id is None else args.bos_id
    eos_ids = [1, 2] if args.eos_ids is None else args.eos_ids
    extra = {}
    if hf is not None:
        try:
            bos_id, eos_ids, extra = _hf_extras(args, hf, say)
        except (OSError, ValueError, ImportError) as e:
            print("error: %s" % e, file=sys.stderr)
            return 1
    from .export import export_llama
    try:
        exp = export_llama(model, bos_id=bos_id, eos_ids=eos_ids,
                           check_ops=False if args.no_check else "auto", progress=say,
                           fused_attention=args.fused_attention, extra_metadata=extra,
                           quantize=args.quantize, group_size=args.group_size,
                           symmetric=not args.asymmetric, pad_groups=args.pad_groups,
                           embedding_quantize=args.embedding_quantize,
                           kv_cache=args.kv_cache, output_quantize=args.quantize_output,
                           executorch_llm_ops=args.executorch_llm_ops,
                           backend=args.backend)
    except (OSError, ValueError, RuntimeError) as e:   # no libetch, operator check, ...
        print("error: %s" % e, file=sys.stderr)
        return 1
    exp.save(args.output)
    say("wrote %s (%d bytes); kv cache %s, %d bytes per token"
        % (args.output, len(exp.buffer), exp.kv_cache[0], exp.kv_cache[1]))
    if args.summary:
        print(exp.summary(), file=sys.stderr)
    return 0


def _hf_extras(args, hf, say):
    """BOS, EOS ids and the chat template metadata of a Hugging Face folder."""
    import os
    from . import chat
    a = hf.args
    scaling = a.rope_scaling and a.rope_scaling["rope_type"]
    say("%s: rope theta %g%s, rms eps %g, head_dim %d%s; context %d of the model's %d"
        % (hf.architecture, a.rope_theta, ", scaling %s" % scaling if scaling else "",
           a.norm_eps, a.head_dim, ", q/k/v bias" if a.qkv_bias else "", a.max_seq_len,
           hf.max_position_embeddings))
    for n in hf.notes:
        say(n)
    bos_id = args.bos_id
    if bos_id is None:
        bos_id = hf.bos_id if hf.bos_id >= 0 and _adds_bos(args.hf) else -1
    eos_ids = args.eos_ids if args.eos_ids is not None else hf.eos_ids
    say("bos %d, eos %s" % (bos_id, ",".join(str(t) for t in eos_ids)))
    if hf.tokenizer_json:
        say("tokenizer: %s (etch llm --tokenizer %s)" % (hf.tokenizer_json, hf.tokenizer_json))
    else:
        say("warning: %s has no tokenizer.json" % args.hf)
    extra = {}
    if args.no_chat_template:
        return bos_id, eos_ids, extra
    tpl, special = chat.load_template(args.hf)
    if tpl is None:
        say("no chat template in %s" % os.path.join(args.hf, "tokenizer_config.json"))
        return bos_id, eos_ids, extra
    strings, why = chat.derive(tpl, special)
    if strings is None:
        say("warning: chat template not stored (no get_chat_template): %s" % why)
        return bos_id, eos_ids, extra
    if chat.strips_text(tpl, special):
        say("note: the chat template strips whitespace around message texts; "
            "get_chat_template carries them as given")
    say("chat template: %s" % ", ".join("%s=%r" % kv for kv in zip(chat.FIELDS, strings)))
    extra["get_chat_template"] = strings
    if args.eos_ids is None and hf.tokenizer_json:
        turn_end = _turn_end_id(hf.tokenizer_json, strings[chat.FIELDS.index("assistant_suffix")])
        if turn_end is not None and turn_end not in eos_ids:
            eos_ids = list(eos_ids) + [turn_end]
            say("eos %s: the template's end of an assistant turn (id %d) stops a reply too"
                % (",".join(str(t) for t in eos_ids), turn_end))
    return bos_id, eos_ids, extra


def _turn_end_id(tokenizer_json: str, assistant_suffix: str):
    """The id of the special token that opens `assistant_suffix` (e.g. ``<|im_end|>``,
    ``<|eot_id|>``): a chat reply ends with it even where config.json names only the base
    model's end-of-text token as EOS.  None when the suffix starts with no special token."""
    import json
    with open(tokenizer_json, "rb") as f:
        tj = json.loads(f.read().decode("utf-8"))
    best = None
    for t in (tj.get("added_tokens") or []) if isinstance(tj, dict) else []:
        if not isinstance(t, dict) or not t.get("special") or not isinstance(t.get("id"), int):
            continue
        c = t.get("content")
        if isinstance(c, str) and c and assistant_suffix.startswith(c) and \
                (best is None or len(c) > len(best[0])):
            best = (c, t["id"])
    return None if best is None else best[1]


def _adds_bos(d: str) -> bool:
    """Whether the folder's tokenizer starts a text with BOS: add_bos_token in
    tokenizer_config.json, else a TemplateProcessing post-processor of tokenizer.json that
    begins with a special token."""
    import json
    import os
    p = os.path.join(d, "tokenizer_config.json")
    if os.path.isfile(p):
        with open(p, "rb") as f:
            tc = json.loads(f.read().decode("utf-8"))
        if isinstance(tc, dict) and isinstance(tc.get("add_bos_token"), bool):
            return tc["add_bos_token"]
    p = os.path.join(d, "tokenizer.json")
    if not os.path.isfile(p):
        return True
    with open(p, "rb") as f:
        tj = json.loads(f.read().decode("utf-8"))
    pp = tj.get("post_processor") if isinstance(tj, dict) else None
    procs = (pp.get("processors") or []) if isinstance(pp, dict) and \
        pp.get("type") == "Sequence" else [pp]
    for q in procs:
        if isinstance(q, dict) and q.get("type") == "TemplateProcessing":
            single = q.get("single") or []
            return bool(single) and isinstance(single[0], dict) and "SpecialToken" in single[0]
    return False
