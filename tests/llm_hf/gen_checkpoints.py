"""Writes small random-weight Hugging Face model folders, in the layout transformers saves,
and their golden data from the PyTorch reference (reference.py):

    gen_checkpoints.py OUTDIR

OUTDIR/<name>/ holds config.json (transformers' key names), the weights, tokenizer.json (a
byte-level BPE in the format of the tokenizers library), tokenizer_config.json with the
model family's chat template, generation_config.json where the family has one, and
reference.json: the prompt's ids, the reference's greedy ids and the last position's logits.

    llama    LlamaForCausalLM, Llama 3 style: untied lm_head, GQA 4/2, rope_scaling llama3,
             bf16 model-0000x-of-00002.safetensors + model.safetensors.index.json, BOS added
             by the tokenizer, eos ids from generation_config.json
    qwen2    Qwen2ForCausalLM as Qwen2-0.5B-Instruct: tied, bias on q/k/v, GQA 4/2, f32
             model.safetensors, vocab padded beyond the tokenizer's ids, ChatML with a
             default system message
    smollm   LlamaForCausalLM as SmolLM2-Instruct: tied, GQA 3/1, explicit head_dim,
             pytorch_model.bin (torch.save of the bf16 state dict), special tokens first
    llama2   LlamaForCausalLM, Llama 2 style with attention_bias and mlp_bias, rope_scaling
             linear, f16 pytorch_model-0000x-of-00002.bin + pytorch_model.bin.index.json, the
             [INST] <<SYS>> chat template (not expressible: exported without one)

The logits rows of ids that do not decode to printable ASCII (other bytes, special tokens,
padding) are zero, so the generated text of every greedy run is plain ASCII and `etch llm`'s
text can be compared exactly.  Every greedy step's margin (best minus second logit) must be
at least MIN_MARGIN, so float rounding cannot flip a choice.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

PROMPT = "the cat sat on the mat"
GREEDY = 24
MIN_MARGIN = 1e-3
MERGES = [("h", "e"), ("t", "he"), ("Ġ", "t"), ("Ġt", "he"), ("a", "t"), ("Ġ", "c"),
          ("Ġc", "at"), ("Ġ", "s"), ("Ġs", "at"), ("o", "n"), ("Ġ", "on"), ("Ġ", "m"),
          ("Ġm", "at")]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# chat templates as the models' tokenizer_config.json carry them (after JSON decoding)
CHATML_QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CHATML_SMOLLM = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and "
    "system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
    "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}")


def byte_chars():
    """GPT-2's byte -> printable character map, in its order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


class Tokenizer:
    """The vocabulary: optional special tokens first, the 256 byte characters, the merges,
    then the special tokens."""

    def __init__(self, specials, specials_first=False):
        self.vocab = {}
        self.specials = list(specials)
        if specials_first:
            for s in specials:
                self.vocab[s] = len(self.vocab)
        self.byte_of = {}
        for b, c in byte_chars():
            self.vocab[c] = len(self.vocab)
            self.byte_of[c] = b
        for a, b in MERGES:
            self.vocab[a + b] = len(self.vocab)
        self.n_base = len(self.vocab)
        if not specials_first:
            for s in specials:
                self.vocab[s] = len(self.vocab)
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.char_of = {b: c for c, b in self.byte_of.items()}

    def __len__(self):
        return len(self.vocab)

    def encode(self, text):
        """BPE of a text of lowercase words and single spaces (the pre-tokenizers split it
        into ' ?[a-z]+' words)."""
        assert re.fullmatch(r"[a-z]+( [a-z]+)*", text)
        rank = {p: i for i, p in enumerate(MERGES)}
        ids = []
        for w in re.findall(r" ?[a-z]+", text):
            parts = [self.char_of[b] for b in w.encode()]
            while True:
                pairs = [(rank.get((parts[i], parts[i + 1]), 1 << 30), i)
                         for i in range(len(parts) - 1)]
                if not pairs or min(pairs)[0] == 1 << 30:
                    break
                _, i = min(pairs)
                parts[i:i + 2] = [parts[i] + parts[i + 1]]
            ids += [self.vocab[p] for p in parts]
        return ids

    def decode(self, ids) -> bytes:
        out = b""
        for i in ids:
            t = self.id_to_tok[i]
            out += t.encode() if t in self.specials else bytes(self.byte_of[c] for c in t)
        return out

    def printable(self, i) -> bool:
        t = self.id_to_tok.get(i)
        if t is None or t in self.specials:
            return False
        return all(0x20 <= self.byte_of[c] <= 0x7E for c in t)

    def json(self, split_regex, bos=None):
        added = [{"id": self.vocab[s], "content": s, "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True}
                 for s in self.specials]
        if split_regex:
            pre = {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": split_regex}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False}]}
        else:
            pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                   "use_regex": True}
        post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                "use_regex": True}
        if bos is not None:
            post = {"type": "Sequence", "processors": [post, {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [self.vocab[bos]],
                                         "tokens": [bos]}}}]}
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": None, "pre_tokenizer": pre, "post_processor": post,
                "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                            "trim_offsets": True, "use_regex": True},
                "model": {"type": "BPE", "dropout": None, "unk_token": None,
                          "continuing_subword_prefix": None, "end_of_word_suffix": None,
                          "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                          "vocab": self.vocab,
                          "merges": ["%s %s" % m for m in MERGES]}}


# ---- the test's own safetensors writer (independent of etch.llm.safetensors) ----
ST_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}


def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bfloat16:      # the upper 16 bits of the float32 (exact: t is bf16)
        return (t.float().view(torch.int32) >> 16).to(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """transformers' layout: JSON header (names sorted, __metadata__ {"format": "pt"}),
    padded with spaces to 8 bytes, then the tensors' bytes back to back."""
    header, blobs, off = {}, [], 0
    header["__metadata__"] = metadata if metadata is not None else {"format": "pt"}
    for name in sorted(tensors):
        raw = tensor_bytes(tensors[name])
        header[name] = {"dtype": ST_NAMES[tensors[name].dtype],
                        "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def hf_state(cfg, gen, dtype, zero_rows):
    """Random weights under Hugging Face's names, rounded to `dtype`; the classifier rows of
    `zero_rows` are zero."""
    D, I = cfg["hidden_size"], cfg["intermediate_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = cfg.get("head_dim") or D // H
    V = cfg["vocab_size"]
    qwen = cfg["architectures"][0] == "Qwen2ForCausalLM"
    attn_bias = qwen or cfg.get("attention_bias", False)

    def mat(o, i):
        return torch.randn(o, i, generator=gen) / i ** 0.5

    def vec(n, s=0.1, c=0.0):
        return c + s * torch.randn(n, generator=gen)

    tied = cfg.get("tie_word_embeddings", False)
    # small embeddings when tied, so the classifier does not just repeat the input token
    sd = {"model.embed_tokens.weight": torch.randn(V, D, generator=gen) * (0.1 if tied
                                                                           else 1.0),
          "model.norm.weight": vec(D, 0.1, 1.0)}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        sd[p + "input_layernorm.weight"] = vec(D, 0.1, 1.0)
        sd[p + "post_attention_layernorm.weight"] = vec(D, 0.1, 1.0)
        for n, o, i in (("q_proj", H * hd, D), ("k_proj", KV * hd, D), ("v_proj", KV * hd, D),
                        ("o_proj", D, H * hd)):
            sd[p + "self_attn.%s.weight" % n] = mat(o, i) * (2.0 if n in ("q_proj",
                                                                          "k_proj") else 1.0)
            if attn_bias and (n != "o_proj" or not qwen):
                sd[p + "self_attn.%s.bias" % n] = vec(o, 0.3)
        for n, o, i in (("gate_proj", I, D), ("up_proj", I, D), ("down_proj", D, I)):
            sd[p + "mlp.%s.weight" % n] = mat(o, i)
            if cfg.get("mlp_bias", False):
                sd[p + "mlp.%s.bias" % n] = vec(o, 0.1)
    cls = sd["model.embed_tokens.weight"] if tied else mat(V, D) * 4.0
    cls[zero_rows] = 0
    if not tied:
        sd["lm_head.weight"] = cls
    return {k: v.to(dtype) for k, v in sd.items()}


def base_llama(**kw):
    cfg = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
           "attention_dropout": 0.0, "hidden_act": "silu", "initializer_range": 0.02,
           "mlp_bias": False, "model_type": "llama", "pretraining_tp": 1,
           "torch_dtype": "bfloat16", "transformers_version": "4.45.0", "use_cache": True}
    cfg.update(kw)
    return cfg


def models():
    l3 = Tokenizer(["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"])
    qw = Tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    sm = Tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], specials_first=True)
    l2 = Tokenizer(["<unk>", "<s>", "</s>"], specials_first=True)
    yield dict(
        name="llama", tok=l3, split=LLAMA3_SPLIT, bos="<|begin_of_text|>", dtype=torch.bfloat16,
        layout="safetensors-sharded", template=LLAMA3,
        special={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        cfg=base_llama(bos_token_id=l3.vocab["<|begin_of_text|>"],
                       eos_token_id=l3.vocab["<|end_of_text|>"], hidden_size=64,
                       intermediate_size=160, max_position_embeddings=131072,
                       num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2,
                       rms_norm_eps=1e-05, rope_theta=500000.0,
                       rope_scaling={"factor": 8.0, "high_freq_factor": 4.0,
                                     "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": 64,
                                     "rope_type": "llama3"},
                       tie_word_embeddings=False, vocab_size=len(l3)),
        gen={"bos_token_id": l3.vocab["<|begin_of_text|>"],
             "eos_token_id": [l3.vocab["<|end_of_text|>"], l3.vocab["<|eot_id|>"]],
             "do_sample": True, "temperature": 0.6, "top_p": 0.9,
             "transformers_version": "4.45.0"})
    yield dict(
        name="qwen2", seed=1, tok=qw, split=QWEN2_SPLIT, bos=None, dtype=torch.float32,
        layout="safetensors", template=CHATML_QWEN2,
        special={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        cfg={"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
             "bos_token_id": qw.vocab["<|endoftext|>"], "eos_token_id": qw.vocab["<|im_end|>"],
             "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
             "intermediate_size": 128, "max_position_embeddings": 32768,
             "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 4,
             "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
             "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
             "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
             "use_sliding_window": False, "vocab_size": len(qw) + 21},
        gen={"bos_token_id": qw.vocab["<|endoftext|>"], "pad_token_id": qw.vocab["<|endoftext|>"],
             "do_sample": True, "eos_token_id": [qw.vocab["<|im_end|>"],
                                                 qw.vocab["<|endoftext|>"]],
             "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
             "transformers_version": "4.40.1"})
    yield dict(
        name="smollm", tok=sm, split=None, bos=None, dtype=torch.bfloat16, layout="torch",
        template=CHATML_SMOLLM,
        special={"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                 "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>"},
        cfg=base_llama(bos_token_id=1, eos_token_id=2, head_dim=16, hidden_size=48,
                       intermediate_size=128, is_llama_config=True,
                       max_position_embeddings=8192, num_attention_heads=3,
                       num_hidden_layers=3, num_key_value_heads=1, pad_token_id=2,
                       rms_norm_eps=1e-05, rope_interleaved=False, rope_scaling=None,
                       rope_theta=100000, tie_word_embeddings=True, vocab_size=len(sm)),
        gen=None)
    yield dict(
        name="llama2", tok=l2, split=None, bos="<s>", dtype=torch.float16,
        layout="torch-sharded", template=LLAMA2,
        special={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        cfg=base_llama(attention_bias=True, mlp_bias=True, bos_token_id=1, eos_token_id=2,
                       hidden_size=32, intermediate_size=96, max_position_embeddings=4096,
                       num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=4,
                       rms_norm_eps=1e-06, rope_theta=10000.0,
                       rope_scaling={"type": "linear", "factor": 2.0},
                       tie_word_embeddings=False, torch_dtype="float16",
                       vocab_size=len(l2)),
        gen={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
             "transformers_version": "4.31.0"})


def shard_names(sd):
    """Two shards: layer 0 and the embedding in the first, the rest in the second."""
    first = [k for k in sd if k.startswith(("model.embed_tokens", "model.layers.0."))]
    return [{k: sd[k] for k in first}, {k: v for k, v in sd.items() if k not in first}]


def write_weights(d, sd, layout):
    if layout == "safetensors":
        write_safetensors(os.path.join(d, "model.safetensors"), sd)
    elif layout == "torch":
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    else:
        ext = "safetensors" if layout.startswith("safetensors") else "bin"
        stem = "model" if ext == "safetensors" else "pytorch_model"
        shards = shard_names(sd)
        wm = {}
        total = 0
        for i, part in enumerate(shards):
            fn = "%s-%05d-of-%05d.%s" % (stem, i + 1, len(shards), ext)
            if ext == "safetensors":
                write_safetensors(os.path.join(d, fn), part)
            else:
                torch.save(part, os.path.join(d, fn))
            for k, v in part.items():
                wm[k] = fn
                total += v.numel() * v.element_size()
        index = "%s.%s.index.json" % (stem, ext)
        with open(os.path.join(d, index), "w") as f:
            json.dump({"metadata": {"total_size": total},
                       "weight_map": dict(sorted(wm.items()))}, f, indent=2)


def main(out):
    for m in models():
        d = os.path.join(out, m["name"])
        os.makedirs(d, exist_ok=True)
        cfg, tok = m["cfg"], m["tok"]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        if m["gen"]:
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump(m["gen"], f, indent=2)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok.json(m["split"], m["bos"]), f, ensure_ascii=False)
        tc = {"add_prefix_space": False, "chat_template": m["template"],
              "clean_up_tokenization_spaces": False, "model_max_length": 131072,
              "tokenizer_class": "PreTrainedTokenizerFast"}
        tc.update(m["special"])
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(tc, f, indent=2, ensure_ascii=False)
        V = cfg["vocab_size"]
        zero = [i for i in range(V) if not tok.printable(i)]
        gen = torch.Generator().manual_seed(m.get("seed", 0) * 1000 + sum(map(ord, m["name"])))
        sd = hf_state(cfg, gen, m["dtype"], zero)
        write_weights(d, sd, m["layout"])
        ref = {k: v.float() for k, v in sd.items()}
        prompt = ([tok.vocab[m["bos"]]] if m["bos"] else []) + tok.encode(PROMPT)
        ids = list(prompt)
        with torch.no_grad():
            logits0 = reference.forward(cfg, ref, ids)[-1]
            for step in range(GREEDY):
                lg = reference.forward(cfg, ref, ids)[-1]
                top = torch.topk(lg, 2).values
                if float(top[0] - top[1]) < MIN_MARGIN:
                    raise SystemExit("%s: greedy step %d has margin %g < %g; change the seed"
                                     % (m["name"], step, float(top[0] - top[1]), MIN_MARGIN))
                ids.append(int(torch.argmax(lg)))
        greedy = ids[len(prompt):]
        assert greedy == reference.greedy(cfg, ref, prompt, GREEDY)
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump({"prompt": PROMPT, "prompt_ids": prompt, "greedy_ids": greedy,
                       "greedy_text": tok.decode(greedy).decode("ascii"),
                       "logits": [float(x) for x in logits0],
                       "chat_template": m["template"], "special": m["special"]}, f)
        print("%s: prompt %s -> %s" % (m["name"], prompt, greedy))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: gen_checkpoints.py OUTDIR")
    main(sys.argv[1])
