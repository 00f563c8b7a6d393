"""Bundled programs (``.bpte``, identifier ``BP08``; docs/pte-format.md §7): a whole ``.pte``
image plus test inputs and expected outputs per method.

The schema's tables live in their own namespace (``bundled_program_flatbuffer``); its
``Tensor``, ``Int``, ``Bool`` and ``Double`` are distinct from the program schema's and are
defined here.  ``BundledProgram.program`` is the embedded ``.pte`` byte for byte
(``force_align: 32``); read it with :func:`etch.serialize.read_pte`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from . import fbs
from .fbs import byte_vector, scalar, scalars, string, tables, union
from .flatbuffers import FlatbufferError
from .pte import PteFormatError
from .schema import ScalarType

__all__ = ["Int", "Bool", "Double", "Tensor", "Value", "BundledMethodTestCase",
           "BundledMethodTestSuite", "BundledProgram", "read_bpte", "write_bpte",
           "FILE_IDENTIFIER", "BUNDLED_PROGRAM_VERSION", "tensor_value"]

FILE_IDENTIFIER = b"BP08"
BUNDLED_PROGRAM_VERSION = 2


@dataclass
class Int:
    int_val: int = scalar("q")


@dataclass
class Bool:
    bool_val: bool = scalar("?", False)


@dataclass
class Double:
    double_val: float = scalar("d", 0.0)


@dataclass
class Tensor:
    scalar_type: ScalarType = scalar("b", ScalarType.BYTE, ScalarType)
    sizes: List[int] = scalars("i")
    data: bytes = byte_vector(align=16)       # raw elements in dim_order layout
    dim_order: List[int] = scalars("B")


VALUE_UNION = (Tensor, Int, Bool, Double)


@dataclass
class Value:
    val: Optional[Union[Tensor, Int, Bool, Double]] = union(*VALUE_UNION)


@dataclass
class BundledMethodTestCase:
    inputs: List[Value] = tables(Value)
    expected_outputs: List[Value] = tables(Value)


@dataclass
class BundledMethodTestSuite:
    method_name: str = string()
    test_cases: List[BundledMethodTestCase] = tables(BundledMethodTestCase)


@dataclass
class BundledProgram:
    version: int = scalar("I")
    method_test_suites: List[BundledMethodTestSuite] = tables(BundledMethodTestSuite)
    program: bytes = byte_vector(align=32)    # the whole .pte image


def tensor_value(scalar_type: int, sizes: Sequence[int], data: bytes,
                 dim_order: Optional[Sequence[int]] = None) -> Value:
    """A Tensor test value (contiguous dim order unless given)."""
    order = list(range(len(sizes))) if dim_order is None else list(dim_order)
    return Value(Tensor(ScalarType(scalar_type), list(sizes), bytes(data), order))


def read_bpte(data: bytes) -> BundledProgram:
    data = bytes(data)
    if len(data) < 8 or bytes(data[4:8]) != FILE_IDENTIFIER:
        raise PteFormatError("not a bundled program: no BP08 identifier at byte 4")
    try:
        return fbs.decode(BundledProgram, data, FILE_IDENTIFIER)
    except (FlatbufferError, UnicodeDecodeError) as e:
        raise PteFormatError("malformed bundled program: %s" % e) from None


def write_bpte(bp: BundledProgram) -> bytes:
    """The BP08 flatbuffer (its size is a multiple of 32, the program 32-byte aligned)."""
    return fbs.encode(bp, FILE_IDENTIFIER)
