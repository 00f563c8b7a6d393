"""Quantized linears for the XNNPACK lowering, the way ExecuTorch's XNNPACK partitioner lowers
them: before partitioning, the exported graph's patterns

* dynamic per-token activations (8da4w, int8-dynamic)::

      s, z = choose_qparams_per_token_asymmetric(x, int8)
      dequantize_per_token(quantize_per_token(x, s, z, -128, 127, int8), s, z, -128, 127, int8,
                           float32)

  become one :class:`DynQuant` node (lowered to a ``Convert`` to a qdint8 value, per token:
  what the fully connected nodes read), and
* quantized weights of a linear::

      mm(a, permute_copy(embedding_4bit(packed, scales, None, -8, 7, arange(N)), [1, 0]))
      mm(a, permute_copy(dequantize_per_channel(w8, scales, 0, 0, -128, 127, int8), [1, 0]))
      (addmm with a constant bias likewise)

  become one :class:`QLinear` node (lowered to a ``FullyConnected`` with qbint4 blockwise /
  qcint8 per-channel weights: the payload holds the packed bytes, never a float copy).

Only symmetric weights fit (XNNPACK's 4-bit weights have the fixed zero point 8, its int8 ones
0); anything else keeps its operators.  Both node kinds replay eagerly (the original operators,
for the export-time checks), and the pass runs on the delegated method only: a CPU twin keeps
the operators themselves.
"""

from __future__ import annotations

import operator
from typing import Optional

import torch

from ... import debuginfo as _debuginfo

aten = torch.ops.aten

__all__ = ["DynQuant", "QLinear", "fuse"]


def _q():
    return torch.ops.quantized_decomposed


class DynQuant:
    """x -> its per-token int8 quantization, dequantized (the replay: the original ops)."""

    def __init__(self, choose, quantize, dequantize):
        self.choose, self.quantize, self.dequantize = choose, quantize, dequantize
        self.__name__ = "xnnpack_dynamic_quant"

    def __call__(self, x):
        s, z = self.choose(x, torch.int8)
        q = self.quantize(x, s, z, -128, 127, torch.int8)
        return self.dequantize(q, s, z, -128, 127, torch.int8, torch.float32)

    def __repr__(self):
        return "xnnpack_dynamic_quant"


class QLinear:
    """y = a @ W.T (+ bias), W quantized: kind "4" (data: [N, K/2] uint8 in embedding_4bit's
    layout, scales [N, K/G]) or "8" (data: [N, K] int8, scales [N])."""

    def __init__(self, kind: str, data: torch.Tensor, scales: torch.Tensor,
                 weight: torch.Tensor, bias: Optional[torch.Tensor]):
        self.kind, self.data, self.scales = kind, data, scales.to(torch.float32)
        self.weight = weight.to(torch.float32)     # dequantized, for the replay only
        self.bias = None if bias is None else bias.to(torch.float32)
        self.N, self.K = int(weight.shape[0]), int(weight.shape[1])
        self.group = self.K // int(scales.shape[1]) if kind == "4" else self.K
        self.__name__ = "xnnpack_quantized_linear"

    def __call__(self, a):
        y = a @ self.weight.t()
        return y if self.bias is None else y + self.bias

    def __repr__(self):
        return "xnnpack_quantized_linear(%s, %dx%d)" % (self.kind, self.N, self.K)


def _const(eg, n):
    return isinstance(n, torch.fx.Node) and eg.is_constant(n)


def _weight(eg, p) -> Optional[tuple]:
    """(kind, data, scales, dequantized [N, K]) when p = permute_copy(W, [1, 0]) of a
    symmetric quantized constant weight W read only by p."""
    if not (isinstance(p, torch.fx.Node) and p.op == "call_function"
            and p.target is aten.permute_copy.default and list(p.args[1]) in ([1, 0], [-1, 0], [1, -2])
            and len(p.users) == 1):
        return None
    e = p.args[0]
    if not (isinstance(e, torch.fx.Node) and e.op == "call_function" and len(e.users) == 1):
        return None
    Q = _q()
    args = list(e.args)
    if e.target in (Q.embedding_4bit.dtype, Q.embedding_4bit.default):
        if len(args) < 6 or e.kwargs.get("dtype", torch.float32) not in (None, torch.float32):
            return None
        w, sc, zp, lo, hi, ids = args[:6]
        if not (_const(eg, w) and _const(eg, sc) and _const(eg, ids)) or zp is not None:
            return None
        if (lo, hi) != (-8, 7):
            return None
        data, scales, idx = eg.constant_value(w), eg.constant_value(sc), eg.constant_value(ids)
        if data.dtype != torch.uint8 or data.dim() != 2 or scales.dim() != 2:
            return None
        N, K = int(data.shape[0]), int(data.shape[1]) * 2
        if not torch.equal(idx.to(torch.int64), torch.arange(N)) or scales.shape[0] != N:
            return None
        G = K // int(scales.shape[1]) if int(scales.shape[1]) else 0
        if G <= 0 or G % 2 or G * int(scales.shape[1]) != K:
            return None
        kind = "4"
    elif e.target is Q.dequantize_per_channel.default:
        if len(args) < 7:
            return None
        w, sc, zp, axis, lo, hi, dt = args[:7]
        if not (_const(eg, w) and _const(eg, sc)) or int(axis) != 0 or dt != torch.int8:
            return None
        if e.kwargs.get("out_dtype") not in (None, torch.float32):
            return None
        data, scales = eg.constant_value(w), eg.constant_value(sc)
        if zp is not None:
            if not _const(eg, zp) or bool(eg.constant_value(zp).ne(0).any()):
                return None
        if data.dtype != torch.int8 or data.dim() != 2 or scales.dim() != 1:
            return None
        kind = "8"
    else:
        return None
    with torch.no_grad():
        deq = e.target(*[eg.constant_value(a) if _const(eg, a) else a for a in args],
                       **e.kwargs)
    if deq.dtype != torch.float32 or deq.dim() != 2:
        return None
    return kind, data, scales, deq


def _dyn_chain(eg, d) -> Optional[torch.fx.Node]:
    """x when d is dequantize_per_token of quantize_per_token of x with the parameters
    choose_qparams_per_token_asymmetric(x, int8) chose (and nothing else reads the chain)."""
    Q = _q()
    if not (d.op == "call_function" and d.target is Q.dequantize_per_token.default):
        return None
    q, s, z, lo, hi, dt, odt = d.args[:7]
    if (lo, hi, dt, odt) != (-128, 127, torch.int8, torch.float32):
        return None
    if not (isinstance(q, torch.fx.Node) and q.target is Q.quantize_per_token.default
            and len(q.users) == 1 and q.args[1] is s and q.args[2] is z
            and tuple(q.args[3:6]) == (-128, 127, torch.int8)):
        return None
    x = q.args[0]
    for i, g in ((0, s), (1, z)):
        if not (isinstance(g, torch.fx.Node) and g.target is operator.getitem
                and g.args[1] == i and set(g.users) <= {q, d}):
            return None
    c = s.args[0]
    if not (z.args[0] is c and c.target is Q.choose_qparams_per_token_asymmetric.default
            and c.args[0] is x and c.args[1] == torch.int8 and len(c.users) == 2):
        return None
    return x


def fuse(eg) -> int:
    """Rewrite the patterns above in `eg` (in place); returns how many nodes it made."""
    Q = _q()
    try:   # the operators exist once etch.quant registered them (a quantized model)
        Q.dequantize_per_token.default
    except (AttributeError, RuntimeError):
        return 0
    made = 0
    g = eg.graph
    for d in list(g.nodes):
        if d.op != "call_function":
            continue
        if d.target is Q.dequantize_per_token.default:
            x = _dyn_chain(eg, d)
            if x is None:
                continue
            q = d.args[0]
            s, z = d.args[1], d.args[2]
            c = s.args[0]
            with g.inserting_before(d):
                n = g.call_function(DynQuant(c.target, q.target, d.target), (x,))
            n.meta["spec"] = d.meta["spec"]
            _debuginfo.take(n, d)
            d.replace_all_uses_with(n)
            for old in (d, q, s, z, c):
                g.erase_node(old)
            made += 1
        elif d.target in (aten.mm.default, aten.addmm.default):
            if d.target is aten.mm.default:
                a, p, bias = d.args[0], d.args[1], None
            else:
                if len(d.args) != 3 or d.kwargs.get("beta", 1) != 1 or d.kwargs.get("alpha", 1) != 1:
                    continue
                bias, a, p = d.args
                if not _const(eg, bias) or eg.constant_value(bias).dim() != 1:
                    continue
            w = _weight(eg, p)
            if w is None:
                continue
            kind, data, scales, deq = w
            b = None if bias is None else eg.constant_value(bias)
            e = p.args[0]
            with g.inserting_before(d):
                n = g.call_function(QLinear(kind, data, scales, deq, b), (a,))
            n.meta["spec"] = d.meta["spec"]
            _debuginfo.take(n, d)
            d.replace_all_uses_with(n)
            for old in (d, p, e):
                g.erase_node(old)
            made += 1
    if made:
        g.lint()
        eg.prune()
    return made

