"""A reference llama decoder (llama2.c's architecture) written for export.

The math is llama2.c's: RMSNorm (eps 1e-5, weight * x / sqrt(mean(x^2) + eps)), rotary
embeddings over adjacent pairs (x[2i], x[2i+1]) of each head with frequency
10000^(-2i/head_dim), grouped-query attention (head h reads kv head h // (n_heads /
n_kv_heads)), SwiGLU feed-forward w2(silu(w1 x) * w3 x), a final RMSNorm and a classifier that
is the token embedding when the checkpoint shares it.

For Hugging Face checkpoints (:mod:`etch.llm.hf`) the arguments also carry a head size that
is not dim / n_heads, biases on the q/k/v projections (Qwen2), on the output projection and
on the feed-forward (Llama's ``attention_bias`` / ``mlp_bias``), and RoPE frequency scaling
(``linear``, ``llama3``).  Hugging Face's half-split RoPE (rotate_half) is the same rotation
after a permutation of each head's q/k rows, which the importer undoes, so the module keeps
one (interleaved) convention.

The module owns its KV cache as buffers, written in place at the positions of the current
tokens, so the exported program holds the cache as mutable state:

* ``k_cache`` of layer l is ``[n_kv_heads, head_dim, max_seq_len]`` (keys stored transposed, so
  the scores are one batched matmul over the cache, with no copy of it) and ``v_cache`` is
  ``[n_kv_heads, max_seq_len, head_dim]``;
* ``forward(tokens[1, T], start_pos[1])`` writes positions ``start_pos .. start_pos + T - 1``
  with ``index_put`` (slicing the cache by a position tensor cannot be traced in torch 1.13),
  attends over the whole cache with a causal mask (key position <= query position) and
  returns the logits of the **last** position, shape ``[1, vocab_size]``.

With an int8 cache (:meth:`Llama.set_kv_cache`, ``export_llama(..., kv_cache="int8")``)
both caches are int8 ``[n_kv_heads, max_seq_len, head_dim]`` with ``*_scales`` (float32)
and ``*_zero_points`` (int8) ``[n_kv_heads, max_seq_len, 1]`` beside them; the new rows are
quantized per (position, kv head) with ExecuTorch's
``choose_qparams_per_token_asymmetric`` + ``quantize_per_token``, and the whole cache is
dequantized (``dequantize_per_token``) before the masked attention, or read by
``etch::sdpa_kv_q8`` with fused attention.

With ExecuTorch's LLM operators (:meth:`Llama.set_executorch_llm_ops`, what
``export_llama(..., executorch_llm_ops=True)`` uses) both caches are ``[1, max_seq_len,
n_kv_heads, head_dim]``, written with ``index_copy_`` (``llama::update_cache`` once exported)
and read by ``etch_trace::custom_sdpa`` (``llama::custom_sdpa`` once exported;
:mod:`etch.llm.et_ops`).

Prefill is one call with T prompt tokens; decoding is T = 1.  Nothing checks that
``start_pos + T <= max_seq_len``: the caller (the C runner) does.

With fused attention (:meth:`Llama.set_fused_attention`, what ``export_llama(...,
fused_attention=True)`` uses) both caches are ``[n_kv_heads, max_seq_len, head_dim]`` and
attention is one etch-only operator, ``etch::sdpa_kv`` (:mod:`etch.llm.attention`), that reads
only the keys ``0 .. start_pos + T - 1`` (same math as the masked softmax).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ModelArgs", "Llama", "rope_tables", "rope_frequencies", "KV_CACHE_DTYPES"]

KV_CACHE_DTYPES = ("float32", "int8")


@dataclass
class ModelArgs:
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    max_seq_len: int
    shared_classifier: bool = True
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    n_head_dim: int = 0           # head size; 0: dim // n_heads
    qkv_bias: bool = False        # bias on wq, wk, wv
    o_bias: bool = False          # bias on wo
    mlp_bias: bool = False        # bias on w1, w2, w3
    rope_scaling: Optional[dict] = None   # None, {"rope_type": "linear", "factor": f} or
    #                             {"rope_type": "llama3", "factor", "low_freq_factor",
    #                              "high_freq_factor", "original_max_position_embeddings"}

    @property
    def head_dim(self) -> int:
        return self.n_head_dim or self.dim // self.n_heads

    def check(self) -> None:
        for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                  "max_seq_len"):
            if getattr(self, k) < 1:
                raise ValueError("model argument %s = %d must be positive"
                                 % (k, getattr(self, k)))
        if (not self.n_head_dim and self.dim % self.n_heads) or self.head_dim % 2:
            raise ValueError("dim %d must split into %d heads of even size"
                             % (self.dim, self.n_heads))
        rope_frequencies(self.head_dim, self.rope_theta, self.rope_scaling)   # checks it
        if self.n_heads % self.n_kv_heads:
            raise ValueError("n_heads %d is not a multiple of n_kv_heads %d"
                             % (self.n_heads, self.n_kv_heads))


def rope_frequencies(head_dim: int, theta: float = 10000.0,
                     scaling: Optional[dict] = None) -> torch.Tensor:
    """theta^(-2i/head_dim), i = 0 .. head_dim/2 - 1, float64, with Hugging Face's frequency
    scaling applied: ``linear`` divides every frequency by ``factor``; ``llama3`` divides the
    low frequencies (wavelength above original_max_position_embeddings / low_freq_factor) by
    ``factor``, keeps the high ones (wavelength below ... / high_freq_factor) and blends
    between them linearly in original_max_position_embeddings / wavelength."""
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    freq = 1.0 / (theta ** (i / head_dim))
    if not scaling:
        return freq
    kind = scaling.get("rope_type", scaling.get("type"))
    try:
        factor = float(scaling["factor"])
        if kind == "linear":
            return freq / factor
        if kind == "llama3":
            low = float(scaling["low_freq_factor"])
            high = float(scaling["high_freq_factor"])
            old = float(scaling["original_max_position_embeddings"])
        else:
            raise ValueError("RoPE scaling %r is not supported (only linear and llama3)"
                             % (kind,))
    except KeyError as e:
        raise ValueError("RoPE scaling %r lacks %s" % (kind, e)) from None
    if factor <= 0 or high <= low:
        raise ValueError("RoPE scaling llama3: factor %g must be > 0 and high_freq_factor %g "
                         "> low_freq_factor %g" % (factor, high, low))
    wavelen = 2 * math.pi / freq
    smooth = (old / wavelen - low) / (high - low)
    mid = (1 - smooth) * freq / factor + smooth * freq
    out = torch.where(wavelen > old / low, freq / factor, freq)
    is_mid = (wavelen >= old / high) & (wavelen <= old / low)
    return torch.where(is_mid, mid, out)


def rope_tables(head_dim: int, n_pos: int, theta: float = 10000.0,
                scaling: Optional[dict] = None):
    """cos and sin of pos * freq_i (:func:`rope_frequencies`), [n_pos, head_dim / 2], float32
    (computed in float64 and rounded once)."""
    freq = rope_frequencies(head_dim, theta, scaling)
    ang = torch.outer(torch.arange(n_pos, dtype=torch.float64), freq)
    return torch.cos(ang).float(), torch.sin(ang).float()


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(torch.mean(x * x, -1, keepdim=True) + self.eps))


def _rotate(x, cos, sin):
    """x [T, heads, hd]; pairs (2i, 2i+1) rotated by the angle whose cos/sin are [T, 1, hd/2]."""
    T, h, hd = x.shape
    xp = x.reshape(T, h, hd // 2, 2)
    x0 = xp[..., 0]
    x1 = xp[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(T, h, hd)


class Attention(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = a.n_heads, a.n_kv_heads, a.head_dim
        self.wq = nn.Linear(a.dim, a.n_heads * a.head_dim, bias=a.qkv_bias)
        self.wk = nn.Linear(a.dim, a.n_kv_heads * a.head_dim, bias=a.qkv_bias)
        self.wv = nn.Linear(a.dim, a.n_kv_heads * a.head_dim, bias=a.qkv_bias)
        self.wo = nn.Linear(a.n_heads * a.head_dim, a.dim, bias=a.o_bias)
        self.register_buffer("k_cache", torch.zeros(a.n_kv_heads, a.head_dim, a.max_seq_len))
        self.register_buffer("v_cache", torch.zeros(a.n_kv_heads, a.max_seq_len, a.head_dim))
        self.fused = False
        self.kv_int8 = False
        self.et_ops = False

    def set_fused(self, on: bool) -> None:
        """Switch between the masked attention over the whole cache (k_cache [KV, hd, S]) and
        etch::sdpa_kv (k_cache [KV, S, hd]); the caches restart at zero."""
        self.fused = bool(on)
        self._make_caches()

    def set_et_ops(self, on: bool) -> None:
        """Attend with ExecuTorch's LLM operators (True): caches [1, S, KV, hd] (ExecuTorch's
        [B, S_max, H, D]) written at the new positions, attention by llama::custom_sdpa
        (etch.llm.et_ops); the caches restart at zero."""
        self.et_ops = bool(on)
        self._make_caches()

    def set_kv_int8(self, on: bool) -> None:
        """Store the cache as int8 (True) or float32 (False, the default); the caches restart
        at zero.  int8: k_cache and v_cache [KV, S, hd] int8 (both layouts), each with
        ``*_scales`` float32 and ``*_zero_points`` int8 [KV, S, 1]: one affine (scale, zero
        point) per position and kv head, ExecuTorch's per-token asymmetric quantization
        (choose_qparams_per_token_asymmetric) of each new key / value row."""
        self.kv_int8 = bool(on)
        self._make_caches()

    def _make_caches(self) -> None:
        KV, hd = self.n_kv, self.hd
        S = self.v_cache.shape[-3] if self.v_cache.dim() == 4 else self.v_cache.shape[1]
        for n in ("k_cache_scales", "k_cache_zero_points", "v_cache_scales",
                  "v_cache_zero_points"):
            if n in self._buffers:
                del self._buffers[n]
        if self.kv_int8:
            self.k_cache = torch.zeros(KV, S, hd, dtype=torch.int8)
            self.v_cache = torch.zeros(KV, S, hd, dtype=torch.int8)
            for c in ("k", "v"):
                self.register_buffer(c + "_cache_scales", torch.zeros(KV, S, 1))
                self.register_buffer(c + "_cache_zero_points",
                                     torch.zeros(KV, S, 1, dtype=torch.int8))
            return
        if self.et_ops:
            self.k_cache = torch.zeros(1, S, KV, hd)
            self.v_cache = torch.zeros(1, S, KV, hd)
            return
        self.k_cache = torch.zeros((KV, S, hd) if self.fused else (KV, hd, S))
        self.v_cache = torch.zeros(KV, S, hd)

    def _store_q8(self, name, x, pos):
        """Quantize the new rows x [T, KV, hd] per (position, kv head) with ExecuTorch's
        operators and write them, their scales and zero points at positions pos."""
        qd = _qd()
        s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)     # [T, KV, 1] f64/i64
        q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
        getattr(self, name).index_copy_(1, pos, q.permute(1, 0, 2))
        getattr(self, name + "_scales").index_copy_(1, pos, s.to(torch.float32).permute(1, 0, 2))
        getattr(self, name + "_zero_points").index_copy_(1, pos,
                                                         z.to(torch.int8).permute(1, 0, 2))

    def _load_q8(self, name):
        """The whole int8 cache dequantized ([KV, S, hd] float32) by
        quantized_decomposed::dequantize_per_token, with the scales and zero points in the
        dtypes choose_qparams_per_token_asymmetric gives (float64, int64)."""
        return _qd().dequantize_per_token(
            getattr(self, name), getattr(self, name + "_scales").to(torch.float64),
            getattr(self, name + "_zero_points").to(torch.int64), -128, 127, torch.int8,
            torch.float32)

    def forward(self, x, pos, cos, sin, mask, start_pos=None):
        T = x.shape[0]
        H, KV, hd = self.n_heads, self.n_kv, self.hd
        G = H // KV
        q = _rotate(self.wq(x).view(T, H, hd), cos, sin)
        k = _rotate(self.wk(x).view(T, KV, hd), cos, sin)
        v = self.wv(x).view(T, KV, hd)
        if self.kv_int8:
            self._store_q8("k_cache", k, pos)
            self._store_q8("v_cache", v, pos)
            if self.fused:
                from .attention import sdpa_kv_q8
                o = sdpa_kv_q8(q, self.k_cache, self.k_cache_scales, self.k_cache_zero_points,
                               self.v_cache, self.v_cache_scales, self.v_cache_zero_points,
                               start_pos, 1.0 / math.sqrt(hd))
                return self.wo(o)
            k_all = self._load_q8("k_cache").transpose(1, 2)              # [KV, hd, S]
            v_all = self._load_q8("v_cache")                              # [KV, S, hd]
            return self.wo(_masked_attention(q, k_all, v_all, mask, KV, G, hd))
        if self.et_ops:
            from .et_ops import trace_sdpa
            # [1, T, KV, hd] at rows pos of dim 1: llama::update_cache once exported
            self.k_cache.index_copy_(1, pos, k.unsqueeze(0))
            self.v_cache.index_copy_(1, pos, v.unsqueeze(0))
            o = trace_sdpa(q.unsqueeze(0), self.k_cache, self.v_cache, start_pos)
            return self.wo(o.reshape(T, H * hd))
        if self.fused:
            from .attention import sdpa_kv
            self.k_cache.index_copy_(1, pos, k.permute(1, 0, 2))  # [KV, T, hd] at rows pos
            self.v_cache.index_copy_(1, pos, v.permute(1, 0, 2))
            o = sdpa_kv(q, self.k_cache, self.v_cache, start_pos, 1.0 / math.sqrt(hd))
            return self.wo(o)
        # index_copy_ (traced as index_put with indices [None, None, pos]); assigning
        # through cache[:, :, pos] = ... fails under torch 1.13's functionalization
        self.k_cache.index_copy_(2, pos, k.permute(1, 2, 0))  # [KV, hd, T] at columns pos
        self.v_cache.index_copy_(1, pos, v.permute(1, 0, 2))  # [KV, T, hd] at rows pos
        return self.wo(_masked_attention(q, self.k_cache, self.v_cache, mask, KV, G, hd))


def _qd():
    from ..quant import decomposed
    return decomposed.ops


def _masked_attention(q, k_t, v, mask, KV, G, hd):
    """q [T, H, hd], keys k_t [KV, hd, S], values v [KV, S, hd] -> [T, H * hd]: softmax over
    every cache position, the future ones (mask [T, S]) at -inf."""
    T = q.shape[0]
    qg = q.view(T, KV, G, hd).permute(1, 2, 0, 3).reshape(KV, G * T, hd)
    scores = torch.bmm(qg, k_t) * (1.0 / math.sqrt(hd))                  # [KV, G*T, S]
    S = scores.shape[-1]
    scores = scores.view(KV, G, T, S).masked_fill(mask, float("-inf"))
    p = torch.softmax(scores, -1).view(KV, G * T, S)
    o = torch.bmm(p, v)                                                  # [KV, G*T, hd]
    return o.view(KV, G, T, hd).permute(2, 0, 1, 3).reshape(T, KV * G * hd)


class FeedForward(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.w1 = nn.Linear(a.dim, a.hidden_dim, bias=a.mlp_bias)
        self.w2 = nn.Linear(a.hidden_dim, a.dim, bias=a.mlp_bias)
        self.w3 = nn.Linear(a.dim, a.hidden_dim, bias=a.mlp_bias)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.attention = Attention(a)
        self.feed_forward = FeedForward(a)
        self.attention_norm = RMSNorm(a.dim, a.norm_eps)
        self.ffn_norm = RMSNorm(a.dim, a.norm_eps)

    def forward(self, x, pos, cos, sin, mask, start_pos=None):
        h = x + self.attention(self.attention_norm(x), pos, cos, sin, mask, start_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    """Parameter names follow llama2.c's model.py (``tok_embeddings``, ``layers.N.attention.wq``,
    ..., ``norm``, ``output``), so its state dicts load directly."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        args.check()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(Block(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.shared_classifier:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rope_tables(args.head_dim, args.max_seq_len, args.rope_theta,
                               args.rope_scaling)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_buffer("key_pos", torch.arange(args.max_seq_len), persistent=False)

    def forward(self, tokens, start_pos):
        """tokens int64 [1, T], start_pos int64 [1] -> logits float32 [1, vocab_size] of the
        last position."""
        T = tokens.shape[1]
        pos = start_pos + torch.arange(T)                    # [T]
        cos = self.rope_cos[pos].unsqueeze(1)                # [T, 1, hd/2]
        sin = self.rope_sin[pos].unsqueeze(1)
        mask = None
        if not self.fused_attention and not self.executorch_llm_ops:
            mask = self.key_pos.unsqueeze(0) > pos.unsqueeze(1)  # [T, S]: a future key
        h = self.tok_embeddings(tokens).view(T, self.args.dim)
        for layer in self.layers:
            h = layer(h, pos, cos, sin, mask, start_pos)
        last = self.norm(h[-1:])                             # [1, dim]
        return self.output(last)

    @property
    def fused_attention(self) -> bool:
        return bool(self.layers) and self.layers[0].attention.fused

    @property
    def executorch_llm_ops(self) -> bool:
        return bool(self.layers) and self.layers[0].attention.et_ops

    def set_executorch_llm_ops(self, on: bool) -> None:
        """Attend with ExecuTorch's llama::custom_sdpa over caches [1, S, KV, hd] written by
        llama::update_cache once exported (True), or as before (False).  Clears the caches."""
        for layer in self.layers:
            layer.attention.set_et_ops(on)

    def set_fused_attention(self, on: bool) -> None:
        """Attend with the etch-only operator etch::sdpa_kv (True) or with the masked softmax
        over the whole cache (False, the default; ExecuTorch-loadable).  Changes the k_cache
        layout and clears the caches; the weights are untouched."""
        for layer in self.layers:
            layer.attention.set_fused(on)

    def reset_cache(self) -> None:
        for layer in self.layers:
            for n, b in layer.attention.named_buffers():
                if "cache" in n:
                    b.zero_()

    @property
    def kv_cache_dtype(self) -> str:
        """"int8" or "float32" (:meth:`set_kv_cache`)."""
        return "int8" if self.layers and self.layers[0].attention.kv_int8 else "float32"

    def set_kv_cache(self, dtype: str) -> None:
        """Store the KV cache as ``"float32"`` (the default) or ``"int8"`` (per position and
        kv head: int8 values, a float32 scale and an int8 zero point); clears the caches."""
        if dtype not in KV_CACHE_DTYPES:
            raise ValueError("KV cache dtype %r: expected one of %s"
                             % (dtype, ", ".join(KV_CACHE_DTYPES)))
        for layer in self.layers:
            layer.attention.set_kv_int8(dtype == "int8")

    def kv_cache_bytes_per_token(self) -> int:
        """Bytes of KV cache state one position takes over all layers (values, scales and
        zero points)."""
        n = 0
        for layer in self.layers:
            for name, b in layer.attention.named_buffers():
                if "cache" in name:
                    n += b.numel() * b.element_size()
        return n // self.args.max_seq_len

    def load_weights(self, state: Dict[str, torch.Tensor]) -> None:
        """Load a llama2.c-style state dict (``_orig_mod.`` prefixes dropped; the classifier
        may be missing when shared)."""
        state = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v
                 for k, v in state.items()}
        state = {k: v for k, v in state.items() if not k.startswith(("freqs_", "rope_"))}
        if self.args.shared_classifier:
            state.setdefault("output.weight", state.get("tok_embeddings.weight"))
        own = self.state_dict()
        missing = [k for k in own if k not in state and
                   not k.endswith(("_cache", "_cache_scales", "_cache_zero_points"))]
        extra = [k for k in state if k not in own]
        if missing or extra:
            raise ValueError("checkpoint does not match the model: missing %s, unexpected %s"
                             % (missing[:5], extra[:5]))
        for k, v in state.items():
            if tuple(v.shape) != tuple(own[k].shape):
                raise ValueError("checkpoint tensor %s has shape %s, the model wants %s"
                                 % (k, tuple(v.shape), tuple(own[k].shape)))
        with torch.no_grad():
            for k, v in state.items():
                own[k].copy_(v.float())
        if self.args.shared_classifier:
            self.output.weight = self.tok_embeddings.weight


def greedy(model: Llama, prompt, steps: int, stop_ids=(), prefill: bool = True):
    """Eager reference: ids following `prompt` (a list of ids) chosen by argmax (ties to the
    lowest id), until `steps` positions are filled or an id in stop_ids is produced (not
    included).  Returns the generated ids."""
    model.reset_cache()
    out = []
    with torch.no_grad():
        if prefill:
            logits = model(torch.tensor([prompt]), torch.tensor([0]))
        else:
            for i, t in enumerate(prompt):
                logits = model(torch.tensor([[t]]), torch.tensor([i]))
        pos = len(prompt)
        while pos < steps:
            nxt = int(torch.argmax(logits[0]))
            if nxt in stop_ids:
                break
            out.append(nxt)
            logits = model(torch.tensor([[nxt]]), torch.tensor([pos]))
            pos += 1
    return out

