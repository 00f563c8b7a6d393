"""A PyTorch reference of Hugging Face's LlamaForCausalLM and Qwen2ForCausalLM, written from
the semantics of transformers' modeling code (not from etch's model): RMSNorm in float32 with
eps, RoPE applied with rotate_half (the two halves of each head) and frequencies
1 / theta^(2i/d) (with the linear and llama3 scalings), grouped-query attention by repeat_kv,
a causal softmax over all positions (no KV cache: every step recomputes the whole sequence),
SwiGLU (down(silu(gate x) * up x)), q/k/v/o and MLP biases as the config asks, tied or
separate lm_head.  Weights are the Hugging Face state dict, float32."""

from __future__ import annotations

import math

import torch


def inv_freq(cfg) -> torch.Tensor:
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    base = cfg.get("rope_theta", 10000.0)
    f = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    sc = cfg.get("rope_scaling")
    if not sc:
        return f
    kind = sc.get("rope_type", sc.get("type"))
    if kind == "linear":
        return f / sc["factor"]
    assert kind == "llama3", kind
    factor, lo, hi = sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
    old = sc["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    wl = 2 * math.pi / f
    g = torch.where(wl > lo_wl, f / factor, f)
    smooth = (old / wl - lo) / (hi - lo)
    smoothed = (1 - smooth) * g / factor + smooth * g
    medium = ~(wl < hi_wl) * ~(wl > lo_wl)
    return torch.where(medium, smoothed, g)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def linear(sd, name, x):
    y = x @ sd[name + ".weight"].t()
    b = sd.get(name + ".bias")
    return y if b is None else y + b


def forward(cfg, sd, ids):
    """logits [T, vocab] of the token ids (a list)."""
    arch = cfg["architectures"][0]
    D = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = cfg.get("head_dim") or D // H
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    x = sd["model.embed_tokens.weight"][torch.tensor(ids)]
    pos = torch.arange(T).float()
    ang = torch.outer(pos, inv_freq(cfg))
    emb = torch.cat((ang, ang), -1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, sd[p + "input_layernorm.weight"], eps)
        q = linear(sd, p + "self_attn.q_proj", h).view(T, H, hd).transpose(0, 1)
        k = linear(sd, p + "self_attn.k_proj", h).view(T, KV, hd).transpose(0, 1)
        v = linear(sd, p + "self_attn.v_proj", h).view(T, KV, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k[:, None].expand(KV, H // KV, T, hd).reshape(H, T, hd)      # repeat_kv
        v = v[:, None].expand(KV, H // KV, T, hd).reshape(H, T, hd)
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, -1) @ v
        a = a.transpose(0, 1).reshape(T, H * hd)
        x = x + linear(sd, p + "self_attn.o_proj", a)
        h = rms_norm(x, sd[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(linear(sd, p + "mlp.gate_proj", h))
        x = x + linear(sd, p + "mlp.down_proj", g * linear(sd, p + "mlp.up_proj", h))
    x = rms_norm(x, sd["model.norm.weight"], eps)
    tied = cfg.get("tie_word_embeddings", False)
    w = sd["model.embed_tokens.weight"] if tied else sd["lm_head.weight"]
    assert arch in ("LlamaForCausalLM", "Qwen2ForCausalLM")
    return x @ w.t()


def greedy(cfg, sd, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(torch.argmax(forward(cfg, sd, ids)[-1])))
    return ids[len(prompt):]
