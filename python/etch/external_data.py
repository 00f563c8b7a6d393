"""Constant weights in a ``.ptd`` beside the program (ExecuTorch's external constants,
docs/pte-format.md §4.1 rule 1 and §8).

``etch.export(model, x, external_data="weights.ptd")`` marks every constant tensor of the
program ``EXTERNAL`` under its key (the parameter's or buffer's fully qualified name, such as
``fc.weight``; ``_etch_constant.<hash>`` for a constant the exporter computed), and
``Program.save("model.pte")`` writes the ``.pte`` (no constant bytes) and the ``.ptd`` beside it.

Several programs can share one ``.ptd``.  Keys are stable, so programs exported from the same
model name the same tensor alike, and:

* ``Program.save`` *merges* into an existing ``.ptd``: entries it already holds must be equal
  (dtype, shape and bytes) to the program's, new ones are added, the others are kept.  A key
  with other contents is an error (``ValueError``), never a silent overwrite that would break
  another program using the file; pass ``overwrite_data=True`` (or delete the file) to start
  afresh, e.g. after retraining.
* :func:`save_external_data` writes one ``.ptd`` for several programs at once (checking that
  they agree), replacing the file.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Sequence

from .emit import ExternalConstant
from .serialize import ptd as _ptd
from .serialize.schema import ScalarType

__all__ = ["save_external_data", "external_entries", "serialize_external"]


def _layout(c: ExternalConstant) -> _ptd.TensorLayout:
    return _ptd.TensorLayout(ScalarType(c.scalar_type), list(c.sizes), list(range(len(c.sizes))))


def _same(layout, data: bytes, c: ExternalConstant) -> bool:
    return layout is not None and int(layout.scalar_type) == c.scalar_type and \
        list(layout.sizes) == list(c.sizes) and \
        list(layout.dim_order) == list(range(len(c.sizes))) and bytes(data) == c.data


def external_entries(programs: Iterable) -> List[ExternalConstant]:
    """The external constants of `programs` (each key once), checking that programs sharing a
    key agree on its contents."""
    out: Dict[str, ExternalConstant] = {}
    for p in programs:
        for c in p.external_constants:
            have = out.get(c.key)
            if have is None:
                out[c.key] = c
            elif have != c:
                raise ValueError("external constant %r differs between the programs (dtype %s "
                                 "shape %s against %s %s, or other values): they cannot share "
                                 "one .ptd" % (c.key, ScalarType(have.scalar_type).name,
                                               list(have.sizes), ScalarType(c.scalar_type).name,
                                               list(c.sizes)))
    return list(out.values())


def serialize_external(constants: Sequence[ExternalConstant],
                       existing: Sequence[_ptd.PtdEntry] = ()) -> bytes:
    """A .ptd (current FlatTensor layout) holding `existing` entries then `constants`."""
    entries = list(existing) + [_ptd.PtdEntry(c.key, c.data, _layout(c)) for c in constants]
    return _ptd.serialize_ptd(entries)


def _read_existing(path: str) -> List[_ptd.PtdEntry]:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return _ptd.unpack_ptd(_ptd.read_ptd(raw))
    except _ptd.PteFormatError as e:
        raise ValueError("%s exists and is not a .ptd this writer can extend (%s); delete it or "
                         "pass overwrite_data=True" % (path, e)) from None


def save_external_data(path, programs: Sequence, *, merge: bool = False) -> None:
    """Write one .ptd with the external constants of every program in `programs`.

    merge=False replaces the file; merge=True keeps an existing file's entries, checks the
    ones the programs also have (same dtype, shape and bytes, else ``ValueError``) and adds
    the rest (what ``Program.save`` does)."""
    path = os.fspath(path)
    if not programs:
        raise ValueError("save_external_data: no programs given")
    constants = external_entries(programs)
    existing: List[_ptd.PtdEntry] = []
    if merge and os.path.exists(path):
        existing = _read_existing(path)
        by_key = {e.key: e for e in existing}
        new = []
        for c in constants:
            e = by_key.get(c.key)
            if e is None:
                new.append(c)
            elif not _same(e.layout, e.data, c):
                raise ValueError(
                    "%s already holds %r with other contents (another model's weights, or "
                    "these before retraining); delete the file or pass overwrite_data=True "
                    "to replace it" % (path, c.key))
        if not new:
            return
        constants = new
    data = serialize_external(constants, existing)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
