"""Memory planning: place every planned tensor storage in arena 1 so that storages whose
lifetimes overlap never overlap in bytes, using as little memory as possible.

A *storage* is one allocation: a tensor produced by an instruction, a method input or output,
a piece of mutable state, together with every elided view (alias) of it.  Its lifetime is the
closed interval of instruction indices from the first instruction that writes it (0 for inputs
and state) to the last that reads it (the last instruction for outputs, inputs and state:
inputs must survive a repeated execute() without new inputs).  Sizes are
rounded up to the alignment (16 bytes) and offsets are multiples of it.

The caller (:func:`etch.emit.emit_method`) lengthens lifetimes where the runtime fuses two
instructions into one: a float convolution/mm/addmm/bmm/linear whose result only the next
instruction, a relu/clamp/hardtanh/gelu/silu/sigmoid, reads (``etch.emit.fusible_pairs``).  The
fused kernel writes the activation's output while it still reads its own inputs, so those
inputs live to the activation and their memory is never the activation's output.  The lower
bound below is taken over the same lifetimes: it is the least memory of any plan that lets
every such pair fuse in place, not of the unfused program (mobilenet_v2: 11038720 bytes
against 10235904 unfused). It also keeps the input of each 1x1 (or stem) -> depthwise 3x3 ->
1x1 convolution block (``etch.emit.chain_blocks``) alive to the block's end, so that the
runtime can run the block as one call (mobilenet_v2's arena stays 11038720 bytes).

The packer is greedy best-fit: storages are taken largest first, and each goes into the
smallest gap (among the storages already placed that are alive at the same time) that holds
it, or above them all.  A few orderings are tried and the smallest arena wins.  The result is
compared against the lower bound: the largest total size of storages alive at any one
instruction (no plan can do better).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["Storage", "MemoryPlan", "plan_memory", "lower_bound", "align_up", "ALIGNMENT"]

ALIGNMENT = 16


def align_up(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


@dataclass
class Storage:
    key: object          # caller's handle
    size: int            # bytes (rounded up to the alignment by plan_memory)
    start: int           # first instruction (inclusive)
    end: int             # last instruction (inclusive)
    offset: int = -1

    def overlaps(self, other: "Storage") -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class MemoryPlan:
    storages: List[Storage]
    arena_size: int
    lower_bound: int
    naive_size: int      # every storage in its own memory
    alignment: int = ALIGNMENT

    @property
    def ratio(self) -> float:
        return self.arena_size / self.lower_bound if self.lower_bound else 1.0

    def offset_of(self, key) -> int:
        for s in self.storages:
            if s.key == key:
                return s.offset
        raise KeyError(key)


def lower_bound(storages: Sequence[Storage], alignment: int = ALIGNMENT) -> int:
    """The largest total of (aligned) sizes alive at one instruction."""
    events: Dict[int, int] = {}
    for s in storages:
        size = align_up(s.size, alignment)
        if size == 0:
            continue
        events[s.start] = events.get(s.start, 0) + size
        events[s.end + 1] = events.get(s.end + 1, 0) - size
    best = cur = 0
    for t in sorted(events):
        cur += events[t]
        best = max(best, cur)
    return best


def _place(order: List[Storage]) -> int:
    placed: List[Storage] = []
    total = 0
    for s in order:
        if s.size == 0:
            s.offset = 0
            continue
        busy = sorted((p for p in placed if p.overlaps(s)), key=lambda p: p.offset)
        best_off, best_gap = None, None
        cursor = 0
        for p in busy:
            gap = p.offset - cursor
            if gap >= s.size and (best_gap is None or gap < best_gap):
                best_off, best_gap = cursor, gap
            cursor = max(cursor, p.offset + p.size)
        if best_off is None:
            best_off = cursor
        s.offset = best_off
        placed.append(s)
        total = max(total, s.offset + s.size)
    return total


_ORDERS: List[Tuple[str, Callable[[Storage], tuple]]] = [
    ("size", lambda s: (-s.size, s.start, -s.end)),
    ("size*lifetime", lambda s: (-s.size * (s.end - s.start + 1), -s.size, s.start)),
    ("lifetime", lambda s: (-(s.end - s.start), -s.size, s.start)),
    ("start", lambda s: (s.start, -s.size)),
]


def plan_memory(storages: Iterable[Storage], alignment: int = ALIGNMENT) -> MemoryPlan:
    """Assign offsets (in place) and return the plan."""
    storages = list(storages)
    for s in storages:
        s.size = align_up(s.size, alignment)
        if s.end < s.start:
            raise ValueError("storage %r ends (%d) before it starts (%d)"
                             % (s.key, s.end, s.start))
    best_total, best_offsets = None, None
    for _, key in _ORDERS:
        total = _place(sorted(storages, key=key))
        if best_total is None or total < best_total:
            best_total, best_offsets = total, [s.offset for s in storages]
    for s, off in zip(storages, best_offsets or []):
        s.offset = off
    return MemoryPlan(storages, best_total or 0, lower_bound(storages, alignment),
                      sum(s.size for s in storages), alignment)


def check_plan(storages: Sequence[Storage]) -> Optional[str]:
    """A message for the first pair of storages alive together whose bytes overlap."""
    for i, a in enumerate(storages):
        if a.size == 0:
            continue
        for b in storages[i + 1:]:
            if b.size == 0 or not a.overlaps(b):
                continue
            if a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                return "%r [%d,+%d) and %r [%d,+%d) overlap while both alive" % (
                    a.key, a.offset, a.size, b.key, b.offset, b.size)
    return None
