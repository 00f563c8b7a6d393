"""Golden data of tests/llm_runner/test_chat.py, written into OUT_DIR:

* tokenizer.json: a Hugging Face byte-level BPE tokenizer (no merges: one id per byte, the
  GPT-2 byte alphabet at ids 3..258) with three special added tokens, <|im_end|> (0),
  <|im_start|> (1), <|endoftext|> (2): 259 ids.
* chat.pte: a 1-layer llama with random weights (seed 16), vocabulary 264 (padded past the
  tokenizer), a 96-token context, EOS <|im_end|>, and a ChatML chat template as the
  `get_chat_template` metadata method (8 String outputs, the order etch's HF exporter writes).
* eos.pte: the same with a zero classifier: every logit is 0, so greedy decoding picks id 0,
  <|im_end|>, the EOS, at once.
* plain.pte: vocabulary 264, no chat template, BOS <|endoftext|>.
* wide.pte: the same with vocabulary 520: more than the 512-id fixture tokenizers, and far
  more than tokenizer.json's 259 ids (no padded embedding), for the vocabulary-size checks.
* template.json: the template's strings, for the test's reference encoding.

    gen_chat_models.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from etch.llm.export import export_llama, metadata_plan  # noqa: E402
from etch.llm.model import Llama, ModelArgs  # noqa: E402
from etch.serialize import pte as P  # noqa: E402
from etch.serialize import schema as S  # noqa: E402

SPECIALS = ["<|im_end|>", "<|im_start|>", "<|endoftext|>"]
N_SPECIAL = len(SPECIALS)
WINDOW = 96

# [conversation_prefix, system_prefix, system_suffix, user_prefix, user_suffix,
#  assistant_prefix, assistant_suffix, default_system]
TEMPLATE = ["", "<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n", "<|im_end|>\n",
            "<|im_start|>assistant\n", "<|im_end|>\n", "Be kind."]


def byte_alphabet():
    """GPT-2's bytes_to_unicode: byte -> the character that stands for it in vocab strings."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json():
    alpha = byte_alphabet()
    vocab = {alpha[b]: N_SPECIAL + b for b in range(256)}
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                          "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def string_plan(name, values):
    """A method with no inputs and no instructions returning the String constants `values`."""
    evs = [S.EValue(S.String(v)) for v in values]
    n = len(evs)
    return S.ExecutionPlan(
        name=name, container_meta_type=S.ContainerMetadata(
            "T2#0#0(T0(),D0())", "T%d%s(%s)" % (n, "#1" * n, ",".join("$" * n))),
        values=evs, inputs=[], outputs=list(range(n)),
        chains=[S.Chain(inputs=[], outputs=[], instructions=[])], operators=[], delegates=[],
        non_const_buffer_sizes=[0])


def write_model(path, vocab, *, zero_classifier=False, template=None, bos=2, eos=(0,)):
    torch.manual_seed(16)
    a = ModelArgs(dim=32, hidden_dim=64, n_layers=1, n_heads=2, n_kv_heads=1,
                  vocab_size=vocab, max_seq_len=WINDOW, shared_classifier=False)
    m = Llama(a)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.5)
        if zero_classifier:
            m.output.weight.zero_()
    # a sanitizer-built libetch cannot be loaded into Python (ETCH_SANITIZED): no op check
    ex = export_llama(m, bos_id=bos, eos_ids=eos,
                      check_ops=not os.environ.get("ETCH_SANITIZED"))
    plans = [mm.plan for mm in ex.program.methods]
    plans += [metadata_plan(k, v) for k, v in ex.metadata.items()]
    if template is not None:
        plans.append(string_plan("get_chat_template", template))
    data = P.serialize_program(S.Program(version=0, execution_plan=plans), ex.program.data)
    tmp = "%s.tmp" % path
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(), ensure_ascii=False),
                                        encoding="utf-8")
    (out / "template.json").write_text(json.dumps(TEMPLATE), encoding="utf-8")
    write_model(out / "chat.pte", 264, template=TEMPLATE)
    write_model(out / "eos.pte", 264, zero_classifier=True, template=TEMPLATE)
    write_model(out / "plain.pte", 264)
    write_model(out / "wide.pte", 520)


if __name__ == "__main__":
    main()
