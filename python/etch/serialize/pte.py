"""Reading and writing ``.pte`` files: the ``ET12`` flatbuffer, the optional ``eh00`` extended
header and the segment area (docs/pte-format.md §2, §4).

Two levels:

* **Exact** — :class:`PteFile` is a :class:`~.schema.Program` exactly as stored plus the
  payload of every ``Program.segments`` entry.  :func:`read_pte` / :func:`write_pte` convert it
  from / to bytes.  The writer recomputes segment offsets (aligned to
  ``lcm(segment_alignment, per-segment alignment)``) and everything else is written as given.

* **Logical** — what an exporter produces: a :class:`~.schema.Program` whose layout fields
  (``segments``, ``constant_segment``, ``constant_buffer``, ``mutable_data_segments``,
  ``named_data``, ``backend_delegate_data``) are left to the writer, plus a
  :class:`ProgramData` holding the bulk bytes: constant tensors and mutable initial values
  (indexed by ``Tensor.data_buffer_idx``), delegate blobs (indexed by
  ``BackendDelegate.processed.index``; ``processed.location`` says whether the blob should go
  to a segment or stay inline) and named data.  :func:`serialize_program` lays it out as the
  reference writer does (§2.5); :func:`unpack_program` does the reverse for any file.

Identical input always gives byte-identical output.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from . import fbs
from .flatbuffers import FlatbufferError
from .schema import (FILE_IDENTIFIER, BackendDelegateDataReference, BackendDelegateInlineData,
                     Buffer, DataLocation, DataSegment, NamedData, Program, SubsegmentOffsets)

__all__ = [
    "PteFormatError", "NotAProgramError", "IncompatibleVersionError", "ExtendedHeader",
    "PteFile", "NamedBlob", "ProgramData", "SerializeConfig", "ProgramParts",
    "read_pte", "write_pte", "serialize_program", "unpack_program", "identify",
    "EXTENDED_HEADER_MAGIC", "EXTENDED_HEADER_LENGTH", "DEFAULT_SEGMENT_ALIGNMENT",
    "DEFAULT_TENSOR_ALIGNMENT", "align_up",
]

EXTENDED_HEADER_MAGIC = b"eh00"
EXTENDED_HEADER_LENGTH = 32          # bytes of header fields written today (24 in old files)
MAX_FORCE_ALIGN = 16                 # largest force_align in program.fbs
DEFAULT_SEGMENT_ALIGNMENT = 128
DEFAULT_TENSOR_ALIGNMENT = 16


class PteFormatError(ValueError):
    """The bytes are not a readable .pte file."""


class NotAProgramError(PteFormatError):
    """No ``ET..`` identifier at byte 4."""


class IncompatibleVersionError(PteFormatError):
    """An ``ET`` identifier other than ``ET12``."""


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def identify(data: bytes) -> str:
    """'pte', 'bpte', 'ptd', or raise NotAProgramError / IncompatibleVersionError."""
    if len(data) < 8:
        raise NotAProgramError("not a program: %d bytes is too short" % len(data))
    ident = bytes(data[4:8])
    if ident == FILE_IDENTIFIER:
        return "pte"
    if ident == b"BP08":
        return "bpte"
    if ident == b"FT01":
        return "ptd"
    if ident[:2] == b"ET":
        raise IncompatibleVersionError("incompatible version: identifier %r, expected b'ET12'"
                                       % ident)
    raise NotAProgramError("not a program: no ET12 identifier at byte 4 (found %r)" % ident)


# ---- extended header -------------------------------------------------------------------


@dataclass
class ExtendedHeader:
    """The ``eh00`` header at file offset 8 (§2.3)."""
    program_size: int
    segment_base_offset: int
    segment_data_size: int = 0
    length: int = EXTENDED_HEADER_LENGTH

    @classmethod
    def parse(cls, data: bytes) -> Optional["ExtendedHeader"]:
        """The header of a file, or None when it has none."""
        if len(data) < 16 or bytes(data[8:12]) != EXTENDED_HEADER_MAGIC:
            return None
        length = struct.unpack_from("<I", data, 12)[0]
        if length < 24:
            raise PteFormatError("extended header length %d is below 24" % length)
        if len(data) < 8 + length:
            raise PteFormatError("file is shorter than its extended header")
        program_size, base = struct.unpack_from("<QQ", data, 16)
        seg_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else 0
        return cls(program_size, base, seg_size, length)

    def encode(self) -> bytes:
        """The header padded to a multiple of the largest force_align (32 bytes)."""
        raw = EXTENDED_HEADER_MAGIC + struct.pack("<IQQQ", EXTENDED_HEADER_LENGTH,
                                                  self.program_size, self.segment_base_offset,
                                                  self.segment_data_size)
        return raw + bytes(align_up(len(raw), MAX_FORCE_ALIGN) - len(raw))


# ---- exact level -----------------------------------------------------------------------


@dataclass
class PteFile:
    """A program as stored: `segments[i]` is the payload of `program.segments[i]`."""
    program: Program
    segments: List[bytes] = field(default_factory=list)
    # As read from a file (informational; write_pte computes its own).
    header: Optional[ExtendedHeader] = field(default=None, compare=False)


def read_pte(data: bytes) -> PteFile:
    """Parse a .pte image (with or without an extended header, 24- or 32-byte header,
    constants in a segment or in the legacy constant_buffer)."""
    data = bytes(data)
    if identify(data) != "pte":
        raise NotAProgramError("not a .pte program (identifier %r)" % bytes(data[4:8]))
    header = ExtendedHeader.parse(data)
    fb_size = len(data)
    base = 0
    if header is not None:
        if not 8 <= header.program_size <= len(data):
            raise PteFormatError("program_size %d outside the %d-byte file"
                                 % (header.program_size, len(data)))
        fb_size = header.program_size
        base = header.segment_base_offset
    try:
        program = fbs.decode(Program, data[:fb_size], FILE_IDENTIFIER)
    except (FlatbufferError, UnicodeDecodeError) as e:
        raise PteFormatError("malformed program flatbuffer: %s" % e) from None
    segments = []
    for i, seg in enumerate(program.segments):
        if seg.size == 0:
            segments.append(b"")
            continue
        if header is None or base == 0:
            raise PteFormatError("segment %d has data but the file has no segment area" % i)
        start = base + seg.offset
        if start + seg.size > len(data):
            raise PteFormatError("segment %d [%d, +%d) runs past the end of the file"
                                 % (i, start, seg.size))
        segments.append(data[start:start + seg.size])
    return PteFile(program, segments, header)


def _segment_offsets(stored: Sequence, payloads: Sequence[bytes], segment_alignment: int,
                     segment_alignments: Optional[Sequence[int]], keep: bool) -> List[int]:
    """Offsets of the payloads inside the segment area: the stored ones (`keep`, checked for
    consistency), or each at the next multiple of lcm(segment_alignment, alignment[i])."""
    if keep:
        if len(stored) != len(payloads):
            raise ValueError("keep_offsets: %d stored segments for %d payloads"
                             % (len(stored), len(payloads)))
        spans = sorted((s.offset, s.offset + len(p)) for s, p in zip(stored, payloads) if p)
        for (_, e0), (s1, _) in zip(spans, spans[1:]):
            if s1 < e0:
                raise ValueError("keep_offsets: stored segments overlap")
        for s, p in zip(stored, payloads):
            if s.size != len(p):
                raise ValueError("keep_offsets: stored segment size %d, payload %d bytes"
                                 % (s.size, len(p)))
        return [s.offset for s in stored]
    offsets = []
    end = 0
    for i, payload in enumerate(payloads):
        a = segment_alignment
        if segment_alignments is not None:
            a = a * segment_alignments[i] // math.gcd(a, segment_alignments[i])
        off = align_up(end, a)
        offsets.append(off)
        end = off + len(payload)
    return offsets


def write_pte(pte: PteFile, segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT,
              segment_alignments: Optional[Sequence[int]] = None,
              keep_offsets: bool = False) -> bytes:
    """Write a PteFile.  `program.segments` is recomputed from the payloads (in order, each
    starting at a multiple of lcm(segment_alignment, segment_alignments[i])), or, with
    `keep_offsets`, the stored offsets are kept.  The 32-byte extended header is written
    exactly when there is segment data."""
    offsets = _segment_offsets(pte.program.segments, pte.segments, segment_alignment,
                               segment_alignments, keep_offsets)
    end = max((o + len(p) for o, p in zip(offsets, pte.segments)), default=0)
    program = dataclasses.replace(
        pte.program,
        segments=[DataSegment(off, len(p)) for off, p in zip(offsets, pte.segments)])
    flat = fbs.encode(program, FILE_IDENTIFIER)
    if not any(pte.segments):
        return flat
    hdr_len = len(ExtendedHeader(0, 0).encode())
    program_size = len(flat) + hdr_len
    base = align_up(program_size, segment_alignment)
    header = ExtendedHeader(program_size, base, end).encode()
    root = struct.unpack_from("<I", flat, 0)[0] + hdr_len
    out = bytearray(struct.pack("<I", root) + flat[4:8] + header + flat[8:])
    out += bytes(base - len(out))
    area = bytearray(end)
    for off, payload in zip(offsets, pte.segments):
        area[off:off + len(payload)] = payload
    return bytes(out + area)


# ---- logical level ---------------------------------------------------------------------


@dataclass
class NamedBlob:
    """A named-data entry (typically backend weights), stored in its own segment."""
    key: str
    data: bytes
    alignment: int = 1


@dataclass
class ProgramData:
    """The bulk bytes of a logical program.

    constants:       constant tensor bytes by ``Tensor.data_buffer_idx``; index 0 is the empty
                     placeholder.
    mutable:         initial values of planned (mutable) tensors by ``data_buffer_idx``; index 0
                     is the placeholder; leave empty when no tensor has an initial value.
    delegate_blobs:  processed blobs, referenced by ``BackendDelegate.processed.index``.
    named_data:      named blobs (``Program.named_data``), one segment per distinct payload.
    """
    constants: List[bytes] = field(default_factory=lambda: [b""])
    mutable: List[bytes] = field(default_factory=list)
    delegate_blobs: List[bytes] = field(default_factory=list)
    named_data: List[NamedBlob] = field(default_factory=list)


@dataclass
class SerializeConfig:
    segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT
    constant_tensor_alignment: int = DEFAULT_TENSOR_ALIGNMENT
    # False: constants inline in the (deprecated) Program.constant_buffer, no segment.
    constant_segment: bool = True
    # With the legacy constant_buffer: also write an empty constant_segment (as ExecuTorch's
    # writer has since 2023); False leaves it out, as the oldest files (2023) do.
    empty_constant_segment: bool = True


@dataclass
class ProgramParts:
    """What unpack_program returns: enough to re-serialize the same layout."""
    program: Program
    data: ProgramData
    config: SerializeConfig


def _no_layout() -> dict:
    """Program fields that the writer fills in (cleared in a logical program)."""
    return dict(segments=[], constant_segment=None, constant_buffer=[],
                mutable_data_segments=[], named_data=[], backend_delegate_data=[])


def _pack(blobs: Sequence[bytes], alignment: int, dedup: bool) -> Tuple[bytes, List[int]]:
    """Concatenate blobs, padding each but the last one written to `alignment`; with
    `dedup`, identical blobs are stored once and share an offset.  Returns (bytes, offsets)."""
    blobs = [bytes(b) for b in blobs]
    order = list(dict.fromkeys(blobs)) if dedup else blobs
    out = bytearray()
    starts = []
    for k, b in enumerate(order):
        starts.append(len(out))
        out += b
        if k != len(order) - 1:
            out += bytes(align_up(len(out), alignment) - len(out))
    if dedup:
        where = dict(zip(order, starts))
        return bytes(out), [where[b] for b in blobs]
    return bytes(out), starts


def serialize_program(program: Program, data: Optional[ProgramData] = None,
                      config: Optional[SerializeConfig] = None) -> bytes:
    """Lay out a logical program and its data as the reference writer does (§2.5):

    1. the constant segment (always present, possibly empty: the placeholder is index 0;
       each tensor but the last padded to `constant_tensor_alignment`; identical tensors
       share storage), or the legacy ``constant_buffer`` when ``config.constant_segment`` is
       False;
    2. the mutable-data segment when there is an initial value (packed, no padding);
    3. one segment per distinct delegate blob whose reference says ``SEGMENT`` (empty blobs
       stay inline), inline blobs into ``backend_delegate_data``;
    4. one segment per distinct named-data payload.
    """
    data = data or ProgramData()
    config = config or SerializeConfig()
    constants = list(data.constants) or [b""]
    if constants[0] != b"":
        raise ValueError("ProgramData.constants[0] must be the empty placeholder")
    segments: List[bytes] = []
    seg_align: List[int] = []
    prog = dataclasses.replace(program, **_no_layout())

    if config.constant_segment:
        blob, offsets = _pack(constants, config.constant_tensor_alignment, dedup=True)
        prog.constant_segment = SubsegmentOffsets(len(segments), offsets)
        segments.append(blob)
        seg_align.append(1)
    else:
        prog.constant_buffer = [Buffer(bytes(c)) for c in constants]
        if config.empty_constant_segment:
            prog.constant_segment = SubsegmentOffsets(0, [])

    if any(data.mutable[1:]):
        if data.mutable[0] != b"":
            raise ValueError("ProgramData.mutable[0] must be the empty placeholder")
        blob, offsets = _pack(data.mutable, 1, dedup=False)
        prog.mutable_data_segments = [SubsegmentOffsets(len(segments), offsets)]
        segments.append(blob)
        seg_align.append(1)

    inline_index: Dict[bytes, int] = {}
    segment_index: Dict[bytes, int] = {}
    plans = []
    for plan in program.execution_plan:
        delegates = []
        for d in plan.delegates:
            ref = d.processed
            if ref is None:
                raise ValueError("delegate %r has no processed blob reference" % d.id)
            if not 0 <= ref.index < len(data.delegate_blobs):
                raise ValueError("delegate %r refers to blob %d of %d"
                                 % (d.id, ref.index, len(data.delegate_blobs)))
            blob = bytes(data.delegate_blobs[ref.index])
            if ref.location == DataLocation.SEGMENT and blob:
                if blob not in segment_index:
                    segment_index[blob] = len(segments)
                    segments.append(blob)
                    seg_align.append(1)
                new = BackendDelegateDataReference(DataLocation.SEGMENT, segment_index[blob])
            else:
                if blob not in inline_index:
                    inline_index[blob] = len(prog.backend_delegate_data)
                    prog.backend_delegate_data.append(BackendDelegateInlineData(blob))
                new = BackendDelegateDataReference(DataLocation.INLINE, inline_index[blob])
            delegates.append(dataclasses.replace(d, processed=new))
        plans.append(dataclasses.replace(plan, delegates=delegates))
    prog.execution_plan = plans

    named_index: Dict[bytes, int] = {}
    for nb in data.named_data:
        blob = bytes(nb.data)
        if blob not in named_index:
            named_index[blob] = len(segments)
            segments.append(blob)
            seg_align.append(max(nb.alignment, 1))
        else:
            k = named_index[blob]
            seg_align[k] = seg_align[k] * nb.alignment // math.gcd(seg_align[k], nb.alignment)
        prog.named_data.append(NamedData(nb.key, named_index[blob]))

    return write_pte(PteFile(prog, segments), config.segment_alignment, seg_align)


def _split(segment: bytes, offsets: Sequence[int]) -> List[bytes]:
    """Cut a segment at the given offsets: entry i runs to the next larger offset (or the
    segment end); entry 0 is the empty placeholder."""
    cuts = sorted(set(offsets) | {len(segment)})
    nxt = {c: cuts[k + 1] for k, c in enumerate(cuts[:-1])}
    out = [b""]
    for off in offsets[1:]:
        if off > len(segment):
            raise PteFormatError("offset %d beyond a %d-byte segment" % (off, len(segment)))
        out.append(bytes(segment[off:nxt.get(off, off)]))
    return out


def unpack_program(pte: PteFile) -> ProgramParts:
    """Turn a stored program back into a logical program + ProgramData (+ the config that
    reproduces its constant layout).  Each constant runs to the next larger offset, so it
    keeps its alignment padding; re-serializing reproduces the same offsets."""
    p = pte.program
    data = ProgramData(constants=[b""], mutable=[], delegate_blobs=[], named_data=[])
    config = SerializeConfig()
    cs = p.constant_segment
    if cs is not None and len(cs.offsets) > 0:
        data.constants = _split(pte.segments[cs.segment_index], cs.offsets)
    elif p.constant_buffer:
        config.constant_segment = False
        config.empty_constant_segment = cs is not None
        data.constants = [b.storage for b in p.constant_buffer]
    if p.mutable_data_segments:
        ms = p.mutable_data_segments[0]
        data.mutable = _split(pte.segments[ms.segment_index], ms.offsets)
    blob_index: Dict[Tuple[int, int], int] = {}
    plans = []
    for plan in p.execution_plan:
        delegates = []
        for d in plan.delegates:
            ref = d.processed
            if ref is None:
                raise PteFormatError("delegate %r has no processed blob" % d.id)
            key = (int(ref.location), ref.index)
            if key not in blob_index:
                if ref.location == DataLocation.SEGMENT:
                    blob = pte.segments[ref.index]
                else:
                    blob = p.backend_delegate_data[ref.index].data
                blob_index[key] = len(data.delegate_blobs)
                data.delegate_blobs.append(bytes(blob))
            delegates.append(dataclasses.replace(
                d, processed=BackendDelegateDataReference(ref.location, blob_index[key])))
        plans.append(dataclasses.replace(plan, delegates=delegates))
    for nd in p.named_data:
        data.named_data.append(NamedBlob(nd.key, bytes(pte.segments[nd.segment_index])))
    program = dataclasses.replace(p, execution_plan=plans, **_no_layout())
    return ProgramParts(program, data, config)
