"""External tensor data files (``.ptd``, FlatTensor, identifier ``FT01``; docs/pte-format.md
§8).

A ``.ptd`` holds named blobs (usually weights) that a ``.pte`` refers to by the
``fully_qualified_name`` of tensors marked ``TensorDataLocation.EXTERNAL``.  The file is a
flatbuffer with a 40-byte ``FH01`` header inserted at offset 8 (padded to 48), followed by an
aligned segment area.

Exact level: :class:`PtdFile` / :func:`read_ptd` / :func:`write_ptd`.
Logical level: a list of :class:`PtdEntry` / :func:`serialize_ptd` / :func:`unpack_ptd`.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from . import fbs
from .fbs import scalar, scalars, string, table, tables
from .flatbuffers import FlatbufferError
from .pte import (DEFAULT_SEGMENT_ALIGNMENT, DEFAULT_TENSOR_ALIGNMENT, PteFormatError,
                  _segment_offsets, align_up)
from .schema import ScalarType

__all__ = ["TensorLayout", "DataSegment", "NamedData", "FlatTensor", "FlatTensorHeader",
           "PtdFile", "PtdEntry", "read_ptd", "write_ptd", "serialize_ptd", "unpack_ptd",
           "FILE_IDENTIFIER", "HEADER_MAGIC"]

FILE_IDENTIFIER = b"FT01"
HEADER_MAGIC = b"FH01"
HEADER_LENGTH = 40


# ---- schema (flat_tensor.fbs, namespace flat_tensor_flatbuffer) -------------------------


@dataclass
class TensorLayout:
    scalar_type: ScalarType = scalar("b", ScalarType.BYTE, ScalarType)
    sizes: List[int] = scalars("i")
    dim_order: List[int] = scalars("B")


@dataclass
class DataSegment:
    offset: int = scalar("Q")        # relative to segment_base_offset
    size: int = scalar("Q")


@dataclass
class NamedData:
    key: str = string()
    segment_index: int = scalar("I")
    tensor_layout: Optional[TensorLayout] = table(TensorLayout)


@dataclass
class FlatTensor:
    version: int = scalar("I")
    segments: List[DataSegment] = tables(DataSegment)
    named_data: List[NamedData] = tables(NamedData)


# ---- header ------------------------------------------------------------------------------


@dataclass
class FlatTensorHeader:
    flatbuffer_offset: int            # padded header length (48)
    flatbuffer_size: int              # flatbuffer bytes before the header was inserted
    segment_base_offset: int
    segment_data_size: int
    length: int = HEADER_LENGTH

    @classmethod
    def parse(cls, data: bytes) -> "FlatTensorHeader":
        if len(data) < 48 or bytes(data[8:12]) != HEADER_MAGIC:
            raise PteFormatError(".ptd: no FH01 header at byte 8")
        length = struct.unpack_from("<I", data, 12)[0]
        if length < HEADER_LENGTH:
            raise PteFormatError(".ptd: header length %d below 40" % length)
        return cls(*struct.unpack_from("<QQQQ", data, 16), length=length)

    def encode(self) -> bytes:
        raw = HEADER_MAGIC + struct.pack("<IQQQQ", HEADER_LENGTH, self.flatbuffer_offset,
                                         self.flatbuffer_size, self.segment_base_offset,
                                         self.segment_data_size)
        return raw + bytes(align_up(len(raw), 16) - len(raw))


# ---- exact level ---------------------------------------------------------------------------


@dataclass
class PtdFile:
    flat_tensor: FlatTensor
    segments: List[bytes] = field(default_factory=list)
    header: Optional[FlatTensorHeader] = field(default=None, compare=False)


def read_ptd(data: bytes) -> PtdFile:
    data = bytes(data)
    if len(data) < 8 or bytes(data[4:8]) != FILE_IDENTIFIER:
        raise PteFormatError("not a .ptd file: no FT01 identifier at byte 4")
    h = FlatTensorHeader.parse(data)
    end = h.flatbuffer_offset + h.flatbuffer_size
    if end > len(data) or h.segment_base_offset + h.segment_data_size > len(data):
        raise PteFormatError(".ptd: truncated file")
    try:
        ft = fbs.decode(FlatTensor, data[:end], FILE_IDENTIFIER)
    except (FlatbufferError, UnicodeDecodeError) as e:
        raise PteFormatError(".ptd: malformed flatbuffer: %s" % e) from None
    segments = []
    for i, s in enumerate(ft.segments):
        if s.offset + s.size > h.segment_data_size:
            raise PteFormatError(".ptd: segment %d outside the data area" % i)
        start = h.segment_base_offset + s.offset
        segments.append(data[start:start + s.size])
    return PtdFile(ft, segments, h)


def write_ptd(ptd: PtdFile, segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT,
              segment_alignments: Optional[Sequence[int]] = None,
              keep_offsets: bool = False) -> bytes:
    """Write a PtdFile; segment offsets are recomputed from the payloads (each at a multiple
    of lcm(segment_alignment, segment_alignments[i])) unless `keep_offsets`."""
    offsets = _segment_offsets(ptd.flat_tensor.segments, ptd.segments, segment_alignment,
                               segment_alignments, keep_offsets)
    end = max((o + len(p) for o, p in zip(offsets, ptd.segments)), default=0)
    ft = dataclasses.replace(
        ptd.flat_tensor,
        segments=[DataSegment(o, len(p)) for o, p in zip(offsets, ptd.segments)])
    flat = fbs.encode(ft, FILE_IDENTIFIER)
    hdr_len = len(FlatTensorHeader(0, 0, 0, 0).encode())
    base = align_up(hdr_len + len(flat), segment_alignment)
    header = FlatTensorHeader(hdr_len, len(flat), base, end).encode()
    root = struct.unpack_from("<I", flat, 0)[0] + hdr_len
    out = bytearray(struct.pack("<I", root) + flat[4:8] + header + flat[8:])
    out += bytes(base - len(out))
    area = bytearray(end)
    for off, payload in zip(offsets, ptd.segments):
        area[off:off + len(payload)] = payload
    return bytes(out + area)


# ---- logical level ---------------------------------------------------------------------


@dataclass
class PtdEntry:
    key: str                                   # the tensor's fully qualified name
    data: bytes
    layout: Optional[TensorLayout] = None      # required for tensors
    alignment: int = DEFAULT_TENSOR_ALIGNMENT


def serialize_ptd(entries: Sequence[PtdEntry],
                  segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT) -> bytes:
    """One segment per distinct payload, keys in the given order."""
    segments: List[bytes] = []
    aligns: List[int] = []
    where: Dict[bytes, int] = {}
    named = []
    for e in entries:
        blob = bytes(e.data)
        if blob not in where:
            where[blob] = len(segments)
            segments.append(blob)
            aligns.append(max(e.alignment, 1))
        else:
            k = where[blob]
            aligns[k] = aligns[k] * e.alignment // math.gcd(aligns[k], e.alignment)
        named.append(NamedData(e.key, where[blob], e.layout))
    return write_ptd(PtdFile(FlatTensor(0, [], named), segments), segment_alignment, aligns)


def unpack_ptd(ptd: PtdFile) -> List[PtdEntry]:
    return [PtdEntry(nd.key, bytes(ptd.segments[nd.segment_index]), nd.tensor_layout)
            for nd in ptd.flat_tensor.named_data]
