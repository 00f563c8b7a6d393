"""Loading llama2.c checkpoints: the ``.bin`` export (version 0 layout) and PyTorch checkpoints.

llama2.c ``.bin``, version 0 ("legacy") layout, little endian:

* a header of 7 int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  a negative vocab_size means the classifier is stored separately (not shared with the token
  embedding);
* float32 arrays, in this order: token embedding [vocab, dim]; attention RMSNorm weights
  [L, dim]; wq [L, dim, dim]; wk [L, kv_dim, dim]; wv [L, kv_dim, dim]; wo [L, dim, dim]; FFN
  RMSNorm weights [L, dim]; w1 [L, hidden, dim]; w2 [L, dim, hidden]; w3 [L, hidden, dim];
  final RMSNorm [dim]; two RoPE tables [seq_len, head_dim / 2] (cos, sin; unused, the model
  recomputes them); then, when not shared, the classifier [vocab, dim].
  (kv_dim = dim * n_kv_heads / n_heads.)

PyTorch checkpoints are dicts with ``model_args`` (dim, n_layers, n_heads, n_kv_heads,
vocab_size, hidden_dim or multiple_of, max_seq_len, ...) and ``model`` (a state dict whose keys
may carry torch.compile's ``_orig_mod.`` prefix).
"""

from __future__ import annotations

import struct
from typing import Dict, Optional, Tuple

import torch

from ..safe_load import load_tensors
from .model import Llama, ModelArgs

__all__ = ["load_checkpoint", "load_llama2c_bin", "load_torch_checkpoint", "build_model"]


def load_llama2c_bin(path: str) -> Tuple[ModelArgs, Dict[str, torch.Tensor]]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 28:
        raise ValueError("%s: too short for a llama2.c header" % path)
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    args = ModelArgs(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads,
                     n_kv_heads=n_kv, vocab_size=vocab, max_seq_len=seq_len,
                     shared_classifier=shared)
    try:
        args.check()
    except ValueError as e:
        raise ValueError("%s: not a llama2.c version 0 checkpoint (%s)" % (path, e)) from None
    hd = dim // n_heads
    kv_dim = hd * n_kv
    L = n_layers
    layout = [
        ("tok_embeddings.weight", (vocab, dim)),
        ("attention_norm", (L, dim)),
        ("wq", (L, dim, dim)),
        ("wk", (L, kv_dim, dim)),
        ("wv", (L, kv_dim, dim)),
        ("wo", (L, dim, dim)),
        ("ffn_norm", (L, dim)),
        ("w1", (L, hidden, dim)),
        ("w2", (L, dim, hidden)),
        ("w3", (L, hidden, dim)),
        ("norm.weight", (dim,)),
        ("rope_cos", (seq_len, hd // 2)),
        ("rope_sin", (seq_len, hd // 2)),
    ]
    if not shared:
        layout.append(("output.weight", (vocab, dim)))
    need = 28 + 4 * sum(_numel(s) for _, s in layout)
    if len(data) < need:
        raise ValueError("%s: %d bytes, the header's shapes need %d" % (path, len(data), need))
    if len(data) != need:
        raise ValueError("%s: %d bytes, expected exactly %d for a version 0 checkpoint "
                         "(other versions start with a magic number)" % (path, len(data), need))
    flat = torch.frombuffer(bytearray(data[28:]), dtype=torch.float32)
    off = 0
    arrays: Dict[str, torch.Tensor] = {}
    for name, shape in layout:
        n = _numel(shape)
        arrays[name] = flat[off:off + n].reshape(shape).clone()
        off += n
    per_layer = {"attention_norm": "attention_norm.weight", "wq": "attention.wq.weight",
                 "wk": "attention.wk.weight", "wv": "attention.wv.weight",
                 "wo": "attention.wo.weight", "ffn_norm": "ffn_norm.weight",
                 "w1": "feed_forward.w1.weight", "w2": "feed_forward.w2.weight",
                 "w3": "feed_forward.w3.weight"}
    state: Dict[str, torch.Tensor] = {}
    for name, arr in arrays.items():
        if name in per_layer:
            for l in range(L):
                state["layers.%d.%s" % (l, per_layer[name])] = arr[l]
        elif not name.startswith("rope_"):
            state[name] = arr
    return args, state


def load_torch_checkpoint(path: str) -> Tuple[ModelArgs, Dict[str, torch.Tensor]]:
    # tensors and plain containers only: nothing stored in the file runs
    ck = load_tensors(path)
    if not isinstance(ck, dict) or "model" not in ck or "model_args" not in ck:
        raise ValueError("%s: expected a dict with 'model_args' and 'model'" % path)
    ma = dict(ck["model_args"])
    state = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v
             for k, v in ck["model"].items()}
    dim = int(ma["dim"])
    n_heads = int(ma["n_heads"])
    n_kv = int(ma.get("n_kv_heads") or n_heads)
    hidden = ma.get("hidden_dim")
    if not hidden:
        w1 = state.get("layers.0.feed_forward.w1.weight")
        if w1 is not None:
            hidden = int(w1.shape[0])
        else:   # llama2.c model.py's rule
            multiple_of = int(ma.get("multiple_of", 256))
            hidden = int(2 * (4 * dim) / 3)
            hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)
    emb = state["tok_embeddings.weight"]
    out = state.get("output.weight")
    shared = out is None or out.data_ptr() == emb.data_ptr() or torch.equal(out, emb)
    args = ModelArgs(dim=dim, hidden_dim=int(hidden), n_layers=int(ma["n_layers"]),
                     n_heads=n_heads, n_kv_heads=n_kv, vocab_size=int(ma["vocab_size"]),
                     max_seq_len=int(ma["max_seq_len"]), shared_classifier=shared,
                     norm_eps=float(ma.get("norm_eps", 1e-5)))
    if shared:
        state.pop("output.weight", None)
    return args, {k: v.float() for k, v in state.items()}


def load_checkpoint(path: str) -> Tuple[ModelArgs, Dict[str, torch.Tensor]]:
    """A llama2.c ``.bin`` (version 0) or a PyTorch checkpoint, told apart by the bytes: a
    PyTorch checkpoint is a zip (``PK``) or a pickle (``0x80``)."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:2] == b"PK" or head[:1] == b"\x80":
        return load_torch_checkpoint(path)
    return load_llama2c_bin(path)


def build_model(path: str, max_seq_len: Optional[int] = None) -> Llama:
    """The reference module with the checkpoint's weights, its context cut to max_seq_len
    (default: the checkpoint's)."""
    args, state = load_checkpoint(path)
    if max_seq_len is not None:
        if max_seq_len < 2:
            raise ValueError("max_seq_len must be at least 2")
        args.max_seq_len = int(max_seq_len)
    model = Llama(args)
    model.load_weights(state)
    return model.eval()


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
