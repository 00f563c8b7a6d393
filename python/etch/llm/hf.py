"""Hugging Face llama-family checkpoints: a model folder as ``transformers`` saves it.

* ``config.json``: ``architectures`` ``LlamaForCausalLM`` (Llama 2/3, SmolLM) or
  ``Qwen2ForCausalLM``; hidden_size, intermediate_size, num_hidden_layers,
  num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps, rope_theta, rope_scaling
  (``linear``, ``llama3``), tie_word_embeddings, vocab_size, max_position_embeddings,
  hidden_act (``silu``), bos/eos_token_id, attention_bias and mlp_bias (Llama: bias on q/k/v/o,
  on gate/up/down); Qwen2 has a bias on q/k/v (not o) always;
* the weights: ``model.safetensors``, shards listed by ``model.safetensors.index.json``
  (``weight_map``), ``pytorch_model.bin`` or shards listed by ``pytorch_model.bin.index.json``;
* ``generation_config.json`` (optional): its bos/eos ids override the config's.

Hugging Face applies RoPE to the two halves of each head (rotate_half); its conversion from
Meta's checkpoints permuted the q/k rows of every head so that pair (2i, 2i+1) became
(i, i + head_dim/2).  The importer undoes that permutation on q_proj/k_proj (weights and
biases), so :class:`etch.llm.model.Llama` computes exactly the same attention scores with its
interleaved rotation, and the exported graph needs no other operators.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from ..safe_load import load_tensors
from . import safetensors
from .model import Llama, ModelArgs

__all__ = ["HFCheckpoint", "load_hf", "build_hf_model", "read_config", "load_hf_weights",
           "DEFAULT_MAX_SEQ_LEN", "tokenizer_vocab_size"]

ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM")
DEFAULT_MAX_SEQ_LEN = 2048     # KV-cache positions unless --max-seq-len says otherwise


@dataclass
class HFCheckpoint:
    args: ModelArgs
    state: Dict[str, torch.Tensor]          # etch's names (tok_embeddings.weight, ...)
    architecture: str
    bos_id: int                             # -1 when the model has none
    eos_ids: List[int]
    max_position_embeddings: int
    tokenizer_json: Optional[str] = None
    notes: List[str] = field(default_factory=list)


def _load_json(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            d = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: not valid JSON (%s)" % (path, e)) from None
    if not isinstance(d, dict):
        raise ValueError("%s: expected a JSON object" % path)
    return d


def _int(cfg: dict, key: str, path: str, default=None) -> int:
    v = cfg.get(key, default)
    if v is None:
        raise ValueError("%s: %s is missing" % (path, key))
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError("%s: %s = %r must be a positive integer" % (path, key, v))
    return v


def _ids(v, key: str, path: str) -> List[int]:
    if v is None:
        return []
    vals = v if isinstance(v, list) else [v]
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in vals):
        raise ValueError("%s: %s = %r must be a token id or a list of ids" % (path, key, v))
    return list(vals)


def read_config(d: str, max_seq_len: Optional[int] = None
                ) -> Tuple[ModelArgs, str, dict]:
    """ModelArgs of DIR/config.json (KV cache sized by max_seq_len, default
    min(max_position_embeddings, DEFAULT_MAX_SEQ_LEN)), the architecture and the raw config."""
    path = os.path.join(d, "config.json")
    if not os.path.isfile(path):
        raise ValueError("%s: no config.json (not a Hugging Face model folder)" % d)
    cfg = _load_json(path)
    archs = cfg.get("architectures") or []
    arch = next((a for a in archs if a in ARCHITECTURES), None)
    if arch is None:
        mt = cfg.get("model_type")
        arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}.get(mt)
        if arch is None or archs:
            raise ValueError("%s: architecture %s (model_type %r) is not supported; supported: "
                             "%s" % (path, archs or "?", mt, ", ".join(ARCHITECTURES)))
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError("%s: hidden_act %r is not supported (only silu)" % (path, act))
    dim = _int(cfg, "hidden_size", path)
    n_heads = _int(cfg, "num_attention_heads", path)
    n_kv = _int(cfg, "num_key_value_heads", path, n_heads)
    head_dim = cfg.get("head_dim")
    if head_dim is not None:
        head_dim = _int(cfg, "head_dim", path)
    elif dim % n_heads:
        raise ValueError("%s: hidden_size %d is not a multiple of num_attention_heads %d"
                         % (path, dim, n_heads))
    if n_heads % n_kv:
        raise ValueError("%s: num_attention_heads %d is not a multiple of num_key_value_heads "
                         "%d" % (path, n_heads, n_kv))
    max_pos = _int(cfg, "max_position_embeddings", path, 2048)
    if max_seq_len is None:
        seq = min(max_pos, DEFAULT_MAX_SEQ_LEN)
    else:
        if max_seq_len < 2:
            raise ValueError("max_seq_len must be at least 2")
        if max_seq_len > max_pos:
            raise ValueError("max_seq_len %d exceeds the model's max_position_embeddings %d"
                             % (max_seq_len, max_pos))
        seq = int(max_seq_len)
    scaling = cfg.get("rope_scaling")
    if scaling is not None:
        if not isinstance(scaling, dict):
            raise ValueError("%s: rope_scaling must be an object" % path)
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind in (None, "default"):
            scaling = None
        elif kind not in ("linear", "llama3"):
            raise ValueError("%s: rope_scaling type %r is not supported (only linear and "
                             "llama3)" % (path, kind))
        else:
            scaling = dict(scaling, rope_type=kind)
    if arch == "Qwen2ForCausalLM":
        if cfg.get("use_sliding_window"):
            sw = cfg.get("sliding_window")
            if isinstance(sw, int) and sw < seq:
                raise ValueError("%s: sliding-window attention (window %d < context %d) is not "
                                 "supported; export with --max-seq-len %d or less"
                                 % (path, sw, seq, sw))
        qkv_bias, o_bias, mlp_bias = True, False, False
    else:
        qkv_bias = o_bias = bool(cfg.get("attention_bias", False))
        mlp_bias = bool(cfg.get("mlp_bias", False))
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)
    for k, v in (("rms_norm_eps", eps), ("rope_theta", theta)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ValueError("%s: %s = %r must be a positive number" % (path, k, v))
    args = ModelArgs(dim=dim, hidden_dim=_int(cfg, "intermediate_size", path),
                     n_layers=_int(cfg, "num_hidden_layers", path), n_heads=n_heads,
                     n_kv_heads=n_kv, vocab_size=_int(cfg, "vocab_size", path),
                     max_seq_len=seq, shared_classifier=bool(cfg.get("tie_word_embeddings", False)),
                     norm_eps=float(eps), rope_theta=float(theta), n_head_dim=head_dim or 0,
                     qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
                     rope_scaling=scaling)
    try:
        args.check()
    except ValueError as e:
        raise ValueError("%s: %s" % (path, e)) from None
    return args, arch, cfg


def _shard_files(d: str) -> Tuple[List[str], str]:
    """The weight files of DIR and their kind ("safetensors" or "torch")."""
    for index, kind in (("model.safetensors.index.json", "safetensors"),
                        ("pytorch_model.bin.index.json", "torch")):
        p = os.path.join(d, index)
        if os.path.isfile(p):
            wm = _load_json(p).get("weight_map")
            if not isinstance(wm, dict) or not wm or \
                    not all(isinstance(v, str) for v in wm.values()):
                raise ValueError("%s: weight_map must map tensor names to file names" % p)
            files = []
            for f in wm.values():
                if os.path.basename(f) != f:
                    raise ValueError("%s: shard %r is not a file name in the folder" % (p, f))
                if f not in files:
                    files.append(f)
            missing = [f for f in files if not os.path.isfile(os.path.join(d, f))]
            if missing:
                raise ValueError("%s: shard %s is missing" % (p, missing[0]))
            return [os.path.join(d, f) for f in files], kind
    for single, kind in (("model.safetensors", "safetensors"), ("pytorch_model.bin", "torch")):
        p = os.path.join(d, single)
        if os.path.isfile(p):
            return [p], kind
    raise ValueError("%s: no weights (model.safetensors, model.safetensors.index.json, "
                     "pytorch_model.bin or pytorch_model.bin.index.json)" % d)


def load_hf_weights(d: str) -> Dict[str, torch.Tensor]:
    """The state dict of DIR's weight files under Hugging Face's names, as stored."""
    files, kind = _shard_files(d)
    state: Dict[str, torch.Tensor] = {}
    for f in files:
        if kind == "safetensors":
            part = safetensors.load_file(f)
        else:
            part = load_tensors(f)
            if not isinstance(part, dict) or \
                    not all(isinstance(v, torch.Tensor) for v in part.values()):
                raise ValueError("%s: expected a state dict of tensors" % f)
        for k, v in part.items():
            if k in state:
                raise ValueError("%s: tensor %s is also in another shard" % (f, k))
            state[k] = v
    return state


def _unpermute(w: torch.Tensor, n_heads: int, hd: int) -> torch.Tensor:
    """Rows of each head from Hugging Face's half-split order (i, i + hd/2) back to
    interleaved pairs (2i, 2i+1); w [n_heads * hd, ...] or a bias [n_heads * hd]."""
    rest = w.shape[1:]
    return w.reshape(n_heads, 2, hd // 2, *rest).transpose(1, 2).reshape(n_heads * hd, *rest)


def convert_state(hf: Dict[str, torch.Tensor], a: ModelArgs, where: str
                  ) -> Dict[str, torch.Tensor]:
    """Hugging Face names -> etch's (q/k rows un-permuted), float32; every tensor the model
    needs must be there with its shape, and nothing else."""
    hf = dict(hf)
    for k in [k for k in hf if k.endswith("rotary_emb.inv_freq")]:
        del hf[k]                          # a buffer older transformers saved
    hd = a.head_dim
    out: Dict[str, torch.Tensor] = {}

    def take(src: str, dst: str, shape, heads: int = 0):
        if src not in hf:
            raise ValueError("%s: tensor %s is missing" % (where, src))
        t = hf.pop(src)
        if tuple(t.shape) != tuple(shape):
            raise ValueError("%s: tensor %s has shape %s, the config wants %s"
                             % (where, src, tuple(t.shape), tuple(shape)))
        if not t.is_floating_point():
            raise ValueError("%s: tensor %s has dtype %s, not floating point"
                             % (where, src, t.dtype))
        t = t.float()
        out[dst] = _unpermute(t, heads, hd) if heads else t

    take("model.embed_tokens.weight", "tok_embeddings.weight", (a.vocab_size, a.dim))
    take("model.norm.weight", "norm.weight", (a.dim,))
    qd, kvd = a.n_heads * hd, a.n_kv_heads * hd
    for l in range(a.n_layers):
        p, q = "model.layers.%d." % l, "layers.%d." % l
        take(p + "input_layernorm.weight", q + "attention_norm.weight", (a.dim,))
        take(p + "post_attention_layernorm.weight", q + "ffn_norm.weight", (a.dim,))
        for name, dst, shape, heads in (("q_proj", "wq", (qd, a.dim), a.n_heads),
                                        ("k_proj", "wk", (kvd, a.dim), a.n_kv_heads),
                                        ("v_proj", "wv", (kvd, a.dim), 0),
                                        ("o_proj", "wo", (a.dim, qd), 0)):
            take(p + "self_attn.%s.weight" % name, q + "attention.%s.weight" % dst, shape,
                 heads)
            if (a.o_bias if name == "o_proj" else a.qkv_bias):
                take(p + "self_attn.%s.bias" % name, q + "attention.%s.bias" % dst,
                     shape[:1], heads)
        for name, dst, shape in (("gate_proj", "w1", (a.hidden_dim, a.dim)),
                                 ("down_proj", "w2", (a.dim, a.hidden_dim)),
                                 ("up_proj", "w3", (a.hidden_dim, a.dim))):
            take(p + "mlp.%s.weight" % name, q + "feed_forward.%s.weight" % dst, shape)
            if a.mlp_bias:
                take(p + "mlp.%s.bias" % name, q + "feed_forward.%s.bias" % dst, shape[:1])
    if a.shared_classifier:
        hf.pop("lm_head.weight", None)     # tied: the embedding is the classifier
    else:
        take("lm_head.weight", "output.weight", (a.vocab_size, a.dim))
    if hf:
        raise ValueError("%s: unexpected tensors for this config: %s%s"
                         % (where, ", ".join(sorted(hf)[:5]), " ..." if len(hf) > 5 else ""))
    return out


def tokenizer_vocab_size(path: str) -> int:
    """Ids of a tokenizer.json: 1 + the largest id of model.vocab and added_tokens."""
    tj = _load_json(path)
    model = tj.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(vocab, dict):
        raise ValueError("%s: no model.vocab object" % path)
    ids = [v for v in vocab.values() if isinstance(v, int)]
    for t in tj.get("added_tokens") or []:
        if isinstance(t, dict) and isinstance(t.get("id"), int):
            ids.append(t["id"])
    if not ids:
        raise ValueError("%s: the vocabulary is empty" % path)
    return max(ids) + 1


def load_hf(d: str, max_seq_len: Optional[int] = None) -> HFCheckpoint:
    args, arch, cfg = read_config(d, max_seq_len)
    cpath = os.path.join(d, "config.json")
    bos = _ids(cfg.get("bos_token_id"), "bos_token_id", cpath)
    eos = _ids(cfg.get("eos_token_id"), "eos_token_id", cpath)
    gpath = os.path.join(d, "generation_config.json")
    if os.path.isfile(gpath):
        g = _load_json(gpath)
        if "bos_token_id" in g:
            bos = _ids(g["bos_token_id"], "bos_token_id", gpath)
        if "eos_token_id" in g:
            eos = _ids(g["eos_token_id"], "eos_token_id", gpath)
    if not eos:
        raise ValueError("%s: no eos_token_id (config.json or generation_config.json)" % d)
    for t in bos + eos:
        if t >= args.vocab_size:
            raise ValueError("%s: token id %d outside the vocabulary (%d)"
                             % (d, t, args.vocab_size))
    notes = []
    tok = os.path.join(d, "tokenizer.json")
    if os.path.isfile(tok):
        n = tokenizer_vocab_size(tok)
        if n > args.vocab_size:
            raise ValueError("%s: %d token ids, more than the model's vocab_size %d"
                             % (tok, n, args.vocab_size))
        if n < args.vocab_size:
            notes.append("tokenizer.json has %d ids, the model %d (padded vocabulary)"
                         % (n, args.vocab_size))
    else:
        tok = None
    state = convert_state(load_hf_weights(d), args, d)
    return HFCheckpoint(args=args, state=state, architecture=arch,
                        bos_id=bos[0] if bos else -1, eos_ids=list(dict.fromkeys(eos)),
                        max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                        tokenizer_json=tok, notes=notes)


def build_hf_model(ck: HFCheckpoint) -> Llama:
    model = Llama(ck.args)
    model.load_weights(ck.state)
    return model.eval()
