"""The ExecuTorch program schema (``program.fbs``, namespace ``executorch_flatbuffer``) as
Python dataclasses.

Tables are declared in the order of the ``.fbs`` file and their fields in declaration order,
so vtable slot numbers match the schema (see docs/pte-format.md §3; a union field takes two
slots).  Field names are the schema's.  Equality is plain dataclass equality, which is what
the round-trip tests rely on.

Notes on meaning (details in the spec):

* ``IntList.items`` are *value indices* of ``Int`` values, not literal integers;
  ``TensorList`` / ``OptionalTensorList`` items are value indices too (``-1`` = None);
  ``DoubleList`` / ``BoolList`` hold literal values.
* ``Tensor.data_buffer_idx`` > 0 indexes the constant data (or the mutable initial values when
  ``allocation_info`` is set); 0 means "no serialized data".
* ``AllocationDetails.memory_id`` is 1-based; ``ExecutionPlan.non_const_buffer_sizes[0]`` is
  reserved (always 0).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import List, Optional, Union

from .fbs import byte_vector, scalar, scalars, string, table, tables, union

FILE_IDENTIFIER = b"ET12"

__all__ = [
    "FILE_IDENTIFIER", "ScalarType", "TensorShapeDynamism", "TensorDataLocation", "DeviceType",
    "DataLocation", "ContainerMetadata", "Null", "AllocationDetails", "ExtraTensorInfo",
    "Tensor", "Int", "Bool", "Double", "String", "IntList", "DoubleList", "BoolList",
    "TensorList", "OptionalTensorList", "KernelTypes", "EValue", "Operator", "KernelCall",
    "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall", "InstructionArguments",
    "Instruction", "Frame", "FrameList", "BackendDelegateDataReference", "CompileSpec",
    "BackendDelegate", "Chain", "NonConstBufferDevice", "ExecutionPlan", "Buffer",
    "BackendDelegateInlineData", "DataSegment", "SubsegmentOffsets", "NamedData", "Program",
    "scalar_type_size",
]


# ---- enums -----------------------------------------------------------------------------


class ScalarType(enum.IntEnum):
    """Element types (c10::ScalarType numbering; 8-10 and 18-21 are not in the schema)."""
    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


_SCALAR_SIZES = {
    ScalarType.BYTE: 1, ScalarType.CHAR: 1, ScalarType.SHORT: 2, ScalarType.INT: 4,
    ScalarType.LONG: 8, ScalarType.HALF: 2, ScalarType.FLOAT: 4, ScalarType.DOUBLE: 8,
    ScalarType.BOOL: 1, ScalarType.QINT8: 1, ScalarType.QUINT8: 1, ScalarType.QINT32: 4,
    ScalarType.BFLOAT16: 2, ScalarType.QUINT4X2: 1, ScalarType.QUINT2X4: 1,
    ScalarType.BITS16: 2, ScalarType.FLOAT8E5M2: 1, ScalarType.FLOAT8E4M3FN: 1,
    ScalarType.FLOAT8E5M2FNUZ: 1, ScalarType.FLOAT8E4M3FNUZ: 1, ScalarType.UINT16: 2,
    ScalarType.UINT32: 4, ScalarType.UINT64: 8,
}


def scalar_type_size(st: int) -> int:
    """Bytes per element of a ScalarType (KeyError for values outside the schema)."""
    return _SCALAR_SIZES[ScalarType(st)]


class TensorShapeDynamism(enum.IntEnum):
    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2


class TensorDataLocation(enum.IntEnum):
    SEGMENT = 0
    EXTERNAL = 1


class DeviceType(enum.IntEnum):
    CPU = 0
    CUDA = 1


class DataLocation(enum.IntEnum):
    """Where a delegate blob lives."""
    INLINE = 0
    SEGMENT = 1


# ---- tables, in program.fbs declaration order -----------------------------------------


@dataclass
class ContainerMetadata:
    encoded_inp_str: str = string()
    encoded_out_str: str = string()


@dataclass
class Null:
    pass


@dataclass
class AllocationDetails:
    memory_id: int = scalar("I")            # 1-based arena id
    memory_offset_low: int = scalar("I")
    memory_offset_high: int = scalar("I")

    @classmethod
    def at(cls, memory_id: int, offset: int) -> "AllocationDetails":
        return cls(memory_id, offset & 0xFFFFFFFF, offset >> 32)

    @property
    def memory_offset(self) -> int:
        return self.memory_offset_low | (self.memory_offset_high << 32)


@dataclass
class ExtraTensorInfo:
    mutable_data_segments_idx: int = scalar("Q")
    fully_qualified_name: Optional[str] = string(optional=True)
    location: TensorDataLocation = scalar("b", TensorDataLocation.SEGMENT, TensorDataLocation)
    device_type: DeviceType = scalar("b", DeviceType.CPU, DeviceType)
    device_index: int = scalar("b")


@dataclass
class Tensor:
    scalar_type: ScalarType = scalar("b", ScalarType.BYTE, ScalarType)
    storage_offset: int = scalar("i")
    sizes: List[int] = scalars("i")          # upper bound for DYNAMIC_BOUND
    dim_order: List[int] = scalars("B")
    requires_grad: bool = scalar("?", False)
    data_buffer_idx: int = scalar("I")
    allocation_info: Optional[AllocationDetails] = table(AllocationDetails)
    layout: int = scalar("b")
    shape_dynamism: TensorShapeDynamism = scalar("b", TensorShapeDynamism.STATIC,
                                                 TensorShapeDynamism)
    extra_tensor_info: Optional[ExtraTensorInfo] = table(ExtraTensorInfo)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * scalar_type_size(self.scalar_type)


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
class String:
    string_val: str = string()


@dataclass
class IntList:
    items: List[int] = scalars("q")          # value indices of Int values


@dataclass
class DoubleList:
    items: List[float] = scalars("d")


@dataclass
class BoolList:
    items: List[bool] = scalars("?")


@dataclass
class TensorList:
    items: List[int] = scalars("i")          # value indices of Tensor values


@dataclass
class OptionalTensorList:
    items: List[int] = scalars("i")          # value indices, -1 = None


KernelTypes = Union[Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList,
                    TensorList, OptionalTensorList]
KERNEL_TYPES = (Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList,
                TensorList, OptionalTensorList)


@dataclass
class EValue:
    val: Optional[KernelTypes] = union(*KERNEL_TYPES)


@dataclass
class Operator:
    name: str = string()                     # "aten::add"
    overload: str = string()                 # "out"; "" for the default overload


@dataclass
class KernelCall:
    op_index: int = scalar("i")
    args: List[int] = scalars("i")


@dataclass
class DelegateCall:
    delegate_index: int = scalar("i")
    args: List[int] = scalars("i")


@dataclass
class MoveCall:
    move_from: int = scalar("i")
    move_to: int = scalar("i")


@dataclass
class JumpFalseCall:
    cond_value_index: int = scalar("i")
    destination_instruction: int = scalar("i")


@dataclass
class FreeCall:
    value_index: int = scalar("i")


InstructionArguments = Union[KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall]
INSTRUCTION_ARGUMENTS = (KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall)


@dataclass
class Instruction:
    instr_args: Optional[InstructionArguments] = union(*INSTRUCTION_ARGUMENTS)


@dataclass
class Frame:
    filename: Optional[str] = string(optional=True)
    lineno: int = scalar("i")
    name: Optional[str] = string(optional=True)
    context: Optional[str] = string(optional=True)


@dataclass
class FrameList:
    items: List[Frame] = tables(Frame)


@dataclass
class BackendDelegateDataReference:
    location: DataLocation = scalar("b", DataLocation.INLINE, DataLocation)
    index: int = scalar("I")


@dataclass
class CompileSpec:
    key: str = string()
    value: bytes = byte_vector()


@dataclass
class BackendDelegate:
    id: str = string()                       # backend name, e.g. "XnnpackBackend"
    processed: Optional[BackendDelegateDataReference] = table(BackendDelegateDataReference)
    compile_specs: List[CompileSpec] = tables(CompileSpec)


@dataclass
class Chain:
    inputs: List[int] = scalars("i")
    outputs: List[int] = scalars("i")
    instructions: List[Instruction] = tables(Instruction)
    stacktrace: List[FrameList] = tables(FrameList, always=False)


# Declared after ExecutionPlan in program.fbs; table declaration order does not affect slots.
@dataclass
class NonConstBufferDevice:
    buffer_idx: int = scalar("i")
    device_type: DeviceType = scalar("b", DeviceType.CPU, DeviceType)
    device_index: int = scalar("b")


@dataclass
class ExecutionPlan:
    name: str = string()
    container_meta_type: Optional[ContainerMetadata] = table(ContainerMetadata)
    values: List[EValue] = tables(EValue)
    inputs: List[int] = scalars("i")
    outputs: List[int] = scalars("i")
    chains: List[Chain] = tables(Chain)
    operators: List[Operator] = tables(Operator)
    delegates: List[BackendDelegate] = tables(BackendDelegate)
    non_const_buffer_sizes: List[int] = scalars("q")
    non_const_buffer_device: List[NonConstBufferDevice] = tables(NonConstBufferDevice,
                                                                 always=False)


@dataclass
class Buffer:
    storage: bytes = byte_vector(align=16)   # force_align: 16


@dataclass
class BackendDelegateInlineData:
    data: bytes = byte_vector(align=16)      # force_align: 16


@dataclass
class DataSegment:
    offset: int = scalar("Q")                # relative to segment_base_offset
    size: int = scalar("Q")


@dataclass
class SubsegmentOffsets:
    segment_index: int = scalar("I")
    offsets: List[int] = scalars("Q")


@dataclass
class NamedData:
    key: str = string()
    segment_index: int = scalar("I")


@dataclass
class Program:
    version: int = scalar("I")
    execution_plan: List[ExecutionPlan] = tables(ExecutionPlan)
    constant_buffer: List[Buffer] = tables(Buffer)
    backend_delegate_data: List[BackendDelegateInlineData] = tables(BackendDelegateInlineData)
    segments: List[DataSegment] = tables(DataSegment)
    constant_segment: Optional[SubsegmentOffsets] = table(SubsegmentOffsets)
    mutable_data_segments: List[SubsegmentOffsets] = tables(SubsegmentOffsets, always=False)
    named_data: List[NamedData] = tables(NamedData, always=False)

    def method(self, name: str) -> ExecutionPlan:
        for plan in self.execution_plan:
            if plan.name == name:
                return plan
        raise KeyError(name)
