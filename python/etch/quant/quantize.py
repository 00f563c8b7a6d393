"""``etch.quantize``: an ``nn.Module`` -> a copy whose layers compute with quantized weights
(and, for the dynamic schemes, quantized activations) through ExecuTorch's
``quantized_decomposed`` operators, ready for :func:`etch.export`.

The representation of every scheme is stated in README.md beside this file."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .decomposed import ops as qd, pack_int4

__all__ = ["quantize", "SCHEMES", "QuantizationReport", "Int8Linear", "Int4Linear",
           "QuantizedEmbedding", "parse_embedding_spec", "quantize_weight"]

SCHEMES = ("8w", "4w", "8da4w", "int8-dynamic", "int8")
WEIGHT_SCHEMES = ("8w", "int8-dynamic", "4w", "8da4w")   # per layer (overrides)
GROUP_SIZES = (32, 64, 128, 256)
DEFAULT_GROUP_SIZE = 128
_EPS = torch.finfo(torch.float32).eps


@dataclass
class QuantizationReport:
    """What :func:`quantize` did: the scheme and its options, the layers it quantized and
    the layers with weights that stayed float (name, why)."""
    scheme: str
    options: dict
    quantized: List[Tuple[str, str]] = field(default_factory=list)    # (name, how)
    kept_float: List[Tuple[str, str]] = field(default_factory=list)   # (name, why)

    def lines(self) -> List[str]:
        opts = ", ".join("%s=%s" % kv for kv in sorted(self.options.items()))
        out = ["quantization: scheme %s (%s): %d layer(s) quantized, %d kept float"
               % (self.scheme, opts, len(self.quantized), len(self.kept_float))]
        for name, how in self.quantized:
            out.append("  quantized  %-40s %s" % (name, how))
        for name, why in self.kept_float:
            out.append("  float      %-40s %s" % (name, why))
        return out

    def __str__(self):
        return "\n".join(self.lines())


# ---- weight quantization ------------------------------------------------------------------

def quantize_weight(w: torch.Tensor, bits: int, group_size: Optional[int], symmetric: bool = True,
                    scale_dtype: torch.dtype = torch.float32):
    """Group-wise (``group_size`` columns of a row; None: the whole row) quantization of a
    2-d float weight to ``bits`` bits.  Returns ``(q int8 [rows, cols], scales [rows, groups],
    zero_points [rows, groups] or None, quant_min, quant_max)``; scales (and zero points) are
    ``scale_dtype``, and q is computed from the stored (rounded) scales.

    symmetric: ``q = clamp(round(w / s), qmin, qmax)``, ``s = max|w| / ((qmax - qmin) / 2)``
    with qmin, qmax = -2**(bits-1) (+1 for 8 bits: -127), 2**(bits-1) - 1;
    asymmetric: ``s = (max(w, 0) - min(w, 0)) / (qmax - qmin)``, ``z = clamp(round(qmin -
    min(w, 0) / s), qmin, qmax)``, ``q = clamp(round(w / s) + z, qmin, qmax)``, qmin = -2**(bits-1).
    Every s is at least float32's eps."""
    if w.dim() != 2:
        raise ValueError("quantize_weight needs a 2-d weight, got %s" % (tuple(w.shape),))
    rows, cols = w.shape
    g = cols if group_size is None else int(group_size)
    if g <= 0 or cols % g:
        raise ValueError("group size %d does not divide %d columns" % (g, cols))
    qmax = 2 ** (bits - 1) - 1
    qmin = -qmax if (symmetric and bits == 8) else -qmax - 1
    wg = w.detach().to(torch.float32).reshape(rows, cols // g, g)
    if symmetric:
        s = wg.abs().amax(dim=-1) / ((qmax - qmin) / 2.0)
        s = s.clamp(min=_EPS).to(scale_dtype)
        sf = s.to(torch.float32).unsqueeze(-1)
        q = torch.clamp(torch.round(wg / sf), qmin, qmax)
        z = None
    else:
        lo = wg.amin(dim=-1).clamp(max=0.0)
        hi = wg.amax(dim=-1).clamp(min=0.0)
        s = ((hi - lo) / float(qmax - qmin)).clamp(min=_EPS).to(scale_dtype)
        sf = s.to(torch.float32)
        zf = torch.clamp(torch.round(qmin - lo / sf), qmin, qmax)
        z = zf.to(scale_dtype)
        q = torch.clamp(torch.round(wg / sf.unsqueeze(-1)) + zf.unsqueeze(-1), qmin, qmax)
    return q.reshape(rows, cols).to(torch.int8), s, z, qmin, qmax


def _per_token_qdq(x: torch.Tensor) -> torch.Tensor:
    """int8 dynamic per-token asymmetric activation quantization (quantize + dequantize)."""
    s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
    q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
    return qd.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float32)


class Int8Linear(nn.Module):
    """``8w`` / ``int8-dynamic``: int8 weight per output channel (symmetric, -127..127),
    ``dequantize_per_channel`` -> linear; with ``dynamic_activations`` the input is first
    quantized per token (choose_qparams_per_token_asymmetric -> quantize_per_token ->
    dequantize_per_token)."""

    def __init__(self, lin: nn.Linear, dynamic_activations: bool = False):
        super().__init__()
        q, s, _, qmin, qmax = quantize_weight(lin.weight, 8, None, True, torch.float32)
        self.in_features, self.out_features = lin.in_features, lin.out_features
        self.quant_min, self.quant_max = qmin, qmax
        self.dynamic_activations = bool(dynamic_activations)
        self.register_buffer("weight_int8", q)
        self.register_buffer("weight_scales", s.reshape(-1).contiguous())
        self.register_buffer("weight_zero_points", torch.zeros(q.shape[0], dtype=torch.int64))
        self.register_buffer("bias", None if lin.bias is None else lin.bias.detach().clone())

    def dequantized_weight(self) -> torch.Tensor:
        return qd.dequantize_per_channel(self.weight_int8, self.weight_scales,
                                         self.weight_zero_points, 0, self.quant_min,
                                         self.quant_max, torch.int8)

    def forward(self, x):
        if self.dynamic_activations:
            x = _per_token_qdq(x)
        return F.linear(x, self.dequantized_weight(), self.bias)


class Int4Linear(nn.Module):
    """``4w`` / ``8da4w``: int4 group-wise weight packed two per byte in embedding_4bit's
    layout; the weight is ``embedding_4bit.dtype(packed, scales, zero_points, -8, 7,
    arange(out_features), dtype=float32)`` -> linear; with ``dynamic_activations`` the input
    is quantized per token first (as :class:`Int8Linear`).

    pad: when group_size does not divide in_features, the weight gets zero columns up to the
    next multiple (``padded_in_features``) and the dequantized weight is sliced back to
    in_features (``slice_copy`` on dimension 1) before the linear."""

    def __init__(self, lin: nn.Linear, group_size: int, symmetric: bool = True,
                 scale_dtype: torch.dtype = torch.float16, dynamic_activations: bool = False,
                 pad: bool = False):
        super().__init__()
        w = lin.weight.detach()
        k = lin.in_features
        kp = -(-k // group_size) * group_size
        if kp != k:
            if not pad:
                raise ValueError("group size %d does not divide in_features %d"
                                 % (group_size, k))
            w = F.pad(w, (0, kp - k))
        q, s, z, _, _ = quantize_weight(w, 4, group_size, symmetric, scale_dtype)
        self.in_features, self.out_features = lin.in_features, lin.out_features
        self.padded_in_features = kp
        self.group_size = int(group_size)
        self.dynamic_activations = bool(dynamic_activations)
        self.register_buffer("weight_packed", pack_int4(q))
        self.register_buffer("weight_scales", s.contiguous())
        self.register_buffer("weight_zero_points", None if z is None else z.contiguous())
        self.register_buffer("row_ids", torch.arange(lin.out_features, dtype=torch.int64))
        self.register_buffer("bias", None if lin.bias is None else lin.bias.detach().clone())

    def dequantized_weight(self) -> torch.Tensor:
        w = qd.embedding_4bit.dtype(self.weight_packed, self.weight_scales,
                                    self.weight_zero_points, -8, 7, self.row_ids,
                                    dtype=torch.float32)
        if self.padded_in_features != self.in_features:
            w = w[:, :self.in_features]
        return w

    def forward(self, x):
        if self.dynamic_activations:
            x = _per_token_qdq(x)
        return F.linear(x, self.dequantized_weight(), self.bias)


class QuantizedEmbedding(nn.Module):
    """nn.Embedding with 8-bit (``embedding_byte.dtype``) or 4-bit (``embedding_4bit.dtype``)
    symmetric rows, per row (group None) or per group of columns."""

    def __init__(self, emb: nn.Embedding, bits: int, group_size: Optional[int],
                 scale_dtype: torch.dtype = torch.float32):
        super().__init__()
        q, s, _, qmin, qmax = quantize_weight(emb.weight, bits, group_size, True, scale_dtype)
        self.bits, self.group_size = bits, group_size
        self.num_embeddings, self.embedding_dim = emb.num_embeddings, emb.embedding_dim
        self.quant_min, self.quant_max = qmin, qmax
        self.register_buffer("weight_q", pack_int4(q) if bits == 4 else q)
        self.register_buffer("weight_scales", (s.reshape(-1) if group_size is None else s)
                             .contiguous())

    def forward(self, indices):
        if self.bits == 4:
            return qd.embedding_4bit.dtype(self.weight_q, self.weight_scales, None, -8, 7,
                                           indices, dtype=torch.float32)
        return qd.embedding_byte.dtype(self.weight_q, self.weight_scales, None, self.quant_min,
                                       self.quant_max, indices, dtype=torch.float32)


# ---- options --------------------------------------------------------------------------------

def parse_embedding_spec(spec) -> Optional[Tuple[int, Optional[int]]]:
    """``None`` | ``"8"`` | ``"4,32"`` | ``(bits, group)`` -> (bits, group or None)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",")]
        if len(parts) not in (1, 2) or not all(p.lstrip("-").isdigit() for p in parts):
            raise ValueError("embedding quantization must be BITS or BITS,GROUP (8, 4,32), "
                             "not %r" % spec)
        spec = tuple(int(p) for p in parts)
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = (spec,)
    if not isinstance(spec, (tuple, list)) or len(spec) not in (1, 2):
        raise ValueError("embedding quantization must be BITS or (BITS, GROUP), not %r"
                         % (spec,))
    bits = spec[0]
    group = spec[1] if len(spec) == 2 else None
    if bits not in (4, 8):
        raise ValueError("embedding quantization: %r bits; 8 or 4 are supported" % (bits,))
    if group is not None and (group <= 0 or group % 2):
        raise ValueError("embedding quantization: group size %r must be a positive even "
                         "number (0 or none: one scale per row)" % (group,))
    if group == 0:
        group = None
    if bits == 4 and group is None:
        return 4, None
    return bits, group


def _as_dtype(x, what: str) -> torch.dtype:
    if isinstance(x, torch.dtype):
        d = x
    else:
        d = {"float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
             "float32": torch.float32, "fp32": torch.float32, "float": torch.float32}.get(
                 str(x).lower())
    if d not in (torch.float16, torch.float32):
        raise ValueError("%s must be float16 or float32, not %r" % (what, x))
    return d


def _check_calibration(calibration, example_inputs) -> list:
    from ..capture import _flatten_inputs
    flat, _ = _flatten_inputs(example_inputs)
    try:
        batches = list(calibration)
    except TypeError:
        raise TypeError("calibration must be an iterable of input tuples like example_inputs, "
                        "not %s" % type(calibration).__name__) from None
    if not batches:
        raise ValueError("calibration holds no batches")
    for i, b in enumerate(batches):
        got, _ = _flatten_inputs(b)
        if len(got) != len(flat):
            raise ValueError("calibration batch %d has %d inputs, the model takes %d"
                             % (i, len(got), len(flat)))
        for j, (g, e) in enumerate(zip(got, flat)):
            if g.dtype != e.dtype:
                raise ValueError("calibration batch %d input %d is %s, the example input is %s"
                                 % (i, j, g.dtype, e.dtype))
            if g.dim() != e.dim() or tuple(g.shape[1:]) != tuple(e.shape[1:]):
                raise ValueError("calibration batch %d input %d has shape %s, the example "
                                 "input %s (only the first dimension may differ)"
                                 % (i, j, tuple(g.shape), tuple(e.shape)))
    return batches


# ---- the entry point ------------------------------------------------------------------------

def quantize(model: nn.Module, example_inputs, scheme: str, calibration=None, *,
             group_size: Optional[int] = None, symmetric: bool = True,
             embedding=None, scale_dtype=None, skip: Sequence[str] = (),
             pad: bool = False, observer: str = "minmax", activation_dtype: str = "uint8",
             overrides: Optional[Mapping[str, str]] = None,
             inplace: bool = False) -> nn.Module:
    """Quantize `model` for export (``etch.export(etch.quantize(m, x, "4w"), x)``).

    scheme: ``8w`` (int8 weights per output channel), ``4w`` (int4 group-wise weights),
        ``8da4w`` (int8 dynamic per-token activations + int4 group-wise weights),
        ``int8-dynamic`` (int8 dynamic per-token activations + int8 per-channel weights):
        the nn.Linear layers are quantized; other layers with weights stay float and are
        named in the report (``model.etch_quantization``, printed by ``Program.summary``).
        ``int8``: static post-training quantization (int8 weights per channel, activations
        uint8 affine per tensor from observers over `calibration`, Conv + BN (+ ReLU)
        folded, QDQ around every op torch.ao's native backend quantizes; :mod:`.static`).
    example_inputs: as for :func:`etch.export` (the reference for calibration's shapes).
    calibration: ``int8``'s data, an iterable of input tuples like example_inputs (checked:
        count, dtype, shape but the first dimension); the weight-only and dynamic schemes
        need none and refuse it (a ValueError) after the same checks.
    observer: ``int8``: ``"minmax"`` or ``"histogram"`` (torch.ao's HistogramObserver, which
        clips outliers by minimizing the quantization error).
    activation_dtype: ``int8``: ``"uint8"`` (the only one torch.ao's native backend quantizes
        conv / linear with).
    group_size: 4-bit schemes: 32, 64, 128 or 256 columns per scale (default 128); it must
        divide every quantized layer's in_features (a ValueError naming the layer otherwise),
        unless ``pad=True``: such layers are then padded with zero columns up to the next
        multiple (stored padded, sliced back at run time; the report says so).
    symmetric: 4-bit schemes: False adds a zero point per group (asymmetric).
    embedding: also quantize nn.Embedding tables: ``"8"`` / ``"8,G"`` (embedding_byte) or
        ``"4,G"`` (embedding_4bit), G the group size (none: one scale per row).
    scale_dtype: 4-bit scales' dtype: float16 (default; the file stays within Q4_0's size) or
        float32.  8-bit scales are float32.
    skip: names (or name prefixes) of modules to keep float.
    overrides: weight-only / dynamic schemes: ``{linear name: scheme}`` for layers quantized
        otherwise (``8w``, ``int8-dynamic``, ``4w``, ``8da4w``; e.g. an LLM's classifier at 8
        bits under ``4w``, as llama.cpp's Q4_0 keeps it); each name must be an nn.Linear.
    inplace: modify `model` itself instead of a deep copy.
    """
    if not isinstance(model, nn.Module):
        raise TypeError("etch.quantize needs an nn.Module, got %s" % type(model).__name__)
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        hint = ""
        if scheme == "qat":
            hint = " (QAT: etch.prepare_qat, train, etch.convert_qat)"
        raise ValueError("unknown quantization scheme %r; known: %s%s"
                         % (scheme, ", ".join(SCHEMES), hint))
    four = scheme in ("4w", "8da4w")
    if group_size is None:
        group_size = DEFAULT_GROUP_SIZE if four else None
    elif not four:
        raise ValueError("scheme %s quantizes per channel; a group size applies to 4w and "
                         "8da4w" % scheme)
    elif isinstance(group_size, bool) or not isinstance(group_size, int) or \
            group_size not in GROUP_SIZES:
        raise ValueError("group size %r: use one of %s"
                         % (group_size, ", ".join(map(str, GROUP_SIZES))))
    if not four and not symmetric:
        raise ValueError("scheme %s has symmetric weights only" % scheme)
    sdt = _as_dtype(scale_dtype if scale_dtype is not None else torch.float16, "scale_dtype")
    emb = parse_embedding_spec(embedding)
    from ..capture import _flatten_inputs
    _flatten_inputs(example_inputs)     # a TypeError for what export would refuse too
    if scheme == "int8":
        if calibration is None:
            raise ValueError("scheme int8 needs calibration data (an iterable of input tuples "
                             "like example_inputs; --calibration DIR_OR_NPZ)")
        if group_size is not None or emb is not None or pad or overrides:
            raise ValueError("scheme int8 takes no group size, embedding, pad or overrides "
                             "option")
        calibration = _check_calibration(calibration, example_inputs)
        from .static import quantize_static
        report = QuantizationReport("int8", {"observer": observer,
                                             "activations": activation_dtype})
        q = quantize_static(model, example_inputs, calibration, observer=observer,
                            activation_dtype=activation_dtype, report=report)
        q.etch_quantization = report
        return q
    overrides = dict(overrides or {})
    linears = {n for n, m in model.named_modules() if type(m) is nn.Linear}
    for name, sch in overrides.items():
        if name not in linears:
            raise ValueError("overrides: %r is not an nn.Linear of the model" % (name,))
        if sch not in WEIGHT_SCHEMES:
            raise ValueError("overrides: scheme %r for %s; use one of %s"
                             % (sch, name, ", ".join(WEIGHT_SCHEMES)))
    if calibration is not None:
        _check_calibration(calibration, example_inputs)
        raise ValueError("scheme %s quantizes weights ahead of time and activations at run "
                         "time; it takes no calibration data" % scheme)
    skip = tuple(skip)

    # Validate everything before changing anything.
    plan = []          # (parent, attr, name, new-module factory, how)
    report = QuantizationReport(scheme, {"group_size": group_size, "symmetric": symmetric,
                                         "embedding": "%s,%s" % emb if emb else "float"})
    if four:
        report.options["scale_dtype"] = str(sdt).replace("torch.", "")
    for name, mod in model.named_modules():
        if not name or any(name == s or name.startswith(s + ".") for s in skip):
            if name and _owns_weights(mod):
                report.kept_float.append((name, "%s: skipped on request"
                                          % type(mod).__name__))
            continue
        parent, attr = _parent(model, name)
        if type(mod) is nn.Linear:
            if mod.weight.dtype != torch.float32:
                report.kept_float.append((name, "Linear with %s weights (float32 only)"
                                          % mod.weight.dtype))
                continue
            lin = overrides.get(name, scheme)
            if lin in ("4w", "8da4w"):
                gs = group_size if four else DEFAULT_GROUP_SIZE
                padded = ""
                if mod.in_features % gs:
                    if not pad:
                        ok = [g for g in GROUP_SIZES if mod.in_features % g == 0]
                        raise ValueError(
                            "group size %d does not divide %s's in_features %d (%s; or pad "
                            "with zero columns: pad=True, --pad-groups)"
                            % (gs, name, mod.in_features,
                               "group sizes that do: %s" % ", ".join(map(str, ok)) if ok
                               else "none of %s does" % ", ".join(map(str, GROUP_SIZES))))
                    padded = ", padded to %d" % (-(-mod.in_features // gs) * gs)
                dyn = lin == "8da4w"
                plan.append((parent, attr, name,
                             lambda m, d=dyn, g=gs: Int4Linear(m, g, symmetric, sdt, d, pad),
                             "Linear %dx%d -> int4 g%d%s%s%s" % (
                                 mod.out_features, mod.in_features, gs,
                                 "" if symmetric else " asym", padded,
                                 ", int8 dyn act" if dyn else "")))
            else:
                dyn = lin == "int8-dynamic"
                plan.append((parent, attr, name, lambda m, d=dyn: Int8Linear(m, d),
                             "Linear %dx%d -> int8 per channel%s" % (
                                 mod.out_features, mod.in_features,
                                 ", int8 dyn act" if dyn else "")))
        elif type(mod) is nn.Embedding:
            if emb is None:
                report.kept_float.append((name, "Embedding (quantized only with embedding=)"))
                continue
            why = _embedding_unsupported(mod, emb)
            if why:
                report.kept_float.append((name, why))
                continue
            bits, g = emb
            plan.append((parent, attr, name,
                         lambda m, b=bits, gg=g: QuantizedEmbedding(
                             m, b, gg, sdt if b == 4 else torch.float32),
                         "Embedding %dx%d -> %d-bit %s" % (
                             mod.num_embeddings, mod.embedding_dim, bits,
                             "per row" if g is None else "g%d" % g)))
        elif _owns_weights(mod):
            report.kept_float.append((name, "%s: scheme %s quantizes nn.Linear%s only"
                                      % (type(mod).__name__, scheme,
                                         " and nn.Embedding" if emb else "")))
    target = model if inplace else _copy(model)
    for parent, attr, name, make, how in plan:
        parent_t = _get(target, parent) if parent else target
        setattr(parent_t, attr, make(_get(target, name)))
        report.quantized.append((name, how))
    target.etch_quantization = report
    return target


def _copy(model: nn.Module) -> nn.Module:
    """A deep copy; state that is not a graph leaf (a KV cache written by a forward run
    outside no_grad) is copied by value, which deepcopy alone refuses."""
    memo = {}
    for t in list(model.parameters()) + list(model.buffers()):
        if not t.is_leaf:
            memo[id(t)] = t.detach().clone()
    return copy.deepcopy(model, memo)


def _owns_weights(mod: nn.Module) -> bool:
    return any(True for _ in mod.parameters(recurse=False))


def _embedding_unsupported(mod: nn.Embedding, emb) -> Optional[str]:
    bits, g = emb
    if mod.weight.dtype != torch.float32:
        return "Embedding with %s weights (float32 only)" % mod.weight.dtype
    if mod.max_norm is not None:
        return "Embedding with max_norm (renormalizes rows at run time)"
    if g is not None and mod.embedding_dim % g:
        raise ValueError("embedding group size %d does not divide %d columns of %s"
                         % (g, mod.embedding_dim, "the embedding"))
    if bits == 4 and mod.embedding_dim % 2:
        raise ValueError("4-bit embedding needs an even embedding_dim, got %d"
                         % mod.embedding_dim)
    return None


def _parent(model: nn.Module, name: str) -> Tuple[str, str]:
    if "." in name:
        p, a = name.rsplit(".", 1)
        return p, a
    return "", name


def _get(model: nn.Module, name: str) -> nn.Module:
    m = model
    for part in name.split("."):
        m = getattr(m, part)
    return m
