#!/usr/bin/python3
"""Golden cases for the portable kernels, computed with PyTorch.

Usage: /usr/bin/python3 gen_golden.py OUT_FILE

Every case is one kernel call: the operator name, its arguments in the ExecuTorch calling
convention (schema order including out arguments, plus the return slot), and what must happen:
either the call succeeds and each out tensor / result value equals torch's, or it fails (torch
raised for the same arguments, or etch's rules forbid it, e.g. resizing a static out tensor).
Everything is seeded, so the file is byte-for-byte reproducible.

File format (little endian):

  file    := "EKG1" u32:ncases case*
  case    := str:op str:label u8:expect_fail f64:rtol u32:nargs arg*
             (rtol 0 = the default tolerance of the out dtype; see test_kernels.c)
  str     := u16:len bytes
  arg     := u8:kind payload
    0 NONE
    1 TENSOR (input)   u8:dtype u8:dim i64[dim]:sizes u8[dim]:dim_order u64:nbytes bytes
                       (bytes in memory order: the tensor permuted by dim_order, row-major)
    2 TENSOR (out)     u8:dtype u8:dim i64[dim]:sizes u8[dim]:dim_order u8:dynamism
                       i64:capacity u8:has_expected
                       [i64[dim]:expected_sizes u64:nbytes bytes]   (memory order of dim_order)
    3 INT    i64        4 DOUBLE f64        5 BOOL u8
    6 INT_LIST u32:n i64[n]                  7 STRING str
    8 REF u32:index     (the same value as an earlier argument: the return slot of out variants)
    9 TENSOR_LIST u32:n u32[n]:indices       (of earlier arguments)
   10 RESULT u8:tag [i64 | f64 | u8]         (slot the kernel overwrites; tag 0 = no check)
   11 DOUBLE_LIST u32:n f64[n]               12 BOOL_LIST u32:n u8[n]
   13 OPTIONAL_TENSOR_LIST u32:n i32[n]      (indices of earlier arguments; -1 = None)
   14 HIDDEN arg              (a slot that is not passed to the kernel, only referred to by
                               later arguments: the tensors of a Tensor[] out list)
   15 TENSOR (in/out)    the payload of 2, then u64:nbytes bytes: its contents before the call
                         (memory order; for in-place kernels, checked like an out afterwards)

More cases live in modules named cases_<area>.py beside this script: each defines
generate(g), called with this module, and adds cases through g.W.case(...).

dtype numbers are c10::ScalarType's.
"""
import importlib
import math
import os
import struct
import sys

import numpy as np
import torch

torch.manual_seed(1234)
RNG = np.random.default_rng(1234)

DT = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
    torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.bfloat16: 15,
}
ALL = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
       torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]

# ---- values -------------------------------------------------------------------------------


class In:
    def __init__(self, t, order=None):
        self.t = t
        self.order = list(order) if order is not None else list(range(t.dim()))


class Out:
    """An out tensor. expected=None: the case must fail (or the value is not checked).
    shape: the tensor's shape before the call (default: the expected shape);
    dynamic: bounded-dynamic with `capacity` elements (default: numel of shape)."""

    def __init__(self, dtype, expected=None, shape=None, order=None, dynamic=False, capacity=None):
        self.dtype = dtype
        self.expected = expected
        if shape is None:
            shape = list(expected.shape) if expected is not None else [0]
        self.shape = list(shape)
        self.order = list(order) if order is not None else list(range(len(self.shape)))
        self.dynamic = dynamic
        self.capacity = capacity if capacity is not None else int(np.prod(self.shape, dtype=np.int64))


class InOut(Out):
    """A tensor an in-place kernel reads and writes: `t` before the call, `expected` after
    (None: the call must fail). Static, of t's shape."""

    def __init__(self, t, expected=None, order=None):
        super().__init__(t.dtype, expected, shape=list(t.shape), order=order)
        self.t = t


class Int:
    def __init__(self, v):
        self.v = int(v)


class Dbl:
    def __init__(self, v):
        self.v = float(v)


class Bool:
    def __init__(self, v):
        self.v = bool(v)


class IntList:
    def __init__(self, v):
        self.v = [int(x) for x in v]


class Str:
    def __init__(self, v):
        self.v = v


class Ref:
    def __init__(self, i):
        self.i = i


class TList:
    def __init__(self, idx):
        self.idx = list(idx)


class Result:
    def __init__(self, v=None):
        self.v = v


class DblList:
    def __init__(self, v):
        self.v = [float(x) for x in v]


class BoolList:
    def __init__(self, v):
        self.v = [bool(x) for x in v]


class OptTList:
    """Indices of earlier arguments; None for an absent tensor."""

    def __init__(self, idx):
        self.idx = [-1 if i is None else int(i) for i in idx]


class Hidden:
    """A value the kernel does not receive as an argument of its own, e.g. an out tensor that
    only a later TList (a Tensor[] out argument) refers to; indices still count it."""

    def __init__(self, a):
        self.a = a


NONE = None

# ---- writer ---------------------------------------------------------------------------------


def mem_bytes(t, order):
    t = t.detach()
    if t.dim() > 0:
        t = t.permute(*order)
    t = t.contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def dtype_code(a, dtype):
    """The ScalarType number written for an In/Out: its `code` attribute when set (dtypes
    torch 1.13 lacks, e.g. UInt16 = 27 carried in an int16 tensor's bytes), else dtype's."""
    code = getattr(a, "code", None)
    return DT[dtype] if code is None else code


def s_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


class Writer:
    def __init__(self):
        self.cases = []
        self.labels = set()
        # (op, dtypes of the input tensors — of the outs when there is no input —, expect_fail): op_dtype_table.py reads it
        self.index = []

    def case(self, op, label, args, fail=False, rtol=0.0):
        assert label not in self.labels, label
        if rtol == 0.0 and op in EXACT_OPS:
            rtol = EXACT_RTOL
        self.labels.add(label)
        b = bytearray()
        b += s_str(op) + s_str(label) + struct.pack("<BdI", 1 if fail else 0, rtol, len(args))
        for a in args:
            b += self.arg(a)
        self.cases.append(bytes(b))
        ins = [a.a if isinstance(a, Hidden) else a for a in args]  # hidden inputs count too
        # (a ScalarType number instead where the case carries a dtype torch lacks: UInt16)
        dtypes = [getattr(a, "code", None) or a.t.dtype
                  for a in ins if isinstance(a, (In, InOut))]
        if not dtypes:  # creation ops (full, arange, ...): the out tensor's dtype
            dtypes = [getattr(a, "code", None) or a.dtype for a in ins if isinstance(a, Out)]
        self.index.append((op, dtypes, bool(fail)))

    def arg(self, a):
        if a is None:
            return struct.pack("<B", 0)
        if isinstance(a, In):
            t = a.t
            data = mem_bytes(t, a.order)
            return (struct.pack("<BBB", 1, dtype_code(a, t.dtype), t.dim()) +
                    struct.pack("<%dq" % t.dim(), *t.shape) + bytes(a.order) +
                    struct.pack("<Q", len(data)) + data)
        if isinstance(a, InOut):
            b = bytearray(self.arg(Out(a.dtype, a.expected, shape=a.shape, order=a.order)))
            b[0] = 15
            data = mem_bytes(a.t, a.order)
            return bytes(b) + struct.pack("<Q", len(data)) + data
        if isinstance(a, Out):
            dim = len(a.shape)
            b = (struct.pack("<BBB", 2, dtype_code(a, a.dtype), dim) +
                 struct.pack("<%dq" % dim, *a.shape) +
                 bytes(a.order) + struct.pack("<Bq", 1 if a.dynamic else 0, a.capacity))
            if a.expected is None:
                return b + struct.pack("<B", 0)
            e = a.expected
            assert e.dtype == a.dtype and e.dim() == dim, (e.dtype, a.dtype, e.shape, a.shape)
            data = mem_bytes(e, a.order)
            return (b + struct.pack("<B", 1) + struct.pack("<%dq" % dim, *e.shape) +
                    struct.pack("<Q", len(data)) + data)
        if isinstance(a, Int):
            return struct.pack("<Bq", 3, a.v)
        if isinstance(a, Dbl):
            return struct.pack("<Bd", 4, a.v)
        if isinstance(a, Bool):
            return struct.pack("<BB", 5, a.v)
        if isinstance(a, IntList):
            return struct.pack("<BI", 6, len(a.v)) + struct.pack("<%dq" % len(a.v), *a.v)
        if isinstance(a, Str):
            return struct.pack("<B", 7) + s_str(a.v)
        if isinstance(a, Ref):
            return struct.pack("<BI", 8, a.i)
        if isinstance(a, TList):
            return struct.pack("<BI", 9, len(a.idx)) + struct.pack("<%dI" % len(a.idx), *a.idx)
        if isinstance(a, Result):
            v = a.v
            if v is None:
                return struct.pack("<BB", 10, 0)
            if isinstance(v, bool):
                return struct.pack("<BBB", 10, 5, v)
            if isinstance(v, int):
                return struct.pack("<BBq", 10, 4, v)
            return struct.pack("<BBd", 10, 3, v)
        if isinstance(a, DblList):
            return struct.pack("<BI", 11, len(a.v)) + struct.pack("<%dd" % len(a.v), *a.v)
        if isinstance(a, BoolList):
            return struct.pack("<BI", 12, len(a.v)) + bytes(int(x) for x in a.v)
        if isinstance(a, Hidden):
            assert not isinstance(a.a, Hidden)
            return struct.pack("<B", 14) + self.arg(a.a)
        if isinstance(a, OptTList):
            return struct.pack("<BI", 13, len(a.idx)) + struct.pack("<%di" % len(a.idx), *a.idx)
        raise TypeError(a)

    def save(self, path):
        with open(path, "wb") as f:
            f.write(b"EKG1" + struct.pack("<I", len(self.cases)))
            for c in self.cases:
                f.write(c)


W = Writer()
EXACT_RTOL = 1e-300  # "exact": any difference fails
# Ops whose results are exactly determined by IEEE rules (copies, conversions, selections):
# compared bit for bit. Accumulating ops (mm, convolution, sum) keep the dtype's tolerance.
EXACT_OPS = {"aten::relu.out", "aten::_to_copy.out", "aten::clone.out", "aten::permute_copy.out",
             "aten::view_copy.out", "aten::max_pool2d_with_indices.out",
             "dim_order_ops::_clone_dim_order.out", "dim_order_ops::_to_dim_order_copy.out"}

# ---- data -----------------------------------------------------------------------------------


def rand(shape, dtype, lo=None, hi=None, special=False):
    """Random values spanning each dtype's interesting range (ints wrap-around included)."""
    shape = list(shape)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == torch.bool:
        return torch.from_numpy(RNG.integers(0, 2, n).astype(np.bool_)).reshape(shape)
    if dtype in INTS:
        info = torch.iinfo(dtype)
        l = info.min if lo is None else lo
        h = info.max if hi is None else hi
        if dtype == torch.int64 and lo is None:
            l, h = -(1 << 40), 1 << 40
        v = RNG.integers(l, h, n, endpoint=True, dtype=np.int64)
        return torch.from_numpy(v).reshape(shape).to(dtype)
    scale = 3.0 if hi is None else hi
    v = torch.from_numpy(RNG.standard_normal(n) * scale).reshape(shape)
    if special and n >= 4:
        flat = v.reshape(-1)
        flat[0] = float("nan")
        flat[1] = float("inf")
        flat[2] = float("-inf")
        flat[3] = -0.0
    return v.to(dtype)


def torch_or_fail(fn):
    try:
        return fn(), None
    except Exception as e:  # torch rejects these arguments: etch must fail too
        return None, str(e)


def orders(dim):
    """Dim orders worth testing for a rank: contiguous, channels-last-like, reversed."""
    r = [list(range(dim))]
    if dim == 4:
        r.append([0, 2, 3, 1])
    if dim >= 2:
        r.append(list(reversed(range(dim))))
    return r


# ---- elementwise arithmetic -------------------------------------------------------------------

# Reference semantics are those of torch's Python API (torch.add(a, b, alpha=, out=)): a Python
# number becomes a wrapped scalar and the Tensor `.out` overload runs, so the out dtype must be
# a safe cast of the result. (torch.ops.aten.*.Scalar_out in torch 1.13 would instead accept any
# out dtype through copy_, and turns a Python bool into an Int; etch follows the Python API.)
BINOPS = {"add": (torch.add, True), "sub": (torch.sub, True), "mul": (torch.mul, False),
          "div": (torch.div, False)}


def binary_case(name, a, b, out_dtype=None, alpha=None, label=None, a_order=None, b_order=None,
                out_order=None, out_kw=None, force_fail=False):
    fn, has_alpha = BINOPS[name]
    scalar = not isinstance(b, torch.Tensor)
    kw = {}
    if has_alpha and alpha is not None:
        kw["alpha"] = alpha
    if out_dtype is None:
        probe, _ = torch_or_fail(lambda: fn(a, b))
        out_dtype = probe.dtype if probe is not None else torch.float32
    res, err = torch_or_fail(lambda: fn(a, b, **kw, out=torch.empty(0, dtype=out_dtype)))
    aname = "aten::%s.%s" % (name, "Scalar_out" if scalar else "out")
    args = [In(a, a_order)]
    args.append(In(b, b_order) if not scalar else scalar_value(b))
    if has_alpha:
        args.append(scalar_value(alpha if alpha is not None else 1))
    okw = dict(out_kw or {})
    if res is not None and not force_fail:
        out = Out(out_dtype, res, order=out_order, **okw)
    else:
        shape = okw.pop("shape", list(res.shape) if res is not None else [0])
        out = Out(out_dtype, None, shape=shape, order=out_order, **okw)
    args += [out, Ref(len(args))]
    # IEEE arithmetic makes these bit-exact, except a + alpha*b with alpha != 1, where torch
    # may or may not fuse the multiply-add depending on the CPU
    exact = alpha is None or alpha == 1 or isinstance(alpha, bool)
    W.case(aname, label, args, fail=(res is None or force_fail), rtol=EXACT_RTOL if exact else 0.0)


def scalar_value(v):
    if isinstance(v, bool):
        return Bool(v)
    if isinstance(v, int):
        return Int(v)
    return Dbl(v)


def gen_binary():
    n = 0
    # every dtype pair, with broadcasting
    for name in BINOPS:
        for da in ALL:
            for db in ALL:
                a = rand([2, 3], da)
                b = rand([3], db)
                if name == "div" and db in INTS + [torch.bool]:
                    b = torch.where(b == 0, torch.ones_like(b), b)
                binary_case(name, a, b, label="%s %s+%s" % (name, da, db))
    # every out dtype for a few input pairs (torch decides which casts are allowed)
    pairs = [(torch.int32, torch.int32), (torch.float32, torch.float32), (torch.bool, torch.bool),
             (torch.uint8, torch.int8), (torch.float16, torch.bfloat16), (torch.int64, torch.float64)]
    for name in BINOPS:
        for da, db in pairs:
            for do in ALL:
                a = rand([5], da, lo=-20 if da in INTS and da != torch.uint8 else None, hi=20 if da in INTS else None)
                b = rand([5], db, lo=1 if db in INTS else None, hi=20 if db in INTS else None)
                binary_case(name, a, b, out_dtype=do, label="%s out %s %s->%s" % (name, da, db, do))
    # broadcasting shapes, odd sizes, empty, zero-dim, high rank
    shapes = [([], []), ([5], []), ([], [4]), ([3, 1], [1, 4]), ([2, 3, 4], [4]), ([2, 1, 4], [3, 1]),
              ([7, 1, 5], [1, 6, 1]), ([0, 3], [3]), ([0], [1]), ([1], [0]), ([2, 0, 3], [1, 1, 3]),
              ([1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2], [2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1]),
              ([3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5], [5]),
              ([33, 65], [65]), ([130], [130]), ([9, 300], [9, 1])]
    for name in BINOPS:
        for i, (sa, sb) in enumerate(shapes):
            for dt in [torch.float32, torch.int32]:
                a = rand(sa, dt)
                b = rand(sb, dt, lo=1 if dt in INTS else None, hi=100 if dt in INTS else None)
                binary_case(name, a, b, label="%s bcast%d %s" % (name, i, dt))
    # incompatible shapes
    for name in BINOPS:
        for i, (sa, sb) in enumerate([([3], [4]), ([2, 3], [3, 2]), ([0], [2])]):
            a = rand(sa, torch.float32)
            b = rand(sb, torch.float32)
            binary_case(name, a, b, out_dtype=torch.float32, label="%s badshape%d" % (name, i))
    # zero-dim tensors take part in promotion only by category
    zd = [(torch.int32, [3], torch.float64, []), (torch.float32, [3], torch.float64, []),
          (torch.int8, [3], torch.int64, []), (torch.bool, [3], torch.int32, []),
          (torch.float16, [3], torch.float32, []), (torch.uint8, [], torch.int8, [])]
    for name in BINOPS:
        for i, (da, sa, db, sb) in enumerate(zd):
            a = rand(sa, da, lo=1 if da in INTS else None, hi=9 if da in INTS else None)
            b = rand(sb, db, lo=1 if db in INTS else None, hi=9 if db in INTS else None)
            binary_case(name, a, b, label="%s zerodim%d" % (name, i))
            binary_case(name, b, a, label="%s zerodim%d rev" % (name, i))
    # special values (nan, inf, -0) and division by zero
    for name in BINOPS:
        for dt in FLOATS:
            a = rand([4, 4], dt, special=True)
            b = rand([4, 4], dt, special=True)
            b.reshape(-1)[5] = 0
            binary_case(name, a, b, label="%s special %s" % (name, dt))
        a = rand([6], torch.int32, lo=-5, hi=5)
        b = torch.tensor([0, 1, -1, 0, 2, -3], dtype=torch.int32)
        if name == "div":
            binary_case(name, a, b, label="div int by zero")
    # int64 beyond 2^53 converts to Float in one rounding
    big = torch.tensor([(1 << 62) + (1 << 38) + 1, -(1 << 60) - (1 << 36) - 1, (1 << 53) + 1], dtype=torch.int64)
    for name in BINOPS:
        binary_case(name, big, torch.tensor([1.5, 2.0, 0.25]), label="%s big int64" % name)
        binary_case(name, big, torch.tensor([1.5, 2.0, 0.25], dtype=torch.float16), label="%s big int64 half" % name)
    # alpha
    for name in ["add", "sub"]:
        for dt, alpha in [(torch.float32, 0.5), (torch.float32, 3), (torch.int32, 2), (torch.int32, 0.5),
                          (torch.float64, -1.25), (torch.bool, True), (torch.int8, -3), (torch.float32, True),
                          (torch.int64, True), (torch.bfloat16, 0.1), (torch.float16, 2.5)]:
            a = rand([3, 4], dt)
            b = rand([4], dt)
            binary_case(name, a, b, alpha=alpha, label="%s alpha %s %r" % (name, dt, alpha))
    # Scalar overloads: every tensor dtype with Int, Double, Bool scalars
    for name in BINOPS:
        for dt in ALL:
            for s in [3, -2, 2.5, 0.1, True, False, 0]:
                if name == "div" and s in (0, False) and not isinstance(s, float):
                    continue
                a = rand([2, 5], dt)
                kw = {}
                binary_case(name, a, s, label="%s scalar %s %r" % (name, dt, s), **kw)
        for s in [2, 0.5]:
            a = rand([3], torch.int32)
            binary_case(name, a, s, out_dtype=torch.float64, label="%s scalar out f64 %r" % (name, s))
            binary_case(name, a, s, out_dtype=torch.int16, label="%s scalar out i16 %r" % (name, s))
    for name in ["add", "sub"]:
        for dt, alpha in [(torch.float32, 2), (torch.int32, 3), (torch.int32, 1.5)]:
            binary_case(name, rand([4], dt), 7, alpha=alpha, label="%s scalar alpha %s %r" % (name, dt, alpha))
    # dim orders (channels last, reversed), on inputs and outputs
    for name in BINOPS:
        for ao in orders(4):
            for oo in orders(4):
                a = rand([2, 3, 4, 5], torch.float32)
                b = rand([2, 3, 4, 5], torch.float32)
                binary_case(name, a, b, a_order=ao, b_order=orders(4)[1], out_order=oo,
                            label="%s order %s %s" % (name, ao, oo))
        a = rand([2, 3, 4, 5], torch.int16)
        b = rand([3, 1, 1], torch.int16)
        binary_case(name, a, b, a_order=[0, 2, 3, 1], out_order=[0, 2, 3, 1], b_order=[2, 0, 1],
                    label="%s order bcast" % name)
    # out tensors: dynamic with room, dynamic without room, static with the wrong shape
    for name in BINOPS:
        a = rand([3, 5], torch.float32)
        b = rand([5], torch.float32)
        binary_case(name, a, b, out_kw=dict(shape=[4, 8], dynamic=True, capacity=32),
                    label="%s dynamic out" % name)
        binary_case(name, a, b, out_kw=dict(shape=[4, 8], dynamic=True, capacity=32), out_order=[1, 0],
                    label="%s dynamic out t" % name)
        binary_case(name, a, b, out_kw=dict(shape=[2, 2], dynamic=True, capacity=4),
                    label="%s dynamic out too small" % name, force_fail=True)
        binary_case(name, a, b, out_kw=dict(shape=[5, 3]), label="%s static out wrong shape" % name,
                    force_fail=True)
        binary_case(name, a, b, out_kw=dict(shape=[3, 5, 1], dynamic=True, capacity=100),
                    label="%s out wrong rank" % name, force_fail=True)


def gen_div_modes():
    for mode in ["trunc", "floor", None]:
        for dt in [torch.int8, torch.int32, torch.int64, torch.uint8, torch.float32, torch.float64,
                   torch.float16, torch.bfloat16, torch.bool]:
            a = rand([4, 6], dt)
            b = rand([6], dt)
            if dt in INTS:
                b = torch.where(b == 0, torch.ones_like(b), b)
            if dt == torch.int32:
                a = torch.cat([a, torch.tensor([[-7, 7, -7, 7, torch.iinfo(dt).min, 0]], dtype=dt)])  # no MIN / -1: torch traps
                b = torch.tensor([2, -2, -2, 2, 1, 3], dtype=dt)
            for scalar in [None, 3, -2.5]:
                if scalar is not None and dt == torch.bool:
                    continue
                other = b if scalar is None else scalar
                probe, _ = torch_or_fail(lambda: torch.div(a, other, rounding_mode=mode))
                odt = probe.dtype if probe is not None else dt
                name = "aten::div.out_mode" if scalar is None else "aten::div.Scalar_mode_out"
                res, _ = torch_or_fail(lambda: torch.div(a, other, rounding_mode=mode, out=torch.empty(0, dtype=odt)))
                args = [In(a), In(b) if scalar is None else scalar_value(scalar),
                        Str(mode) if mode else None,
                        Out(odt, res, shape=None if res is not None else [4, 6]), Ref(3)]
                W.case(name, "div mode %s %s %r" % (mode, dt, scalar), args, fail=res is None)
    for dt in [torch.int32, torch.int64]:
        a = rand([3], dt)
        b = torch.tensor([1, 0, 2], dtype=dt)
        res, _ = torch_or_fail(lambda: torch.div(a, b, rounding_mode="floor"))
        assert res is None
        W.case("aten::div.out_mode", "div floor by zero %s" % dt,
               [In(a), In(b), Str("floor"), Out(dt, None, shape=[3]), Ref(3)], fail=True)
    W.case("aten::div.out_mode", "div bad mode",
           [In(rand([3], torch.float32)), In(rand([3], torch.float32)), Str("round"),
            Out(torch.float32, None, shape=[3]), Ref(3)], fail=True)


# ---- relu and copies ------------------------------------------------------------------------


def gen_relu():
    for dt in ALL:
        a = rand([3, 7], dt, special=dt in FLOATS)
        if dt == torch.float16:  # torch 1.13 has no Half relu on CPU; relu is exact in float
            res = torch.relu(a.float()).half()
        else:
            res, _ = torch_or_fail(lambda: torch.ops.aten.relu.out(a, out=torch.empty(0, dtype=dt)))
        W.case("aten::relu.out", "relu %s" % dt, [In(a), Out(dt, res, shape=[3, 7]), Ref(1)], fail=res is None)
    for od in [torch.float64, torch.int32, torch.float16]:
        a = rand([5], torch.float32)
        res = torch.ops.aten.relu.out(a, out=torch.empty(0, dtype=od))
        W.case("aten::relu.out", "relu f32 -> %s" % od, [In(a), Out(od, res), Ref(1)])
    for o in orders(4):
        a = rand([2, 3, 4, 5], torch.float32)
        W.case("aten::relu.out", "relu order %s" % o, [In(a, [0, 2, 3, 1]), Out(torch.float32, torch.relu(a), order=o), Ref(1)])
    for shape in [[], [0], [0, 4], [1000]]:
        a = rand(shape, torch.float32)
        W.case("aten::relu.out", "relu shape %s" % shape, [In(a), Out(torch.float32, torch.relu(a)), Ref(1)])
    a = rand([4, 4], torch.float32)
    W.case("aten::relu.out", "relu dynamic", [In(a), Out(torch.float32, torch.relu(a), shape=[1, 20], dynamic=True, capacity=20), Ref(1)])
    W.case("aten::relu.out", "relu static wrong", [In(a), Out(torch.float32, None, shape=[16]), Ref(1)], fail=True)


def gen_conversions():
    # every dtype pair through _to_copy and clone; values chosen inside every target's range
    for src in ALL:
        for dst in ALL:
            if src in FLOATS:
                a = (torch.from_numpy(RNG.uniform(-120, 120, 24)).to(src)).reshape(4, 6)
                a.reshape(-1)[0] = 0.0
                a.reshape(-1)[1] = 0.5
                a.reshape(-1)[2] = -0.75
                if dst not in INTS and dst != torch.bool:
                    a.reshape(-1)[3] = float("nan")
                    a.reshape(-1)[4] = float("inf")
                    a.reshape(-1)[5] = 65519.0 if src != torch.float16 else 1.0
            else:
                a = rand([4, 6], src)
            res = torch.ops.aten._to_copy.out(a, out=torch.empty(0, dtype=dst))
            W.case("aten::_to_copy.out", "to_copy %s->%s" % (src, dst),
                   [In(a), Bool(False), None, Out(dst, res), Ref(3)])
            res2 = torch.ops.aten.clone.out(a, out=torch.empty(0, dtype=dst))
            W.case("aten::clone.out", "clone %s->%s" % (src, dst), [In(a), None, Out(dst, res2), Ref(2)])
    # float rounding to Half/BFloat16 (ties, subnormals, overflow)
    vals = torch.tensor([1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 65504.0, 65519.99, 65520.0, 1e-8, 2 ** -24,
                         3 * 2 ** -25, 2 ** -25, 6.0e-5, -6.1e-5, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.4e38,
                         -3.39e38, 1e-40, float("nan"), float("-inf")], dtype=torch.float64)
    for src in [torch.float32, torch.float64]:
        for dst in [torch.float16, torch.bfloat16]:
            a = vals.to(src)
            W.case("aten::_to_copy.out", "round %s->%s" % (src, dst),
                   [In(a), Bool(False), None, Out(dst, a.to(dst)), Ref(3)])
    a = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).view(torch.int16).view(torch.float16)[::1]
    a = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(torch.float16)
    W.case("aten::_to_copy.out", "all halves", [In(a), Bool(False), None, Out(torch.float32, a.float()), Ref(3)])
    b = torch.arange(0, 65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    W.case("aten::_to_copy.out", "all bf16", [In(b), Bool(False), None, Out(torch.float32, b.float()), Ref(3)])
    # layouts: memory_format and dim orders
    x = rand([2, 3, 4, 5], torch.float32)
    W.case("aten::clone.out", "clone to channels last", [In(x), Int(2), Out(torch.float32, x, order=[0, 2, 3, 1]), Ref(2)])
    W.case("aten::clone.out", "clone from channels last", [In(x, [0, 2, 3, 1]), Int(0), Out(torch.float32, x), Ref(2)])
    W.case("aten::clone.out", "clone preserve", [In(x, [0, 2, 3, 1]), Int(1), Out(torch.float32, x, order=[0, 2, 3, 1]), Ref(2)])
    W.case("aten::clone.out", "clone contiguous into cl", [In(x), Int(0), Out(torch.float32, None, shape=[2, 3, 4, 5], order=[0, 2, 3, 1]), Ref(2)], fail=True)
    W.case("aten::clone.out", "clone bad format", [In(x), Int(7), Out(torch.float32, None, shape=[2, 3, 4, 5]), Ref(2)], fail=True)
    W.case("aten::clone.out", "clone shape mismatch", [In(x), None, Out(torch.float32, None, shape=[2, 3, 4, 6]), Ref(2)], fail=True)
    W.case("aten::clone.out", "clone empty", [In(rand([0, 3], torch.int64)), None, Out(torch.int64, torch.empty(0, 3, dtype=torch.int64)), Ref(2)])
    W.case("aten::clone.out", "clone scalar", [In(torch.tensor(2.5)), None, Out(torch.float32, torch.tensor(2.5)), Ref(2)])
    W.case("dim_order_ops::_clone_dim_order.out", "clone_dim_order cl",
           [In(x), Bool(False), IntList([0, 2, 3, 1]), Out(torch.float32, x, order=[0, 2, 3, 1]), Ref(3)])
    W.case("dim_order_ops::_clone_dim_order.out", "clone_dim_order mismatch",
           [In(x), Bool(False), IntList([0, 1, 2, 3]), Out(torch.float32, None, shape=[2, 3, 4, 5], order=[0, 2, 3, 1]), Ref(3)], fail=True)
    W.case("dim_order_ops::_to_dim_order_copy.out", "to_dim_order_copy",
           [In(x, [0, 2, 3, 1]), Bool(False), None, Out(torch.float16, x.half()), Ref(3)])
    W.case("dim_order_ops::_to_dim_order_copy.out", "to_dim_order_copy cl",
           [In(x), Bool(False), IntList([0, 2, 3, 1]), Out(torch.float64, x.double(), order=[0, 2, 3, 1]), Ref(3)])


def gen_permute_view():
    for dt in [torch.float32, torch.int8, torch.bool, torch.float16, torch.int64]:
        for shape, dims in [([2, 3, 4], [2, 0, 1]), ([2, 3, 4], [-1, -3, 1]), ([5], [0]), ([], []),
                            ([2, 3, 4, 5], [0, 2, 3, 1]), ([7, 9], [1, 0]), ([0, 3], [1, 0]),
                            ([1, 2, 1, 3, 1, 2], [5, 4, 3, 2, 1, 0])]:
            a = rand(shape, dt)
            for i, o in enumerate(orders(len(shape))):
                W.case("aten::permute_copy.out", "permute %s %s %s %d" % (dt, shape, dims, i),
                       [In(a, o), IntList(dims), Out(dt, (a.permute(dims) if dims else a).contiguous()), Ref(2)])
    a = rand([2, 3, 4], torch.float32)
    W.case("aten::permute_copy.out", "permute into cl", [In(a), IntList([0, 1, 2]), Out(torch.float32, a, order=[2, 1, 0]), Ref(2)])
    W.case("aten::permute_copy.out", "permute cast", [In(a), IntList([1, 0, 2]), Out(torch.float64, a.permute(1, 0, 2).double()), Ref(2)])
    for i, dims in enumerate([[0, 0, 1], [0, 1], [0, 1, 3], [0, 1, -4]]):
        W.case("aten::permute_copy.out", "permute bad %d" % i, [In(a), IntList(dims), Out(torch.float32, None, shape=[2, 3, 4]), Ref(2)], fail=True)
    W.case("aten::permute_copy.out", "permute static wrong", [In(a), IntList([2, 1, 0]), Out(torch.float32, None, shape=[2, 3, 4]), Ref(2)], fail=True)

    for dt in [torch.float32, torch.int16, torch.bool]:
        for shape, size in [([2, 3, 4], [6, 4]), ([2, 3, 4], [-1]), ([2, 3, 4], [4, -1, 2]), ([6], [1, 6, 1]),
                            ([], [1]), ([1], []), ([0, 4], [4, 0]), ([0, 4], [2, -1, 0]) if False else ([0, 4], [0, 2, 2])]:
            a = rand(shape, dt)
            for i, o in enumerate(orders(len(shape))):
                W.case("aten::view_copy.out", "view %s %s %s %d" % (dt, shape, size, i),
                       [In(a, o), IntList(size), Out(dt, a.reshape(size).contiguous()), Ref(2)])
    a = rand([2, 3, 4], torch.float32)
    W.case("aten::view_copy.out", "view into cl", [In(a), IntList([2, 3, 2, 2]), Out(torch.float32, a.reshape(2, 3, 2, 2), order=[0, 2, 3, 1]), Ref(2)])
    W.case("aten::view_copy.out", "view cast", [In(a), IntList([24]), Out(torch.int32, a.reshape(24).int()), Ref(2)])
    W.case("aten::view_copy.out", "view dynamic", [In(a), IntList([4, 6]), Out(torch.float32, a.reshape(4, 6), shape=[10, 10], dynamic=True, capacity=100), Ref(2)])
    for i, size in enumerate([[5, 5], [-1, -1], [-1, 5], [2, -3, 4], [0, -1]]):
        W.case("aten::view_copy.out", "view bad %d" % i, [In(a), IntList(size), Out(torch.float32, None, shape=[len(size)] * len(size), dynamic=True, capacity=100), Ref(2)], fail=True)
    W.case("aten::view_copy.out", "view empty ambiguous", [In(rand([0, 3], torch.float32)), IntList([-1, 0]), Out(torch.float32, None, shape=[0, 0], dynamic=True, capacity=0), Ref(2)], fail=True)


# ---- matrix multiply --------------------------------------------------------------------------


def mm_ref(fn, *ts):
    """torch's result; for dtypes torch lacks on CPU, the float64 result rounded to the dtype."""
    r, err = torch_or_fail(lambda: fn(*ts))
    if r is not None and ts[0].dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return r
    # float32 and below: the exact (float64) result rounded once, so the tolerance need not
    # cover torch's own float accumulation order
    return fn(*[t.double() for t in ts]).to(ts[0].dtype)


def gen_mm():
    MM_DT = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.int8, torch.uint8, torch.int16]
    for dt in MM_DT:
        for m, k, n in [(1, 1, 1), (3, 5, 7), (17, 33, 65), (0, 4, 3), (4, 0, 3), (4, 3, 0), (2, 130, 3)]:
            a = rand([m, k], dt, lo=-8 if dt in INTS and dt != torch.uint8 else None, hi=8 if dt in INTS else None)
            b = rand([k, n], dt, lo=-8 if dt in INTS and dt != torch.uint8 else None, hi=8 if dt in INTS else None)
            if dt in INTS:
                ref = torch.mm(a.long(), b.long()).to(dt)
            else:
                ref = mm_ref(torch.mm, a, b)
            W.case("aten::mm.out", "mm %s %dx%dx%d" % (dt, m, k, n), [In(a), In(b), Out(dt, ref), Ref(2)])
    a = rand([5, 6], torch.float32)
    b = rand([6, 4], torch.float32)
    W.case("aten::mm.out", "mm transposed operands", [In(a, [1, 0]), In(b, [1, 0]), Out(torch.float32, mm_ref(torch.mm, a, b), order=[1, 0]), Ref(2)])
    i8 = rand([3, 40], torch.int8)
    W.case("aten::mm.out", "mm int8 wraps", [In(i8), In(i8.t().contiguous()), Out(torch.int8, torch.mm(i8, i8.t())), Ref(2)])
    W.case("aten::mm.out", "mm bad inner", [In(a), In(a), Out(torch.float32, None, shape=[5, 6]), Ref(2)], fail=True)
    W.case("aten::mm.out", "mm dtype mismatch", [In(a), In(b.double()), Out(torch.float32, None, shape=[5, 4]), Ref(2)], fail=True)
    W.case("aten::mm.out", "mm out dtype", [In(a), In(b), Out(torch.float64, None, shape=[5, 4]), Ref(2)], fail=True)
    W.case("aten::mm.out", "mm bool", [In(a > 0), In(b > 0), Out(torch.bool, None, shape=[5, 4]), Ref(2)], fail=True)
    W.case("aten::mm.out", "mm rank", [In(a.reshape(30)), In(b), Out(torch.float32, None, shape=[5, 4]), Ref(2)], fail=True)
    W.case("aten::mm.out", "mm static wrong", [In(a), In(b), Out(torch.float32, None, shape=[4, 5]), Ref(2)], fail=True)

    for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]:
        for bs, m, k, n in [(2, 3, 4, 5), (1, 1, 1, 1), (0, 2, 2, 2), (3, 0, 2, 2), (2, 2, 0, 3), (4, 7, 9, 70)]:
            a = rand([bs, m, k], dt, lo=-8 if dt in INTS else None, hi=8 if dt in INTS else None)
            b = rand([bs, k, n], dt, lo=-8 if dt in INTS else None, hi=8 if dt in INTS else None)
            ref = torch.bmm(a.long(), b.long()).to(dt) if dt in INTS else mm_ref(torch.bmm, a, b)
            W.case("aten::bmm.out", "bmm %s %d %d %d %d" % (dt, bs, m, k, n), [In(a), In(b), Out(dt, ref), Ref(2)])
    a = rand([3, 4, 5], torch.float32)
    b = rand([3, 5, 2], torch.float32)
    W.case("aten::bmm.out", "bmm orders", [In(a, [2, 0, 1]), In(b, [0, 2, 1]), Out(torch.float32, mm_ref(torch.bmm, a, b), order=[1, 2, 0]), Ref(2)])
    W.case("aten::bmm.out", "bmm batch mismatch", [In(a), In(rand([2, 5, 2], torch.float32)), Out(torch.float32, None, shape=[3, 4, 2]), Ref(2)], fail=True)
    W.case("aten::bmm.out", "bmm inner mismatch", [In(a), In(a), Out(torch.float32, None, shape=[3, 4, 5]), Ref(2)], fail=True)
    W.case("aten::bmm.out", "bmm rank", [In(a[0]), In(b[0]), Out(torch.float32, None, shape=[4, 2]), Ref(2)], fail=True)

    for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
               torch.int8]:
        for bshape in [[6], [1, 6], [4, 1], [4, 6], [], [1]]:
            for beta, alpha in [(1, 1), (2, 3), (0.5, -1.5), (0, 1)]:
                isint = dt in INTS
                a = rand([4, 5], dt, lo=-8 if isint else None, hi=8 if isint else None)
                b = rand([5, 6], dt, lo=-8 if isint else None, hi=8 if isint else None)
                bias = rand(bshape, dt, lo=-8 if isint else None, hi=8 if isint else None)
                if beta == 0 and not isint:
                    bias = torch.full(bshape, float("nan"), dtype=dt)
                if isint:
                    ref = torch.ops.aten.addmm.out(bias.long(), a.long(), b.long(), beta=beta, alpha=alpha,
                                                   out=torch.empty(0, dtype=torch.int64)).to(dt)
                else:
                    ref = mm_ref(lambda x, y, z: torch.addmm(x, y, z, beta=beta, alpha=alpha), bias, a, b)
                W.case("aten::addmm.out", "addmm %s %s %r %r" % (dt, bshape, beta, alpha),
                       [In(bias), In(a), In(b), scalar_value(beta), scalar_value(alpha), Out(dt, ref), Ref(5)])
    a = rand([4, 5], torch.float32)
    b = rand([5, 6], torch.float32)
    bias = rand([6], torch.float32)
    W.case("aten::addmm.out", "addmm empty K", [In(bias), In(rand([4, 0], torch.float32)), In(rand([0, 6], torch.float32)), Int(2), Int(1), Out(torch.float32, (2 * bias).expand(4, 6).contiguous()), Ref(5)])
    W.case("aten::addmm.out", "addmm bad bias", [In(rand([5], torch.float32)), In(a), In(b), Int(1), Int(1), Out(torch.float32, None, shape=[4, 6]), Ref(5)], fail=True)
    W.case("aten::addmm.out", "addmm bias rank 3", [In(rand([1, 1, 6], torch.float32)), In(a), In(b), Int(1), Int(1), Out(torch.float32, None, shape=[4, 6]), Ref(5)], fail=True)
    W.case("aten::addmm.out", "addmm bias dtype", [In(bias.double()), In(a), In(b), Int(1), Int(1), Out(torch.float32, None, shape=[4, 6]), Ref(5)], fail=True)
    W.case("aten::addmm.out", "addmm dynamic out", [In(bias), In(a), In(b), Int(1), Int(1), Out(torch.float32, mm_ref(torch.addmm, bias, a, b), shape=[8, 8], dynamic=True, capacity=64), Ref(5)])


# ---- convolution ------------------------------------------------------------------------------


def conv_ref(x, w, b, stride, pad, dil, transposed, opad, groups):
    args = (stride, pad, dil, transposed, opad, groups)
    r, err = torch_or_fail(lambda: torch.ops.aten.convolution(x.double(), w.double(), None if b is None else b.double(), *args))
    if r is None:
        return None, err
    return r.to(x.dtype), None


def gen_conv():
    cases = [
        # name, input shape, weight shape, bias, stride, padding, dilation, transposed, output_padding, groups
        ("2d basic", [1, 1, 5, 5], [1, 1, 3, 3], True, [1], [0], [1], False, [0], 1),
        ("2d lenet1", [2, 1, 28, 28], [6, 1, 5, 5], True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        ("2d lenet2", [2, 6, 12, 12], [16, 6, 5, 5], True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        ("2d stride", [2, 3, 9, 11], [4, 3, 3, 2], True, [2, 3], [0, 0], [1, 1], False, [0, 0], 1),
        ("2d pad", [1, 3, 7, 6], [5, 3, 3, 3], False, [1, 1], [1, 2], [1, 1], False, [0, 0], 1),
        ("2d dilation", [1, 2, 10, 9], [3, 2, 3, 2], True, [1, 1], [2, 1], [2, 3], False, [0, 0], 1),
        ("2d groups", [2, 6, 7, 7], [9, 2, 3, 3], True, [1, 2], [1, 1], [1, 1], False, [0, 0], 3),
        ("2d depthwise", [1, 4, 8, 8], [4, 1, 3, 3], True, [2, 2], [1, 1], [1, 1], False, [0, 0], 4),
        ("2d all", [3, 4, 13, 10], [6, 2, 3, 4], True, [2, 1], [2, 3], [2, 1], False, [0, 0], 2),
        ("2d 1x1", [2, 8, 5, 5], [3, 8, 1, 1], True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        ("2d wide", [1, 2, 3, 300], [2, 2, 3, 5], True, [1, 1], [1, 2], [1, 1], False, [0, 0], 1),
        ("2d kernel=input", [1, 2, 4, 4], [3, 2, 4, 4], True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        ("2d big pad", [1, 1, 2, 2], [1, 1, 3, 3], True, [1, 1], [3, 3], [1, 1], False, [0, 0], 1),
        ("2d empty batch", [0, 3, 5, 5], [2, 3, 3, 3], True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
        ("1d basic", [2, 3, 10], [4, 3, 3], True, [1], [0], [1], False, [0], 1),
        ("1d all", [2, 4, 31], [6, 2, 5], True, [3], [2], [2], False, [0], 2),
        ("1d long", [1, 1, 1000], [2, 1, 7], True, [2], [3], [1], False, [0], 1),
        ("1d depthwise", [1, 3, 9], [3, 1, 2], False, [1], [1], [3], False, [0], 3),
        ("t2d basic", [1, 2, 4, 4], [2, 3, 3, 3], True, [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
        ("t2d stride", [2, 3, 5, 4], [3, 2, 3, 3], True, [2, 2], [0, 0], [1, 1], True, [0, 0], 1),
        ("t2d stride opad", [2, 3, 5, 4], [3, 2, 3, 3], True, [2, 3], [1, 1], [1, 1], True, [1, 2], 1),
        ("t2d dilation", [1, 2, 4, 5], [2, 2, 3, 2], True, [2, 1], [1, 0], [2, 3], True, [1, 0], 1),
        ("t2d groups", [2, 4, 3, 3], [4, 3, 2, 2], True, [2, 2], [0, 1], [1, 1], True, [0, 1], 2),
        ("t2d pad", [1, 2, 6, 6], [2, 2, 5, 5], False, [1, 1], [2, 2], [1, 1], True, [0, 0], 1),
        ("t1d basic", [2, 3, 7], [3, 4, 3], True, [2], [1], [1], True, [1], 1),
        ("t1d groups", [1, 4, 5], [4, 1, 4], True, [3], [0], [2], True, [2], 4),
    ]
    for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16]:
        for (name, xs, ws, bias, stride, pad, dil, tr, opad, groups) in cases:
            if dt in (torch.bfloat16, torch.float16) and name not in ("2d all", "1d all", "t2d groups", "2d basic"):
                continue
            x = rand(xs, dt)
            w = rand(ws, dt, hi=0.5)
            b = rand([ws[1] * groups if tr else ws[0]], dt) if bias else None
            ref, err = conv_ref(x, w, b, stride, pad, dil, tr, opad, groups)
            assert ref is not None, (name, err)
            args = [In(x), In(w), In(b) if b is not None else None, IntList(stride), IntList(pad),
                    IntList(dil), Bool(tr), IntList(opad), Int(groups), Out(dt, ref), Ref(9)]
            W.case("aten::convolution.out", "conv %s %s" % (name, dt), args)
    # channels-last input/weight/output
    x = rand([2, 4, 6, 5], torch.float32)
    w = rand([6, 2, 3, 3], torch.float32, hi=0.5)
    b = rand([6], torch.float32)
    ref, _ = conv_ref(x, w, b, [1, 2], [1, 1], [1, 1], False, [0, 0], 2)
    W.case("aten::convolution.out", "conv channels last",
           [In(x, [0, 2, 3, 1]), In(w, [0, 2, 3, 1]), In(b), IntList([1, 2]), IntList([1, 1]), IntList([1, 1]),
            Bool(False), IntList([0, 0]), Int(2), Out(torch.float32, ref, order=[0, 2, 3, 1]), Ref(9)])
    W.case("aten::convolution.out", "conv dynamic out",
           [In(x), In(w), In(b), IntList([1, 2]), IntList([1, 1]), IntList([1, 1]),
            Bool(False), IntList([0, 0]), Int(2), Out(torch.float32, ref, shape=[3, 6, 6, 6], dynamic=True, capacity=6 ** 4), Ref(9)])
    # invalid arguments: torch rejects each of these
    bad = [
        ("bad groups", [1, 4, 5, 5], [4, 3, 3, 3], [1], [0], [1], False, [0], 2),
        ("bad cin", [1, 4, 5, 5], [4, 3, 3, 3], [1], [0], [1], False, [0], 1),
        ("bad stride0", [1, 3, 5, 5], [4, 3, 3, 3], [0], [0], [1], False, [0], 1),
        ("bad negpad", [1, 3, 5, 5], [4, 3, 3, 3], [1], [-1], [1], False, [0], 1),
        ("bad dil0", [1, 3, 5, 5], [4, 3, 3, 3], [1], [0], [0], False, [0], 1),
        ("bad kernel too big", [1, 3, 2, 2], [4, 3, 3, 3], [1], [0], [1], False, [0], 1),
        ("bad stride len", [1, 3, 5, 5], [4, 3, 3, 3], [1, 1, 1], [0], [1], False, [0], 1),
        ("bad opad", [1, 3, 5, 5], [3, 4, 3, 3], [1], [0], [1], True, [1], 1),
        ("bad rank", [1, 3, 5, 5], [4, 3, 3], [1], [0], [1], False, [0], 1),
        ("bad groups0", [1, 3, 5, 5], [4, 3, 3, 3], [1], [0], [1], False, [0], 0),
        ("bad t groups", [1, 3, 5, 5], [3, 4, 3, 3], [1], [0], [1], True, [0], 2),
    ]
    for (name, xs, ws, stride, pad, dil, tr, opad, groups) in bad:
        x = rand(xs, torch.float32)
        w = rand(ws, torch.float32)
        ref, err = conv_ref(x, w, None, stride, pad, dil, tr, opad, groups)
        assert ref is None, name
        W.case("aten::convolution.out", "conv %s" % name,
               [In(x), In(w), None, IntList(stride), IntList(pad), IntList(dil), Bool(tr), IntList(opad), Int(groups),
                Out(torch.float32, None, shape=[1, 4, 3, 3], dynamic=True, capacity=1000), Ref(9)], fail=True)
    x = rand([1, 3, 5, 5], torch.float32)
    w = rand([4, 3, 3, 3], torch.float32)
    common = [IntList([1]), IntList([0]), IntList([1]), Bool(False), IntList([0]), Int(1)]
    W.case("aten::convolution.out", "conv bad bias", [In(x), In(w), In(rand([3], torch.float32))] + common + [Out(torch.float32, None, shape=[1, 4, 3, 3]), Ref(9)], fail=True)
    W.case("aten::convolution.out", "conv dtype mismatch", [In(x), In(w.double()), None] + common + [Out(torch.float32, None, shape=[1, 4, 3, 3]), Ref(9)], fail=True)
    W.case("aten::convolution.out", "conv int", [In(x.int()), In(w.int()), None] + common + [Out(torch.int32, None, shape=[1, 4, 3, 3]), Ref(9)], fail=True)
    W.case("aten::convolution.out", "conv out static wrong", [In(x), In(w), None] + common + [Out(torch.float32, None, shape=[1, 4, 5, 5]), Ref(9)], fail=True)
    W.case("aten::convolution.out", "conv out dtype", [In(x), In(w), None] + common + [Out(torch.float64, None, shape=[1, 4, 3, 3]), Ref(9)], fail=True)


# ---- max pool -------------------------------------------------------------------------------


def gen_pool():
    cases = [
        ("basic", [1, 1, 4, 4], [2], [], [0], [1], False),
        ("3d", [3, 7, 7], [3, 3], [2, 2], [1, 1], [1, 1], False),
        ("lenet", [2, 6, 24, 24], [2, 2], [2, 2], [0, 0], [1, 1], False),
        ("odd", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], [1, 1], False),
        ("ceil", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], [1, 1], True),
        ("ceil2", [1, 2, 5, 5], [2, 2], [2, 2], [0, 0], [1, 1], True),
        ("ceil3", [1, 1, 6, 6], [3, 3], [2, 2], [1, 1], [1, 1], True),
        ("dilation", [1, 2, 10, 9], [3, 2], [1, 2], [1, 1], [2, 3], False),
        ("dilation ceil", [1, 2, 10, 9], [3, 3], [2, 2], [1, 1], [2, 2], True),
        ("stride1", [1, 3, 5, 6], [3, 3], [1, 1], [1, 1], [1, 1], False),
        ("kernel1", [2, 2, 3, 3], [1, 1], [2, 2], [0, 0], [1, 1], True),
        ("whole", [1, 2, 5, 4], [5, 4], [], [0], [1], False),
        ("empty batch", [0, 2, 5, 4], [2, 2], [], [0], [1], False),
        ("wide", [1, 1, 3, 200], [3, 3], [1, 2], [1, 1], [1, 1], True),
    ]
    for dt in [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int8, torch.uint8, torch.int64]:
        for (name, xs, k, s, p, d, ceil) in cases:
            if dt not in (torch.float32,) and name not in ("odd", "ceil", "3d", "dilation ceil"):
                continue
            if dt in INTS:
                x = rand(xs, dt, lo=0 if dt == torch.uint8 else -100, hi=100)
                # torch has no integer max_pool2d on CPU: pool the exactly representable float copy
                rv, ri = torch.ops.aten.max_pool2d_with_indices(x.float(), k, s, p, d, ceil)
                rv = rv.to(dt)
            elif dt == torch.float16:
                x = rand(xs, dt)
                rv, ri = torch.ops.aten.max_pool2d_with_indices(x.float(), k, s, p, d, ceil)
                rv = rv.half()
            else:
                x = rand(xs, dt, special=name == "odd")
                rv, ri = torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, ceil)
            W.case("aten::max_pool2d_with_indices.out", "pool %s %s" % (name, dt),
                   [In(x), IntList(k), IntList(s), IntList(p), IntList(d), Bool(ceil),
                    Out(dt, rv), Out(torch.int64, ri), TList([6, 7])])
    # ties, -inf everywhere, nan
    x = torch.tensor([[[1.0, 1.0, 0.0], [1.0, float("-inf"), 2.0], [2.0, 2.0, float("nan")]]])
    x2 = torch.full([1, 3, 3], float("-inf"))
    x3 = torch.tensor([[[float("nan"), 1.0], [float("nan"), 5.0]]])
    for i, t in enumerate([x, x2, x3]):
        rv, ri = torch.ops.aten.max_pool2d_with_indices(t, [2, 2], [1, 1], [1, 1], [1, 1], False)
        W.case("aten::max_pool2d_with_indices.out", "pool special %d" % i,
               [In(t), IntList([2, 2]), IntList([1, 1]), IntList([1, 1]), IntList([1, 1]), Bool(False),
                Out(torch.float32, rv), Out(torch.int64, ri), TList([6, 7])])
    # channels last
    x = rand([2, 3, 6, 7], torch.float32)
    rv, ri = torch.ops.aten.max_pool2d_with_indices(x, [3, 2], [2, 2], [1, 1], [1, 1], True)
    W.case("aten::max_pool2d_with_indices.out", "pool channels last",
           [In(x, [0, 2, 3, 1]), IntList([3, 2]), IntList([2, 2]), IntList([1, 1]), IntList([1, 1]), Bool(True),
            Out(torch.float32, rv, order=[0, 2, 3, 1]), Out(torch.int64, ri, order=[0, 2, 3, 1]), TList([6, 7])])
    W.case("aten::max_pool2d_with_indices.out", "pool dynamic",
           [In(x), IntList([3, 2]), IntList([2, 2]), IntList([1, 1]), IntList([1, 1]), Bool(True),
            Out(torch.float32, rv, shape=[2, 3, 7, 7], dynamic=True, capacity=294), Out(torch.int64, ri, shape=[2, 3, 7, 7], dynamic=True, capacity=294), TList([6, 7])])
    bad = [
        ("pad too big", [1, 1, 5, 5], [3, 3], [1, 1], [2, 2], [1, 1]),
        ("kernel0", [1, 1, 5, 5], [0, 3], [1, 1], [0, 0], [1, 1]),
        ("stride0", [1, 1, 5, 5], [3, 3], [0, 1], [0, 0], [1, 1]),
        ("dil0", [1, 1, 5, 5], [3, 3], [1, 1], [0, 0], [0, 1]),
        ("negpad", [1, 1, 5, 5], [3, 3], [1, 1], [-1, 0], [1, 1]),
        ("too small", [1, 1, 2, 2], [3, 3], [1, 1], [0, 0], [1, 1]),
        ("rank2", [5, 5], [3, 3], [1, 1], [0, 0], [1, 1]),
        ("rank5", [1, 1, 1, 5, 5], [3, 3], [1, 1], [0, 0], [1, 1]),
        ("k len3", [1, 1, 5, 5], [3, 3, 3], [1, 1], [0, 0], [1, 1]),
        ("empty C", [1, 0, 5, 5], [3, 3], [1, 1], [0, 0], [1, 1]),
    ]
    for (name, xs, k, s, p, d) in bad:
        x = rand(xs, torch.float32)
        r, _ = torch_or_fail(lambda: torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, False))
        assert r is None, name
        W.case("aten::max_pool2d_with_indices.out", "pool bad %s" % name,
               [In(x), IntList(k), IntList(s), IntList(p), IntList(d), Bool(False),
                Out(torch.float32, None, shape=[1, 1, 3, 3], dynamic=True, capacity=100),
                Out(torch.int64, None, shape=[1, 1, 3, 3], dynamic=True, capacity=100), TList([6, 7])], fail=True)
    x = rand([1, 2, 4, 4], torch.float32)
    common = [IntList([2, 2]), IntList([2, 2]), IntList([0, 0]), IntList([1, 1]), Bool(False)]
    W.case("aten::max_pool2d_with_indices.out", "pool bad indices dtype", [In(x)] + common + [Out(torch.float32, None, shape=[1, 2, 2, 2]), Out(torch.int32, None, shape=[1, 2, 2, 2]), TList([6, 7])], fail=True)
    W.case("aten::max_pool2d_with_indices.out", "pool bad out dtype", [In(x)] + common + [Out(torch.float64, None, shape=[1, 2, 2, 2]), Out(torch.int64, None, shape=[1, 2, 2, 2]), TList([6, 7])], fail=True)
    W.case("aten::max_pool2d_with_indices.out", "pool bool", [In(x > 0)] + common + [Out(torch.bool, None, shape=[1, 2, 2, 2]), Out(torch.int64, None, shape=[1, 2, 2, 2]), TList([6, 7])], fail=True)
    W.case("aten::max_pool2d_with_indices.out", "pool static wrong", [In(x)] + common + [Out(torch.float32, None, shape=[1, 2, 3, 3]), Out(torch.int64, None, shape=[1, 2, 3, 3]), TList([6, 7])], fail=True)


# ---- sum --------------------------------------------------------------------------------------


def gen_sum():
    for dt in ALL:
        for dims, keep in [([1], False), ([0, 2], True), ([], False), (None, True), ([-1], False), ([0, 1, 2], False)]:
            x = rand([3, 4, 5], dt, hi=20 if dt in INTS else None, lo=-20 if dt in INTS and dt != torch.uint8 else None)
            od = dt if dt in FLOATS else torch.int64
            ref = torch.ops.aten.sum.IntList_out(x.double() if dt in (torch.float16, torch.bfloat16, torch.float32) else x, dims, keep, out=torch.empty(0, dtype=torch.float64 if dt in FLOATS else od)).to(od)
            W.case("aten::sum.IntList_out", "sum %s %s %s" % (dt, dims, keep),
                   [In(x), IntList(dims) if dims is not None else None, Bool(keep), None, Out(od, ref), Ref(4)])
    x = rand([3, 4, 5], torch.int32, lo=-50, hi=50)
    for od in [torch.float32, torch.int16, torch.int32]:
        ref = torch.ops.aten.sum.IntList_out(x, [1], False, out=torch.empty(0, dtype=od))
        W.case("aten::sum.IntList_out", "sum out %s" % od, [In(x), IntList([1]), Bool(False), None, Out(od, ref), Ref(4)])
    W.case("aten::sum.IntList_out", "sum dtype arg", [In(x), IntList([1]), Bool(False), Int(DT[torch.float64]), Out(torch.float64, x.double().sum(1)), Ref(4)])
    W.case("aten::sum.IntList_out", "sum dtype arg mismatch", [In(x), IntList([1]), Bool(False), Int(DT[torch.float64]), Out(torch.float32, None, shape=[3, 5]), Ref(4)], fail=True)
    W.case("aten::sum.IntList_out", "sum repeated dim", [In(x), IntList([1, -2]), Bool(False), None, Out(torch.int64, None, shape=[3, 5]), Ref(4)], fail=True)
    W.case("aten::sum.IntList_out", "sum bad dim", [In(x), IntList([3]), Bool(False), None, Out(torch.int64, None, shape=[3, 5]), Ref(4)], fail=True)
    y = rand([2, 3, 4, 5], torch.float32)
    W.case("aten::sum.IntList_out", "sum channels last", [In(y, [0, 2, 3, 1]), IntList([1]), Bool(True), None, Out(torch.float32, y.double().sum(1, keepdim=True).float(), order=[0, 2, 3, 1]), Ref(4)])
    W.case("aten::sum.IntList_out", "sum empty", [In(rand([3, 0], torch.float32)), IntList([1]), Bool(False), None, Out(torch.float32, torch.zeros(3)), Ref(4)])
    W.case("aten::sum.IntList_out", "sum scalar", [In(torch.tensor(4.5)), None, Bool(False), None, Out(torch.float32, torch.tensor(4.5)), Ref(4)])
    W.case("aten::sum.IntList_out", "sum bool", [In(rand([4, 5], torch.bool)), IntList([0]), Bool(False), None, Out(torch.bool, None, shape=[5]), Ref(4)])


# ---- prim ops (Python semantics: SymInt arithmetic is Python arithmetic) --------------------


def wrap64(v):
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def gen_prim():
    ints = [0, 1, -1, 7, -7, 3, -3, 2 ** 62, -(2 ** 63), 2 ** 63 - 1, 100]
    dbls = [0.0, -0.0, 2.5, -2.5, 7.0, -3.25, 1e300, 0.1, float("inf"), 2.0 ** 63, -(2.0 ** 63), 100.5]
    bools = [True, False]
    vals = [(Int(v), v) for v in ints] + [(Dbl(v), v) for v in dbls] + [(Bool(v), v) for v in bools]

    def py(op, a, b):
        if op == "add": return a + b
        if op == "sub": return a - b
        if op == "mul": return a * b
        if op == "floordiv": return a // b
        if op == "truediv": return a / b
        if op == "mod": return a % b
        if op == "eq": return a == b
        if op == "gt": return a > b
        if op == "lt": return a < b
        if op == "ge": return a >= b
        if op == "le": return a <= b
        if op == "sym_max": return b if b > a else a
        if op == "sym_min": return b if b < a else a

    n = 0
    for op in ["add", "sub", "mul", "floordiv", "truediv", "mod", "eq", "gt", "lt", "ge", "le", "sym_max", "sym_min"]:
        for va, a in vals:
            for vb, b in vals:
                isint = not isinstance(a, float) and not isinstance(b, float)
                try:
                    r = py(op, a, b)
                except (ZeroDivisionError, OverflowError):
                    r = None
                if r is None:
                    W.case("executorch_prim::%s.Scalar" % op, "prim %d" % n, [va, vb, Result()], fail=True)
                    n += 1
                    continue
                if op in ("eq", "gt", "lt", "ge", "le"):
                    r = bool(r)
                elif op == "truediv":
                    r = float(r)
                elif isint:
                    r = wrap64(int(r))
                else:
                    r = float(r)
                if isinstance(r, float) and math.isnan(r):
                    continue  # not comparable; inf - inf etc.
                W.case("executorch_prim::%s.Scalar" % op, "prim %d" % n, [va, vb, Result(r)])
                n += 1
                if op in ("floordiv", "mod") and isint and not isinstance(a, bool) and not isinstance(b, bool):
                    W.case("executorch_prim::%s.int" % op, "prim %d" % n, [va, vb, Result(r)])
                    n += 1
    for va, a in vals:
        for op in ["neg", "sym_float", "sym_int", "sym_not", "ceil", "round", "trunc"]:
            isint = not isinstance(a, float)
            try:
                if op == "neg": r = wrap64(-a) if isint else -a
                elif op == "sym_float": r = float(a)
                elif op == "sym_int": r = int(a)
                elif op == "sym_not":
                    if isinstance(a, float):
                        continue
                    r = not a
                elif op == "ceil": r = math.ceil(a)
                elif op == "round": r = round(a)
                elif op == "trunc": r = math.trunc(a)
                if isinstance(r, bool) or op == "sym_not":
                    r = bool(r)
                elif isinstance(r, int):
                    r = int(r)
                    if not -(2 ** 63) <= r < 2 ** 63:
                        raise OverflowError
            except (OverflowError, ValueError):
                W.case("executorch_prim::%s.Scalar" % op, "prim %d" % n, [va, Result()], fail=True)
                n += 1
                continue
            W.case("executorch_prim::%s.Scalar" % op, "prim %d" % n, [va, Result(r)])
            n += 1
    for v in [0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, float("nan"), -2.7, 1e19]:
        r = None
        try:
            r = round(v)
            if not -(2 ** 63) <= r < 2 ** 63:
                r = None
        except (OverflowError, ValueError):
            pass
        W.case("executorch_prim::round.Scalar", "prim round %r" % v, [Dbl(v), Result(r)], fail=r is None)

    # tensor queries
    x = rand([3, 0, 5], torch.float32)
    for d, r in [(0, 3), (1, 0), (2, 5), (-1, 5), (-3, 3)]:
        W.case("aten::sym_size.int", "sym_size %d" % d, [In(x), Int(d), Result(r)])
    for d in [3, -4]:
        W.case("aten::sym_size.int", "sym_size bad %d" % d, [In(x), Int(d), Result()], fail=True)
    W.case("aten::sym_size.int", "sym_size scalar", [In(torch.tensor(1.0)), Int(0), Result()], fail=True)
    W.case("aten::sym_numel", "sym_numel", [In(rand([3, 4], torch.int8)), Result(12)])
    W.case("aten::sym_numel", "sym_numel empty", [In(x), Result(0)])
    W.case("aten::sym_numel", "sym_numel scalar", [In(torch.tensor(3)), Result(1)])
    for dt in ALL:  # size queries read only the shape: every dtype
        y = torch.zeros([2, 3], dtype=dt)  # no draw from the shared generator
        W.case("aten::sym_size.int", "sym_size %s" % dt, [In(y), Int(1), Result(3)])
        W.case("aten::sym_numel", "sym_numel %s" % dt, [In(y), Result(6)])
    for t, r in [(torch.tensor(2.5), 2.5), (torch.tensor([7], dtype=torch.int32), 7), (torch.tensor(True), True),
                 (torch.tensor([[-3]], dtype=torch.int64), -3), (torch.tensor(1.5, dtype=torch.float16), 1.5),
                 (torch.tensor(-2, dtype=torch.int8), -2), (torch.tensor(200, dtype=torch.uint8), 200)]:
        W.case("aten::_local_scalar_dense", "local_scalar %s" % t.dtype + str(list(t.shape)), [In(t), Result(r)])
    W.case("aten::_local_scalar_dense", "local_scalar two", [In(torch.ones(2)), Result()], fail=True)
    W.case("aten::_local_scalar_dense", "local_scalar none", [In(torch.ones(0)), Result()], fail=True)


def generate_all():
    """Fill W with every case (the built-in families, then the cases_<area>.py modules)."""
    gen_binary()
    gen_div_modes()
    gen_relu()
    gen_conversions()
    gen_permute_view()
    gen_mm()
    gen_conv()
    gen_pool()
    gen_sum()
    gen_prim()
    # cases_<area>.py modules add the rest, in name order so the file stays reproducible
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    for name in sorted(f[:-3] for f in os.listdir(here)
                       if f.startswith("cases_") and f.endswith(".py")):
        importlib.import_module(name).generate(sys.modules[__name__])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_golden.py OUT_FILE")
    generate_all()
    W.save(sys.argv[1])
    print("%d golden cases -> %s" % (len(W.cases), sys.argv[1]))


if __name__ == "__main__":
    main()
