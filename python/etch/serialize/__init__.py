"""Pure-Python reading and writing of ExecuTorch files: ``.pte`` programs, ``.ptd`` external
data and ``.bpte`` bundled programs.  No dependency beyond the standard library.

Quick tour::

    from etch.serialize import *

    pf = read_pte(open("model.pte", "rb").read())       # exact: Program + segment payloads
    print(pf.program.execution_plan[0].name)
    data = write_pte(pf)                                  # and back

    parts = unpack_program(pf)                           # logical: Program + ProgramData
    data = serialize_program(parts.program, parts.data, parts.config)

Modules: ``flatbuffers`` (builder/reader), ``fbs`` (dataclass <-> table mapping), ``schema``
(program.fbs), ``pte``, ``ptd``, ``bundled``, ``program_builder`` (hand-written programs).
"""

from . import bundled, fbs, flatbuffers, program_builder, ptd, pte, schema  # noqa: F401
from .bundled import BundledProgram, read_bpte, write_bpte  # noqa: F401
from .flatbuffers import Builder, FlatbufferError, Table  # noqa: F401
from .program_builder import MethodBuilder, ProgramBuilder  # noqa: F401
from .ptd import PtdEntry, PtdFile, read_ptd, serialize_ptd, unpack_ptd, write_ptd  # noqa: F401
from .pte import (DEFAULT_SEGMENT_ALIGNMENT, DEFAULT_TENSOR_ALIGNMENT,  # noqa: F401
                  ExtendedHeader, IncompatibleVersionError, NamedBlob, NotAProgramError,
                  ProgramData, ProgramParts, PteFile, PteFormatError, SerializeConfig,
                  identify, read_pte, serialize_program, unpack_program, write_pte)
from .schema import *  # noqa: F401,F403
