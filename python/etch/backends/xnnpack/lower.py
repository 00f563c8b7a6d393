"""Lowering of graph nodes to XNNGraph nodes (float32 values; quantized linears through the
nodes of :mod:`.qfuse`; static shapes, or one dynamic dim where XNNPACK re-infers it).

XNNPACK computes convolutions, pooling and resizing in NHWC; a program's tensors are NCHW.
Each lowered value therefore has a physical layout: *logical* (the tensor as PyTorch has it) or
*NHWC* (a rank-4 tensor ``[N, C, H, W]`` stored as ``[N, H, W, C]``; a conv1d's ``[N, C, L]``
counts as ``[N, C, 1, L]``).  Convolutions and pooling take and give NHWC; element-wise nodes
keep their input's layout (constant operands are permuted at export); permutes, concatenations
and slices of NHWC values remap their dimensions; everything else takes logical values, and a
``StaticTranspose`` is put in only where a layout changes.  The external inputs and outputs of
a payload are logical (contiguous NCHW), as in ExecuTorch's XNNPACK payloads.

:func:`supported` says whether a node can be lowered; :class:`Lowering` turns a group of
nodes into one :class:`~etch.backends.xnnpack.payload.XnnGraph`.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

from ... import ops as _ops
from ...passes._util import bind_args
from .payload import (EXTERNAL_INPUT, EXTERNAL_OUTPUT, NO_VALUE, QBINT4, QCINT8, QDINT8,
                      XnnGraph)
from .qfuse import DynQuant, QLinear

aten = torch.ops.aten

__all__ = ["supported", "Lowering", "LoweringError"]

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
NHWC_AXIS = (0, 3, 1, 2)     # NHWC axis of logical axis d of a rank-4 tensor


class LoweringError(ValueError):
    pass


def U(v):
    return ("I", int(v))


def F(v):
    return ("f", float(v))


def V(v):
    return ("IV", [int(x) for x in v])


_UNARY = {
    aten.sigmoid.default: "Sigmoid", aten.neg.default: "Negate", aten.abs.default: "Abs",
    aten.sqrt.default: "SquareRoot", aten.rsqrt.default: "ReciprocalSquareRoot",
    aten.log.default: "Log", aten.floor.default: "Floor", aten.ceil.default: "Ceiling",
    aten.hardswish.default: "Hardswish", aten.tanh.default: "Tanh", aten.exp.default: "Exp",
    aten.sin.default: "Sin",
}
_BINARY = {
    aten.add.Tensor: "Add", aten.sub.Tensor: "Subtract", aten.mul.Tensor: "Multiply",
    aten.div.Tensor: "Div", aten.maximum.default: "Maximum", aten.minimum.default: "Minimum",
}
_BINARY_SCALAR = {
    aten.add.Scalar: "Add", aten.sub.Scalar: "Subtract", aten.mul.Scalar: "Multiply",
    aten.div.Scalar: "Div",
}
_UPSAMPLE = (aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec)
_CLAMPS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)
# Nodes whose output_min_max a following clamp can become (XNNPACK's fused activations).
_CLAMPABLE = frozenset(["Add", "Subtract", "Multiply", "Div", "FullyConnected", "Conv2d",
                        "DepthwiseConv2d", "ConvTranspose2d", "AvgPooling2d", "MaxPooling2d",
                        "Clamp", "BatchMatrixMultiply", "Maximum", "Minimum"])


def _spec(eg, n, i=0):
    s = eg.spec(n)
    return s[i] if isinstance(s, tuple) else s


def _is_f32_static(spec) -> bool:
    return (spec is not None and hasattr(spec, "dtype") and spec.dtype == torch.float32
            and not spec.is_dynamic)


def _is_f32(spec) -> bool:
    """float32 with at most one dynamic dim (a payload shape of upper bounds that the backend
    re-infers at run time; a reshape names the dynamic dim 0, "inferred")."""
    return (spec is not None and hasattr(spec, "dtype") and spec.dtype == torch.float32
            and len(spec.dynamic) <= 1)


def _dynamic_dims(eg, n, i=0) -> Tuple[int, ...]:
    s = _spec(eg, n, i)
    return tuple(s.dynamic) if s is not None and hasattr(s, "dynamic") else ()


def _new_shape(eg, n, i=0) -> List[int]:
    """n's shape as a StaticReshape names it: its dynamic dim 0 (inferred from the input)."""
    dyn = _dynamic_dims(eg, n, i)
    return [0 if d in dyn else int(s) for d, s in enumerate(_shape(eg, n, i))]


def _shape(eg, n, i=0) -> Tuple[int, ...]:
    return tuple(int(d) for d in _spec(eg, n, i).shape)


def _tensor_args(n) -> List[torch.fx.Node]:
    out: List[torch.fx.Node] = []
    torch.fx.node.map_arg((n.args, n.kwargs), out.append)
    return out


def _pair(v, default) -> Tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (int(v[0]), int(v[-1])) if len(v) in (1, 2) else (None, None)


def _conv_ok(eg, n) -> bool:
    a = bind_args(n)
    w = a["weight"]
    if not eg.is_constant(w) or (a["bias"] is not None and not eg.is_constant(a["bias"])):
        return False
    rank = len(_shape(eg, n))
    if rank not in (3, 4):
        return False
    if a["transposed"]:
        if rank != 4 or any(int(p) < 0 for p in a["output_padding"]):
            return False
    elif any(int(p) for p in a["output_padding"]):
        return False
    return all(len(a[k]) == rank - 2 for k in ("stride", "padding", "dilation"))


def _pool_ok(eg, n) -> bool:
    a = bind_args(n)
    if len(_shape(eg, n.args[0])) != 4 or a["ceil_mode"]:
        return False
    k = _pair(a["kernel_size"], None)
    s = _pair(a["stride"], a["kernel_size"])
    p = _pair(a["padding"], 0)
    if None in k + s + p:
        return False
    if n.target is aten.max_pool2d_with_indices.default:
        d = _pair(a["dilation"], 1)
        if None in d:
            return False
        # the indices must be unused
        for u in n.users:
            if not (u.op == "call_function" and u.target is operator.getitem and u.args[1] == 0):
                return False
        return True
    # XNNPACK averages over the window's elements inside the input
    return a["divisor_override"] is None and (p == (0, 0) or not a["count_include_pad"])


def _index_plan(eg, a):
    """How an index_select by a constant index lowers: ("repeat", r) when the index is
    0,0,..,1,1,.. (each of the dim's positions r times in order: repeat_interleave), else
    ("runs", [(start, length), ...]) for at most 16 runs of consecutive positions; None when
    the index is not a constant 1-D integer tensor within the dim."""
    idx = a["index"]
    if not isinstance(idx, torch.fx.Node) or not eg.is_constant(idx):
        return None
    t = eg.constant_value(idx)
    if t.dim() != 1 or t.dtype not in (torch.int64, torch.int32) or t.numel() == 0:
        return None
    shape = _shape(eg, a["self"])
    if not shape:
        return None
    size = shape[int(a["dim"]) % len(shape)]
    ix = [int(v) for v in t.tolist()]
    if any(v < -size or v >= size for v in ix):
        return None
    ix = [v % size for v in ix]
    if len(ix) % size == 0 and len(ix) > size:
        r = len(ix) // size
        if ix == [i // r for i in range(len(ix))]:
            return ("repeat", r)
    runs = []
    for v in ix:
        if runs and runs[-1][0] + runs[-1][1] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return ("runs", [tuple(r) for r in runs]) if len(runs) <= 16 else None


def supported(eg, n: torch.fx.Node) -> bool:
    """True when node `n` (a call) can run in an XNNPACK payload: its op and arguments have
    an XNNGraph node and every tensor it reads or writes is float32 of static shape."""
    if n.op != "call_function":
        return False
    t = n.target
    if t is operator.getitem:
        src = n.args[0]
        return (isinstance(src, torch.fx.Node) and src.op == "call_function"
                and src.target is aten.max_pool2d_with_indices.default and n.args[1] == 0
                and supported(eg, src))
    if isinstance(t, (DynQuant, QLinear)):   # (qfuse: the patterns were checked there)
        specs = [eg.spec(n)] + [eg.spec(x) for x in _tensor_args(n)]
        x = n.args[0]
        return (all(_is_f32(s) for s in specs) and isinstance(x, torch.fx.Node)
                and (len(_shape(eg, x)) - 1) not in _dynamic_dims(eg, x)
                and (not isinstance(t, QLinear) or _shape(eg, x)[-1] == t.K))
    outs = eg.spec(n)
    outs = list(outs[:1]) if t is aten.max_pool2d_with_indices.default else [outs]
    reads = _tensor_args(n)
    if t is aten.index_select.default:
        reads = reads[:1]      # the index: a constant, read at export (_index_plan)
    specs = outs + [eg.spec(x) for x in reads]
    if not all(_is_f32_static(s) for s in specs):
        # dynamic shapes only where the node's result shape follows from its inputs' at run
        # time (the payload holds the upper bounds)
        if t not in _DYNAMIC_OK or not all(_is_f32(s) for s in specs):
            return False
    a = bind_args(n) if t is not _ops.alias else {}
    if t in (aten.addmm.default, aten.mm.default, aten.linear.default, aten._softmax.default):
        x = a.get("mat1", a.get("self", a.get("input")))
        if isinstance(x, torch.fx.Node) and (len(_shape(eg, x)) - 1) in _dynamic_dims(eg, x):
            return False       # the reduced (last) dim must be static
    if t in _UNARY or t in _BINARY:
        return t not in (aten.add.Tensor, aten.sub.Tensor) or a.get("alpha", 1) == 1
    if t in _BINARY_SCALAR:
        other = a["other"]
        return isinstance(other, (int, float)) and not isinstance(other, bool)
    if t in _CLAMPS:
        if t is aten.clamp.default:
            return all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                       for v in (a["min"], a["max"]))
        return True
    if t is aten.gelu.default:
        return a["approximate"] == "none"
    if t is aten.leaky_relu.default:
        return True
    if t is aten.elu.default:
        return a["scale"] == 1 and a["input_scale"] == 1
    if t is aten._softmax.default:
        return int(a["dim"]) in (-1, len(_shape(eg, n)) - 1) and not a["half_to_float"]
    if t is aten.pow.Tensor_Scalar:
        return a["exponent"] == 2
    if t is aten.convolution.default:
        return _conv_ok(eg, n)
    if t is aten.addmm.default:
        return (a["beta"] == 1 and a["alpha"] == 1 and eg.is_constant(a["mat2"])
                and eg.is_constant(a["self"]) and len(_shape(eg, a["self"])) == 1)
    if t is aten.mm.default:
        return eg.is_constant(a["mat2"])
    if t is aten.linear.default:
        return eg.is_constant(a["weight"]) and (a["bias"] is None or eg.is_constant(a["bias"]))
    if t is aten.bmm.default:
        return True
    if t in (aten.max_pool2d_with_indices.default, aten.avg_pool2d.default):
        return _pool_ok(eg, n)
    if t is aten.mean.dim:
        shape = _shape(eg, a["self"])
        if a["dtype"] is not None or not a["dim"] or not shape:
            return False
        dims = sorted(int(d) % len(shape) for d in a["dim"])
        # [2, 3] of a rank-4 value: global average pooling of its NHWC form; the last dim of
        # any rank: the same over a [rows, 1, D, 1] view
        return (len(shape) == 4 and dims == [2, 3]) or dims == [len(shape) - 1]
    if t is aten.index_select.default:
        return _index_plan(eg, a) is not None
    if t is aten.permute_copy.default or t is _ops.alias:
        return 1 <= len(_shape(eg, n)) <= 6
    if t is aten.cat.default:
        return len(a["tensors"]) >= 2 and all(isinstance(x, torch.fx.Node) for x in a["tensors"])
    if t is aten.slice_copy.Tensor:
        return a["step"] == 1
    if t is aten.constant_pad_nd.default:
        return all(int(p) >= 0 for p in a["pad"])
    if t in _UPSAMPLE:
        # XNNPACK maps coordinates by the size ratio; torch by a given scale, where one is
        # given (and corners are not aligned): the same only when the sizes are that ratio
        shape, ins = _shape(eg, n), _shape(eg, n.args[0])
        if len(shape) != 4:
            return False
        if t is aten.upsample_bilinear2d.vec:
            scales = a["scale_factors"]
        else:
            scales = None if a["scales_h"] is None and a["scales_w"] is None else \
                [a["scales_h"], a["scales_w"]]
        if scales is None or a["align_corners"]:
            return True
        return all(s is not None and float(s) * i == o
                   for s, i, o in zip(scales, ins[2:], shape[2:]))
    return False


# kinds whose output shape XNNPACK derives from the inputs' (so they may be dynamic)
_DYNAMIC_OK = frozenset(list(_UNARY) + list(_BINARY) + list(_BINARY_SCALAR) + list(_CLAMPS) + [
    aten.gelu.default, aten.leaky_relu.default, aten.elu.default, aten._softmax.default,
    aten.pow.Tensor_Scalar, aten.addmm.default, aten.mm.default, aten.linear.default,
    aten.bmm.default, aten.permute_copy.default, _ops.alias])

# ---- lowering ------------------------------------------------------------------------------


class _Val:
    """A lowered value: its id, and for an NHWC value the rank-4 logical shape it stores."""
    __slots__ = ("vid", "nchw4")

    def __init__(self, vid: int, nchw4: Optional[Tuple[int, ...]] = None):
        self.vid = vid
        self.nchw4 = nchw4


def _f32(t: torch.Tensor) -> bytes:
    return t.detach().to(torch.float32).contiguous().numpy().tobytes()


class Lowering:
    """One group of nodes -> one XnnGraph.

    inputs: the group's non-constant inputs (external inputs 0..k-1, in order); outputs: the
    (node, result) keys the rest of the program reads (external outputs k.., in order)."""

    def __init__(self, eg, nodes: Sequence[torch.fx.Node], inputs: Sequence[torch.fx.Node],
                 outputs: Sequence[Tuple[torch.fx.Node, int]]):
        self.eg = eg
        self.g = XnnGraph()
        self.vals: Dict[Any, _Val] = {}
        self.logical_cache: Dict[int, int] = {}
        self.nhwc_cache: Dict[int, int] = {}
        self.producer: Dict[int, int] = {}       # value id -> index of the node writing it
        self.readers: Dict[int, int] = {}        # value id -> nodes reading it
        self.out_ext = {k: len(inputs) + i for i, k in enumerate(outputs)}
        self.tb_of: Dict[Any, int] = {}     # a last-two-dims permute -> its input's value
        self.outputs = list(outputs)
        for i, x in enumerate(inputs):
            vid = self.g.value(_shape(eg, x), flags=EXTERNAL_INPUT, ext=i)
            self.vals[self.key(x)] = _Val(vid)
        for n in nodes:
            self.lower(n)
        for k in outputs:
            self.finish_output(k)

    # ---- values ----

    def key(self, n: torch.fx.Node) -> Tuple[torch.fx.Node, int]:
        if n.op == "call_function" and n.target is operator.getitem:
            return (n.args[0], n.args[1])
        return (n, 0)

    def val(self, n) -> _Val:
        k = self.key(n)
        if k not in self.vals:
            if not self.eg.is_constant(n):
                raise LoweringError("value %s is not available in the payload" % n.name)
            t = self.eg.constant_value(n)
            self.vals[k] = _Val(self.g.value(tuple(t.shape), const=_f32(t)))
        return self.vals[k]

    def const(self, t: torch.Tensor) -> int:
        return self.g.value(tuple(t.shape), const=_f32(t))

    def new(self, dims, n=None, nchw4=None) -> int:
        """A value for the result of node n (dims: physical).  A logical result the program
        reads later is an external output itself."""
        k = None if n is None else self.key(n)
        if k is not None and nchw4 is None and k in self.out_ext and k not in self.vals:
            vid = self.g.value(dims, flags=EXTERNAL_OUTPUT, ext=self.out_ext[k])
        else:
            vid = self.g.value(dims)
        if k is not None:
            self.vals[k] = _Val(vid, nchw4)
        return vid

    def emit(self, kind, fields, out_vid, reads, lo=None, hi=None) -> None:
        self.producer[out_vid] = len(self.g.nodes)
        for r in reads:
            self.readers[r] = self.readers.get(r, 0) + 1
        self.g.node(kind, fields, lo, hi)

    def transpose(self, vid: int, perm, out_dims, n=None, nchw4=None) -> int:
        o = self.new(out_dims, n, nchw4)
        self.emit("StaticTranspose", {0: U(len(perm)), 1: V(perm), 2: U(vid), 3: U(o)}, o, [vid])
        return o

    def reshape(self, vid: int, dims, n=None, nchw4=None) -> int:
        o = self.new(dims, n, nchw4)
        self.emit("StaticReshape", {0: U(len(dims)), 1: V(dims), 2: U(vid), 3: U(o)}, o, [vid])
        return o

    def is_qd(self, vid: int) -> bool:
        return self.g.values[vid]["dtype"] == QDINT8

    def float_of(self, vid: int) -> int:
        """vid, or for a per-token quantized value its dequantization (a Convert)."""
        if not self.is_qd(vid):
            return vid
        if vid not in self.logical_cache:
            f = self.g.value(self.g.dims(vid))
            self.emit("Convert", {0: U(vid), 1: U(f)}, f, [vid])
            self.logical_cache[vid] = f
        return self.logical_cache[vid]

    def logical(self, n) -> int:
        """The id of n's value in its logical layout (float)."""
        v = self.val(n)
        if v.nchw4 is None:
            return self.float_of(v.vid)
        if v.vid not in self.logical_cache:
            shape = _shape(self.eg, *self.key(n))
            N, C, H, W = v.nchw4
            if H * W == 1 or C == 1:       # the same bytes in both layouts
                o = self.reshape(v.vid, list(shape))
            else:
                o = self.transpose(v.vid, TO_NCHW, v.nchw4)
                if tuple(shape) != v.nchw4:
                    o = self.reshape(o, list(shape))
            self.logical_cache[v.vid] = o
        return self.logical_cache[v.vid]

    def nhwc(self, n, nchw4: Tuple[int, ...]) -> int:
        """The id of n's value stored NHWC as the rank-4 tensor nchw4."""
        v = self.val(n)
        if v.nchw4 == tuple(nchw4):
            return v.vid
        src = self.logical(n)
        if src in self.nhwc_cache:
            return self.nhwc_cache[src]
        N, C, H, W = nchw4
        phys = [N, H, W, C]
        if H * W == 1 or C == 1:
            o = self.reshape(src, phys)
        else:
            if tuple(self.g.dims(src)) != tuple(nchw4):
                src = self.reshape(src, list(nchw4))
            o = self.transpose(src, TO_NHWC, phys)
        self.nhwc_cache[self.logical(n)] = o
        return o

    def finish_output(self, k) -> None:
        n, i = k
        v = self.vals[k]
        ext = self.out_ext[k]
        if self.g.values[v.vid]["flags"] & EXTERNAL_OUTPUT:
            return
        # an NHWC (or internal) result: convert or copy it into the external value
        src = v.vid
        shape = list(_shape(self.eg, n, i))
        o = self.g.value(shape, flags=EXTERNAL_OUTPUT, ext=ext)
        if self.is_qd(src):     # a dynamically quantized value the program reads: dequantized
            if list(self.g.dims(src)) == shape:
                self.emit("Convert", {0: U(src), 1: U(o)}, o, [src])
                return
            src = self.float_of(src)
        if v.nchw4 is not None and v.nchw4[2] * v.nchw4[3] != 1 and v.nchw4[1] != 1:
            if tuple(shape) == v.nchw4:
                self.emit("StaticTranspose", {0: U(4), 1: V(TO_NCHW), 2: U(src), 3: U(o)}, o,
                          [src])
                return
            src = self.transpose(src, TO_NCHW, v.nchw4)
        dims = _new_shape(self.eg, n, i)
        self.emit("StaticReshape", {0: U(len(dims)), 1: V(dims), 2: U(src), 3: U(o)}, o, [src])

    # ---- nodes ----

    def lower(self, n: torch.fx.Node) -> None:
        t = n.target
        eg = self.eg
        if t is operator.getitem:
            return                               # max_pool2d_with_indices' result 0: its key
        if isinstance(t, DynQuant):
            return self.dyn_quant(n)
        if isinstance(t, QLinear):
            return self.qlinear(n)
        a = bind_args(n) if t is not _ops.alias else {}
        if t in _UNARY:
            return self.unary(n, _UNARY[t], a["self"])
        if t in _CLAMPS:
            if t is aten.relu.default:
                lo, hi = 0.0, math.inf
            elif t is aten.hardtanh.default:
                lo, hi = float(a["min_val"]), float(a["max_val"])
            else:
                lo = -math.inf if a["min"] is None else float(a["min"])
                hi = math.inf if a["max"] is None else float(a["max"])
            return self.clamp(n, a["self"], lo, hi)
        if t is aten.gelu.default:
            return self.unary(n, "Gelu", a["self"])
        if t is aten.pow.Tensor_Scalar:
            return self.unary(n, "Square", a["self"])
        if t is aten.leaky_relu.default:
            return self.unary(n, "LeakyReLU", a["self"], alpha=float(a["negative_slope"]))
        if t is aten.elu.default:
            return self.unary(n, "ELU", a["self"], alpha=float(a["alpha"]))
        if t is aten._softmax.default:
            x = self.logical(a["self"])
            o = self.new(_shape(eg, n), n)
            return self.emit("Softmax", {0: U(x), 1: U(o)}, o, [x])
        if t in _BINARY:
            return self.binary(n, _BINARY[t], a["self"], a["other"])
        if t in _BINARY_SCALAR:
            other = float(a["other"]) * (float(a["alpha"]) if "alpha" in a else 1.0)
            return self.binary(n, _BINARY_SCALAR[t], a["self"], torch.tensor([other]))
        if t is aten.convolution.default:
            return self.conv(n, a)
        if t in (aten.addmm.default, aten.mm.default, aten.linear.default):
            return self.fully_connected(n, a)
        if t is aten.bmm.default:
            x = self.logical(a["self"])
            m2 = a["mat2"]
            tb = isinstance(m2, torch.fx.Node) and self.key(m2) in self.tb_of
            y = self.tb_of[self.key(m2)] if tb else self.logical(m2)
            o = self.new(_shape(eg, n), n)
            return self.emit("BatchMatrixMultiply",
                             {0: U(x), 1: U(y), 2: U(o), 3: U(1 if tb else 0)}, o, [x, y])
        if t in (aten.max_pool2d_with_indices.default, aten.avg_pool2d.default):
            return self.pool(n, a)
        if t is aten.mean.dim:
            x = a["self"]
            shape4 = _shape(eg, x)
            if [int(d) % len(shape4) for d in a["dim"]] == [len(shape4) - 1]:
                return self.mean_last(n, x)
            xv = self.nhwc(x, shape4)
            N, C = shape4[0], shape4[1]
            if a["keepdim"]:
                o = self.new([N, 1, 1, C], n, nchw4=(N, C, 1, 1))
            else:
                o = self.new([N, C], n)
            return self.emit("GlobalAvgPooling2d", {0: U(xv), 1: U(o)}, o, [xv])
        if t is aten.index_select.default:
            return self.index_select(n, a)
        if t is _ops.alias:
            return self.alias(n)
        if t is aten.permute_copy.default:
            return self.permute(n, [int(d) % len(_shape(eg, n)) for d in a["dims"]])
        if t is aten.cat.default:
            return self.cat(n, list(a["tensors"]), int(a["dim"]))
        if t is aten.slice_copy.Tensor:
            return self.slice(n, a)
        if t is aten.constant_pad_nd.default:
            return self.pad(n, a)
        if t in _UPSAMPLE:
            x = a["input" if "input" in a else "self"]
            s4 = _shape(eg, x)
            xv = self.nhwc(x, s4)
            N, C, OH, OW = _shape(eg, n)
            o = self.new([N, OH, OW, C], n, nchw4=(N, C, OH, OW))
            flags = 8 if a["align_corners"] else 0
            return self.emit("StaticResizeBilinear2D",
                             {0: U(OH), 1: U(OW), 2: U(xv), 3: U(o), 4: U(flags)}, o, [xv])
        raise LoweringError("no lowering for %s" % _ops.op_name(t))

    def unary(self, n, kind, x, alpha=None) -> None:
        v = self.val(x)
        o = self.new(self.g.dims(v.vid), n, v.nchw4)
        if alpha is None:
            self.emit(kind, {0: U(v.vid), 1: U(o)}, o, [v.vid])
        else:
            self.emit(kind, {0: F(alpha), 1: U(v.vid), 2: U(o)}, o, [v.vid])

    def clamp(self, n, x, lo, hi) -> None:
        v = self.val(x)
        p = self.producer.get(v.vid)
        k = self.key(x) if isinstance(x, torch.fx.Node) else None
        if (p is not None and k is not None and k not in self.out_ext
                and len(x.users) == 1 and self.readers.get(v.vid, 0) == 0
                and not (self.g.values[v.vid]["flags"] & EXTERNAL_OUTPUT)):
            kind, fields, mm = self.g.nodes[p]
            if KIND_NAME[kind] in _CLAMPABLE:
                plo, phi = mm if mm is not None else (-math.inf, math.inf)
                self.g.nodes[p] = (kind, fields, (max(plo, lo), min(phi, hi)))
                # the clamp's result is the producer's value (external, if the program reads it)
                kn = self.key(n)
                if kn in self.out_ext and v.nchw4 is None:
                    self.g.values[v.vid]["flags"] |= EXTERNAL_OUTPUT
                    self.g.values[v.vid]["ext"] = self.out_ext[kn]
                self.vals[kn] = v
                return
        o = self.new(self.g.dims(v.vid), n, v.nchw4)
        self.emit("Clamp", {0: U(v.vid), 1: U(o)}, o, [v.vid], lo, hi)

    def binary(self, n, kind, x, y) -> None:
        out = _shape(self.eg, n)
        xs = [x, y]
        layouts = [self.val(z).nchw4 if isinstance(z, torch.fx.Node) else None for z in xs]
        use_nhwc = len(out) == 4 and any(l is not None and l == out for l in layouts)
        if use_nhwc:
            for z in xs:   # every operand must be NHWC-able: rank-4 values or constants
                if isinstance(z, torch.fx.Node) and not self.eg.is_constant(z):
                    if len(_shape(self.eg, z)) != 4:
                        use_nhwc = False
        ids = []
        for z in xs:
            is_const = not isinstance(z, torch.fx.Node) or self.eg.is_constant(z)
            if is_const:
                c = z if not isinstance(z, torch.fx.Node) else self.eg.constant_value(z)
                c = c.to(torch.float32)
                if use_nhwc:
                    c = c.reshape((1,) * (4 - c.dim()) + tuple(c.shape)).permute(*TO_NHWC)
                ids.append(self.const(c.contiguous()))
            elif use_nhwc:
                ids.append(self.nhwc(z, _shape(self.eg, z)))
            else:
                ids.append(self.logical(z))
        if use_nhwc:
            o = self.new([out[0], out[2], out[3], out[1]], n, nchw4=out)
        else:
            o = self.new(list(out), n)
        self.emit(kind, {0: U(ids[0]), 1: U(ids[1]), 2: U(o)}, o, ids)

    def conv(self, n, a) -> None:
        eg = self.eg
        x = a["input"]
        w = eg.constant_value(a["weight"]).to(torch.float32)
        b = a["bias"]
        xs = _shape(eg, x)
        os_ = _shape(eg, n)
        one_d = len(xs) == 3
        if one_d:   # [N, C, L] as [N, C, 1, L]
            xs4 = (xs[0], xs[1], 1, xs[2])
            os4 = (os_[0], os_[1], 1, os_[2])
            w = w.unsqueeze(2)
            stride, pad, dil = [1] + list(a["stride"]), [0] + list(a["padding"]), \
                [1] + list(a["dilation"])
            opad = [0] + list(a["output_padding"])
        else:
            xs4, os4 = xs, os_
            stride, pad, dil = list(a["stride"]), list(a["padding"]), list(a["dilation"])
            opad = list(a["output_padding"])
        groups = int(a["groups"])
        xv = self.nhwc(x, xs4)
        N, O, OH, OW = os4
        C = xs4[1]
        bv = NO_VALUE if b is None else self.const(eg.constant_value(b).to(torch.float32))
        kh, kw = int(w.shape[2]), int(w.shape[3])
        if a["transposed"]:
            # torch [groups * gic, goc, kh, kw] -> XNNPACK [groups * goc, kh, kw, gic]
            gic, goc = C // groups, int(w.shape[1])
            wx = w.reshape(groups, gic, goc, kh, kw).permute(0, 2, 3, 4, 1).reshape(
                groups * goc, kh, kw, gic)
            kind = "ConvTranspose2d"
        elif groups > 1 and groups == C and int(w.shape[1]) == 1:
            gic, goc = 1, O // groups
            wx = w.permute(1, 2, 3, 0)             # [1, kh, kw, O]
            kind = "DepthwiseConv2d"
        else:
            gic, goc = C // groups, O // groups
            wx = w.permute(0, 2, 3, 1)             # OHWI
            kind = "Conv2d"
        wv = self.const(wx.contiguous())
        o = self.new([N, OH, OW, O], n, nchw4=os4)
        fields = {0: U(pad[0]), 1: U(pad[1]), 2: U(pad[0]), 3: U(pad[1]), 4: U(kh), 5: U(kw),
                  6: U(stride[0]), 7: U(stride[1]), 8: U(dil[0]), 9: U(dil[1]), 10: U(gic),
                  11: U(goc), 12: U(groups), 15: U(xv), 16: U(wv), 17: U(bv), 18: U(o)}
        if a["transposed"]:
            fields[13], fields[14] = U(opad[0]), U(opad[1])
        self.emit(kind, fields, o, [xv])

    def fully_connected(self, n, a) -> None:
        eg = self.eg
        t = n.target
        if t is aten.addmm.default:
            x, w, b = a["mat1"], eg.constant_value(a["mat2"]).t(), a["self"]
        elif t is aten.mm.default:
            x, w, b = a["self"], eg.constant_value(a["mat2"]).t(), None
        else:
            x, w, b = a["input"], eg.constant_value(a["weight"]), a["bias"]
        xv = self.logical(x)
        wv = self.const(w.to(torch.float32).contiguous())
        bv = NO_VALUE if b is None else self.const(eg.constant_value(b).to(torch.float32))
        o = self.new(list(_shape(eg, n)), n)
        self.emit("FullyConnected", {0: U(xv), 1: U(wv), 2: U(bv), 3: U(o), 4: U(0)}, o, [xv])

    def pool(self, n, a) -> None:
        x = a["self"]
        xs = _shape(self.eg, x)
        kh, kw = _pair(a["kernel_size"], None)
        sh, sw = _pair(a["stride"], a["kernel_size"])
        ph, pw = _pair(a["padding"], 0)
        xv = self.nhwc(x, xs)
        N, C, OH, OW = _shape(self.eg, n, 0)
        o = self.new([N, OH, OW, C], n, nchw4=(N, C, OH, OW))
        fields = {0: U(ph), 1: U(pw), 2: U(ph), 3: U(pw), 4: U(kh), 5: U(kw), 6: U(sh),
                  7: U(sw)}
        if n.target is aten.max_pool2d_with_indices.default:
            dh, dw = _pair(a["dilation"], 1)
            fields.update({8: U(dh), 9: U(dw), 10: U(xv), 11: U(o)})
            self.emit("MaxPooling2d", fields, o, [xv])
        else:
            fields.update({8: U(1), 9: U(1), 10: U(xv), 11: U(o)})
            self.emit("AvgPooling2d", fields, o, [xv])

    def dyn_quant(self, n) -> None:
        """x -> its per-token int8 quantization (qdint8: the fully connected nodes read it)."""
        xv = self.logical(n.args[0])
        qd = self.g.value(self.g.dims(xv), dtype=QDINT8, q=("token", 1))
        self.emit("Convert", {0: U(xv), 1: U(qd)}, qd, [xv])
        self.vals[self.key(n)] = _Val(qd)

    def qlinear(self, n) -> None:
        q: QLinear = n.target
        a = n.args[0]
        v = self.val(a)
        xv = v.vid if v.nchw4 is None and self.is_qd(v.vid) else self.logical(a)
        if q.kind == "4":
            # etch (embedding_4bit): even k in the high nibble; XNNPACK: in the low one
            d = q.data.to(torch.int32)
            packed = (((d & 0x0F) << 4) | (d >> 4)).to(torch.uint8).contiguous().numpy()
            wv = self.g.value([q.N, q.K], dtype=QBINT4, const=packed.tobytes(),
                              q=("block32", [float(s) for s in q.scales.flatten()], 0, q.group))
        else:
            wv = self.g.value([q.N, q.K], dtype=QCINT8,
                              const=q.data.contiguous().numpy().tobytes(),
                              q=("channel", [float(s) for s in q.scales], 0))
        bv = NO_VALUE if q.bias is None else self.const(q.bias)
        in_dims = list(self.g.dims(xv))
        out_dims = in_dims[:-1] + [q.N]
        shape = list(_shape(self.eg, n))
        o = self.new(out_dims, n) if out_dims == shape else self.g.value(out_dims)
        self.emit("FullyConnected", {0: U(xv), 1: U(wv), 2: U(bv), 3: U(o), 4: U(0)}, o, [xv])
        if out_dims != shape:   # the node's own shape (XNNPACK keeps the input's leading dims)
            r = self.new(shape, n)
            dims = _new_shape(self.eg, n)
            self.emit("StaticReshape", {0: U(len(dims)), 1: V(dims), 2: U(o), 3: U(r)}, r, [o])

    def alias(self, n) -> None:
        x = n.args[0]
        v = self.val(x)
        shape = _shape(self.eg, n)
        if (v.nchw4 is None and self.is_qd(v.vid) and self.key(n) not in self.out_ext
                and shape[-1] == self.g.dims(v.vid)[-1]):
            self.vals[self.key(n)] = v   # the same rows: a linear reads them as they are
            return
        if v.nchw4 is not None and self.key(n) not in self.out_ext:
            s4 = v.nchw4
            if shape == s4 or (len(shape) == 3 and s4[2] == 1 and shape == (s4[0], s4[1], s4[3])):
                self.vals[self.key(n)] = v            # the same NHWC bytes
                return
        xv = self.logical(x)
        o = self.new(list(shape), n)
        dims = _new_shape(self.eg, n)
        self.emit("StaticReshape", {0: U(len(dims)), 1: V(dims), 2: U(xv), 3: U(o)}, o, [xv])

    def permute(self, n, perm) -> None:
        x = n.args[0]
        v = self.val(x)
        shape = _shape(self.eg, n)
        r = len(perm)
        if (v.nchw4 is None and r >= 2 and list(perm) == list(range(r - 2)) + [r - 1, r - 2]
                and self.key(n) not in self.out_ext and n.users
                and all(u.target is aten.bmm.default and u.args[1] is n and u.args[0] is not n
                        for u in n.users)):
            # read only as a bmm's second operand: the bmm transposes it (XNN_FLAG_TRANSPOSE_B)
            self.tb_of[self.key(n)] = self.logical(x)
            return
        if v.nchw4 is not None and len(perm) == 4 and _shape(self.eg, x) == v.nchw4:
            # L = P.permute(TO_NCHW), so L.permute(perm) = P.permute(TO_NCHW[perm])
            self.transpose(v.vid, [TO_NCHW[p] for p in perm], list(shape), n)
            return
        self.transpose(self.logical(x), perm, list(shape), n)

    def cat(self, n, parts, dim) -> None:
        eg = self.eg
        shape = _shape(eg, n)
        dim %= len(shape)
        nhwc = len(shape) == 4 and all(
            not eg.is_constant(p) and self.val(p).nchw4 == _shape(eg, p) for p in parts)
        if nhwc:
            ids = [self.val(p).vid for p in parts]
            axis = NHWC_AXIS[dim]
            dims_of = lambda s: [s[0], s[2], s[3], s[1]]  # noqa: E731
        else:
            ids = [self.logical(p) for p in parts]
            axis = dim
            dims_of = list
        self.concat(ids, axis, dims_of(shape) if nhwc else list(shape), n,
                    nchw4=shape if nhwc else None)

    def concat(self, ids, axis, out_dims, n=None, nchw4=None) -> int:
        """Concatenate the values ids (two or more) along axis into a value of out_dims (the
        result of n): Concatenate2..5 nodes, longer lists in steps of up to 5."""
        while True:
            take, rest = ids[:5], ids[5:]
            if rest:
                dims = list(self.g.dims(take[0]))
                dims[axis] = sum(self.g.dims(i)[axis] for i in take)
                o = self.new(dims)
            else:
                o = self.new(out_dims, n, nchw4=nchw4)
            fields = {0: U(axis), 5: U(o)}
            for s, i in zip([1, 2, 3, 4, 7], take):
                fields[s] = U(i)
            self.emit("Concatenate%d" % len(take), fields, o, take)
            if not rest:
                return o
            ids = [o] + rest

    def mean_last(self, n, x) -> None:
        """Mean over the last dim: global average pooling of the rows seen as a
        [rows, 1, D, 1] NHWC tensor (each row one batch of D pixels of one channel)."""
        shape = _shape(self.eg, x)
        D = shape[-1]
        rows = 1
        for d in shape[:-1]:
            rows *= d
        xv = self.reshape(self.logical(x), [rows, 1, D, 1])
        g = self.new([rows, 1, 1, 1])
        self.emit("GlobalAvgPooling2d", {0: U(xv), 1: U(g)}, g, [xv])
        self.reshape(g, list(_shape(self.eg, n)), n)

    def index_select(self, n, a) -> None:
        """index_select by a constant index: copies of the input along a new axis
        (repeat_interleave) or slices of its runs of consecutive positions, concatenated."""
        eg = self.eg
        x = a["self"]
        xs = list(_shape(eg, x))
        d = int(a["dim"]) % len(xs)
        kind, how = _index_plan(eg, a)
        xv = self.logical(x)
        out = list(_shape(eg, n))
        if kind == "repeat":
            pre = 1
            for v in xs[:d]:
                pre *= v
            post = 1
            for v in xs[d + 1:]:
                post *= v
            src = self.reshape(xv, [pre, xs[d], 1, post])
            parts, axis = [src] * how, 2
        else:
            parts, axis = [], d
            for start, length in how:
                if start == 0 and length == xs[d]:
                    parts.append(xv)
                    continue
                offs = [0] * len(xs)
                sizes = list(xs)
                offs[d], sizes[d] = start, length
                o = self.new(sizes)
                self.emit("StaticSlice", {0: U(len(xs)), 1: V(offs), 2: V(sizes), 3: U(xv),
                                          4: U(o)}, o, [xv])
                parts.append(o)
        if len(parts) > 1:
            dims = list(self.g.dims(parts[0]))
            dims[axis] = sum(self.g.dims(i)[axis] for i in parts)
            parts = [self.concat(parts, axis, dims)]
        self.reshape(parts[0], out, n)

    def slice(self, n, a) -> None:
        eg = self.eg
        x = a["self"]
        xs = _shape(eg, x)
        d = int(a["dim"]) % len(xs)
        size = xs[d]
        start = 0 if a["start"] is None else int(a["start"])
        end = size if a["end"] is None else int(a["end"])
        start = max(0, min(size, start + size if start < 0 else start))
        end = max(start, min(size, end + size if end < 0 else end))
        offs = [0] * len(xs)
        sizes = list(xs)
        offs[d], sizes[d] = start, end - start
        v = self.val(x)
        if v.nchw4 is not None and v.nchw4 == xs:
            perm = TO_NHWC
            offs = [offs[p] for p in perm]
            sizes = [sizes[p] for p in perm]
            o = self.new(sizes, n, nchw4=_shape(eg, n))
            xv = v.vid
        else:
            xv = self.logical(x)
            o = self.new(sizes, n)
        self.emit("StaticSlice", {0: U(len(xs)), 1: V(offs), 2: V(sizes), 3: U(xv), 4: U(o)},
                  o, [xv])

    def pad(self, n, a) -> None:
        x = a["self"]
        xs = _shape(self.eg, x)
        pad = [int(p) for p in a["pad"]]
        pre, post = [0] * len(xs), [0] * len(xs)
        for i in range(len(pad) // 2):
            pre[len(xs) - 1 - i] = pad[2 * i]
            post[len(xs) - 1 - i] = pad[2 * i + 1]
        xv = self.logical(x)
        o = self.new(list(_shape(self.eg, n)), n)
        self.emit("StaticConstantPad", {0: V(pre), 1: V(post), 2: F(float(a["value"])),
                                        3: U(xv), 4: U(o)}, o, [xv])


from .payload import KINDS as _KINDS  # noqa: E402

KIND_NAME = dict(enumerate(_KINDS))
