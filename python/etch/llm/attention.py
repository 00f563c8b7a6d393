"""``etch::sdpa_kv``: causal grouped-query attention over the filled part of a KV cache.

An etch-only operator (files that use it do not load in ExecuTorch), emitted only when the
exporter is asked for it (``export_llama(..., fused_attention=True)``, ``--fused-attention``).

Schema::

    etch::sdpa_kv(Tensor q, Tensor k_cache, Tensor v_cache, Tensor start_pos, float scale)
        -> Tensor
    etch::sdpa_kv.out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor start_pos,
                      float scale, *, Tensor(a!) out) -> Tensor(a!)

* ``q``: float32 ``[T, H, hd]`` (the rotated queries of T consecutive positions);
* ``k_cache``, ``v_cache``: float32 ``[KV, S, hd]``, H a multiple of KV (query head h reads
  kv head ``h // (H / KV)``), already holding positions ``0 .. start_pos + T - 1``;
* ``start_pos``: int64 ``[1]``, the position of the first query (the method's input);
* ``scale``: the factor applied to every dot product (1/sqrt(hd) for llama);
* result: float32 ``[T, H * hd]``, row t, columns ``h*hd .. h*hd + hd - 1``::

      p = start_pos + t
      s_j = scale * dot(q[t, h], k_cache[h // G, j])           for j = 0 .. p
      out[t, h*hd:(h+1)*hd] = sum_j softmax(s)_j * v_cache[h // G, j]

  i.e. the masked-softmax attention of :class:`etch.llm.model.Attention` with keys after p
  masked, restricted to the keys it can see.  Keys past ``start_pos + T - 1`` are never read;
  ``start_pos < 0`` or ``start_pos + T > S`` is an error (the C kernels fail with a message,
  this reference raises).

``etch::sdpa_kv_q8`` is the same attention over an int8 cache (``--kv-cache int8
--fused-attention``)::

    etch::sdpa_kv_q8(Tensor q, Tensor k_cache, Tensor k_scales, Tensor k_zero_points,
                     Tensor v_cache, Tensor v_scales, Tensor v_zero_points,
                     Tensor start_pos, float scale) -> Tensor    (and .out)

with ``k_cache``, ``v_cache`` int8 ``[KV, S, hd]`` and their float32 scales and int8 zero
points ``[KV, S, 1]`` (one per kv head and position): every row is read as
``(c - zero_point) * scale`` (:func:`dequantize_cache`), then as ``sdpa_kv``.

Importing this module defines the operators (once per process) with a PyTorch
implementation that is the masked formulation itself, so tracing and the exporter's graph
interpreter compute exactly what the unfused model computes.
"""

from __future__ import annotations

import torch

__all__ = ["sdpa_kv", "sdpa_kv_reference", "OP_NAME", "sdpa_kv_q8", "sdpa_kv_q8_reference",
           "OP_NAME_Q8", "dequantize_cache"]

OP_NAME = "etch::sdpa_kv.out"
OP_NAME_Q8 = "etch::sdpa_kv_q8.out"


def sdpa_kv_reference(q, k_cache, v_cache, start_pos, scale: float):
    """The masked formulation (what the unfused model computes), [T, H * hd]."""
    if q.dim() != 3 or k_cache.dim() != 3 or v_cache.shape != k_cache.shape:
        raise ValueError("sdpa_kv: q must be [T, H, hd] and the caches [KV, S, hd] alike, got "
                         "%s, %s, %s" % (tuple(q.shape), tuple(k_cache.shape),
                                         tuple(v_cache.shape)))
    T, H, hd = q.shape
    KV, S, hd2 = k_cache.shape
    if hd2 != hd or KV == 0 or H % KV:
        raise ValueError("sdpa_kv: q %s does not match the caches %s"
                         % (tuple(q.shape), tuple(k_cache.shape)))
    if start_pos.numel() != 1:
        raise ValueError("sdpa_kv: start_pos must hold one position")
    sp = int(start_pos.reshape(-1)[0])
    if sp < 0 or sp + T > S:
        raise ValueError("sdpa_kv: positions %d .. %d are outside the cache's %d"
                         % (sp, sp + T - 1, S))
    G = H // KV
    pos = start_pos.reshape(1) + torch.arange(T)
    mask = torch.arange(S).unsqueeze(0) > pos.unsqueeze(1)              # [T, S]
    qg = q.reshape(T, KV, G, hd).permute(1, 2, 0, 3).reshape(KV, G * T, hd)
    scores = torch.bmm(qg, k_cache.transpose(1, 2)) * scale             # [KV, G*T, S]
    scores = scores.view(KV, G, T, S).masked_fill(mask, float("-inf"))
    p = torch.softmax(scores, -1).view(KV, G * T, S)
    o = torch.bmm(p, v_cache)                                           # [KV, G*T, hd]
    return o.view(KV, G, T, hd).permute(2, 0, 1, 3).reshape(T, H * hd)


def dequantize_cache(c, scales, zero_points):
    """An int8 cache [KV, S, hd] with float32 scales and int8 zero points [KV, S, 1] (one per
    position and kv head) as float32: ``(c - zero_point) * scale``, the formula of
    ``quantized_decomposed::dequantize_per_token`` (the difference exact in int32, one float
    multiply)."""
    if c.dtype != torch.int8 or scales.dtype != torch.float32 or zero_points.dtype != torch.int8:
        raise ValueError("sdpa_kv_q8: caches must be int8 with float32 scales and int8 zero "
                         "points, got %s, %s, %s" % (c.dtype, scales.dtype, zero_points.dtype))
    if c.dim() != 3 or tuple(scales.shape) != tuple(c.shape[:2]) + (1,) or \
            tuple(zero_points.shape) != tuple(scales.shape):
        raise ValueError("sdpa_kv_q8: cache %s needs scales and zero points %s, got %s, %s"
                         % (tuple(c.shape), tuple(c.shape[:2]) + (1,), tuple(scales.shape),
                            tuple(zero_points.shape)))
    return (c.to(torch.int32) - zero_points.to(torch.int32)).to(torch.float32) * scales


def sdpa_kv_q8_reference(q, k_cache, k_scales, k_zero_points, v_cache, v_scales,
                         v_zero_points, start_pos, scale: float):
    """etch::sdpa_kv_q8: :func:`sdpa_kv_reference` over the dequantized int8 caches
    (:func:`dequantize_cache`), in q's dtype."""
    k = dequantize_cache(k_cache, k_scales, k_zero_points).to(q.dtype)
    v = dequantize_cache(v_cache, v_scales, v_zero_points).to(q.dtype)
    return sdpa_kv_reference(q, k, v, start_pos, scale)


def _define():
    ns = getattr(torch.ops, "etch")
    try:
        return ns.sdpa_kv
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("etch", "DEF")
    lib.define("sdpa_kv(Tensor q, Tensor k_cache, Tensor v_cache, Tensor start_pos, "
               "float scale) -> Tensor")
    lib.define("sdpa_kv.out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor start_pos, "
               "float scale, *, Tensor(a!) out) -> Tensor(a!)")

    def fn(q, k_cache, v_cache, start_pos, scale):
        return sdpa_kv_reference(q, k_cache, v_cache, start_pos, scale)

    def fn_out(q, k_cache, v_cache, start_pos, scale, *, out):
        r = sdpa_kv_reference(q, k_cache, v_cache, start_pos, scale)
        out.resize_(r.shape)
        out.copy_(r)
        return out

    lib.impl("sdpa_kv", fn, "CPU")
    lib.impl("sdpa_kv.out", fn_out, "CPU")

    args = ("Tensor q, Tensor k_cache, Tensor k_scales, Tensor k_zero_points, Tensor v_cache, "
            "Tensor v_scales, Tensor v_zero_points, Tensor start_pos, float scale")
    lib.define("sdpa_kv_q8(%s) -> Tensor" % args)
    lib.define("sdpa_kv_q8.out(%s, *, Tensor(a!) out) -> Tensor(a!)" % args)

    def fn_q8(*a):
        return sdpa_kv_q8_reference(*a)

    def fn_q8_out(*a, out):
        r = sdpa_kv_q8_reference(*a)
        out.resize_(r.shape)
        out.copy_(r)
        return out

    lib.impl("sdpa_kv_q8", fn_q8, "CPU")
    lib.impl("sdpa_kv_q8.out", fn_q8_out, "CPU")
    _define.lib = lib  # keep the registration alive
    return ns.sdpa_kv


sdpa_kv = _define()
sdpa_kv_q8 = torch.ops.etch.sdpa_kv_q8
