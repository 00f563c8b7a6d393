"""Operator check: before a program is written, every ``KernelCall`` is checked against the
kernels this build of the C runtime registers (read from ``libetch.so`` through ctypes:
``etch_kernels_register_portable``, ``etch_kernels_count``, ``etch_kernels_at``).

A call fails the check when its operator is not registered, when its arguments do not fit
the kernel's signature string (include/etch/kernel.h: one letter per argument including the
return slot), which is what ``etch_method_load`` would reject on the device, or when the dtype
of its first input tensor (its out tensor for creation operators) is not among those the
portable kernel is tested with (``etch_kernels_portable_dtypes``, generated from the golden
cases).  All problems are collected and reported together.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from . import _lib
from .serialize import schema as S

__all__ = ["registry", "dtype_support", "check_program", "OperatorCheckError", "find_library"]

find_library = _lib.find_library


class OperatorCheckError(RuntimeError):
    def __init__(self, problems: List[str]):
        self.problems = problems
        super().__init__("%d operator problem%s for this build of the etch runtime:\n  %s"
                         % (len(problems), "" if len(problems) == 1 else "s",
                            "\n  ".join(problems)))


def registry(path: Optional[str] = None) -> Dict[str, Optional[str]]:
    """name -> signature (None when the kernel checks its own arguments) of every kernel the
    library registers (later registrations of a name win, as in the runtime)."""
    lib = _lib.load(path)
    lib.etch_kernels_register_portable()
    out: Dict[str, Optional[str]] = {}
    for i in range(lib.etch_kernels_count()):
        k = lib.etch_kernels_at(i)
        if not k:
            continue
        name = k.contents.name.decode()
        sig = k.contents.signature
        out[name] = sig.decode() if sig is not None else None
    return out


def dtype_support(path: Optional[str] = None) -> Dict[str, int]:
    """name -> bitmask (1 << ScalarType) of the first-input dtypes each portable kernel is
    tested with; names without a mask (custom kernels) are absent."""
    lib = _lib.load(path)
    fn = getattr(lib, "etch_kernels_portable_dtypes", None)
    if fn is None:
        return {}
    out: Dict[str, int] = {}
    for name in registry(path):
        mask = fn(name.encode())
        if mask:
            out[name] = int(mask)
    return out


_DTYPE_NAMES = {0: "Byte", 1: "Char", 2: "Short", 3: "Int", 4: "Long", 5: "Half", 6: "Float",
                7: "Double", 11: "Bool", 15: "BFloat16", 27: "UInt16"}


def _first_tensor_dtype(sig: Optional[str], args: List[int], values: List[S.EValue]):
    """The dtype the portable table is keyed by: the first input tensor (T/t, or the first
    member of a tensor list), else the first out tensor (creation ops)."""
    letters = (sig or "").split("*", 1)[0]
    for k, idx in enumerate(args):
        letter = letters[k] if k < len(letters) else "?"
        val = values[idx].val
        if letter in "Tt" and isinstance(val, S.Tensor):
            return int(val.scalar_type)
        if letter in "XO" and isinstance(val, (S.TensorList, S.OptionalTensorList)):
            for item in val.items:
                if item >= 0 and isinstance(values[item].val, S.Tensor):
                    return int(values[item].val.scalar_type)
    for k, idx in enumerate(args):
        letter = letters[k] if k < len(letters) else "?"
        if letter in "W" and isinstance(values[idx].val, S.Tensor):
            return int(values[idx].val.scalar_type)
    return None


_KIND = {S.Null: "None", S.Int: "Int", S.Bool: "Bool", S.Double: "Double", S.Tensor: "Tensor",
         S.String: "String", S.IntList: "IntList", S.DoubleList: "DoubleList",
         S.BoolList: "BoolList", S.TensorList: "TensorList",
         S.OptionalTensorList: "OptionalTensorList"}

_ACCEPTS = {
    "T": {"Tensor"}, "t": {"Tensor", "None"}, "W": {"Tensor"}, "V": {"Tensor"},
    "S": {"Int", "Double", "Bool"}, "s": {"Int", "Double", "Bool", "None"},
    "I": {"Int"}, "i": {"Int", "None"}, "D": {"Double", "Int"}, "d": {"Double", "Int", "None"},
    "B": {"Bool"}, "b": {"Bool", "None"}, "L": {"IntList"}, "l": {"IntList", "None"},
    "F": {"DoubleList"}, "Q": {"BoolList"}, "X": {"TensorList"}, "Y": {"TensorList"},
    "O": {"OptionalTensorList"}, "N": {"String"}, "n": {"String", "None"},
    "R": {"Int", "Double", "Bool"},
}


def _is_constant_tensor(v) -> bool:
    return isinstance(v, S.Tensor) and v.data_buffer_idx > 0 and v.allocation_info is None


def check_call(name: str, sig: Optional[str], args: List[int], values: List[S.EValue]) -> List[str]:
    if sig is None:
        return []
    fixed = sig.split("*", 1)[0]
    variadic = "*" in sig
    problems = []
    if len(args) < len(fixed) or (not variadic and len(args) != len(fixed)):
        return ["%s takes %d arguments (with the return slot), the call passes %d"
                % (name, len(fixed), len(args))]
    for k, idx in enumerate(args):
        letter = fixed[k] if k < len(fixed) else "?"
        if letter == "?":
            continue
        val = values[idx].val
        kind = _KIND.get(type(val), "?")
        if kind not in _ACCEPTS.get(letter, set()):
            problems.append("%s argument %d (value %d) is %s, the kernel expects '%s'"
                            % (name, k, idx, kind, letter))
        elif letter in "WV" and _is_constant_tensor(val):
            problems.append("%s argument %d (value %d) would write a constant" % (name, k, idx))
    return problems


def check_program(program: S.Program, kernels: Dict[str, Optional[str]],
                  dtypes: Optional[Dict[str, int]] = None) -> None:
    """Raise OperatorCheckError naming every missing operator, every mismatched call and
    every (operator, dtype) pair without a tested kernel (when `dtypes` is given)."""
    problems: List[str] = []
    missing: List[str] = []
    for plan in program.execution_plan:
        names = [op.name + ("." + op.overload if op.overload else "") for op in plan.operators]
        for n in names:
            if n not in kernels and n not in missing:
                missing.append(n)
        for chain in plan.chains:
            for pc, ins in enumerate(chain.instructions):
                call = ins.instr_args
                if not isinstance(call, S.KernelCall):
                    continue
                name = names[call.op_index]
                if name not in kernels:
                    continue
                found = check_call(name, kernels[name], call.args, plan.values)
                if not found and dtypes and name in dtypes:
                    dt = _first_tensor_dtype(kernels[name], call.args, plan.values)
                    if dt is not None and not (dtypes[name] >> dt) & 1:
                        have = [n for d, n in sorted(_DTYPE_NAMES.items())
                                if (dtypes[name] >> d) & 1]
                        found = ["%s has no kernel for %s inputs in this build (it has: %s)"
                                 % (name, _DTYPE_NAMES.get(dt, "dtype %d" % dt),
                                    ", ".join(have))]
                for p in found:
                    msg = "method %s, instruction %d: %s" % (plan.name, pc, p)
                    if msg not in problems:
                        problems.append(msg)
    errs = ["missing operator %s" % n for n in missing] + problems
    if errs:
        raise OperatorCheckError(errs)
