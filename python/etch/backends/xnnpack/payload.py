"""The ``XnnpackBackend`` delegate payload, written as ExecuTorch's XNNPACK serializer lays it
out: a 30-byte ``XH00`` header (header length, flatbuffer offset and size, constant-data offset
and size), the ``XNNGraph`` flatbuffer (identifier ``XN01``) and a 16-aligned constant section
that the graph's ``constant_data`` entries point into.

:class:`XnnGraph` collects values and nodes; :meth:`XnnGraph.blob` serializes them.  Node kinds
are the members of the schema's ``XNodeUnion`` (:data:`KINDS`, in union order: number = index);
``fields`` of a node are its table's slots in schema order (``{slot: ("I", v) | ("f", v) |
("IV", [...])}``).
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from ...serialize.flatbuffers import Builder

__all__ = ["XnnGraph", "KINDS", "KIND", "FP32", "FP16", "QINT8", "QUINT8", "QINT32", "QCINT8",
           "QCINT32", "QCINT4", "QDINT8", "QBINT4", "EXTERNAL_INPUT", "EXTERNAL_OUTPUT",
           "NO_VALUE"]

KINDS = ("invalid", "Add", "FullyConnected", "Softmax", "Sigmoid", "StaticTranspose", "Clamp",
         "Conv2d", "Div", "StaticResizeBilinear2D", "StaticConstantPad", "AvgPooling2d",
         "Minimum", "DepthwiseConv2d", "MaxPooling2d", "Multiply", "Subtract", "Floor",
         "Convert", "GlobalAvgPooling2d", "StaticReshape", "ArgMaxPooling2d", "SquareRoot",
         "Ceiling", "Hardswish", "LeakyReLU", "Maximum", "Negate", "Square", "ELU", "Abs",
         "PReLU", "Concatenate2", "Concatenate3", "Concatenate4", "StaticSlice",
         "ScaledDotProductAttention", "BatchMatrixMultiply", "Concatenate5", "ConvTranspose2d",
         "ReciprocalSquareRoot", "Log", "Gelu", "Tanh", "Exp", "Sin")
KIND = {n: i for i, n in enumerate(KINDS)}

# XNNDatatype
FP32, FP16, QINT8, QUINT8, QINT32, QCINT8, QCINT32, QCINT4, QDINT8, QBINT4 = range(1, 11)
# XValue flags
EXTERNAL_INPUT, EXTERNAL_OUTPUT = 1, 2
NO_VALUE = 0xFFFFFFFF          # an absent optional value id (e.g. no bias)

_HEADER = struct.Struct("<I4sHIIIQ")   # padding, magic, header length, fb off/size, const off/size
_FB_OFFSET = 32                        # the flatbuffer starts 16-aligned after the header


def _pad16(n: int) -> int:
    return (n + 15) // 16 * 16


class XnnGraph:
    """An XNNGraph under construction."""

    def __init__(self) -> None:
        self.values: List[dict] = []
        self.nodes: List[Tuple[int, Dict[int, Tuple[str, object]], Optional[Tuple[float, float]]]] = []
        self.consts: List[bytes] = [b""]      # constant_data[0] is the empty entry
        self._const_index: Dict[bytes, int] = {}

    def value(self, dims: Sequence[int], dtype: int = FP32, flags: int = 0,
              ext: Optional[int] = None, const: Optional[bytes] = None, q=None,
              dq: int = 0) -> int:
        """A value; returns its id.  ``const``: its bytes (identical bytes are stored once);
        ``q``: quantization, ("tensor", scale, zero_point) | ("channel", scales, axis) |
        ("token", num_nonbatch_dims) | ("block", scales, axis, block_size) (bf16 scales) |
        ("block32", scales, axis, block_size) (float32 scales);
        ``dq``: the dq_datatype of a float external input its readers see quantized per token
        (QINT8; the form ExecuTorch wrote before the Convert-to-qdint8 node, 2023)."""
        cidx = 0
        if const is not None:
            data = bytes(const)
            cidx = self._const_index.get(data, 0)
            if not cidx:
                self.consts.append(data)
                cidx = self._const_index[data] = len(self.consts) - 1
        vid = len(self.values)
        self.values.append(dict(dims=[int(d) for d in dims], dtype=dtype, flags=flags,
                                ext=NO_VALUE if ext is None else int(ext), cidx=cidx, id=vid,
                                q=q, dq=int(dq)))
        return vid

    def node(self, kind: str, fields: Dict[int, Tuple[str, object]],
             lo: Optional[float] = None, hi: Optional[float] = None) -> None:
        """A node of `kind` (a name of :data:`KINDS`); lo/hi: its output_min_max."""
        mm = None if lo is None and hi is None else (
            float("-inf") if lo is None else lo, float("inf") if hi is None else hi)
        self.nodes.append((KIND[kind], dict(fields), mm))

    def dims(self, vid: int) -> List[int]:
        return list(self.values[vid]["dims"])

    @property
    def num_externals(self) -> int:
        return sum(1 for v in self.values if v["flags"] & (EXTERNAL_INPUT | EXTERNAL_OUTPUT))

    # ---- serialization -------------------------------------------------------------------

    def _quant(self, b: Builder, q) -> Tuple[int, int]:
        if q[0] == "tensor":
            b.start_table()
            b.add_scalar(0, "f", q[1], default=None)
            b.add_scalar(1, "i", q[2], default=0)
            return 2, b.end_table()
        if q[0] == "channel":
            sc = b.create_scalar_vector("f", q[1], 4)
            b.start_table()
            b.add_offset(0, sc)
            b.add_scalar(1, "i", q[2], default=0)
            return 1, b.end_table()
        if q[0] == "token":
            b.start_table()
            b.add_scalar(0, "i", q[1], default=0)
            return 3, b.end_table()
        if q[0] == "block32":  # scales as float32 (ExecuTorch's runtime accepts both)
            sc = b.create_scalar_vector("f", q[1], 4)
            b.start_table()
            b.add_offset(0, sc)
            b.add_scalar(1, "i", q[2], default=0)
            b.add_scalar(2, "i", q[3], default=0)
            return 4, b.end_table()
        if q[0] == "block":   # scales as bf16 (the upper half of each float's bits)
            bf = [struct.unpack("<I", struct.pack("<f", s))[0] >> 16 for s in q[1]]
            sc = b.create_scalar_vector("H", bf, 4)
            b.start_table()
            b.add_scalar(1, "i", q[2], default=0)
            b.add_scalar(2, "i", q[3], default=0)
            b.add_offset(3, sc)
            return 4, b.end_table()
        raise ValueError("unknown quantization %r" % (q[0],))

    def _flatbuffer(self, offsets: List[int]) -> bytes:
        b = Builder(4096)
        cdo = []
        for c, o in zip(self.consts, offsets):
            b.start_table()
            b.add_scalar(0, "Q", o, default=0)
            b.add_scalar(1, "Q", len(c), default=0)
            cdo.append(b.end_table())
        xvals = []
        for v in self.values:
            dims = b.create_scalar_vector("I", v["dims"], 4)
            b.start_table()
            b.add_scalar(0, "h", v["dtype"], default=0)
            b.add_scalar(1, "I", len(v["dims"]), default=0)
            b.add_offset(2, dims)
            b.add_scalar(3, "I", v["cidx"], default=0)
            b.add_scalar(4, "I", v["ext"], default=None)
            b.add_scalar(5, "I", v["flags"], default=0)
            b.add_scalar(6, "I", v["id"], default=0)
            b.add_scalar(7, "h", v.get("dq", 0), default=0)
            tv = b.end_table()
            if v["q"] is None:
                kind, u = 1, tv                      # XValueUnion.XNNTensorValue
            else:
                qt, qp = self._quant(b, v["q"])
                b.start_table()
                b.add_offset(0, tv)
                b.add_scalar(1, "B", qt, default=0)
                b.add_offset(2, qp)
                kind, u = 2, b.end_table()           # XNNQuantizedTensorValue
            b.start_table()
            b.add_scalar(0, "B", kind, default=0)
            b.add_offset(1, u)
            xvals.append(b.end_table())
        xnodes = []
        for kind, fields, mm in self.nodes:
            vecs = {s: b.create_scalar_vector("I", v, 4) for s, (t, v) in fields.items()
                    if t == "IV"}
            b.start_table()
            for s, (t, v) in fields.items():
                if t == "IV":
                    b.add_offset(s, vecs[s])
                else:
                    b.add_scalar(s, t, v, default=None)
            tbl = b.end_table()
            mmt = None
            if mm is not None:
                b.start_table()
                b.add_scalar(0, "f", mm[0], default=None)
                b.add_scalar(1, "f", mm[1], default=None)
                mmt = b.end_table()
            b.start_table()
            b.add_scalar(0, "B", kind, default=0)
            b.add_offset(1, tbl)
            if mmt is not None:
                b.add_offset(3, mmt)
            xnodes.append(b.end_table())
        ins = [v["id"] for v in self.values if v["flags"] & EXTERNAL_INPUT]
        outs = [v["id"] for v in self.values if v["flags"] & EXTERNAL_OUTPUT]
        vn = b.create_offset_vector(xnodes)
        vv = b.create_offset_vector(xvals)
        vi = b.create_scalar_vector("I", ins, 4)
        vo = b.create_scalar_vector("I", outs, 4)
        vc = b.create_offset_vector(cdo)
        ver = b.create_string("0")
        b.start_table()
        b.add_offset(0, ver)
        b.add_offset(1, vn)
        b.add_offset(2, vv)
        b.add_scalar(3, "I", len(ins) + len(outs), default=0)
        b.add_offset(4, vi)
        b.add_offset(5, vo)
        b.add_offset(8, vc)
        return b.finish(b.end_table(), b"XN01")

    def blob(self) -> bytes:
        """The payload: XH00 header, flatbuffer, 16-aligned constant section."""
        offsets, at = [], 0
        for c in self.consts:
            offsets.append(at)
            at += _pad16(len(c))
        fb = self._flatbuffer(offsets)
        consts = b"".join(c + b"\0" * (_pad16(len(c)) - len(c)) for c in self.consts)
        co = _pad16(_FB_OFFSET + len(fb))
        hdr = _HEADER.pack(0, b"XH00", _HEADER.size, _FB_OFFSET, len(fb), co, len(consts))
        out = hdr + b"\0" * (_FB_OFFSET - len(hdr)) + fb
        return out + b"\0" * (co - len(out)) + consts
