"""A convenience layer for writing programs by hand (tests, small tools, the exporter's last
step): append values and instructions to a method, get value indices back, and let the
builder keep the operator table, planned-arena sizes and the constant / mutable / delegate
data in order.

Example (``forward(x, y) = x + y`` on float[2])::

    pb = ProgramBuilder()
    m = pb.method("forward")
    x = m.tensor(ScalarType.FLOAT, [2])                 # planned in arena 1
    y = m.tensor(ScalarType.FLOAT, [2])
    out = m.tensor(ScalarType.FLOAT, [2])
    one = m.int(1)
    m.kernel("aten::add.out", [x, y, one, out, out])
    m.inputs = [x, y]
    m.outputs = [out]
    data = pb.serialize()

The result is an ordinary :class:`~.schema.Program` plus :class:`~.pte.ProgramData`
(:meth:`ProgramBuilder.build`), which tests may edit before serializing.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .pte import NamedBlob, ProgramData, SerializeConfig, align_up, serialize_program
from .schema import (AllocationDetails, BackendDelegate, BackendDelegateDataReference, Bool,
                     BoolList, Chain, CompileSpec, ContainerMetadata, DataLocation,
                     DelegateCall, Double, DoubleList, EValue, ExecutionPlan, ExtraTensorInfo,
                     FreeCall, Instruction, Int, IntList, JumpFalseCall, KernelCall, MoveCall,
                     Null, Operator, OptionalTensorList, Program, ScalarType, String, Tensor,
                     TensorDataLocation, TensorList, TensorShapeDynamism, scalar_type_size)

__all__ = ["ProgramBuilder", "MethodBuilder", "split_op_name", "PLANNED_ALIGNMENT"]

PLANNED_ALIGNMENT = 16


def split_op_name(full: str) -> Tuple[str, str]:
    """"aten::add.out" -> ("aten::add", "out"); "aten::copy_" -> ("aten::copy_", "")."""
    ns, sep, rest = full.rpartition("::")
    op, dot, overload = rest.partition(".")
    return ns + sep + op, overload


class MethodBuilder:
    """One ExecutionPlan under construction.  Value and instruction helpers return indices."""

    def __init__(self, program: "ProgramBuilder", name: str) -> None:
        self.program = program
        self.name = name
        self.values: List[EValue] = []
        self.inputs: List[int] = []
        self.outputs: List[int] = []
        self.instructions: List[Instruction] = []
        self.operators: List[Operator] = []
        self.delegates: List[BackendDelegate] = []
        self.arena_sizes: List[int] = [0]           # index 0 reserved, memory id m -> [m]
        self.container = ContainerMetadata("", "")
        self._ops: Dict[Tuple[str, str], int] = {}

    # ---- values ------------------------------------------------------------------------

    def value(self, payload) -> int:
        self.values.append(EValue(payload))
        return len(self.values) - 1

    def null(self) -> int:
        return self.value(Null())

    def int(self, v: int) -> int:
        return self.value(Int(v))

    def bool(self, v: bool) -> int:
        return self.value(Bool(v))

    def double(self, v: float) -> int:
        return self.value(Double(v))

    def string(self, s: str) -> int:
        return self.value(String(s))

    def int_list(self, items: Sequence[int]) -> int:
        """A list of *value indices* of Int values."""
        return self.value(IntList(list(items)))

    def int_list_of(self, ints: Sequence[int]) -> int:
        """Convenience: new Int values for literal ints, then the list of them."""
        return self.int_list([self.int(v) for v in ints])

    def double_list(self, items: Sequence[float]) -> int:
        return self.value(DoubleList(list(items)))

    def bool_list(self, items: Sequence[bool]) -> int:
        return self.value(BoolList(list(items)))

    def tensor_list(self, items: Sequence[int]) -> int:
        return self.value(TensorList(list(items)))

    def optional_tensor_list(self, items: Sequence[int]) -> int:
        return self.value(OptionalTensorList(list(items)))

    def alloc(self, nbytes: int, memory_id: int = 1) -> int:
        """Reserve `nbytes` (rounded to 16) at the end of arena `memory_id`; the offset."""
        while len(self.arena_sizes) <= memory_id:
            self.arena_sizes.append(0)
        off = self.arena_sizes[memory_id]
        self.arena_sizes[memory_id] = off + align_up(max(nbytes, 0), PLANNED_ALIGNMENT)
        return off

    def tensor(self, dtype: int, sizes: Sequence[int], *, dim_order: Optional[Sequence[int]] = None,
               planned: Optional[bool] = None, memory_id: int = 1, offset: Optional[int] = None,
               constant: Optional[bytes] = None, initial: Optional[bytes] = None,
               dynamism: int = TensorShapeDynamism.STATIC, external: Optional[str] = None,
               fqn: Optional[str] = None) -> int:
        """A tensor value (docs/pte-format.md §4.1 lists what each combination means).

        constant: bytes of a constant tensor (constant segment).
        external: fully qualified name of the tensor's data in a .ptd (an external constant,
                  or an external mutable tensor when planned=True).
        planned:  give it planned memory at `offset` in arena `memory_id` (appended when no
                  offset is given).  Default: planned unless `constant` or `external` is
                  given.  planned=False leaves it unbound (set_input or a kernel binds it).
        initial:  initial value of a planned (mutable) tensor (mutable-data segment).
        fqn:      a name recorded in ExtraTensorInfo (location SEGMENT).
        """
        if planned is None:
            planned = constant is None and external is None
        t = Tensor(scalar_type=ScalarType(dtype), sizes=list(sizes),
                   dim_order=list(range(len(sizes))) if dim_order is None else list(dim_order),
                   shape_dynamism=TensorShapeDynamism(dynamism))
        if constant is not None:
            t.data_buffer_idx = self.program.constant(constant)
        if external is not None:
            t.extra_tensor_info = ExtraTensorInfo(fully_qualified_name=external,
                                                  location=TensorDataLocation.EXTERNAL)
        elif fqn is not None:
            t.extra_tensor_info = ExtraTensorInfo(fully_qualified_name=fqn)
        if planned:
            nbytes = 1
            for s in sizes:
                nbytes *= max(s, 0)
            nbytes *= scalar_type_size(dtype)
            if offset is None:
                offset = self.alloc(nbytes, memory_id)
            else:
                while len(self.arena_sizes) <= memory_id:
                    self.arena_sizes.append(0)
                self.arena_sizes[memory_id] = max(self.arena_sizes[memory_id],
                                                  align_up(offset + nbytes, PLANNED_ALIGNMENT))
            t.allocation_info = AllocationDetails.at(memory_id, offset)
            if initial is not None:
                t.data_buffer_idx = self.program.mutable(initial)
        return self.value(t)

    # ---- instructions --------------------------------------------------------------------

    @property
    def pc(self) -> int:
        """Index of the next instruction."""
        return len(self.instructions)

    def operator(self, full_name: str) -> int:
        key = split_op_name(full_name)
        if key not in self._ops:
            self._ops[key] = len(self.operators)
            self.operators.append(Operator(*key))
        return self._ops[key]

    def instruction(self, args) -> int:
        self.instructions.append(Instruction(args))
        return len(self.instructions) - 1

    def kernel(self, full_name: str, args: Sequence[int]) -> int:
        return self.instruction(KernelCall(self.operator(full_name), list(args)))

    def delegate(self, backend_id: str, blob: bytes, args: Sequence[int], *,
                 inline: bool = False, compile_specs: Sequence[Tuple[str, bytes]] = ()) -> int:
        """A BackendDelegate entry plus its DelegateCall; returns the instruction index."""
        ref = BackendDelegateDataReference(
            DataLocation.INLINE if inline else DataLocation.SEGMENT,
            self.program.delegate_blob(blob))
        self.delegates.append(BackendDelegate(
            backend_id, ref, [CompileSpec(k, bytes(v)) for k, v in compile_specs]))
        return self.instruction(DelegateCall(len(self.delegates) - 1, list(args)))

    def move(self, src: int, dst: int) -> int:
        return self.instruction(MoveCall(src, dst))

    def jump_false(self, cond: int, destination: int) -> int:
        return self.instruction(JumpFalseCall(cond, destination))

    def free(self, value: int) -> int:
        return self.instruction(FreeCall(value))

    def build(self) -> ExecutionPlan:
        return ExecutionPlan(
            name=self.name, container_meta_type=self.container, values=list(self.values),
            inputs=list(self.inputs), outputs=list(self.outputs),
            chains=[Chain([], [], list(self.instructions))], operators=list(self.operators),
            delegates=list(self.delegates), non_const_buffer_sizes=list(self.arena_sizes))


class ProgramBuilder:
    """Methods plus the program-wide data (constants are shared by all methods)."""

    def __init__(self) -> None:
        self.methods: List[MethodBuilder] = []
        self.data = ProgramData(constants=[b""], mutable=[], delegate_blobs=[], named_data=[])
        self._constants: Dict[bytes, int] = {}

    def method(self, name: str) -> MethodBuilder:
        m = MethodBuilder(self, name)
        self.methods.append(m)
        return m

    def constant(self, data: bytes) -> int:
        """data_buffer_idx of a constant (identical bytes share one entry)."""
        data = bytes(data)
        if data not in self._constants:
            self._constants[data] = len(self.data.constants)
            self.data.constants.append(data)
        return self._constants[data]

    def mutable(self, data: bytes) -> int:
        """data_buffer_idx of a mutable tensor's initial value."""
        if not self.data.mutable:
            self.data.mutable.append(b"")
        self.data.mutable.append(bytes(data))
        return len(self.data.mutable) - 1

    def delegate_blob(self, data: bytes) -> int:
        self.data.delegate_blobs.append(bytes(data))
        return len(self.data.delegate_blobs) - 1

    def named(self, key: str, data: bytes, alignment: int = 1) -> None:
        self.data.named_data.append(NamedBlob(key, bytes(data), alignment))

    def build(self) -> Tuple[Program, ProgramData]:
        return Program(execution_plan=[m.build() for m in self.methods]), self.data

    def serialize(self, config: Optional[SerializeConfig] = None) -> bytes:
        program, data = self.build()
        return serialize_program(program, data, config)
