"""A reader of the safetensors format (Hugging Face's weight files), written from the format's
description; no ``safetensors`` package is needed.

Layout: an unsigned 64-bit little-endian header length N, then N bytes of UTF-8 JSON (an object
mapping each tensor's name to ``{"dtype": ..., "shape": [...], "data_offsets": [begin, end]}``,
plus an optional ``"__metadata__"`` object of string values), then the data: every tensor's
bytes, little endian, C order, at ``[begin, end)`` relative to the end of the header.

The reader checks everything a file could lie about and names the file and the tensor: the
header length against the file size, the JSON's kinds, each dtype, that each shape's byte size
equals its offsets' span, that spans lie inside the data and do not overlap, and that the data
is covered exactly (no bytes outside every tensor).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, Tuple

import torch

__all__ = ["load_file", "read_header", "DTYPES"]

# safetensors dtype name -> (torch dtype, bytes per element)
DTYPES = {
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "F64": (torch.float64, 8),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_NAMES = {v[0]: k for k, v in DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024     # the format's own limit on the JSON header


def _bad(path, msg) -> ValueError:
    return ValueError("%s: not a valid safetensors file: %s" % (path, msg))


def read_header(path: str) -> Tuple[Dict[str, dict], Dict[str, str], int, int]:
    """(tensors: name -> {dtype, shape, data_offsets}, metadata, data start, file size), all
    checked against the file's size."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _bad(path, "%d bytes, shorter than the 8-byte header length" % size)
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER or 8 + n > size:
            raise _bad(path, "header length %d does not fit the file (%d bytes)" % (n, size))
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(path, "header is not UTF-8 JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise _bad(path, "header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _bad(path, "__metadata__ must be an object of strings")
    start = 8 + n
    data_len = size - start
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise _bad(path, "tensor %r: entry is not an object" % name)
        dt, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dt not in DTYPES:
            raise _bad(path, "tensor %r: dtype %r not supported (supported: %s)"
                       % (name, dt, ", ".join(DTYPES)))
        if (not isinstance(shape, list) or
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                        for s in shape)):
            raise _bad(path, "tensor %r: shape %r is not a list of sizes" % (name, shape))
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise _bad(path, "tensor %r: data_offsets %r is not [begin, end]" % (name, offs))
        b, e = offs
        if not 0 <= b <= e <= data_len:
            raise _bad(path, "tensor %r: data_offsets [%d, %d] outside the %d data bytes"
                       % (name, b, e, data_len))
        numel = 1
        for s in shape:
            numel *= s
        if numel * DTYPES[dt][1] != e - b:
            raise _bad(path, "tensor %r: shape %s of %s needs %d bytes, data_offsets span %d"
                       % (name, shape, dt, numel * DTYPES[dt][1], e - b))
        spans.append((b, e, name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b < pos:
            raise _bad(path, "tensor %r overlaps the tensor before it" % name)
        if b > pos:
            raise _bad(path, "bytes %d..%d belong to no tensor (before %r)" % (pos, b, name))
        pos = e
    if pos != data_len:
        raise _bad(path, "%d data bytes after the last tensor" % (data_len - pos))
    return header, meta, start, size


def load_file(path: str) -> Dict[str, torch.Tensor]:
    """Every tensor of the file (copies, in the file's dtype and shape)."""
    header, _meta, start, _size = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        data = bytearray(f.read())
    out: Dict[str, torch.Tensor] = {}
    for name, info in header.items():
        dtype, _ = DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        if e == b:
            out[name] = torch.zeros(info["shape"], dtype=dtype)
            continue
        t = torch.frombuffer(data, dtype=dtype, count=(e - b) // DTYPES[info["dtype"]][1],
                             offset=b)
        out[name] = t.reshape(info["shape"]).clone()
    return out

