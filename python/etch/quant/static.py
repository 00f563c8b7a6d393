"""Static int8 post-training quantization (``int8``) and quantization-aware training
(``etch.prepare_qat`` / ``etch.convert_qat``) on top of torch.ao's FX quantization (1.13).

torch.ao does the work it is good at: symbolic tracing, Conv + BN (+ ReLU) folding (eval
mode), observers or fake quantization at the inputs and outputs of every op its native backend
quantizes, and the reference model (``convert_to_reference_fx``), whose graph carries
``quantize_per_tensor`` -> ``dequantize`` pairs and reference Linear / Conv modules.  This
module then rewrites that model into ExecuTorch's PT2E form:

* each ``torch.quantize_per_tensor(x, s, z, dtype)`` -> ``quantized_decomposed::
  quantize_per_tensor(x, s, z, qmin, qmax, dtype)`` and each ``.dequantize()`` after it ->
  ``dequantize_per_tensor`` (scales and zero points as numbers in the call, as PT2E's convert
  writes them);
* each reference Linear / Conv1d / Conv2d -> a module with an int8 weight (symmetric per output
  channel, -127..127) that computes ``dequantize_per_channel(w_int8, ...)`` -> linear / conv.
"""

from __future__ import annotations

import contextlib
import copy
import operator
import dis
import inspect
import torch
import torch.nn as nn
import torch.nn.functional as F

from .decomposed import ops as qd

__all__ = ["quantize_static", "prepare_qat", "convert_qat", "StaticInt8Linear",
           "StaticInt8Conv"]

W_QMIN, W_QMAX = -127, 127
# torch.ao's native backend quantizes conv / linear only with quint8 activations (with qint8
# it silently leaves them float), so uint8 is the one activation dtype offered.
_ACT = {"uint8": (torch.quint8, torch.uint8, 0, 255)}
_TORCH_Q = {torch.quint8: (torch.uint8, 0, 255), torch.qint8: (torch.int8, -128, 127)}


def _qconfig(observer: str, activation_dtype: str, qat: bool):
    from torch.ao.quantization import (FakeQuantize, HistogramObserver, MinMaxObserver,
                                       MovingAverageMinMaxObserver,
                                       MovingAveragePerChannelMinMaxObserver,
                                       PerChannelMinMaxObserver, QConfig)
    if activation_dtype not in _ACT:
        raise ValueError("activation_dtype must be uint8 (torch.ao's native backend quantizes "
                         "conv and linear with uint8 activations only), not %r"
                         % (activation_dtype,))
    qdt, _, lo, hi = _ACT[activation_dtype]
    if qat:
        act = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, dtype=qdt,
                                     quant_min=lo, quant_max=hi,
                                     qscheme=torch.per_tensor_affine)
        wt = FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver,
                                    dtype=torch.qint8, quant_min=W_QMIN, quant_max=W_QMAX,
                                    qscheme=torch.per_channel_symmetric, ch_axis=0)
        return QConfig(activation=act, weight=wt)
    obs = {"minmax": MinMaxObserver, "histogram": HistogramObserver}.get(observer)
    if obs is None:
        raise ValueError("observer must be 'minmax' or 'histogram', not %r" % (observer,))
    act = obs.with_args(dtype=qdt, quant_min=lo, quant_max=hi, qscheme=torch.per_tensor_affine)
    wt = PerChannelMinMaxObserver.with_args(dtype=torch.qint8, quant_min=W_QMIN,
                                            quant_max=W_QMAX,
                                            qscheme=torch.per_channel_symmetric, ch_axis=0)
    return QConfig(activation=act, weight=wt)


def _mapping(qconfig, qat: bool = False):
    """`qconfig` for every op, except: the ops whose output range is fixed (sigmoid,
    hardsigmoid, softmax: [0, 1]; tanh: [-1, 1]) get torch.ao's fixed-qparams observers
    (its native backend requires them; prepare_fx refuses the model otherwise), and
    LayerNorm keeps a float weight (as in torch.ao's default mapping)."""
    from torch.ao.quantization import (FixedQParamsFakeQuantize, QConfig, QConfigMapping,
                                       default_placeholder_observer)
    from torch.ao.quantization.qconfig_mapping import _FIXED_QPARAMS_OP_TO_OBSERVER
    m = QConfigMapping().set_global(qconfig)
    fixed = {}
    for op, obs in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
        if obs not in fixed:
            act = FixedQParamsFakeQuantize.with_args(observer=obs) if qat else obs
            fixed[obs] = QConfig(activation=act, weight=qconfig.weight)
        m.set_object_type(op, fixed[obs])
    ln = QConfig(activation=qconfig.activation, weight=default_placeholder_observer)
    m.set_object_type(nn.LayerNorm, ln).set_object_type(F.layer_norm, ln)
    return m


@contextlib.contextmanager
def _fx_unpacking():
    """torch 1.13's Proxy.__iter__ finds the instruction that unpacks a traced value
    (``n, c, h, w = x.size()``, ``a, b = x.chunk(2, 1)``) by ``f_lasti // 2`` in the list of
    instructions, which is wrong from Python 3.11 on (inline caches): tracing such a model
    (torchvision's shufflenet_v2) fails with "Proxy object cannot be iterated".  While
    tracing, look the instruction up by its byte offset instead (right on every version)."""
    from torch.fx.proxy import Proxy
    orig = Proxy.__iter__

    def _iter(self):
        frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return (self[i] for i in range(inst.argval))
                break
        return self.tracer.iter(self)

    Proxy.__iter__ = _iter
    try:
        yield
    finally:
        Proxy.__iter__ = orig


def _example_tuple(example_inputs):
    from ..capture import _flatten_inputs
    flat, spec = _flatten_inputs(example_inputs)
    from torch.utils import _pytree as pytree
    return tuple(pytree.tree_unflatten(flat, spec))


def _fx_error(e: Exception) -> ValueError:
    first = (str(e).splitlines() or [type(e).__name__])[0]
    return ValueError("static int8 / QAT quantization traces the model with torch.fx, which "
                      "failed: %s (models with data-dependent control flow need the "
                      "weight-only or dynamic schemes)" % first)


def quantize_static(model: nn.Module, example_inputs, calibration, *, observer="minmax",
                    activation_dtype="uint8", report=None) -> nn.Module:
    from torch.ao.quantization.quantize_fx import prepare_fx
    ex = _example_tuple(example_inputs)
    qconfig = _qconfig(observer, activation_dtype, qat=False)
    m = _split_relu6(copy.deepcopy(model).eval())
    try:
        with _fx_unpacking():
            prepared = prepare_fx(m, _mapping(qconfig), ex)
    except Exception as e:  # torch.fx tracing errors come in many types
        raise _fx_error(e) from e
    _drop_non_tensor_observers(prepared, ex)
    with torch.no_grad():
        for batch in calibration:
            prepared(*_example_tuple(batch))
    return _convert(prepared, report)


class _Max6(nn.Module):
    def forward(self, x):
        return torch.clamp(x, max=6.0)


def _split_relu6(model: nn.Module) -> nn.Module:
    """Every nn.ReLU6 -> Sequential(ReLU, clamp(max=6)) (the same function).  torch.ao fuses
    Conv + BN + ReLU but not ReLU6, whose output then shares the conv's quantization: the
    range of the values before the activation (negative ones included), about half of the
    256 levels unused (mobilenet_v2).  Split, the conv's output is quantized after the ReLU
    (zero point 0) and the clamp shares that."""
    if type(model) is nn.ReLU6:
        return nn.Sequential(nn.ReLU(), _Max6()).train(model.training)
    for name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            if type(child) is nn.ReLU6:
                # the mode of the module replaced: torch.ao fuses only modules in one mode
                setattr(mod, cname, nn.Sequential(nn.ReLU(), _Max6()).train(child.training))
    return model


def _drop_non_tensor_observers(prepared, ex) -> None:
    """torch.ao places an observer after ops whose result may be a Python number at run time
    (arithmetic on shapes: ``(x.shape[-1] // h) ** -0.5``), which then fails on it
    ("'float' object has no attribute 'numel'").  Run the example once, find the observers
    that receive something other than a tensor, and take them out: those values stay
    Python numbers, as in the float model."""
    from torch.ao.quantization.fake_quantize import FakeQuantizeBase
    from torch.ao.quantization.observer import ObserverBase
    drop = set()

    class Probe(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            if isinstance(self.module.get_submodule(target), (ObserverBase, FakeQuantizeBase)):
                if not isinstance(args[0], torch.Tensor):
                    drop.add(target)
                return args[0]          # observers and fake quantization see nothing here
            return super().call_module(target, args, kwargs)

    training = prepared.training
    prepared.eval()                     # BN statistics stay as they are
    try:
        with torch.no_grad():
            Probe(prepared).run(*ex)
    finally:
        prepared.train(training)
    if not drop:
        return
    for n in list(prepared.graph.nodes):
        if n.op == "call_module" and n.target in drop:
            n.replace_all_uses_with(n.args[0])
            prepared.graph.erase_node(n)
    prepared.recompile()


def prepare_qat(model: nn.Module, example_inputs, *, activation_dtype="uint8") -> nn.Module:
    """A copy of `model` with fake quantization (torch.ao's QAT, FX mode) at every quantized
    op: train it, then :func:`convert_qat`.  Conv + BN (+ ReLU) become QAT fused modules."""
    from torch.ao.quantization.quantize_fx import prepare_qat_fx
    if not isinstance(model, nn.Module):
        raise TypeError("etch.prepare_qat needs an nn.Module, got %s" % type(model).__name__)
    ex = _example_tuple(example_inputs)
    m = _split_relu6(copy.deepcopy(model).train())
    try:
        with _fx_unpacking():
            prepared = prepare_qat_fx(m, _mapping(_qconfig("minmax", activation_dtype,
                                                           qat=True), qat=True), ex)
    except Exception as e:
        raise _fx_error(e) from e
    _drop_non_tensor_observers(prepared, ex)
    return prepared


def convert_qat(model: nn.Module) -> nn.Module:
    """The trained model of :func:`prepare_qat` in the representation of the ``int8`` scheme
    (its learned scales and zero points)."""
    from .quantize import QuantizationReport
    if not isinstance(model, torch.fx.GraphModule) or not any(
            "FakeQuantize" in type(m).__name__ for m in model.modules()):
        raise TypeError("etch.convert_qat takes the model etch.prepare_qat returned")
    report = QuantizationReport("qat", {"weights": "int8 per channel",
                                        "activations": "per tensor affine"})
    out = _convert(copy.deepcopy(model).eval(), report)
    out.etch_quantization = report
    return out


class StaticInt8Linear(nn.Module):
    """int8 weight per output channel (-127..127) -> dequantize_per_channel -> linear."""

    def __init__(self, ref):
        super().__init__()
        _weight_buffers(self, ref)

    def forward(self, x):
        return F.linear(x, _dq_weight(self), self.bias)


class StaticInt8Conv(nn.Module):
    """int8 weight per output channel (-127..127) -> dequantize_per_channel -> convolution."""

    def __init__(self, ref):
        super().__init__()
        if ref.padding_mode != "zeros":
            raise ValueError("padding_mode %r" % ref.padding_mode)
        _weight_buffers(self, ref)
        self.dims = ref.weight.dim() - 2
        self.stride, self.padding = ref.stride, ref.padding
        self.dilation, self.groups = ref.dilation, ref.groups

    def forward(self, x):
        f = F.conv1d if self.dims == 1 else F.conv2d
        return f(x, _dq_weight(self), self.bias, self.stride, self.padding, self.dilation,
                 self.groups)


def _weight_buffers(mod, ref):
    w = ref.weight.detach()
    s = ref.weight_scale.detach().to(torch.float32).reshape(-1)
    z = ref.weight_zero_point.detach().to(torch.int64).reshape(-1)
    if s.numel() != w.shape[0]:
        s = s.expand(w.shape[0]).contiguous()
        z = z.expand(w.shape[0]).contiguous()
    mod.register_buffer("weight_int8", qd.quantize_per_channel(w, s, z, 0, W_QMIN, W_QMAX,
                                                               torch.int8))
    mod.register_buffer("weight_scales", s.clone())
    mod.register_buffer("weight_zero_points", z.clone())
    mod.register_buffer("bias", None if ref.bias is None else ref.bias.detach().clone())


def _dq_weight(mod):
    return qd.dequantize_per_channel(mod.weight_int8, mod.weight_scales,
                                     mod.weight_zero_points, 0, W_QMIN, W_QMAX, torch.int8)


_MUL = (operator.mul, torch.mul)
_DIV = (operator.truediv, torch.div, torch.true_divide)


def _scalar_op_qparams(x, lo, hi):
    """torch.ao gives the output of a multiplication or division by a number the observer of
    its input (the native backend's mul_scalar computes its own output scale when lowered):
    kept, that quantizes x * 0.02 with the scale of x, every value on a few levels.  For
    dequantize(q, s, z) * c the exact output quantization is scale s * |c| (s / |c| for a
    division) with zero point z (c > 0) or lo + hi - z (c < 0, the range mirrored).  None when
    `x` is not such an op on a dequantized tensor."""
    if x.op == "call_function" and (x.target in _MUL or x.target in _DIV):
        div = x.target in _DIV
    elif x.op == "call_method" and x.target in ("mul", "div", "true_divide"):
        div = x.target != "mul"
    else:
        return None
    if len(x.args) != 2 or x.kwargs:
        return None
    a, b = x.args
    if isinstance(a, (int, float)) and not isinstance(a, bool) and not div:
        a, b = b, a
    if not (isinstance(b, (int, float)) and not isinstance(b, bool)) or b == 0:
        return None
    if not (isinstance(a, torch.fx.Node) and a.op == "call_function" and
            a.target is qd.dequantize_per_tensor.default):
        return None
    s_in, z_in = float(a.args[1]), int(a.args[2])
    c = 1.0 / float(b) if div else float(b)
    return s_in * abs(c), (z_in if c > 0 else lo + hi - z_in)


def _convert(prepared, report) -> nn.Module:
    from torch.ao.quantization.quantize_fx import convert_to_reference_fx
    import torch.ao.nn.quantized.reference as R
    ref = convert_to_reference_fx(prepared)
    # Reference modules -> int8-weight modules (inside fused ConvReLU too).
    for name, mod in list(ref.named_modules()):
        for cname, child in list(mod.named_children()):
            full = "%s.%s" % (name, cname) if name else cname
            if isinstance(child, R.Linear):
                setattr(mod, cname, StaticInt8Linear(child))
                kind = "Linear"
            elif isinstance(child, (R.Conv1d, R.Conv2d)):
                setattr(mod, cname, StaticInt8Conv(child))
                kind = type(child).__name__
            else:
                continue
            if report is not None:
                report.quantized.append((full, "%s -> int8 per channel, activations QDQ"
                                         % kind))
    g = ref.graph
    for n in list(g.nodes):
        if n.op == "call_function" and n.target is torch.quantize_per_tensor:
            x, s_node, z_node, tdt = n.args
            scale = float(_attr(ref, s_node))
            zp = int(_attr(ref, z_node))
            dt, lo, hi = _TORCH_Q[tdt]
            scaled = _scalar_op_qparams(x, lo, hi)
            if scaled is not None:
                scale, zp = scaled
            with g.inserting_before(n):
                q = g.call_function(qd.quantize_per_tensor.default, (x, scale, zp, lo, hi, dt))
            for u in list(n.users):
                if u.op == "call_method" and u.target == "dequantize":
                    with g.inserting_before(u):
                        d = g.call_function(qd.dequantize_per_tensor.default,
                                            (q, scale, zp, lo, hi, dt))
                    u.replace_all_uses_with(d)
                    g.erase_node(u)
                else:
                    raise ValueError("a quantized tensor used by %s (only dequantize is "
                                     "supported)" % u.format_node())
            g.erase_node(n)
    leftover = [n.format_node() for n in g.nodes
                if (n.op == "call_method" and n.target == "dequantize") or
                (n.op == "call_function" and "quantize" in str(n.target) and
                 "quantized_decomposed" not in str(n.target))]
    if leftover:
        raise ValueError("quantized tensors the rewrite does not handle: %s"
                         % "; ".join(leftover[:3]))
    g.eliminate_dead_code()
    ref.recompile()
    if report is not None:
        # modules the graph calls as a whole (torch.fx does not trace into torch.nn's own
        # composite modules: TransformerEncoderLayer, MultiheadAttention): float inside
        leaves = {n.target for n in g.nodes if n.op == "call_module"}
        for name, mod in ref.named_modules():
            if name and any(True for _ in mod.parameters(recurse=False)) and not isinstance(
                    mod, (StaticInt8Linear, StaticInt8Conv)):
                outer = [lf for lf in leaves if name.startswith(lf + ".")]
                if outer:
                    o = min(outer, key=len)
                    why = ("%s inside %s (%s), which torch.fx runs as one float module"
                           % (type(mod).__name__, o, type(ref.get_submodule(o)).__name__))
                else:
                    why = "%s: not quantized by the int8 scheme" % type(mod).__name__
                report.kept_float.append((name, why))
    return ref


def _attr(gm, node):
    if isinstance(node, torch.fx.Node):
        assert node.op == "get_attr"
        v = gm
        for p in node.target.split("."):
            v = getattr(v, p)
        return v.item() if isinstance(v, torch.Tensor) else v
    return node


