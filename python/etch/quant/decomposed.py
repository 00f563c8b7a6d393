"""ExecuTorch's ``quantized_decomposed::*`` operators for torch 1.13, which has none of them.

Importing this module defines, once per process, with :mod:`torch.library`, every operator
below in the ``quantized_decomposed`` namespace under ExecuTorch's schemas (PyTorch's
``torch/ao/quantization/fx/_decomposed.py`` for the quantize / dequantize / choose_qparams
family, ExecuTorch's ``exir/passes/_quant_patterns_and_replacements.py`` for the embedding
ops, ExecuTorch's ``kernels/quantized/quantized.yaml`` for the out-variants), each with a CPU
reference implementation.  ``make_fx`` then records every call as a single node and the
exporter lowers it to its out-variant (``quantize_per_tensor`` -> ``quantize_per_tensor.out``,
``.tensor`` -> ``.Tensor_out``, ``embedding_4bit.dtype`` -> ``embedding_4bit.dtype_out``, ...),
the names ExecuTorch's quantized kernel library registers.

The reference math (README.md in this folder states it per operator):

* quantize: ``clamp(round_half_even(x * (1 / scale)) + zero_point, quant_min, quant_max)``,
  then the integer dtype; dequantize: ``(q - zero_point) * scale``;
* ``choose_qparams.tensor``: per tensor affine from min/max (``determine_qparams``'s rule),
  scale float64 ``[1]`` and zero point int64 ``[1]`` (the dtypes ExecuTorch's kernel writes);
* ``choose_qparams_per_token_asymmetric``: per row of the last dimension, XNNPACK's rule
  (range widened to include 0, scale ``(max - min) / 255`` at least float32 eps, the zero point
  from the end with the smaller error, rounded), scales float64 and zero points int64
  ``[..., 1]``;
* ``embedding_4bit``: each byte holds two 4-bit values, the even column in the high nibble,
  the odd one in the low nibble, stored plus 8 (byte = ((q_even + 8) << 4) | (q_odd + 8));
  rows dequantize group-wise (``scales [rows, cols / group]``, optional zero points of the
  scales' dtype) and are then gathered by ``indices``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["ops", "DTYPE_BOUNDS", "OP_NAMES", "pack_int4", "unpack_int4"]

NS = "quantized_decomposed"

DTYPE_BOUNDS = {torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-32768, 32767),
                torch.int32: (-(2 ** 31), 2 ** 31 - 1)}

_F32_EPS = torch.finfo(torch.float32).eps

# Functional schema and out-variant schema of every operator (overload name -> schema).
_SCHEMAS = [
    ("quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
     "int quant_max, ScalarType dtype) -> Tensor",
     "quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, "
     "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)"),
    ("quantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point, "
     "int quant_min, int quant_max, ScalarType dtype) -> Tensor",
     "quantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point, "
     "int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)"),
    ("dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
     "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
     "dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, "
     "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) "
     "-> Tensor(a!)"),
    ("dequantize_per_tensor.tensor(Tensor input, Tensor scale, Tensor zero_point, "
     "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
     "dequantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point, "
     "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
     "Tensor(a!) out) -> Tensor(a!)"),
    ("quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, "
     "int quant_min, int quant_max, ScalarType dtype) -> Tensor",
     "quantize_per_channel.out(Tensor input, Tensor scales, Tensor zero_points, int axis, "
     "int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)"),
    ("dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, "
     "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
     "dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, "
     "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
     "Tensor(a!) out) -> Tensor(a!)"),
    ("choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, "
     "ScalarType dtype) -> (Tensor, Tensor)",
     "choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max, float eps, "
     "ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out) "
     "-> (Tensor(a!), Tensor(b!))"),
    ("choose_qparams_per_token_asymmetric(Tensor input, ScalarType dtype) -> (Tensor, Tensor)",
     "choose_qparams_per_token_asymmetric.out(Tensor input, ScalarType dtype, *, "
     "Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))"),
    ("quantize_per_token(Tensor input, Tensor scales, Tensor zero_points, int quant_min, "
     "int quant_max, ScalarType dtype) -> Tensor",
     "quantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, "
     "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)"),
    ("dequantize_per_token(Tensor input, Tensor scales, Tensor zero_points, int quant_min, "
     "int quant_max, ScalarType dtype, ScalarType output_dtype) -> Tensor",
     "dequantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min, "
     "int quant_max, ScalarType dtype, ScalarType output_dtype, *, Tensor(a!) out) "
     "-> Tensor(a!)"),
    ("dequantize_per_channel_group(Tensor input, Tensor scales, Tensor? zero_points, "
     "int quant_min, int quant_max, ScalarType dtype, int group_size, "
     "ScalarType output_dtype) -> Tensor",
     "dequantize_per_channel_group.out(Tensor input, Tensor scales, Tensor? zero_points, "
     "int quant_min, int quant_max, ScalarType dtype, int group_size, "
     "ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)"),
]
for _emb in ("embedding_byte", "embedding_4bit"):
    _args = ("Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, "
             "int weight_quant_min, int weight_quant_max, Tensor indices")
    _SCHEMAS += [
        ("%s(%s) -> Tensor" % (_emb, _args),
         "%s.out(%s, *, Tensor(a!) out) -> Tensor(a!)" % (_emb, _args)),
        ("%s.dtype(%s, *, ScalarType? dtype=None) -> Tensor" % (_emb, _args),
         "%s.dtype_out(%s, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)"
         % (_emb, _args)),
    ]

# The out-variant names a runtime must register (ExecuTorch's quantized kernel names).
OP_NAMES = tuple(NS + "::" + out.split("(", 1)[0] for _, out in _SCHEMAS)


class QuantOpError(ValueError):
    """A quantized operator called with arguments its schema's contract forbids."""


def _check(cond: bool, op: str, msg: str) -> None:
    if not cond:
        raise QuantOpError("quantized_decomposed::%s: %s" % (op, msg))


def _bounds(op: str, quant_min: int, quant_max: int, dtype: torch.dtype) -> None:
    _check(dtype in DTYPE_BOUNDS, op, "unsupported quantized dtype %s" % dtype)
    lo, hi = DTYPE_BOUNDS[dtype]
    _check(lo <= quant_min <= quant_max <= hi, op,
           "quant range [%d, %d] is not inside %s's [%d, %d]"
           % (quant_min, quant_max, dtype, lo, hi))


def _float_input(op: str, x: torch.Tensor) -> torch.Tensor:
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float32)
    _check(x.dtype == torch.float32, op, "input must be float32, got %s" % x.dtype)
    return x


def _axis_first(x: torch.Tensor, axis: int):
    order = list(range(x.dim()))
    order[0], order[axis] = order[axis], order[0]
    return x.permute(order), order


# ---- reference implementations -------------------------------------------------------------

def quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    x = _float_input("quantize_per_tensor", input)
    _bounds("quantize_per_tensor", quant_min, quant_max, dtype)
    q = torch.round(x * (1.0 / scale)) + zero_point
    return torch.clamp(q, quant_min, quant_max).to(dtype)


def _one(op, t, what):
    _check(t.numel() == 1, op, "%s must hold one element, got %d" % (what, t.numel()))
    return t.item()


def quantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    op = "quantize_per_tensor.tensor"
    return quantize_per_tensor(input, _one(op, scale, "scale"),
                               _one(op, zero_point, "zero_point"), quant_min, quant_max, dtype)


def dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *,
                          out_dtype=None):
    op = "dequantize_per_tensor"
    _check(input.dtype == dtype, op, "input is %s, dtype says %s" % (input.dtype, dtype))
    _check(dtype in DTYPE_BOUNDS, op, "unsupported quantized dtype %s" % dtype)
    return (input.to(out_dtype or torch.float32) - zero_point) * scale


def dequantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *,
                                 out_dtype=None):
    op = "dequantize_per_tensor.tensor"
    return dequantize_per_tensor(input, _one(op, scale, "scale"),
                                 _one(op, zero_point, "zero_point"), quant_min, quant_max,
                                 dtype, out_dtype=out_dtype)


def _channel_params(op, x, scales, zero_points, axis):
    _check(-x.dim() <= axis < x.dim(), op, "axis %d out of range for a %d-d input"
           % (axis, x.dim()))
    axis %= x.dim()
    n = x.shape[axis]
    _check(scales.dim() == 1 and scales.numel() == n, op,
           "scales must be [%d] (one per channel of axis %d), got %s"
           % (n, axis, tuple(scales.shape)))
    _check(zero_points is None or (zero_points.dim() == 1 and zero_points.numel() == n), op,
           "zero_points must be [%d], got %s" % (n, None if zero_points is None
                                                  else tuple(zero_points.shape)))
    return axis


def quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype):
    op = "quantize_per_channel"
    x = _float_input(op, input)
    _bounds(op, quant_min, quant_max, dtype)
    axis = _channel_params(op, x, scales, zero_points, axis)
    x, order = _axis_first(x, axis)
    shape = [scales.shape[0]] + [1] * (x.dim() - 1)
    q = torch.round(x * (1.0 / scales.view(shape))) + zero_points.view(shape)
    return torch.clamp(q, quant_min, quant_max).permute(order).to(dtype)


def dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, *,
                           out_dtype=None):
    op = "dequantize_per_channel"
    _check(input.dtype == dtype, op, "input is %s, dtype says %s" % (input.dtype, dtype))
    _bounds(op, quant_min, quant_max, dtype)
    axis = _channel_params(op, input, scales, zero_points, axis)
    x, order = _axis_first(input, axis)
    shape = [scales.shape[0]] + [1] * (x.dim() - 1)
    if zero_points is not None:
        y = (x - zero_points.view(shape)) * scales.view(shape)
    else:
        y = x * scales.view(shape)
    return y.to(out_dtype or torch.float32).permute(order)


def choose_qparams_tensor(input, quant_min, quant_max, eps, dtype):
    op = "choose_qparams.tensor"
    _check(input.dtype == torch.float32, op, "input must be float32, got %s" % input.dtype)
    _check(dtype in DTYPE_BOUNDS, op, "unsupported quantized dtype %s" % dtype)
    _check(quant_min <= 0 <= quant_max and quant_min < quant_max, op,
           "quant range [%d, %d] must contain 0" % (quant_min, quant_max))
    _check(input.numel() > 0, op, "input is empty")
    lo = torch.clamp(input.min(), max=0.0)
    hi = torch.clamp(input.max(), min=0.0)
    scale = (hi - lo) / float(quant_max - quant_min)
    scale = torch.max(scale, torch.tensor(eps, dtype=scale.dtype))
    zp = quant_min - torch.round(lo / scale).to(torch.int64)
    zp = torch.clamp(zp, quant_min, quant_max)
    return scale.reshape(1).to(torch.float64), zp.reshape(1).to(torch.int64)


def choose_qparams_per_token_asymmetric(input, dtype):
    op = "choose_qparams_per_token_asymmetric"
    _check(input.dtype == torch.float32, op, "input must be float32, got %s" % input.dtype)
    _check(input.dim() >= 1 and input.shape[-1] > 0, op, "input needs a non-empty last dim")
    qmin, qmax = -128, 127
    lo = torch.clamp(input.amin(dim=-1, keepdim=True), max=0.0)
    hi = torch.clamp(input.amax(dim=-1, keepdim=True), min=0.0)
    scale = ((hi - lo) / float(qmax - qmin)).clamp(min=_F32_EPS)
    dmin, dmax = lo / scale, hi / scale
    zp = torch.where((qmin + dmin) + (qmax + dmax) > 0, qmin - dmin, qmax - dmax)
    zp = torch.clamp(zp, qmin, qmax).round()
    return scale.to(torch.float64), zp.to(torch.int64)


def _tokens(op, x, scales, zero_points):
    n = math.prod(x.shape[:-1]) if x.dim() else 1
    _check(scales.numel() == n and zero_points.numel() == n, op,
           "%d tokens but %d scales and %d zero points"
           % (n, scales.numel(), zero_points.numel()))
    shape = list(x.shape[:-1]) + [1]
    return scales.reshape(shape), zero_points.reshape(shape)


def quantize_per_token(input, scales, zero_points, quant_min, quant_max, dtype):
    op = "quantize_per_token"
    x = _float_input(op, input)
    _bounds(op, quant_min, quant_max, dtype)
    s, z = _tokens(op, x, scales, zero_points)
    return x.mul(1.0 / s).add(z).round().clamp(quant_min, quant_max).to(dtype)


def dequantize_per_token(input, scales, zero_points, quant_min, quant_max, dtype,
                         output_dtype):
    op = "dequantize_per_token"
    _check(input.dtype == dtype, op, "input is %s, dtype says %s" % (input.dtype, dtype))
    _bounds(op, quant_min, quant_max, dtype)
    s, z = _tokens(op, input, scales, zero_points)
    return ((input - z) * s).to(output_dtype)


def _group_params(op, w, scales, zero_points, group_size):
    _check(w.dim() == 2, op, "input must be 2-d, got %s" % (tuple(w.shape),))
    rows, cols = w.shape
    _check(group_size > 0 and cols % group_size == 0, op,
           "group size %d does not divide %d columns" % (group_size, cols))
    g = cols // group_size
    _check(scales.numel() == rows * g, op, "scales must hold %d x %d values, got %s"
           % (rows, g, tuple(scales.shape)))
    _check(zero_points is None or zero_points.numel() == rows * g, op,
           "zero_points must hold %d x %d values" % (rows, g))


def dequantize_per_channel_group(input, scales, zero_points, quant_min, quant_max, dtype,
                                 group_size, output_dtype):
    op = "dequantize_per_channel_group"
    _check(input.dtype == dtype, op, "input is %s, dtype says %s" % (input.dtype, dtype))
    if group_size > input.shape[-1] and scales.shape[-1] == 1:
        group_size = input.shape[-1]
    _group_params(op, input, scales, zero_points, group_size)
    grouped = input.reshape(-1, group_size)
    zp = zero_points.reshape(-1, 1) if zero_points is not None else \
        torch.zeros([], dtype=torch.int32)
    return grouped.sub(zp).mul(scales.reshape(-1, 1)).reshape_as(input).to(output_dtype)


def _embedding_checks(op, weight, scales, zero_points):
    _check(weight.dtype in (torch.int8, torch.uint8), op,
           "weight must be int8 or uint8, got %s" % weight.dtype)
    _check(weight.dim() == 2, op, "weight must be 2-d, got %s" % (tuple(weight.shape),))
    _check(scales.dtype in (torch.float16, torch.float32), op,
           "weight_scales must be float16 or float32, got %s" % scales.dtype)
    _check(scales.dim() in (1, 2) and scales.shape[0] == weight.shape[0], op,
           "weight_scales must be [%d] or [%d, groups], got %s"
           % (weight.shape[0], weight.shape[0], tuple(scales.shape)))
    if zero_points is not None:
        _check(zero_points.dtype == scales.dtype, op,
               "weight_zero_points must have the scales' dtype %s" % scales.dtype)
        _check(zero_points.shape == scales.shape, op,
               "weight_zero_points %s must match weight_scales %s"
               % (tuple(zero_points.shape), tuple(scales.shape)))


def _embed(op, w_q, scales, zero_points, indices, out_dtype):
    """Dequantize the rows group-wise (in float32, exact for float16 scales too) and gather."""
    rows, cols = w_q.shape
    groups = scales.shape[1] if scales.dim() == 2 else 1
    _check(cols % groups == 0, op, "%d groups do not divide %d columns" % (groups, cols))
    if indices.dtype not in (torch.int64, torch.int32):
        raise QuantOpError("quantized_decomposed::%s: indices must be int64 or int32, got %s"
                           % (op, indices.dtype))
    if indices.numel():
        _check(int(indices.min()) >= 0 and int(indices.max()) < rows, op,
               "an index is outside the %d rows" % rows)
    g = cols // groups
    q = w_q.to(torch.float32).reshape(rows, groups, g)
    if zero_points is not None:
        q = q - zero_points.to(torch.float32).reshape(rows, groups, 1)
    w = (q * scales.to(torch.float32).reshape(rows, groups, 1)).reshape(rows, cols)
    return torch.nn.functional.embedding(indices, w).to(out_dtype)


def embedding_byte(weight, weight_scales, weight_zero_points, weight_quant_min,
                   weight_quant_max, indices):
    return embedding_byte_dtype(weight, weight_scales, weight_zero_points, weight_quant_min,
                                weight_quant_max, indices, dtype=None)


def embedding_byte_dtype(weight, weight_scales, weight_zero_points, weight_quant_min,
                         weight_quant_max, indices, *, dtype=None):
    op = "embedding_byte"
    _embedding_checks(op, weight, weight_scales, weight_zero_points)
    return _embed(op, weight, weight_scales, weight_zero_points, indices,
                  dtype or weight_scales.dtype)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """[rows, n/2] packed bytes -> int8 [rows, n] in -8..7 (even column = high nibble)."""
    b = packed.to(torch.int16) & 0xFF
    hi, lo = b >> 4, b & 0x0F
    return torch.stack((hi, lo), dim=-1).reshape(packed.shape[0], -1).sub(8).to(torch.int8)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """int8 [rows, n] in -8..7, n even -> uint8 [rows, n/2] in embedding_4bit's layout."""
    if q.dim() != 2 or q.shape[1] % 2:
        raise ValueError("pack_int4 needs a 2-d tensor with an even number of columns, got %s"
                         % (tuple(q.shape),))
    if q.numel() and (int(q.min()) < -8 or int(q.max()) > 7):
        raise ValueError("pack_int4: values outside -8..7")
    u = (q.to(torch.int16) + 8).reshape(q.shape[0], -1, 2)
    return ((u[..., 0] << 4) | u[..., 1]).to(torch.uint8)


def embedding_4bit(weight, weight_scales, weight_zero_points, weight_quant_min,
                   weight_quant_max, indices):
    return embedding_4bit_dtype(weight, weight_scales, weight_zero_points, weight_quant_min,
                                weight_quant_max, indices, dtype=None)


def embedding_4bit_dtype(weight, weight_scales, weight_zero_points, weight_quant_min,
                         weight_quant_max, indices, *, dtype=None):
    op = "embedding_4bit"
    _check(weight_quant_min == -8 and weight_quant_max == 7, op,
           "quant range must be [-8, 7], got [%d, %d]" % (weight_quant_min, weight_quant_max))
    _embedding_checks(op, weight, weight_scales, weight_zero_points)
    return _embed(op, unpack_int4(weight), weight_scales, weight_zero_points, indices,
                  dtype or weight_scales.dtype)


_IMPLS = {
    "quantize_per_tensor": quantize_per_tensor,
    "quantize_per_tensor.tensor": quantize_per_tensor_tensor,
    "dequantize_per_tensor": dequantize_per_tensor,
    "dequantize_per_tensor.tensor": dequantize_per_tensor_tensor,
    "quantize_per_channel": quantize_per_channel,
    "dequantize_per_channel": dequantize_per_channel,
    "choose_qparams.tensor": choose_qparams_tensor,
    "choose_qparams_per_token_asymmetric": choose_qparams_per_token_asymmetric,
    "quantize_per_token": quantize_per_token,
    "dequantize_per_token": dequantize_per_token,
    "dequantize_per_channel_group": dequantize_per_channel_group,
    "embedding_byte": embedding_byte,
    "embedding_byte.dtype": embedding_byte_dtype,
    "embedding_4bit": embedding_4bit,
    "embedding_4bit.dtype": embedding_4bit_dtype,
}


def _out_impl(fn):
    def impl(*args, **kwargs):
        outs = [kwargs.pop(k) for k in ("out", "scale_out", "zero_point_out") if k in kwargs]
        res = fn(*args, **kwargs)
        res = res if isinstance(res, tuple) else (res,)
        for o, r in zip(outs, res):
            o.resize_(r.shape)
            o.copy_(r)
        return outs[0] if len(outs) == 1 else tuple(outs)
    return impl


def _define():
    ns = getattr(torch.ops, NS)
    try:
        ns.embedding_4bit  # noqa: B018  (already defined in this process)
        return ns
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library(NS, "DEF")
    for fs, outs in _SCHEMAS:
        lib.define(fs)
        lib.define(outs)
        fname = fs.split("(", 1)[0]
        oname = outs.split("(", 1)[0]
        lib.impl(fname, _IMPLS[fname], "CPU")
        lib.impl(oname, _out_impl(_IMPLS[fname]), "CPU")
    _define.lib = lib   # keep the registration alive
    return ns


ops = _define()
