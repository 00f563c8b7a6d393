"""Declarative mapping between Python dataclasses and FlatBuffers tables.

A schema table is a ``@dataclass`` whose fields are declared, in ``.fbs`` declaration order,
with the helpers below (``scalar``, ``string``, ``table``, ``scalars``, ``byte_vector``,
``tables``, ``union``).  Slot numbers follow from that order, a union taking two slots (its
hidden ``_type`` tag, then the value), exactly as flatc numbers them.  :func:`encode` and
:func:`decode` then convert whole object trees.

Absent-versus-default rules (they make ``decode(encode(x)) == x`` hold for every tree):

* scalars equal to their default are omitted, absent scalars read as the default;
* ``string`` fields default to ``""`` and are always written, unless declared
  ``optional=True`` (default ``None``, written only when not ``None``);
* vector fields default to empty; ``always=True`` writes an empty vector (for fields that
  readers require to be present), otherwise an empty vector is omitted; absent vectors read as
  empty;
* table and union fields default to ``None`` and are written only when set.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, List, Optional, Tuple, Type

from .flatbuffers import SCALAR_SIZES, Builder, FlatbufferError, Table, root_table

__all__ = ["scalar", "string", "table", "scalars", "byte_vector", "tables", "union",
           "encode", "decode", "encode_into", "decode_table", "FieldSpec"]

_FB = "flatbuffers"


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    kind: str                   # scalar | string | table | scalars | bytes | tables | union
    fmt: str = ""               # struct format of scalars / vector elements
    ref: Any = None             # enum class (scalar), table class, or union member tuple
    always: bool = True         # write empty vectors / strings
    align: int = 1              # force_align of a vector's first element


def scalar(fmt: str, default=0, enum_cls: Optional[Type[enum.IntEnum]] = None):
    """A scalar of struct format `fmt` ('b','B','?','h','H','i','I','q','Q','f','d')."""
    return dataclasses.field(default=default,
                             metadata={_FB: FieldSpec("scalar", fmt, enum_cls)})


def string(optional: bool = False):
    return dataclasses.field(default=None if optional else "",
                             metadata={_FB: FieldSpec("string", always=not optional)})


def table(cls):
    return dataclasses.field(default=None, metadata={_FB: FieldSpec("table", ref=cls)})


def scalars(fmt: str, always: bool = True, align: int = 1):
    return dataclasses.field(default_factory=list,
                             metadata={_FB: FieldSpec("scalars", fmt, always=always,
                                                      align=align)})


def byte_vector(always: bool = True, align: int = 1):
    return dataclasses.field(default=b"",
                             metadata={_FB: FieldSpec("bytes", "B", always=always, align=align)})


def tables(cls, always: bool = True):
    return dataclasses.field(default_factory=list,
                             metadata={_FB: FieldSpec("tables", ref=cls, always=always)})


def union(*members):
    """A union field; members in declaration order get type tags 1, 2, ..."""
    return dataclasses.field(default=None, metadata={_FB: FieldSpec("union", ref=members)})


# ---- layout ----------------------------------------------------------------------------

_layouts: Dict[type, List[Tuple[str, FieldSpec, int]]] = {}


def _layout(cls) -> List[Tuple[str, FieldSpec, int]]:
    """(field name, spec, slot) for every field of a schema dataclass."""
    lay = _layouts.get(cls)
    if lay is None:
        lay = []
        slot = 0
        for f in dataclasses.fields(cls):
            spec = f.metadata.get(_FB)
            if spec is None:
                raise TypeError("%s.%s is not a flatbuffers field" % (cls.__name__, f.name))
            lay.append((f.name, spec, slot))
            slot += 2 if spec.kind == "union" else 1
        _layouts[cls] = lay
    return lay


_default_values: Dict[type, Dict[str, Any]] = {}


def _defaults(cls) -> Dict[str, Any]:
    """Field name -> plain default (fields with a default_factory are left out)."""
    out = _default_values.get(cls)
    if out is None:
        out = {f.name: f.default for f in dataclasses.fields(cls)
               if f.default is not dataclasses.MISSING}
        _default_values[cls] = out
    return out


# ---- encoding --------------------------------------------------------------------------


def encode_into(b: Builder, obj) -> int:
    """Write `obj` (a schema dataclass) and everything it refers to; return its offset."""
    cls = type(obj)
    defaults = _defaults(cls)
    scal = []  # (slot, fmt, value, default)
    refs = []  # (slot, offset)
    for name, spec, slot in _layout(cls):
        v = getattr(obj, name)
        k = spec.kind
        if k == "scalar":
            if spec.fmt in "fd":
                v = float(v)
            elif spec.fmt == "?":
                v = bool(v)
            else:
                v = int(v)
            d = defaults.get(name, 0)
            scal.append((slot, spec.fmt, v, float(d) if spec.fmt in "fd" else
                         (bool(d) if spec.fmt == "?" else int(d))))
        elif k == "string":
            if v is not None and (v != "" or spec.always):
                refs.append((slot, b.create_string(v)))
        elif k == "table":
            if v is not None:
                refs.append((slot, encode_into(b, v)))
        elif k == "scalars":
            if v or spec.always:
                refs.append((slot, b.create_scalar_vector(spec.fmt, list(v), spec.align)))
        elif k == "bytes":
            if v or spec.always:
                refs.append((slot, b.create_bytes_vector(v, spec.align)))
        elif k == "tables":
            if v or spec.always:
                # write the last element first so that element 0 ends up at the lowest address
                offs = [encode_into(b, x) for x in reversed(v)]
                offs.reverse()
                refs.append((slot, b.create_offset_vector(offs)))
        elif k == "union":
            if v is not None:
                try:
                    tag = spec.ref.index(type(v)) + 1
                except ValueError:
                    raise TypeError("%s.%s: %s is not a member of the union"
                                    % (cls.__name__, name, type(v).__name__)) from None
                scal.append((slot, "B", tag, 0))
                refs.append((slot + 1, encode_into(b, v)))
        else:  # pragma: no cover
            raise AssertionError(k)
    b.start_table()
    # largest scalars first: they end up last in the table, which limits padding
    for slot, fmt, v, d in sorted(scal, key=lambda s: -SCALAR_SIZES[s[1]]):
        b.add_scalar(slot, fmt, v, d)
    for slot, off in refs:
        b.add_offset(slot, off)
    return b.end_table()


def encode(obj, identifier: Optional[bytes] = None) -> bytes:
    """A finished flatbuffer whose root is `obj`."""
    b = Builder()
    root = encode_into(b, obj)
    return b.finish(root, identifier)


# ---- decoding --------------------------------------------------------------------------


def decode_table(cls, t: Table):
    """Build a `cls` instance from table `t` (recursively)."""
    kwargs = {}
    defaults = _defaults(cls)
    for name, spec, slot in _layout(cls):
        k = spec.kind
        if k == "scalar":
            v = t.scalar(slot, spec.fmt, None)
            if v is None:
                v = defaults.get(name, 0)
            elif spec.ref is not None:
                try:
                    v = spec.ref(v)
                except ValueError:
                    pass  # keep unknown enum values as plain ints
        elif k == "string":
            v = t.string(slot)
            if v is None:
                v = defaults[name]
        elif k == "table":
            sub = t.table(slot)
            v = decode_table(spec.ref, sub) if sub is not None else None
        elif k == "scalars":
            v = t.scalar_vector(slot, spec.fmt) or []
        elif k == "bytes":
            v = t.bytes_vector(slot) or b""
        elif k == "tables":
            v = [decode_table(spec.ref, x) for x in (t.table_vector(slot) or [])]
        elif k == "union":
            tag = t.scalar(slot, "B", 0)
            if tag == 0:
                v = None
            elif tag > len(spec.ref):
                raise FlatbufferError("%s.%s: unknown union type tag %d"
                                      % (cls.__name__, name, tag))
            else:
                member = spec.ref[tag - 1]
                sub = t.table(slot + 1)
                if sub is None:
                    if dataclasses.fields(member):
                        raise FlatbufferError("%s.%s: union tag %d without a value"
                                              % (cls.__name__, name, tag))
                    v = member()
                else:
                    v = decode_table(member, sub)
        else:  # pragma: no cover
            raise AssertionError(k)
        kwargs[name] = v
    return cls(**kwargs)


def decode(cls, buf, identifier: Optional[bytes] = None):
    """Decode a finished flatbuffer whose root table is a `cls`."""
    return decode_table(cls, root_table(buf, identifier))
