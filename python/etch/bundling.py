"""``etch.bundle``: a program plus test cases -> ``.bpte`` bytes (``BP08``) that
``etch verify`` checks on the device.

    data = etch.bundle(program, [(x1,), (x2,)], rtol=1e-4, atol=1e-5)
    open("model.bpte", "wb").write(data)
    # etch verify model.bpte --rtol 1e-4 --atol 1e-5

A case is the method's inputs (a tuple, or one tensor) or a pair ``(inputs, expected)``.
Without expected outputs, they are computed with torch by running the exported graph (the
same computation as the model, after the exporter's passes).  Every case is also run through
the C runtime and must match within ``rtol``/``atol``
(``|etch - expected| <= atol + rtol * |expected|``); otherwise bundling fails, so that a
``.bpte`` is never written that ``etch verify`` would reject with the same tolerances
(``verify=False`` skips that run; without it, a missing ``libetch`` is an error).
The tolerances themselves are not part of the file format: pass them to ``etch verify``.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch

from . import ops as _ops
from .emit import _tensor_bytes
from .serialize import bundled as B

__all__ = ["bundle", "BundleError"]


class BundleError(RuntimeError):
    pass


def _is_array(x) -> bool:
    return isinstance(_ops.from_numpy(x), torch.Tensor)


def _as_tuple(x) -> Tuple:
    if _is_array(x):
        return (_ops.from_numpy(x),)
    return tuple(_ops.from_numpy(v) for v in x)


def _value(x) -> B.Value:
    if isinstance(x, torch.Tensor):
        t = x.detach().contiguous().cpu()
        return B.tensor_value(_ops.scalar_type(t.dtype), list(t.shape), _tensor_bytes(t))
    if isinstance(x, bool):
        return B.Value(B.Bool(x))
    if isinstance(x, int):
        return B.Value(B.Int(x))
    if isinstance(x, float):
        return B.Value(B.Double(x))
    raise TypeError("bundled value of type %s" % type(x).__name__)


def _split_case(case) -> Tuple[Tuple, Optional[Tuple]]:
    if _is_array(case):
        return _as_tuple(case), None
    if not isinstance(case, (tuple, list)):
        raise TypeError("a test case is a tensor, a tuple of inputs or a pair (inputs, "
                        "expected), not %s" % type(case).__name__)
    case = tuple(case)
    if len(case) == 2 and isinstance(case[0], (tuple, list)) and \
            (isinstance(case[1], (tuple, list)) or _is_array(case[1])):
        return _as_tuple(case[0]), _as_tuple(case[1])
    return _as_tuple(case), None


def _close(actual, expected, rtol, atol) -> Optional[str]:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return "expected a tensor, got %r" % (actual,)
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return "shape/dtype %s %s != expected %s %s" % (
                tuple(actual.shape), actual.dtype, tuple(expected.shape), expected.dtype)
        if expected.dtype.is_floating_point:
            a, e = actual.double(), expected.double()
            bad = (a - e).abs() > atol + rtol * e.abs()
            bad &= ~(a.isnan() & e.isnan())
            if bool(bad.any()):
                i = int(bad.flatten().nonzero()[0])
                return "element %d: %g vs expected %g" % (i, a.flatten()[i], e.flatten()[i])
            return None
        return None if torch.equal(actual, expected) else "values differ"
    return None if actual == expected else "%r != expected %r" % (actual, expected)


def bundle(program, cases: Sequence[Any], *, rtol: float = 1e-5, atol: float = 1e-8,
           method: str = "forward", verify=True) -> bytes:
    """The ``.bpte`` image of `program` with `cases` as test cases of `method`.

    cases: each the method's inputs (torch tensors, numpy arrays or Python scalars) or a pair
    ``(inputs, expected)``.
    verify: ``True`` (the default; ``"auto"`` means the same) runs the cases through libetch,
    and fails when no library is found (:class:`etch._lib.LibraryNotFoundError`); ``False``
    skips the run."""
    if verify not in (True, False, "auto"):
        raise ValueError("verify must be True, False or \"auto\", not %r" % (verify,))
    if getattr(program, "external_data", None) is not None:
        raise BundleError("the program keeps its constants in %s: a bundled program must carry "
                          "them (export it without external_data= to bundle it)"
                          % program.external_data)
    graph = getattr(program, "graphs", {}).get(method)
    data = program.buffer
    test_cases = []
    expected_all: List[Tuple] = []
    inputs_all: List[Tuple] = []
    for k, case in enumerate(cases):
        inputs, expected = _split_case(case)
        if expected is None:
            if graph is None:
                raise BundleError("case %d has no expected outputs and the program keeps no "
                                  "graph to compute them" % k)
            expected = tuple(graph.run(list(inputs)))
        inputs_all.append(inputs)
        expected_all.append(expected)
        test_cases.append(B.BundledMethodTestCase([_value(x) for x in inputs],
                                                  [_value(y) for y in expected]))
    if verify:
        from . import _lib
        lib, tried = _lib.lookup()
        if lib is None:
            raise _lib.LibraryNotFoundError(_lib.not_found_message(
                tried, "or bundle without running the cases (verify=False, --no-check)"))
        from . import runtime
        mod = runtime.load(data, lib)
        for k, (inputs, expected) in enumerate(zip(inputs_all, expected_all)):
            got = mod.run_method(method, *inputs)
            if len(got) != len(expected):
                raise BundleError("case %d: %d outputs, %d expected"
                                  % (k, len(got), len(expected)))
            for j, (a, e) in enumerate(zip(got, expected)):
                msg = _close(a, e, rtol, atol)
                if msg:
                    raise BundleError("case %d, output %d does not verify (rtol %g, atol %g):"
                                      " %s" % (k, j, rtol, atol, msg))
    bp = B.BundledProgram(version=B.BUNDLED_PROGRAM_VERSION,
                          method_test_suites=[B.BundledMethodTestSuite(method, test_cases)],
                          program=data)
    return B.write_bpte(bp)
