"""A small, dependency-free FlatBuffers builder and reader (wire format only).

Only what the ExecuTorch schemas need is implemented: tables (with vtable deduplication),
scalars, strings, vectors of scalars / bytes / tables, unions (a type-tag slot followed by a
value slot) and ``force_align`` vectors.  See docs/pte-format.md §1 for the wire format.

Building works back to front, as in the reference builders: children are written before their
parents, and the root offset plus the 4-byte file identifier are prepended last.  Positions
handed out by the builder ("offsets") are measured from the *end* of the buffer, which is what
stays stable while the buffer grows at the front.  Output is a pure function of the sequence of
calls, so identical input gives byte-identical files.

Reading is lazy: :class:`Table` wraps a position inside a ``bytes``-like object and decodes
fields on demand.  Every access is bounds-checked and raises :class:`FlatbufferError`.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["Builder", "FlatbufferError", "Table", "root_table", "SCALAR_SIZES"]

# struct format character -> byte size of the scalar kinds used by the schemas
SCALAR_SIZES = {"b": 1, "B": 1, "?": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8,
                "f": 4, "d": 8}


class FlatbufferError(ValueError):
    """Malformed flatbuffer data (a reference out of bounds, a bad vtable, ...)."""


def _align_pad(size: int, alignment: int) -> int:
    return (-size) % alignment


class Builder:
    """Back-to-front FlatBuffers builder.

    Typical use::

        b = Builder()
        name = b.create_string("forward")
        b.start_table()
        b.add_offset(0, name)
        b.add_scalar(1, "I", 7, default=0)
        root = b.end_table()
        data = b.finish(root, b"ET12")
    """

    def __init__(self, initial_size: int = 1024) -> None:
        self._buf = bytearray(max(initial_size, 16))
        self._head = len(self._buf)  # first used byte; data lives in _buf[_head:]
        self._minalign = 1
        self._vtables: Dict[bytes, int] = {}  # vtable bytes -> offset of the written vtable
        self._fields: Optional[List[Tuple[int, int]]] = None  # (slot, offset) of open table
        self._object_end = 0
        self._nested = False

    # ---- raw space management --------------------------------------------------------

    def offset(self) -> int:
        """Bytes written so far (= the offset, from the end, of the last written byte)."""
        return len(self._buf) - self._head

    def _grow(self, needed: int) -> None:
        used = self.offset()
        new_size = len(self._buf)
        while new_size - used < needed:
            new_size *= 2
        nb = bytearray(new_size)
        nb[new_size - used:] = self._buf[self._head:]
        self._buf = nb
        self._head = new_size - used

    def _reserve(self, n: int) -> int:
        """Make room for n bytes in front of the data; return their start index in _buf."""
        if self._head < n:
            self._grow(n)
        self._head -= n
        return self._head

    def pad(self, n: int) -> None:
        if n:
            start = self._reserve(n)
            self._buf[start:start + n] = bytes(n)

    def prep(self, alignment: int, additional_bytes: int) -> None:
        """Pad so that, after `additional_bytes` more bytes are written, the position is a
        multiple of `alignment` (measured from the end, which equals alignment from the start
        once finish() has padded the whole buffer to the largest alignment used)."""
        if alignment > self._minalign:
            self._minalign = alignment
        self.pad(_align_pad(self.offset() + additional_bytes, alignment))

    def _put(self, fmt: str, value) -> None:
        size = struct.calcsize("<" + fmt)
        start = self._reserve(size)
        struct.pack_into("<" + fmt, self._buf, start, value)

    def _put_bytes(self, data: bytes) -> None:
        start = self._reserve(len(data))
        self._buf[start:start + len(data)] = data

    # ---- leaf objects ----------------------------------------------------------------

    def _check_not_nested(self) -> None:
        if self._nested:
            raise RuntimeError("flatbuffers: objects cannot be created inside an open table")

    def create_string(self, s) -> int:
        """A string (str is UTF-8 encoded) with its NUL terminator; returns its offset."""
        self._check_not_nested()
        data = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
        self.prep(4, len(data) + 1)
        self._put_bytes(data + b"\0")
        self._put("I", len(data))
        return self.offset()

    def create_bytes_vector(self, data, alignment: int = 1) -> int:
        """A [ubyte] vector whose first byte is aligned to `alignment` (force_align)."""
        self._check_not_nested()
        data = bytes(data)
        self.prep(4, len(data))
        self.prep(max(alignment, 1), len(data))
        self._put_bytes(data)
        self._put("I", len(data))
        return self.offset()

    def create_scalar_vector(self, fmt: str, values: Sequence, alignment: int = 1) -> int:
        """A vector of scalars of struct format `fmt` (elements aligned to their size)."""
        self._check_not_nested()
        esize = SCALAR_SIZES[fmt]
        n = len(values)
        data = struct.pack("<%d%s" % (n, fmt), *values) if n else b""
        self.prep(4, esize * n)
        self.prep(max(esize, alignment), esize * n)
        self._put_bytes(data)
        self._put("I", n)
        return self.offset()

    def create_offset_vector(self, offsets: Sequence[int]) -> int:
        """A vector of uoffsets to already-written tables/strings (element order kept)."""
        self._check_not_nested()
        n = len(offsets)
        self.prep(4, 4 * n)
        for off in reversed(offsets):
            self.prep(4, 0)
            self._put("I", self.offset() + 4 - off)
        self._put("I", n)
        return self.offset()

    # ---- tables ----------------------------------------------------------------------

    def start_table(self) -> None:
        self._check_not_nested()
        self._nested = True
        self._fields = []
        self._object_end = self.offset()

    def add_scalar(self, slot: int, fmt: str, value, default=None) -> None:
        """Add a scalar field; skipped when it equals `default` (compared bitwise for
        floats, so -0.0 and NaN payloads survive)."""
        if default is not None and _same_scalar(fmt, value, default):
            return
        size = SCALAR_SIZES[fmt]
        self.prep(size, 0)
        self._mark_object_end()
        self._put(fmt, value)
        self._fields.append((slot, self.offset()))

    def add_offset(self, slot: int, off: int) -> None:
        """Add a reference to an object written earlier (its offset from create_*/end_table)."""
        self.prep(4, 0)
        self._mark_object_end()
        self._put("I", self.offset() + 4 - off)
        self._fields.append((slot, self.offset()))

    def _mark_object_end(self) -> None:
        # Alignment padding in front of the first field is not part of the table, so that
        # equal layouts give equal vtables (and share one).
        if not self._fields:
            self._object_end = self.offset()

    def end_table(self) -> int:
        if not self._nested:
            raise RuntimeError("flatbuffers: end_table without start_table")
        self.prep(4, 0)
        self._mark_object_end()
        self._put("i", 0)  # soffset to the vtable, patched below
        table = self.offset()
        nslots = max((s for s, _ in self._fields), default=-1) + 1
        entries = [0] * nslots
        for slot, off in self._fields:
            entries[slot] = table - off
        vt = struct.pack("<HH%dH" % nslots, 4 + 2 * nslots, table - self._object_end, *entries)
        existing = self._vtables.get(vt)
        if existing is None:
            self._put_bytes(vt)  # we are 4-aligned, a vtable needs 2
            existing = self.offset()
            self._vtables[vt] = existing
        pos = len(self._buf) - table
        struct.pack_into("<i", self._buf, pos, existing - table)
        self._fields = None
        self._nested = False
        return table

    # ---- finishing -------------------------------------------------------------------

    def finish(self, root: int, identifier: Optional[bytes] = None) -> bytes:
        """Prepend the root offset (and identifier); return the finished buffer, whose size
        is a multiple of the largest alignment used."""
        self._check_not_nested()
        extra = 4 + (4 if identifier is not None else 0)
        self.prep(self._minalign, extra)
        if identifier is not None:
            if len(identifier) != 4:
                raise ValueError("file identifier must be 4 bytes")
            self._put_bytes(bytes(identifier))
        self.prep(4, 0)
        self._put("I", self.offset() + 4 - root)
        return bytes(self._buf[self._head:])


def _same_scalar(fmt: str, a, b) -> bool:
    if fmt in "fd":
        return struct.pack("<" + fmt, a) == struct.pack("<" + fmt, b)
    return a == b


# ---- reading ---------------------------------------------------------------------------


class Table:
    """A table inside a flatbuffer. Field accessors take the vtable slot number."""

    __slots__ = ("buf", "pos", "_vt", "_vt_size")

    def __init__(self, buf, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        soff = _unpack(buf, "i", pos)
        vt = pos - soff
        if vt < 0 or vt + 4 > len(buf):
            raise FlatbufferError("vtable of the table at %d is out of bounds" % pos)
        self._vt = vt
        self._vt_size = _unpack(buf, "H", vt)
        if self._vt_size < 4 or self._vt_size & 1 or vt + self._vt_size > len(buf):
            raise FlatbufferError("bad vtable at %d" % vt)

    def field_pos(self, slot: int) -> int:
        """Absolute position of a field, or 0 when it is absent."""
        entry = 4 + 2 * slot
        if entry >= self._vt_size:
            return 0
        off = _unpack(self.buf, "H", self._vt + entry)
        return self.pos + off if off else 0

    def has(self, slot: int) -> bool:
        return self.field_pos(slot) != 0

    def scalar(self, slot: int, fmt: str, default=0):
        p = self.field_pos(slot)
        return _unpack(self.buf, fmt, p) if p else default

    def _deref(self, slot: int) -> int:
        p = self.field_pos(slot)
        if not p:
            return 0
        target = p + _unpack(self.buf, "I", p)
        if target >= len(self.buf):
            raise FlatbufferError("reference at %d points outside the buffer" % p)
        return target

    def table(self, slot: int) -> Optional["Table"]:
        t = self._deref(slot)
        return Table(self.buf, t) if t else None

    def string(self, slot: int) -> Optional[str]:
        t = self._deref(slot)
        return _read_string(self.buf, t) if t else None

    def vector(self, slot: int) -> Optional[Tuple[int, int]]:
        """(position of element 0, element count), or None when absent."""
        t = self._deref(slot)
        if not t:
            return None
        n = _unpack(self.buf, "I", t)
        return t + 4, n

    def scalar_vector(self, slot: int, fmt: str) -> Optional[list]:
        v = self.vector(slot)
        if v is None:
            return None
        start, n = v
        size = SCALAR_SIZES[fmt]
        if start + n * size > len(self.buf):
            raise FlatbufferError("vector at %d runs past the buffer" % start)
        return list(struct.unpack_from("<%d%s" % (n, fmt), self.buf, start))

    def bytes_vector(self, slot: int) -> Optional[bytes]:
        v = self.vector(slot)
        if v is None:
            return None
        start, n = v
        if start + n > len(self.buf):
            raise FlatbufferError("byte vector at %d runs past the buffer" % start)
        return bytes(self.buf[start:start + n])

    def table_vector(self, slot: int) -> Optional[List["Table"]]:
        v = self.vector(slot)
        if v is None:
            return None
        start, n = v
        out = []
        for k in range(n):
            p = start + 4 * k
            out.append(Table(self.buf, p + _unpack(self.buf, "I", p)))
        return out

    def string_vector(self, slot: int) -> Optional[List[str]]:
        v = self.vector(slot)
        if v is None:
            return None
        start, n = v
        return [_read_string(self.buf, start + 4 * k + _unpack(self.buf, "I", start + 4 * k))
                for k in range(n)]


def _unpack(buf, fmt: str, pos: int):
    if pos < 0 or pos + SCALAR_SIZES[fmt] > len(buf):
        raise FlatbufferError("read of %d bytes at %d is outside the %d-byte buffer"
                              % (SCALAR_SIZES[fmt], pos, len(buf)))
    return struct.unpack_from("<" + fmt, buf, pos)[0]


def _read_string(buf, pos: int) -> str:
    n = _unpack(buf, "I", pos)
    if pos + 4 + n > len(buf):
        raise FlatbufferError("string at %d runs past the buffer" % pos)
    return bytes(buf[pos + 4:pos + 4 + n]).decode("utf-8", errors="surrogateescape")


def root_table(buf, identifier: Optional[bytes] = None) -> Table:
    """The root table of a finished buffer; checks the 4-byte identifier when given."""
    if len(buf) < 8:
        raise FlatbufferError("buffer of %d bytes is too short for a flatbuffer" % len(buf))
    if identifier is not None and bytes(buf[4:8]) != identifier:
        raise FlatbufferError("file identifier is %r, expected %r"
                              % (bytes(buf[4:8]), identifier))
    return Table(buf, _unpack(buf, "I", 0))
