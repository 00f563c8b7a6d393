"""Operator knowledge: which operators an ExecuTorch runtime knows, how a functional ATen call
maps to its out-variant (the name a kernel is registered under and the schema whose argument
order the kernel expects), and the few operators of the exporter's own IR.

The out-variant is found from torch's own schemas (``torch.ops.aten.<op>.<overload>._schema``):
the overload of the same operator whose non-``out`` arguments are the functional overload's
arguments (minus tensor-creation options such as ``dtype``/``device``, which the out tensor
carries) and that has keyword-only written tensors.  Operators that this torch (1.13) does not
have but ExecuTorch's kernels use (``_native_batch_norm_legit_no_training``) are described by a
schema string and implemented here for the reference interpreter.
"""

from __future__ import annotations

import functools
import operator
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

aten = torch.ops.aten

# Operators of ExecuTorch's portable kernel library (kernels/portable/functions.yaml, listed in
# docs/pte-format.md §9), as "namespace::name.overload"; then the ATen sort out-variants
# (torch.sort / torch.argsort / torch.msort capture as aten::sort, lowered to sort.values or
# sort.values_stable), which etch's portable library implements (op_sort.c) but that list
# lacks: a runtime without them fails at load naming the operator.
PORTABLE_OPS = frozenset("aten::" + n for n in """
_adaptive_avg_pool2d.out _cdist_forward.out _conj_physical.out _log_softmax.out
_native_batch_norm_legit.out _native_batch_norm_legit.no_stats_out
_native_batch_norm_legit_no_training.out _pdist_forward.out _softmax.out _to_copy.out abs.out
acos.out acosh.out add.out add.Scalar_out addmm.out alias_copy.out amax.out amin.out
any.all_out any.dims_out any.out arange.out arange.start_out argmax.out argmin.out
as_strided_copy.out asin.out asinh.out atan.out atan2.out atanh.out avg_pool2d.out
bitwise_and.Scalar_out bitwise_and.Tensor_out bitwise_not.out bitwise_or.Scalar_out
bitwise_or.Tensor_out bitwise_xor.Scalar_out bitwise_xor.Tensor_out
bitwise_left_shift.Tensor_out bitwise_left_shift.Tensor_Scalar_out
bitwise_right_shift.Tensor_out bitwise_right_shift.Tensor_Scalar_out bmm.out cat.out ceil.out
clamp.out clamp.Tensor_out clone.out constant_pad_nd.out convolution.out
convolution_backward.out copy.out copy_ cos.out cosh.out cumsum.out detach_copy.out
diagonal_copy.out div.out div.Scalar_mode_out div.Scalar_out div.out_mode embedding.out
empty.out eq.Scalar_out eq.Tensor_out elu.out erf.out exp.out expand_copy.out expm1.out
fill.Scalar_out fill.Tensor_out flip.out floor.out floor_divide.out fmod.Tensor_out
fmod.Scalar_out full.out full_like.out gather.out ge.Scalar_out ge.Tensor_out gelu.out glu.out
grid_sampler_2d.out gt.Scalar_out gt.Tensor_out hardtanh.out index.Tensor_out index_put.out
index_put_ index_select.out isinf.out isnan.out le.Scalar_out le.Tensor_out leaky_relu.out
lift_fresh_copy.out log.out log10.out log1p.out log2.out logical_and.out logical_not.out
logical_or.out logical_xor.out logit.out lt.Scalar_out lt.Tensor_out masked_fill.Scalar_out
masked_scatter.out masked_select.out max.dim_max max.unary_out maximum.out
max_pool2d_with_indices.out max_pool2d_with_indices_backward.grad_input mean.out
mean.dtype_out min.dim_min min.unary_out minimum.out mm.out mul.out mul.Scalar_out
narrow_copy.out native_dropout.out native_group_norm.out native_layer_norm.out ne.Scalar_out
ne.Tensor_out neg.out nonzero.out ones.out permute_copy.out pixel_shuffle.out
pixel_unshuffle.out pow.Scalar_out pow.Tensor_Scalar_out pow.Tensor_Tensor_out prod.int_out
prod.out rand.out randn.out reciprocal.out relu.out remainder.Tensor_out remainder.Scalar_out
repeat.out repeat_interleave.Tensor_out reflection_pad1d.out reflection_pad2d.out
reflection_pad3d.out replication_pad1d.out replication_pad2d.out replication_pad3d.out
roll.out round.out rsqrt.out rsub.Scalar_out scalar_tensor.out scatter.src_out
scatter.value_out scatter_add.out select_copy.int_out select_scatter.out sigmoid.out sign.out
sin.out sinh.out slice_copy.Tensor_out slice_scatter.out split_copy.Tensor_out
split_with_sizes_copy.out sqrt.out squeeze_copy.dim_out squeeze_copy.dims_out stack.out
sub.out sub.Scalar_out sum.IntList_out t_copy.out tan.out tanh.out topk.values
transpose_copy.int_out tril.out trunc.out unbind_copy.int_out unfold_copy.out
unsqueeze_copy.out upsample_bilinear2d.vec_out _upsample_bilinear2d_aa.out
upsample_nearest2d.vec_out var.correction_out var_mean.correction_out var.out
view_as_real_copy.out view_copy.out where.self_out zeros.out
""".split()) | frozenset("aten::" + n for n in """
sort.values sort.values_stable
""".split()) | frozenset("""
dim_order_ops::_empty_dim_order.out dim_order_ops::_to_dim_order_copy.out
dim_order_ops::_clone_dim_order.out
""".split())

# ExecuTorch's quantized operators (kernels/quantized/quantized.yaml, plus the out-variants its
# exporter derives for dequantize_per_channel_group and embedding_2bit), as the out-variant
# schemas the kernels take (src/kernels/portable/table_quant.inc): the functional operators
# (torch.ao's _decomposed.py names, which torch 1.13 lacks; etch.quant defines them for
# capture) map onto these by name, e.g. quantize_per_tensor.tensor -> .Tensor_out.
QUANTIZED_SCHEMAS = [
    "quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point, "
    "int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::quantize_per_tensor.Tensor_out(Tensor input, Tensor scale, "
    "Tensor zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) "
    "-> Tensor(a!)",
    "quantized_decomposed::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, "
    "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_tensor.Tensor_out(Tensor input, Tensor scale, "
    "Tensor zero_point, int quant_min, int quant_max, ScalarType dtype, *, "
    "ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::quantize_per_channel.out(Tensor input, Tensor scales, "
    "Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, "
    "Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales, "
    "Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, "
    "ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::choose_qparams.Tensor_out(Tensor input, int quant_min, "
    "int quant_max, float eps, ScalarType dtype, *, Tensor(a!) scale_out, "
    "Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
    "quantized_decomposed::choose_qparams_per_token_asymmetric.out(Tensor input, "
    "ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out) "
    "-> (Tensor(a!), Tensor(b!))",
    "quantized_decomposed::quantize_per_token.out(Tensor input, Tensor scales, "
    "Tensor zero_points, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) "
    "-> Tensor(a!)",
    "quantized_decomposed::dequantize_per_token.out(Tensor input, Tensor scales, "
    "Tensor zero_points, int quant_min, int quant_max, ScalarType dtype, "
    "ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantized_decomposed::dequantize_per_channel_group.out(Tensor input, Tensor scales, "
    "Tensor? zero_points, int quant_min, int quant_max, ScalarType dtype, int group_size, "
    "ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)",
] + [
    "quantized_decomposed::embedding_%s.%s(Tensor weight, Tensor weight_scales, "
    "Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices, "
    "*, %sTensor(a!) out) -> Tensor(a!)" % (bits, ov, "ScalarType? dtype=None, " if dt else "")
    for bits in ("byte", "4bit", "2bit")
    for ov, dt in (("out", False), ("dtype_out", True))
]

# functional overload -> its out-variant overload
_QUANTIZED_FUNCTIONAL = {
    "quantize_per_tensor": "out", "quantize_per_tensor.tensor": "Tensor_out",
    "dequantize_per_tensor": "out", "dequantize_per_tensor.tensor": "Tensor_out",
    "quantize_per_channel": "out", "dequantize_per_channel": "out",
    "choose_qparams.tensor": "Tensor_out", "choose_qparams_per_token_asymmetric": "out",
    "quantize_per_token": "out", "dequantize_per_token": "out",
    "dequantize_per_channel_group": "out",
    "embedding_byte": "out", "embedding_byte.dtype": "dtype_out",
    "embedding_4bit": "out", "embedding_4bit.dtype": "dtype_out",
    "embedding_2bit": "out", "embedding_2bit.dtype": "dtype_out",
}

QUANTIZED_OPS = frozenset(s.split("(", 1)[0] for s in QUANTIZED_SCHEMAS)


@functools.lru_cache(maxsize=None)
def quantized_out_variant(name: str) -> Optional["OutVariant"]:
    """The out-variant (name and ExecuTorch's schema) of a quantized_decomposed operator given
    by its functional or out-variant name ("quantized_decomposed::quantize_per_tensor.tensor",
    "...::quantize_per_tensor.Tensor_out"); None for other names."""
    ns, _, rest = name.partition("::")
    if ns != "quantized_decomposed":
        return None
    out = rest if name in QUANTIZED_OPS else None
    if out is None and rest in _QUANTIZED_FUNCTIONAL:
        out = rest.split(".", 1)[0] + "." + _QUANTIZED_FUNCTIONAL[rest]
    if out is None:
        return None
    full = "quantized_decomposed::" + out
    for sch in QUANTIZED_SCHEMAS:
        if sch.startswith(full + "("):
            return OutVariant(full, torch._C.parse_schema(sch))
    return None


# etch.quant emits these (its operators are defined for torch 1.13 in etch/quant/decomposed.py).
PORTABLE_OPS = PORTABLE_OPS | QUANTIZED_OPS

# Primitive operators every ExecuTorch runtime registers (§5.4).
PRIM_OPS = frozenset([
    "aten::sym_size.int", "aten::_local_scalar_dense", "aten::sym_numel",
    "executorch_prim::floordiv.int", "executorch_prim::mod.int",
    "executorch_prim::et_copy_index.tensor", "executorch_prim::et_view.default",
] + ["executorch_prim::%s.Scalar" % n for n in (
    "sym_max sym_min add sub mul floordiv truediv sym_float sym_int eq gt lt ge le neg "
    "sym_not sym_ite mod ceil round trunc").split()])

# Namespaces an ExecuTorch runtime may know; anything else is etch-only.
EXECUTORCH_NAMESPACES = ("aten", "executorch_prim", "dim_order_ops", "quantized_decomposed",
                         "llama")


def is_portable_name(name: str) -> bool:
    """True for operator names that ExecuTorch's own runtime resolves (by namespace)."""
    return name.split("::", 1)[0] in EXECUTORCH_NAMESPACES


# ---- torch dtype <-> ScalarType ----------------------------------------------------------

SCALAR_TYPE = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
    torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11,
    torch.bfloat16: 15,
}
TORCH_DTYPE = {v: k for k, v in SCALAR_TYPE.items()}
MEMORY_FORMAT = {torch.contiguous_format: 0, torch.preserve_format: 1}
LAYOUT = {torch.strided: 0, torch.sparse_coo: 1}


def scalar_type(dtype: torch.dtype) -> int:
    try:
        return SCALAR_TYPE[dtype]
    except KeyError:
        raise NotImplementedError("dtype %s has no .pte ScalarType" % dtype) from None


def from_numpy(x, what: str = "value"):
    """`x` itself, unless it is a numpy array (-> a torch tensor of the same dtype and shape,
    C-contiguous, native byte order, sharing memory where it can) or a numpy scalar (-> the
    Python bool/int/float).  numpy is not imported here: without it loaded, nothing is an
    array."""
    np = sys.modules.get("numpy")
    if np is None:
        return x
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf" or x.dtype.itemsize > 8:
            raise TypeError("%s: numpy dtype %s has no etch equivalent (bool, integer and "
                            "floating point arrays are accepted)" % (what, x.dtype))
        a = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        if not a.flags.writeable:
            a = a.copy()
        try:
            return torch.from_numpy(a)
        except TypeError:
            raise TypeError("%s: numpy dtype %s has no torch equivalent" % (what, x.dtype)) \
                from None
    if isinstance(x, np.generic):
        return x.item()
    return x


def _full_name(s) -> str:
    return s.name + ("." + s.overload_name if s.overload_name else "")


# ---- the exporter's own IR operators -----------------------------------------------------


class IROp:
    """A functional operator of the exporter's IR that torch 1.13 lacks.

    ``schema`` is its functional schema, ``out_schema`` the out-variant kernels implement;
    calling the object runs a reference implementation (used by the graph interpreter)."""

    def __init__(self, schema: str, out_schema: str, fn: Callable,
                 out_name: Optional[str] = None):
        self._schema = torch._C.parse_schema(schema)
        self.out_schema = torch._C.parse_schema(out_schema)
        self.out_name = out_name or _full_name(self.out_schema)
        self.fn = fn
        self.__name__ = self._schema.name.split("::")[-1]
        functools.update_wrapper(self, fn, assigned=("__doc__",), updated=())

    @property
    def qualified_name(self) -> str:
        return self._schema.name

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return "etch_ir.%s" % self.__name__


def _bn_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    out = torch.nn.functional.batch_norm(input, running_mean, running_var, weight, bias,
                                         False, momentum, eps)
    empty = input.new_empty((0,))
    return out, empty, empty.clone()


native_batch_norm_no_training = IROp(
    "aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, "
    "Tensor running_mean, Tensor running_var, float momentum, float eps) "
    "-> (Tensor, Tensor, Tensor)",
    "aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, "
    "Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps, *, "
    "Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
    _bn_no_training)


def _alias(x, size):
    return x.contiguous().view(size)


# A view that shares its source's storage (emitted as nothing when statically shaped, as
# executorch_prim::et_view otherwise).  Arguments: (source, size).
alias = IROp(
    "etch_ir::alias(Tensor self, SymInt[] size) -> Tensor",
    "executorch_prim::et_view(Tensor self, SymInt[] size) -> Tensor",
    _alias, out_name="executorch_prim::et_view.default")

IR_OPS = {op.qualified_name: op for op in (native_batch_norm_no_training, alias)}


def schema_of(target) -> torch._C.FunctionSchema:
    """The functional schema of a graph node's target."""
    if isinstance(target, IROp):
        return target._schema
    return target._schema


def op_name(target) -> str:
    """'aten::add.Tensor' style name of a node target."""
    if isinstance(target, IROp):
        return target.qualified_name
    if isinstance(target, torch._ops.OpOverload):
        s = target._schema
        return s.name + ("." + s.overload_name if s.overload_name else "")
    if target is operator.getitem:
        return "getitem"
    return getattr(target, "__name__", str(target))


# ---- out-variants ------------------------------------------------------------------------

# Arguments of factory/conversion ops that the out tensor carries instead.
_TENSOR_OPTIONS = {"dtype", "layout", "device", "pin_memory"}


def _is_out_arg(a) -> bool:
    return a.kwarg_only and a.alias_info is not None and a.alias_info.is_write


def _is_out_schema(s) -> bool:
    return any(_is_out_arg(a) for a in s.arguments)


@dataclass(frozen=True)
class OutVariant:
    """The kernel to call for a functional operator."""
    name: str                       # "aten::add.out"
    schema: torch._C.FunctionSchema  # the out-variant schema (argument order of the call)

    @property
    def out_args(self) -> List:
        return [a for a in self.schema.arguments if _is_out_arg(a)]


@functools.lru_cache(maxsize=None)
def out_variant(target) -> Optional[OutVariant]:
    """The out-variant of a functional operator, or None when torch has none."""
    if isinstance(target, IROp):
        return OutVariant(target.out_name, target.out_schema)
    if not isinstance(target, torch._ops.OpOverload):
        return None
    fs = target._schema
    q = quantized_out_variant(_full_name(fs))
    if q is not None:   # ExecuTorch's schema, whatever overloads the capture defined
        return q
    if _is_out_schema(fs):
        return OutVariant(_full_name(fs), fs)
    full = [(a.name, str(a.type)) for a in fs.arguments]
    want = [(a.name, str(a.type)) for a in fs.arguments if a.name not in _TENSOR_OPTIONS]
    packet = target.overloadpacket
    best = None
    for ov in packet.overloads():
        s = getattr(packet, ov)._schema
        if not _is_out_schema(s):
            continue
        args = [a for a in s.arguments if not _is_out_arg(a)]
        have = [(a.name, str(a.type)) for a in args]
        if have == full:
            return OutVariant(_full_name(s), s)
        if have == want:
            best = OutVariant(_full_name(s), s)
            continue
        # Factory ops: the out overload may add arguments with defaults (arange's step).
        if best is None and _subsequence(want, have) and all(
                a.default_value is not None or str(a.type).endswith("?")
                for a in args if (a.name, str(a.type)) not in want):
            best = OutVariant(_full_name(s), s)
    return best


def _subsequence(a, b) -> bool:
    it = iter(b)
    return all(x in it for x in a)


def is_known_op(target) -> bool:
    """True when the target lowers to an operator of ExecuTorch's portable library (or of its
    quantized one, :data:`QUANTIZED_OPS`)."""
    ov = out_variant(target)
    return ov is not None and (ov.name in PORTABLE_OPS or ov.name in QUANTIZED_OPS)


# ---- torch.library namespaces defined from Python ----------------------------------------

_LIBRARIES: Dict[str, "torch.library.Library"] = {}


def library(ns: str) -> "torch.library.Library":
    """The process's one ``torch.library.Library(ns, "DEF")`` (torch 1.13 allows one DEF per
    namespace and has no FRAGMENT kind), shared by every module that defines operators in
    `ns` (``llama``: :mod:`etch.llm.et_ops`, and tests)."""
    lib = _LIBRARIES.get(ns)
    if lib is None:
        lib = _LIBRARIES[ns] = torch.library.Library(ns, "DEF")
    return lib
