"""ExecuTorch's LLM custom operators (namespace ``llama``), for torch and for the exporter.

ExecuTorch's llama export (``examples/models/llama``, ``--use_sdpa_with_kv_cache``) writes the
KV cache with ``llama::update_cache`` and attends with ``llama::custom_sdpa``; its C++ kernels
are ``extension/llm/custom_ops/op_update_cache.cpp`` and ``op_sdpa.cpp``, its schemas
``op_sdpa_aot.cpp``.  This module defines the same schemas in torch (so that
``torch.ops.llama.*`` run eagerly, on CPU and Meta tensors) and the graph pass with which
``export_llama(..., executorch_llm_ops=True)`` puts them in a llama program::

    llama::update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor
    llama::update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *,
                            Tensor(b!) out) -> Tensor(b!)
    llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos,
                       Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False,
                       float? scale=None) -> Tensor                    (and .out)
    llama::sdpa_with_kv_cache(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache,
                              Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len,
                              Tensor? attn_mask=None, float drpout_p=0.0,
                              bool is_causal=False, float? scale=None) -> Tensor  (and .out)

(``drpout_p`` is ExecuTorch's spelling.)  Layouts: the sequence is dim 1 everywhere: query
``[B, S, H, D]``, caches ``[B, S_max, KV, D]``, H a multiple of KV (head h reads kv head
``h // (H / KV)``).  ``update_cache`` copies value ``[B, S, H, D]`` into the cache at positions
``start_pos .. start_pos + S - 1`` and returns a placeholder (ExecuTorch's ``out`` is never
written).  ``custom_sdpa``: softmax attention with scale ``1/sqrt(D)`` unless given; without a
mask over keys ``0 .. start_pos + S - 1``, causal within the new tokens when ``is_causal``
(row t sees keys ``0 .. start_pos + t``); with ``attn_mask`` (float, added to the scaled
scores) ``[S, S_max]`` over the whole cache (ExecuTorch's current kernel) or
``[S, start_pos + S]`` (its earlier one); a mask with ``is_causal``, and a dropout
probability other than 0, are refused.  ``sdpa_with_kv_cache`` = update both caches, then
``custom_sdpa`` over them.  The C kernels: ``src/kernels/portable/op_update_cache.c``,
``op_custom_sdpa.c``.

Tracing in torch 1.13 cannot carry a SymInt from ``start_pos.item()`` nor functionalize an
operator that mutates its argument, so the llama module traces ``index_copy_`` into the cache
and the trace-only ``etch_trace::custom_sdpa`` (start_pos a tensor), and :func:`lower` (an
``etch.export`` graph pass) rewrites the graph: ``aten::_local_scalar_dense(start_pos)``
gives the Int, each cache write ``index_put(cache, [None, start_pos + arange(T)], v)`` with its
write-back becomes ``llama::update_cache(v, cache, start_pos)`` on the cache's own memory, and
each ``etch_trace::custom_sdpa`` becomes ``llama::custom_sdpa(q, k_cache, v_cache, start_pos,
None, 0.0, True, None)``.  Nothing of ``etch_trace`` reaches the file.
"""

from __future__ import annotations

import math

import torch

from .. import ops as _ops

__all__ = ["update_cache_reference", "custom_sdpa_reference", "sdpa_with_kv_cache_reference",
           "lower", "OP_NAMES", "trace_sdpa"]

OP_NAMES = ("llama::update_cache.out", "llama::custom_sdpa.out", "llama::sdpa_with_kv_cache.out")


def _sp(start_pos) -> int:
    if isinstance(start_pos, torch.Tensor):
        return int(start_pos.reshape(-1)[0])
    return int(start_pos)


def update_cache_reference(value, cache, start_pos):
    """cache[:, start_pos:start_pos + S] = value (in place); returns a placeholder [1]."""
    sp = _sp(start_pos)
    if value.dim() != 4 or cache.dim() != 4 or value.dtype != cache.dtype or any(
            value.shape[i] != cache.shape[i] for i in (0, 2, 3)):
        raise ValueError("update_cache: value %s %s and cache %s %s must be [B, S, H, D] and "
                         "[B, S_max, H, D] of one dtype"
                         % (tuple(value.shape), value.dtype, tuple(cache.shape), cache.dtype))
    S, Smax = value.shape[1], cache.shape[1]
    if sp < 0 or sp >= Smax or sp + S > Smax:
        raise ValueError("update_cache: start_pos %d with %d positions does not fit the "
                         "cache's %d" % (sp, S, Smax))
    with torch.no_grad():
        cache[:, sp:sp + S] = value
    return torch.empty((1,), dtype=value.dtype, device=value.device)


def custom_sdpa_reference(query, key, value, start_pos, attn_mask=None, drpout_p=0.0,
                          is_causal=False, scale=None):
    """ExecuTorch's custom_sdpa (module docstring) in query's dtype; [B, S, H, D]."""
    sp = _sp(start_pos)
    if query.dim() != 4 or key.dim() != 4 or value.shape != key.shape or \
            key.shape[0] != query.shape[0] or key.shape[3] != query.shape[3] or \
            key.shape[2] == 0 or query.shape[2] % key.shape[2]:
        raise ValueError("custom_sdpa: query %s, key %s, value %s: expected [B, S, H, D] and "
                         "caches [B, S_max, KV, D] alike" % (tuple(query.shape),
                                                             tuple(key.shape),
                                                             tuple(value.shape)))
    B, S, H, D = query.shape
    Smax, KV = key.shape[1], key.shape[2]
    if sp < 0 or sp + S > Smax:
        raise ValueError("custom_sdpa: start_pos %d with %d positions does not fit the "
                         "cache's %d" % (sp, S, Smax))
    if drpout_p:
        raise ValueError("custom_sdpa: dropout is not supported")
    if attn_mask is not None and is_causal:
        raise ValueError("custom_sdpa: attn_mask and is_causal cannot be set at the same time")
    if attn_mask is not None:
        if attn_mask.dim() != 2 or attn_mask.shape[0] != S or \
                attn_mask.shape[1] not in (Smax, sp + S) or not attn_mask.is_floating_point():
            raise ValueError("custom_sdpa: attn_mask %s must be a float [S, S_max] or "
                             "[S, start_pos + S]" % (tuple(attn_mask.shape),))
        n = attn_mask.shape[1]
        bias = attn_mask.to(query.dtype)
    else:
        n = sp + S
        bias = torch.zeros(S, n, dtype=query.dtype)
        if is_causal:
            future = torch.arange(n).unsqueeze(0) > (sp + torch.arange(S)).unsqueeze(1)
            bias = bias.masked_fill(future, float("-inf"))
    s = (1.0 / math.sqrt(D)) if scale is None else float(scale)
    G = H // KV
    q = query.transpose(1, 2)                                        # [B, H, S, D]
    k = key[:, :n].transpose(1, 2).repeat_interleave(G, dim=1)       # [B, H, n, D]
    v = value[:, :n].transpose(1, 2).repeat_interleave(G, dim=1)
    w = torch.softmax(q @ k.transpose(-1, -2) * s + bias, dim=-1)
    return (w @ v).transpose(1, 2).contiguous()


def sdpa_with_kv_cache_reference(query, key, value, key_cache, value_cache, start_pos,
                                 seq_len, attn_mask=None, drpout_p=0.0, is_causal=False,
                                 scale=None):
    if int(seq_len) != query.shape[1]:
        raise ValueError("sdpa_with_kv_cache: seq_len %d differs from the query's %d"
                         % (int(seq_len), query.shape[1]))
    custom_sdpa_reference(query, key_cache, value_cache, start_pos, attn_mask, drpout_p,
                          is_causal, scale)    # checks before anything is written
    update_cache_reference(key, key_cache, start_pos)
    update_cache_reference(value, value_cache, start_pos)
    return custom_sdpa_reference(query, key_cache, value_cache, start_pos, attn_mask, drpout_p,
                                 is_causal, scale)


_SDPA_ARGS = ("Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False, "
              "float? scale=None")


def _define():
    try:
        return torch.ops.llama.custom_sdpa, torch.ops.etch_trace.custom_sdpa
    except (AttributeError, RuntimeError):
        pass
    lib = _ops.library("llama")
    lib.define("update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor")
    lib.define("update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, "
               "Tensor(b!) out) -> Tensor(b!)")
    lib.define("custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, %s) "
               "-> Tensor" % _SDPA_ARGS)
    lib.define("custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, %s, "
               "*, Tensor(a!) out) -> Tensor(a!)" % _SDPA_ARGS)
    kv = ("Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, "
          "Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, " + _SDPA_ARGS)
    lib.define("sdpa_with_kv_cache(%s) -> Tensor" % kv)
    lib.define("sdpa_with_kv_cache.out(%s, *, Tensor(c!) out) -> Tensor(c!)" % kv)

    def outv(fn):
        def f(*a, out, **kw):
            r = fn(*a, **kw)
            if fn is not update_cache_reference:
                out.resize_(r.shape)
                out.copy_(r)
            return out
        return f

    def update_meta(value, cache, start_pos):
        return torch.empty((1,), dtype=value.dtype, device="meta")

    def sdpa_meta(query, *a, **kw):
        return torch.empty_like(query)

    for name, fn in (("update_cache", update_cache_reference),
                     ("custom_sdpa", custom_sdpa_reference),
                     ("sdpa_with_kv_cache", sdpa_with_kv_cache_reference)):
        lib.impl(name, fn, "CPU")
        lib.impl(name + ".out", outv(fn), "CPU")
        meta = update_meta if name == "update_cache" else sdpa_meta
        lib.impl(name, meta, "Meta")
        lib.impl(name, meta, "AutogradMeta")   # torch 1.13 has no autograd fallthrough there

    # trace-only (rewritten by lower(); never in a file): start_pos as a tensor
    tl = _ops.library("etch_trace")
    tl.define("custom_sdpa(Tensor query, Tensor key, Tensor value, Tensor start_pos) -> Tensor")
    tl.define("custom_sdpa.out(Tensor query, Tensor key, Tensor value, Tensor start_pos, *, "
              "Tensor(a!) out) -> Tensor(a!)")

    def trace_fn(q, k, v, sp):
        return custom_sdpa_reference(q, k, v, sp, None, 0.0, True, None)

    tl.impl("custom_sdpa", trace_fn, "CPU")
    tl.impl("custom_sdpa.out", outv(trace_fn), "CPU")
    return torch.ops.llama.custom_sdpa, torch.ops.etch_trace.custom_sdpa


_, trace_sdpa = _define()


class LoweringError(RuntimeError):
    pass


def _is_position_range(pos, start) -> bool:
    """pos is start_pos + arange(T) (the model's positions of the new tokens)."""
    if not (isinstance(pos, torch.fx.Node) and pos.op == "call_function" and
            _ops.op_name(pos.target) == "aten::add.Tensor"):
        return False
    a, b = pos.args[0], pos.args[1]
    other = b if a is start else a if b is start else None
    return (isinstance(other, torch.fx.Node) and other.op == "call_function" and
            _ops.op_name(other.target).startswith("aten::arange"))


def lower(eg) -> None:
    """The graph pass of ``export_llama(..., executorch_llm_ops=True)`` (module docstring)."""
    aten = torch.ops.aten
    g = eg.graph
    sdpas = [n for n in g.nodes if n.op == "call_function" and
             n.target is torch.ops.etch_trace.custom_sdpa.default]
    if not sdpas:
        raise LoweringError("no attention (etch_trace::custom_sdpa) in the graph")
    start = sdpas[0].args[3]
    if any(n.args[3] is not start for n in sdpas) or not (
            isinstance(start, torch.fx.Node) and start.op == "placeholder"):
        raise LoweringError("attention start_pos is not the method's start_pos input")
    with g.inserting_after(start):
        sp_int = g.call_function(aten._local_scalar_dense.default, (start,))
    caches = set()
    for n in sdpas:
        caches.update((n.args[1], n.args[2]))
    rewritten = 0
    for c in list(g.nodes):
        if not (c.op == "call_function" and c.target is aten.copy_.default):
            continue
        state, r = c.args[0], c.args[1]
        if not (eg.is_mutable(state) and isinstance(r, torch.fx.Node) and
                r.op == "call_function" and r.target is aten.index_put.default and
                r.args[0] is state):
            continue
        idx, val = r.args[1], r.args[2]
        if not (len(idx) == 2 and idx[0] is None and _is_position_range(idx[1], start) and
                len(eg.spec(state).shape) == 4 and (len(r.args) < 4 or r.args[3] is False)):
            raise LoweringError("cache write %s is not at start_pos + arange(T) of dim 1"
                                % r.name)
        with g.inserting_before(r):
            g.call_function(torch.ops.llama.update_cache.default, (val, state, sp_int))
        # readers of the written cache read the state itself (updated in place)
        for user in list(r.users):
            if user is not c:
                user.replace_input_with(r, state)
        g.erase_node(c)
        g.erase_node(r)
        rewritten += 1
    for n in sdpas:
        q, k, v, _ = n.args
        with g.inserting_before(n):
            m = g.call_function(torch.ops.llama.custom_sdpa.default,
                                (q, k, v, sp_int, None, 0.0, True, None))
        n.replace_all_uses_with(m)
        g.erase_node(n)
    if rewritten != 2 * len(sdpas):
        raise LoweringError("%d cache writes for %d attention calls (2 each expected)"
                            % (rewritten, len(sdpas)))
    g.lint()
    eg.log.append("executorch llm ops: %d llama::update_cache, %d llama::custom_sdpa"
                  % (rewritten, len(sdpas)))
