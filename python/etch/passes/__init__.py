"""Graph passes over :class:`etch.graph.ExportedGraph`, one per module, each with its own test.

Every pass is a function ``run(eg) -> int`` that rewrites the graph in place, keeps it runnable
with torch, and returns how many rewrites it made.  :func:`optimize` runs the standard
pipeline:

1. ``normalize``      rewrite capture artefacts into the portable operator set
2. ``dce``            drop nodes whose results nobody uses
3. ``constant_fold``  evaluate nodes whose inputs are all constants
4. ``bn_fold``        fold inference batch norm into the preceding convolution / linear
5. ``fuse_bias``      fold a bias add into convolution / mm (-> addmm)
6. ``noop``           drop operations that return their input unchanged
7. ``views``          turn views and redundant copies into aliases of their source's memory
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from ..graph import ExportedGraph
from . import bn_fold, constant_fold, dce, fuse_bias, noop, normalize, views
from ._util import bind_args

__all__ = ["optimize", "PIPELINE", "bind_args"]

PIPELINE: List[Tuple[str, Callable[[ExportedGraph], int]]] = [
    ("normalize", normalize.run),
    ("dce", dce.run),
    ("constant_fold", constant_fold.run),
    ("bn_fold", bn_fold.run),
    ("fuse_bias", fuse_bias.run),
    ("constant_fold", constant_fold.run),
    ("noop", noop.run),
    ("views", views.run),
    ("dce", dce.run),
]


def optimize(eg: ExportedGraph, progress: Optional[Callable[[str], None]] = None,
             skip: Tuple[str, ...] = ()) -> Dict[str, int]:
    """Run the standard pipeline; returns rewrites per pass."""
    counts: Dict[str, int] = {}
    eg.propagate()
    for name, fn in PIPELINE:
        if name in skip:
            continue
        if progress:
            progress(name)
        n = fn(eg)
        counts[name] = counts.get(name, 0) + n
        if n:
            eg.propagate()
    eg.graph.lint()
    eg.prune()
    return counts
