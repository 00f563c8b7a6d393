"""Write the tensors of a current-layout .ptd again in both FlatTensor layouts (tests/cli).

    gen_ptd_layouts.py SOURCE.ptd OUTDIR

writes into OUTDIR:
  current.ptd      the current layout (named_data, one segment per tensor), python/etch's writer
  legacy.ptd       the legacy layout of ExecuTorch's early-2025 writer (below)
  legacy_lying.ptd legacy.ptd with the last tensor's offset pointing past its segment's end
  stamp            written last (the build's output)

The legacy layout (extension/flat_tensor/serialize/flat_tensor.fbs before named_data replaced
`tensors`): the same FT01 identifier and 40-byte FH01 header inserted at byte 8, then the root

    table FlatTensor     { version: uint32; tensor_alignment: uint32;
                           tensors: [TensorMetadata]; segments: [DataSegment]; }
    table TensorMetadata { fully_qualified_name: string; scalar_type: ScalarType (byte);
                           sizes: [int32]; dim_order: [uint8];
                           segment_index: uint32; offset: uint64; }
    table DataSegment    { offset: uint64; size: uint64; }

All tensors go into one segment (offset 0 from segment_base_offset), each at an offset that is
a multiple of tensor_alignment (16) inside it: a tensor's bytes are at
segment_base_offset + segments[segment_index].offset + offset. The header's segment_data_size
is that segment's size; segment_base_offset follows the flatbuffer, aligned to 128.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import sys
from dataclasses import dataclass
from typing import List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))

from etch.serialize import fbs  # noqa: E402
from etch.serialize.fbs import scalar, scalars, string, tables  # noqa: E402
from etch.serialize.ptd import (FILE_IDENTIFIER, DataSegment, FlatTensorHeader,  # noqa: E402
                                PtdFile, read_ptd, write_ptd)
from etch.serialize.pte import align_up  # noqa: E402
from etch.serialize.schema import ScalarType  # noqa: E402

TENSOR_ALIGNMENT = 16
SEGMENT_ALIGNMENT = 128


@dataclass
class TensorMetadata:
    fully_qualified_name: str = string()
    scalar_type: ScalarType = scalar("b", ScalarType.BYTE, ScalarType)
    sizes: List[int] = scalars("i")
    dim_order: List[int] = scalars("B")
    segment_index: int = scalar("I")
    offset: int = scalar("Q")


@dataclass
class LegacyFlatTensor:
    version: int = scalar("I")
    tensor_alignment: int = scalar("I")
    tensors: List[TensorMetadata] = tables(TensorMetadata)
    segments: List[DataSegment] = tables(DataSegment)


def legacy_bytes(ptd: PtdFile, lie: bool = False) -> bytes:
    tensors, area = [], bytearray()
    for nd in ptd.flat_tensor.named_data:
        lay = nd.tensor_layout
        data = ptd.segments[nd.segment_index]
        area += bytes(align_up(len(area), TENSOR_ALIGNMENT) - len(area))
        tensors.append(TensorMetadata(nd.key, lay.scalar_type, list(lay.sizes),
                                      list(lay.dim_order), 0, len(area)))
        area += data
    if lie:  # the last tensor starts where its bytes would run past the segment
        tensors[-1] = dataclasses.replace(tensors[-1], offset=len(area) - 4)
    flat = fbs.encode(LegacyFlatTensor(0, TENSOR_ALIGNMENT, tensors,
                                       [DataSegment(0, len(area))]), FILE_IDENTIFIER)
    hdr_len = len(FlatTensorHeader(0, 0, 0, 0).encode())
    base = align_up(hdr_len + len(flat), SEGMENT_ALIGNMENT)
    header = FlatTensorHeader(hdr_len, len(flat), base, len(area)).encode()
    root = struct.unpack_from("<I", flat, 0)[0] + hdr_len
    out = bytearray(struct.pack("<I", root) + flat[4:8] + header + flat[8:])
    out += bytes(base - len(out))
    return bytes(out + area)


def main() -> None:
    src, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    with open(src, "rb") as f:
        ptd = read_ptd(f.read())
    files = {"current.ptd": write_ptd(ptd), "legacy.ptd": legacy_bytes(ptd),
             "legacy_lying.ptd": legacy_bytes(ptd, lie=True)}
    # the generator's own check: the legacy file's flatbuffer has the legacy root
    legacy = files["legacy.ptd"]
    h = FlatTensorHeader.parse(legacy)
    back = fbs.decode(LegacyFlatTensor, legacy[:h.flatbuffer_offset + h.flatbuffer_size],
                      FILE_IDENTIFIER)
    assert [t.fully_qualified_name for t in back.tensors] == \
        [nd.key for nd in ptd.flat_tensor.named_data], back
    for name, data in files.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    with open(os.path.join(outdir, "stamp"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
