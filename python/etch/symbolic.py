"""Symbolic sizes for dynamic shapes.

torch 1.13's symbolic tracing cannot trace most models, so dynamic dimensions are recovered by
tracing several times with different sizes (:mod:`etch.capture`) and fitting every size-
dependent integer as a multilinear polynomial of the dynamic dimensions with integer
coefficients::

    f(s) = sum over subsets S of the symbols of  a_S * prod_{k in S} s_k

(``a*T + b``, ``B*T``, ...).  With k symbols the 2**k corner traces determine the polynomial
exactly; one extra trace checks it.  Values that are not such polynomials (the length after a
strided convolution, say) stay :data:`UNKNOWN`: fine for tensor shapes (kernels compute them),
and usable once per ``view`` size list as ``-1``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

__all__ = ["Symbol", "SymExpr", "UNKNOWN", "fit", "evaluate", "has_sym", "subst"]


@dataclass(frozen=True)
class Symbol:
    """Dynamic dimension `dim` of method input `input`, at most `max`."""
    index: int
    input: int
    dim: int
    max: int

    def __repr__(self):
        return "s%d" % self.index


class _Unknown:
    def __repr__(self):
        return "?"

    def __reduce__(self):
        return (_unknown, ())


def _unknown():
    return UNKNOWN


UNKNOWN = _Unknown()


class SymExpr:
    """An integer polynomial of symbols: {frozenset of symbol indices: coefficient}."""

    __slots__ = ("terms",)

    def __init__(self, terms: Dict[FrozenSet[int], int]):
        self.terms = {k: int(v) for k, v in terms.items() if v != 0}

    @classmethod
    def symbol(cls, k: int) -> "SymExpr":
        return cls({frozenset([k]): 1})

    @property
    def is_constant(self) -> bool:
        return all(not k for k in self.terms)

    @property
    def constant(self) -> int:
        return self.terms.get(frozenset(), 0)

    def evaluate(self, env: Sequence[int]) -> int:
        total = 0
        for k, c in self.terms.items():
            p = c
            for s in k:
                p *= env[s]
            total += p
        return total

    def key(self) -> Tuple:
        return tuple(sorted((tuple(sorted(k)), c) for k, c in self.terms.items()))

    def __eq__(self, other):
        return isinstance(other, SymExpr) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        if not self.terms:
            return "0"
        parts = []
        for k, c in sorted(self.terms.items(), key=lambda kv: (-len(kv[0]), sorted(kv[0]))):
            mono = "*".join("s%d" % s for s in sorted(k))
            if not mono:
                parts.append(str(c))
            elif c == 1:
                parts.append(mono)
            else:
                parts.append("%d*%s" % (c, mono))
        return "(" + " + ".join(parts) + ")"


def fit(points: Sequence[Sequence[int]], values: Sequence[int], n_symbols: int,
        corners: Sequence[int]) -> Union[int, SymExpr, _Unknown]:
    """The polynomial through (points[i], values[i]).  `corners` are the indices of the 2**k
    corner points; every point is checked.  Returns an int when constant."""
    if all(v == values[0] for v in values):
        return int(values[0])
    subsets = [frozenset(c) for r in range(n_symbols + 1)
               for c in itertools.combinations(range(n_symbols), r)]
    # Solve the square system on the corners with exact fractions.
    rows = []
    for i in corners:
        p = points[i]
        row = []
        for S in subsets:
            m = 1
            for s in S:
                m *= p[s]
            row.append(Fraction(m))
        rows.append(row + [Fraction(values[i])])
    sol = _solve(rows)
    if sol is None or any(x.denominator != 1 for x in sol):
        return UNKNOWN
    expr = SymExpr({S: int(x) for S, x in zip(subsets, sol)})
    for p, v in zip(points, values):
        if expr.evaluate(p) != v:
            return UNKNOWN
    return expr


def _solve(rows: List[List[Fraction]]) -> Optional[List[Fraction]]:
    n = len(rows)
    a = [r[:] for r in rows]
    for col in range(n):
        piv = next((r for r in range(col, n) if a[r][col] != 0), None)
        if piv is None:
            return None
        a[col], a[piv] = a[piv], a[col]
        for r in range(n):
            if r != col and a[r][col] != 0:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def evaluate(x, env: Sequence[int]):
    """x with every SymExpr replaced by its value (lists/tuples recursively); UNKNOWN
    becomes -1."""
    if isinstance(x, SymExpr):
        return x.evaluate(env)
    if x is UNKNOWN:
        return -1          # only meaningful in view/reshape sizes (inferred dimension)
    if isinstance(x, list):
        return [evaluate(v, env) for v in x]
    if isinstance(x, tuple):
        return tuple(evaluate(v, env) for v in x)
    if isinstance(x, dict):
        return {k: evaluate(v, env) for k, v in x.items()}
    return x


def has_sym(x) -> bool:
    if isinstance(x, (SymExpr, _Unknown)):
        return True
    if isinstance(x, (list, tuple)):
        return any(has_sym(v) for v in x)
    if isinstance(x, dict):
        return any(has_sym(v) for v in x.values())
    return False


def subst(x, fn):
    """Apply fn to every leaf of nested lists/tuples."""
    if isinstance(x, list):
        return [subst(v, fn) for v in x]
    if isinstance(x, tuple):
        return tuple(subst(v, fn) for v in x)
    return fn(x)
