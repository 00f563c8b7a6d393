"""Golden cases for the nn kernels: pooling, normalization, softmax, reductions, sorting,
embedding, interpolation and padding (see gen_golden.py for the file format and helpers).

References come from torch 1.13. Where torch lacks a dtype on CPU (mostly Half), or where
etch computes more precisely than torch (floating reductions accumulate in double), the
reference is torch's float64 result rounded once to the case's dtype; the test's default
tolerance of the out dtype then covers torch's own rounding. Selections (max/min/arg*/sort/
topk/embedding/padding/nearest upsampling/adaptive max pooling) are compared exactly.
"""
import math

import numpy as np
import torch

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
ALL_DT = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          F16, BF16, F32, F64]
FLOATS = [F16, BF16, F32, F64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
NAMES = {torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short",
         torch.int32: "Int", torch.int64: "Long", F16: "Half", BF16: "BFloat16", F32: "Float",
         F64: "Double"}


def names(dts):
    return [NAMES[d] for d in dts]


# (op, dtype) pairs implemented and tested here (dtype of the main input).
SUPPORTED = {
    "aten::avg_pool2d.out": names([F32, F64, F16, BF16, torch.int64]),
    "aten::_adaptive_avg_pool2d.out": names(FLOATS),
    "aten::adaptive_max_pool2d.out": names(FLOATS),
    "aten::_native_batch_norm_legit_no_training.out": names(FLOATS),
    "aten::native_batch_norm.out": names(FLOATS),
    "aten::native_layer_norm.out": names(FLOATS),
    "aten::native_group_norm.out": names(FLOATS),
    "aten::_softmax.out": names(FLOATS),
    "aten::_log_softmax.out": names(FLOATS),
    "aten::mean.out": names(ALL_DT),  # integral / Bool self with a floating dtype argument
    "aten::mean.dtype_out": names(ALL_DT),
    "aten::amax.out": names(ALL_DT),
    "aten::amin.out": names(ALL_DT),
    "aten::argmax.out": names([d for d in ALL_DT if d != torch.bool]),
    "aten::argmin.out": names([d for d in ALL_DT if d != torch.bool]),
    "aten::var.correction_out": names(FLOATS),
    "aten::var.out": names(FLOATS),
    "aten::prod.int_out": names(ALL_DT),
    "aten::prod.out": names(ALL_DT),
    "aten::any.all_out": names(ALL_DT),
    "aten::any.out": names(ALL_DT),
    "aten::any.dims_out": names(ALL_DT),
    "aten::max.dim_max": names(ALL_DT),
    "aten::min.dim_min": names(ALL_DT),
    "aten::cumsum.out": names(ALL_DT),
    "aten::sort.values": names(ALL_DT),
    "aten::sort.values_stable": names(ALL_DT),
    "aten::topk.values": names([d for d in ALL_DT if d != torch.bool]),
    "aten::argsort.stable_out": names(ALL_DT),
    "aten::embedding.out": names(ALL_DT),  # weight dtype; indices Int or Long
    "aten::upsample_nearest2d.vec_out": names([F32, F64, F16, BF16, torch.uint8]),
    "aten::upsample_nearest2d.out": names([F32, F64, F16, BF16, torch.uint8]),
    "aten::upsample_bilinear2d.vec_out": names(FLOATS),
    "aten::upsample_bilinear2d.out": names(FLOATS),
    "aten::constant_pad_nd.out": names(ALL_DT),
    "aten::linear.out": names([d for d in ALL_DT if d != torch.bool]),
}

A = torch.ops.aten
g = None  # the gen_golden module, set by generate()


def E(dt):
    return torch.empty(0, dtype=dt)


def rnd(shape, dt, lo=None, hi=None, special=False):
    """g.rand with small integer ranges by default (so sums/products stay meaningful)."""
    if dt in INTS:
        if lo is None:
            lo = 0 if dt == torch.uint8 else -9
        if hi is None:
            hi = 9
    return g.rand(shape, dt, lo=lo, hi=hi, special=special)


def distinct(shape, dt, seed=0):
    """Values without ties, in random order (Bool and Byte/Char: as distinct as they can be)."""
    n = 1
    for s in shape:
        n *= s
    gen = torch.Generator().manual_seed(1000 + seed)
    p = torch.randperm(n, generator=gen)
    if dt == torch.bool:
        return (p % 2).reshape(shape).to(dt)
    if dt in (torch.uint8, torch.int8):
        lo = 0 if dt == torch.uint8 else -128
        if n > 256:  # distinct within each row of the last dim
            rows = [torch.randperm(256, generator=gen)[:shape[-1]] for _ in range(n // shape[-1])]
            return (torch.stack(rows) + lo).reshape(shape).to(dt)
        return (p % 256 + lo).reshape(shape).to(dt)
    if dt in INTS:
        return (p - n // 2).reshape(shape).to(dt)
    cand = torch.linspace(-500.0, 500.0, 4 * n + 8, dtype=F64).to(dt).double().unique().to(dt)
    assert len(cand) >= n
    pick = torch.randperm(len(cand), generator=gen)[:n]
    return cand[pick].reshape(shape)


def via64(fn, *ts, dt=None):
    """fn on float64 copies of the floating tensors, rounded to dt (default: the first's)."""
    dt = dt or ts[0].dtype
    args = [t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in ts]
    r = fn(*args)
    return r.to(dt)


def case(op, label, args, fail=False, rtol=0.0):
    g.W.case(op, "nn " + label, args, fail=fail, rtol=rtol)


def exact(op, label, args, fail=False):
    case(op, label, args, fail=fail, rtol=g.EXACT_RTOL)


# ---- softmax ------------------------------------------------------------------------------------


def gen_softmax():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    for opname, fn in [("_softmax", A._softmax), ("_log_softmax", A._log_softmax)]:
        op = "aten::%s.out" % opname
        for dt in FLOATS:
            for shape, dims in [([3, 7], [1, 0, -1]), ([2, 3, 4], [0, 1, 2, -2]), ([1000], [0]),
                                ([5, 1], [1]), ([2, 3, 4, 5], [1, 3])]:
                for d in dims:
                    x = rnd(shape, dt)
                    ref = via64(lambda t: fn(t, d, False), x)
                    case(op, "%s %s %s dim %d" % (opname, dt, shape, d), [In(x), Int(d), Bool(False), Out(dt, ref), Ref(3)])
            x = torch.tensor([[float("nan"), 1.0, 2.0], [float("-inf"), 1.0, 2.0], [float("inf"), 1.0, 2.0],
                              [float("-inf"), float("-inf"), float("-inf")], [-1e4, 0.0, 1e4], [50.0, 50.0, 50.0]]).to(dt)
            ref = via64(lambda t: fn(t, 1, False), x)
            case(op, "%s %s special" % (opname, dt), [In(x), Int(1), Bool(False), Out(dt, ref), Ref(3)])
        for shape, d in [([], 0), ([], -1), ([0, 5], 1), ([4, 0], 1), ([4, 0], 0)]:
            x = rnd(shape, F32)
            ref = fn(x, d, False)
            case(op, "%s shape %s dim %d" % (opname, shape, d), [In(x), Int(d), Bool(False), Out(F32, ref), Ref(3)])
        x = rnd([2, 3, 4, 5], F32)
        for i, o in enumerate(g.orders(4)):
            for d in [1, 3]:
                ref = via64(lambda t: fn(t, d, False), x)
                case(op, "%s order %d dim %d" % (opname, i, d), [In(x, o), Int(d), Bool(False), Out(F32, ref, order=g.orders(4)[-1 - i]), Ref(3)])
        ref = via64(lambda t: fn(t, 1, False), x)
        case(op, "%s dynamic" % opname, [In(x), Int(1), Bool(False), Out(F32, ref, shape=[4, 4, 4, 4], dynamic=True, capacity=256), Ref(3)])
        # failures
        case(op, "%s half_to_float" % opname, [In(x.half()), Int(1), Bool(True), Out(F32, None, shape=[2, 3, 4, 5]), Ref(3)], fail=True)
        case(op, "%s int" % opname, [In(rnd([3], torch.int32)), Int(0), Bool(False), Out(torch.int32, None, shape=[3]), Ref(3)], fail=True)
        case(op, "%s out dtype" % opname, [In(x), Int(1), Bool(False), Out(F64, None, shape=[2, 3, 4, 5]), Ref(3)], fail=True)
        case(op, "%s bad dim" % opname, [In(x), Int(4), Bool(False), Out(F32, None, shape=[2, 3, 4, 5]), Ref(3)], fail=True)
        case(op, "%s bad dim neg" % opname, [In(x), Int(-5), Bool(False), Out(F32, None, shape=[2, 3, 4, 5]), Ref(3)], fail=True)
        case(op, "%s static wrong" % opname, [In(x), Int(1), Bool(False), Out(F32, None, shape=[2, 3, 4, 6]), Ref(3)], fail=True)


# ---- reductions ---------------------------------------------------------------------------------

RED_DIMS = [([1], False), ([0, 2], True), ([], False), (None, True), ([-1], False), ([0, 1, 2], False),
            ([2, 0], False), (None, False)]


def dims_arg(dims):
    return g.IntList(dims) if dims is not None else None


def gen_mean():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    op = "aten::mean.out"
    for dt in FLOATS:
        for dims, keep in RED_DIMS:
            x = rnd([3, 4, 5], dt, special=dims == [1])
            ref = via64(lambda t: A.mean.dim(t, dims, keep), x)
            case(op, "mean %s %s %s" % (dt, dims, keep), [In(x), dims_arg(dims), Bool(keep), None, Out(dt, ref), Ref(4)])
    # a dtype argument: self converted to it first (any real self)
    for dt in ALL_DT:
        for odt in [F32, F64, F16]:
            x = rnd([3, 4, 5], dt)
            ref = A.mean.dim(x.to(odt).double(), [1], False).to(odt)
            case(op, "mean %s dtype %s" % (dt, odt), [In(x), g.IntList([1]), Bool(False), Int(g.DT[odt]), Out(odt, ref), Ref(4)])
            ref = A.mean(x.to(odt).double()).to(odt)
            case("aten::mean.dtype_out", "mean.dtype_out %s %s" % (dt, odt), [In(x), Int(g.DT[odt]), Out(odt, ref), Ref(2)])
    for dt in FLOATS:
        x = rnd([4, 6], dt)
        case("aten::mean.dtype_out", "mean.dtype_out %s none" % dt, [In(x), None, Out(dt, via64(A.mean, x)), Ref(2)])
    # float self, other floating out (no dtype argument)
    x = rnd([3, 4, 5], F32)
    for odt in [F64, F16, BF16]:
        ref = A.mean.dim(x.double(), [2], True).to(odt)
        case(op, "mean f32 out %s" % odt, [In(x), g.IntList([2]), Bool(True), None, Out(odt, ref), Ref(4)])
    # long rows (accumulation), layouts, shapes
    x = rnd([3, 5000], F32)
    case(op, "mean long rows", [In(x), g.IntList([1]), Bool(False), None, Out(F32, via64(lambda t: A.mean.dim(t, [1]), x)), Ref(4)])
    x = rnd([2, 3, 4, 5], F32)
    for i, o in enumerate(g.orders(4)):
        for dims in [[1], [2, 3], [0, 3]]:
            ref = via64(lambda t: A.mean.dim(t, dims, True), x)
            case(op, "mean order %d %s" % (i, dims), [In(x, o), g.IntList(dims), Bool(True), None, Out(F32, ref, order=o), Ref(4)])
    for shape, dims, keep in [([], [0], False), ([], None, True), ([], [-1], True), ([0, 3], [0], False), ([0, 3], [1], True),
                              ([0, 3], None, False), ([1, 1, 1], [1], False), ([2, 1, 3], [0, 2], False)]:
        x = rnd(shape, F32)
        ref = via64(lambda t: A.mean.dim(t, dims, keep), x)
        case(op, "mean shape %s %s %s" % (shape, dims, keep), [In(x), dims_arg(dims), Bool(keep), None, Out(F32, ref), Ref(4)])
    x = rnd([3, 4], F32)
    case(op, "mean dynamic", [In(x), g.IntList([0]), Bool(False), None, Out(F32, via64(lambda t: A.mean.dim(t, [0]), x), shape=[10], dynamic=True, capacity=10), Ref(4)])
    # failures
    xi = rnd([3, 4], torch.int32)
    case(op, "mean int no dtype", [In(xi), g.IntList([0]), Bool(False), None, Out(F32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean int dtype int", [In(xi), g.IntList([0]), Bool(False), Int(g.DT[torch.int32]), Out(torch.int32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean dtype mismatch", [In(x), g.IntList([0]), Bool(False), Int(g.DT[F64]), Out(F32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean int out", [In(x), g.IntList([0]), Bool(False), None, Out(torch.int64, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean dup dim", [In(x), g.IntList([0, -2]), Bool(False), None, Out(F32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean bad dim", [In(x), g.IntList([2]), Bool(False), None, Out(F32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean bad dtype code", [In(x), g.IntList([0]), Bool(False), Int(99), Out(F32, None, shape=[4]), Ref(4)], fail=True)
    case(op, "mean static wrong", [In(x), g.IntList([0]), Bool(False), None, Out(F32, None, shape=[3]), Ref(4)], fail=True)
    case("aten::mean.dtype_out", "mean.dtype_out int", [In(xi), None, Out(F32, None, shape=[]), Ref(2)], fail=True)


def gen_amax_amin():
    In, Out, Bool, Ref = g.In, g.Out, g.Bool, g.Ref
    for name, fn in [("amax", A.amax), ("amin", A.amin)]:
        op = "aten::%s.out" % name
        for dt in ALL_DT:
            for dims, keep in RED_DIMS:
                if dims is None:
                    continue
                x = rnd([3, 4, 5], dt, lo=-100 if dt in INTS and dt != torch.uint8 else None, hi=100 if dt in INTS else None,
                        special=dt in FLOATS and dims == [-1])
                ref = fn(x.float(), dims, keep).to(dt) if dt == F16 else fn(x, dims, keep)
                exact(op, "%s %s %s %s" % (name, dt, dims, keep), [In(x), g.IntList(dims), Bool(keep), Out(dt, ref), Ref(3)])
        x = rnd([2, 3, 4, 5], F32)
        for i, o in enumerate(g.orders(4)):
            exact(op, "%s order %d" % (name, i), [In(x, o), g.IntList([1, 2]), Bool(False), Out(F32, fn(x, [1, 2]), order=[1, 0]), Ref(3)])
        for shape, dims in [([], [0]), ([], []), ([0, 3], [1]), ([5], [0])]:
            x = rnd(shape, torch.int32)
            exact(op, "%s shape %s %s" % (name, shape, dims), [In(x), g.IntList(dims), Bool(True), Out(torch.int32, fn(x, dims, True)), Ref(3)])
        x = torch.tensor([[float("nan"), 1.0, float("nan")], [float("-inf"), float("inf"), 0.0]])
        exact(op, "%s nan row" % name, [In(x), g.IntList([1]), Bool(False), Out(F32, fn(x, [1])), Ref(3)])
        x = rnd([3, 4], F32)
        for lbl, sh, dims in [("empty dim", [0, 3], [0]), ("empty all", [0, 3], []), ("dup", [3, 4], [1, 1]), ("bad dim", [3, 4], [2])]:
            x = rnd(sh, F32)
            case(op, "%s %s" % (name, lbl), [In(x), g.IntList(dims), Bool(False), Out(F32, None, shape=[3], dynamic=True, capacity=12), Ref(3)], fail=True)
        x = rnd([3, 4], F32)
        case(op, "%s out dtype" % name, [In(x), g.IntList([1]), Bool(False), Out(F64, None, shape=[3]), Ref(3)], fail=True)


def gen_arg():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    for name, fn in [("argmax", A.argmax), ("argmin", A.argmin)]:
        op = "aten::%s.out" % name
        for dt in ALL_DT:
            if dt == torch.bool:
                continue
            for d, keep in [(1, False), (0, True), (-1, False), (None, False), (None, True), (2, True)]:
                # few distinct values: ties are frequent, the first index must win
                x = rnd([3, 4, 5], dt, lo=0 if dt in INTS else None, hi=3 if dt in INTS else None)
                if dt in FLOATS:
                    x = (x.float() * 2).round().to(dt)
                ref = fn(x.float(), d, keep) if dt == F16 else fn(x, d, keep)
                exact(op, "%s %s %s %s" % (name, dt, d, keep), [In(x), Int(d) if d is not None else None, Bool(keep), Out(torch.int64, ref), Ref(3)])
        x = torch.tensor([[1.0, float("nan"), 5.0, float("nan")], [float("-inf"), float("-inf"), 2.0, 2.0], [3.0, float("inf"), float("inf"), -1.0]])
        for d in [None, 1, 0]:
            exact(op, "%s special %s" % (name, d), [In(x), Int(d) if d is not None else None, Bool(False), Out(torch.int64, fn(x, d)), Ref(3)])
        x = rnd([2, 3, 4, 5], F32)
        for i, o in enumerate(g.orders(4)):
            exact(op, "%s order %d" % (name, i), [In(x, o), Int(1), Bool(True), Out(torch.int64, fn(x, 1, True), order=o), Ref(3)])
            exact(op, "%s order %d flat" % (name, i), [In(x, o), None, Bool(False), Out(torch.int64, fn(x)), Ref(3)])
        exact(op, "%s scalar" % name, [In(torch.tensor(2.5)), Int(0), Bool(True), Out(torch.int64, fn(torch.tensor(2.5), 0, True)), Ref(3)])
        exact(op, "%s scalar none" % name, [In(torch.tensor(2.5)), None, Bool(False), Out(torch.int64, torch.tensor(0)), Ref(3)])
        x = rnd([0, 3], F32)
        exact(op, "%s empty kept" % name, [In(x), Int(1), Bool(False), Out(torch.int64, fn(x, 1)), Ref(3)])
        case(op, "%s empty dim" % name, [In(x), Int(0), Bool(False), Out(torch.int64, None, shape=[3]), Ref(3)], fail=True)
        case(op, "%s empty flat" % name, [In(x), None, Bool(False), Out(torch.int64, None, shape=[]), Ref(3)], fail=True)
        x = rnd([3, 4], F32)
        case(op, "%s bool" % name, [In(x > 0), Int(0), Bool(False), Out(torch.int64, None, shape=[4]), Ref(3)], fail=True)
        case(op, "%s out int32" % name, [In(x), Int(0), Bool(False), Out(torch.int32, None, shape=[4]), Ref(3)], fail=True)
        case(op, "%s bad dim" % name, [In(x), Int(2), Bool(False), Out(torch.int64, None, shape=[4]), Ref(3)], fail=True)


def gen_max_min_dim():
    In, Out, Int, Bool, TList = g.In, g.Out, g.Int, g.Bool, g.TList
    for name, fn in [("max", A.max.dim), ("min", A.min.dim)]:
        op = "aten::%s" % ("max.dim_max" if name == "max" else "min.dim_min")
        for dt in ALL_DT:
            for d, keep in [(1, False), (0, True), (-1, False), (2, True)]:
                x = rnd([3, 4, 5], dt, lo=0 if dt in INTS else None, hi=3 if dt in INTS else None)
                if dt in FLOATS:
                    x = (x.float() * 2).round().to(dt)
                v, i = fn(x.float(), d, keep) if dt == F16 else fn(x, d, keep)
                exact(op, "%s.dim %s %s %s" % (name, dt, d, keep), [In(x), Int(d), Bool(keep), Out(dt, v.to(dt)), Out(torch.int64, i), TList([3, 4])])
        x = torch.tensor([[1.0, float("nan"), 5.0, float("nan")], [float("-inf"), float("-inf"), 2.0, 2.0], [3.0, float("inf"), float("inf"), -1.0]])
        for d in [1, 0]:
            v, i = fn(x, d)
            exact(op, "%s.dim special %d" % (name, d), [In(x), Int(d), Bool(False), Out(F32, v), Out(torch.int64, i), TList([3, 4])])
        x = rnd([2, 3, 4, 5], F32)
        for k, o in enumerate(g.orders(4)):
            v, i = fn(x, 1, True)
            exact(op, "%s.dim order %d" % (name, k), [In(x, o), Int(1), Bool(True), Out(F32, v, order=o), Out(torch.int64, i), TList([3, 4])])
        v, i = fn(torch.tensor(-1.5), 0, False)
        exact(op, "%s.dim scalar" % name, [In(torch.tensor(-1.5)), Int(-1), Bool(False), Out(F32, v), Out(torch.int64, i), TList([3, 4])])
        x = rnd([0, 3], F32)
        v, i = fn(x, 1)
        exact(op, "%s.dim empty kept" % name, [In(x), Int(1), Bool(False), Out(F32, v), Out(torch.int64, i), TList([3, 4])])
        case(op, "%s.dim empty dim" % name, [In(x), Int(0), Bool(False), Out(F32, None, shape=[3]), Out(torch.int64, None, shape=[3]), TList([3, 4])], fail=True)
        x = rnd([3, 4], F32)
        case(op, "%s.dim vals dtype" % name, [In(x), Int(0), Bool(False), Out(F64, None, shape=[4]), Out(torch.int64, None, shape=[4]), TList([3, 4])], fail=True)
        case(op, "%s.dim idx dtype" % name, [In(x), Int(0), Bool(False), Out(F32, None, shape=[4]), Out(torch.int32, None, shape=[4]), TList([3, 4])], fail=True)
        case(op, "%s.dim bad dim" % name, [In(x), Int(-3), Bool(False), Out(F32, None, shape=[4]), Out(torch.int64, None, shape=[4]), TList([3, 4])], fail=True)


def gen_var():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    for dt in FLOATS:
        for dims, keep in RED_DIMS:
            for corr in [None, 0, 1, 2]:
                x = rnd([3, 4, 5], dt)
                ref = via64(lambda t: A.var.correction(t, dims, correction=corr, keepdim=keep), x)
                case("aten::var.correction_out", "var %s %s %s %s" % (dt, dims, keep, corr),
                     [In(x), dims_arg(dims), Int(corr) if corr is not None else None, Bool(keep), Out(dt, ref), Ref(4)])
            for unb in [True, False]:
                x = rnd([3, 4, 5], dt)
                ref = via64(lambda t: A.var.dim(t, dims, unb, keep), x)
                case("aten::var.out", "var.out %s %s %s %s" % (dt, dims, keep, unb),
                     [In(x), dims_arg(dims), Bool(unb), Bool(keep), Out(dt, ref), Ref(4)])
    op = "aten::var.correction_out"
    for shape, dims, corr in [([1], [0], 1), ([0, 3], [0], 1), ([0, 3], [1], 1), ([], None, 0), ([], None, 1), ([2, 3], [1], 3),
                              ([2, 3], [1], -1), ([4, 1000], [1], 1), ([2, 3], [0], 2)]:
        x = rnd(shape, F32)
        ref = via64(lambda t: A.var.correction(t, dims, correction=corr), x)
        case(op, "var shape %s %s %d" % (shape, dims, corr), [In(x), dims_arg(dims), Int(corr), Bool(False), Out(F32, ref), Ref(4)])
    x = rnd([3, 4], F32, special=True)
    case(op, "var special", [In(x), g.IntList([1]), None, Bool(False), Out(F32, via64(lambda t: A.var.correction(t, [1], correction=1), x)), Ref(4)])
    x = rnd([2, 3, 4, 5], F32)
    for i, o in enumerate(g.orders(4)):
        ref = via64(lambda t: A.var.correction(t, [1, 2], correction=1, keepdim=True), x)
        case(op, "var order %d" % i, [In(x, o), g.IntList([1, 2]), None, Bool(True), Out(F32, ref, order=o), Ref(4)])
    x = rnd([3, 4], F32)
    for odt in [F64, F16]:
        ref = A.var.correction(x.double(), [1], correction=1).to(odt)
        case(op, "var out %s" % odt, [In(x), g.IntList([1]), None, Bool(False), Out(odt, ref), Ref(4)])
    xb = rnd([3, 4], BF16)
    case(op, "var bf16 out f32", [In(xb), g.IntList([1]), None, Bool(False), Out(F32, A.var.correction(xb.double(), [1], correction=1).float()), Ref(4)])
    case(op, "var int", [In(rnd([3, 4], torch.int32)), g.IntList([1]), None, Bool(False), Out(F32, None, shape=[3]), Ref(4)], fail=True)
    case(op, "var int out", [In(x), g.IntList([1]), None, Bool(False), Out(torch.int32, None, shape=[3]), Ref(4)], fail=True)
    case(op, "var dup", [In(x), g.IntList([1, -1]), None, Bool(False), Out(F32, None, shape=[3]), Ref(4)], fail=True)
    case(op, "var bad dim", [In(x), g.IntList([-3]), None, Bool(False), Out(F32, None, shape=[3]), Ref(4)], fail=True)


def gen_prod():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    for dt in ALL_DT:
        odt = torch.int64 if dt in INTS + [torch.bool] else dt
        x = rnd([3, 4, 5], dt, lo=-3 if dt in INTS and dt != torch.uint8 else None, hi=3 if dt in INTS else None)
        if dt in FLOATS:
            x = (torch.rand(3, 4, 5, dtype=F64) + 0.5).to(dt)
        for d, keep in [(1, False), (0, True), (-1, False)]:
            ref = via64(lambda t: A.prod.dim_int(t, d, keep), x, dt=odt) if dt in FLOATS else A.prod.dim_int(x, d, keep)
            case("aten::prod.int_out", "prod %s %d %s" % (dt, d, keep), [In(x), Int(d), Bool(keep), None, Out(odt, ref), Ref(4)])
        ref = via64(A.prod, x, dt=odt) if dt in FLOATS else A.prod(x)
        case("aten::prod.out", "prod all %s" % dt, [In(x), None, Out(odt, ref), Ref(2)])
    # out dtypes: the product is taken in out's dtype
    xi = rnd([4, 6], torch.int32, lo=-4, hi=4)
    for odt in [torch.int8, torch.int16, torch.int32, torch.uint8, F32, F64, torch.bool]:
        ref = A.prod.int_out(xi, 1, False, out=E(odt))
        case("aten::prod.int_out", "prod int32 out %s" % odt, [In(xi), Int(1), Bool(False), None, Out(odt, ref), Ref(4)])
        case("aten::prod.int_out", "prod int32 dtype %s" % odt, [In(xi), Int(1), Bool(False), Int(g.DT[odt]), Out(odt, ref), Ref(4)])
        ref = A.prod.out(xi[:, :3], out=E(odt))
        case("aten::prod.out", "prod all int32 out %s" % odt, [In(xi[:, :3].contiguous()), None, Out(odt, ref), Ref(2)])
    xf = torch.tensor([[2.5, 3.5, -1.25], [0.5, 0.0, 7.75]])
    for odt in [torch.int64, torch.int32, torch.bool, F64]:
        ref = A.prod.int_out(xf, 1, False, out=E(odt))
        case("aten::prod.int_out", "prod f32 out %s" % odt, [In(xf), Int(1), Bool(False), None, Out(odt, ref), Ref(4)])
    big = torch.tensor([1 << 40, 1 << 30, 3], dtype=torch.int64)
    case("aten::prod.out", "prod int64 wraps", [In(big), None, Out(torch.int64, A.prod(big)), Ref(2)])
    for shape, d in [([], 0), ([0, 3], 0), ([0, 3], 1), ([3, 1], 1)]:
        x = rnd(shape, F32)
        case("aten::prod.int_out", "prod shape %s %d" % (shape, d), [In(x), Int(d), Bool(True), None, Out(F32, A.prod.dim_int(x.double(), d, True).float()), Ref(4)])
    case("aten::prod.out", "prod empty", [In(rnd([0, 3], torch.int32)), None, Out(torch.int64, torch.tensor(1)), Ref(2)])
    x = rnd([2, 3, 4, 5], F32)
    for i, o in enumerate(g.orders(4)):
        ref = via64(lambda t: A.prod.dim_int(t, 2, True), x)
        case("aten::prod.int_out", "prod order %d" % i, [In(x, o), Int(2), Bool(True), None, Out(F32, ref, order=o), Ref(4)])
    case("aten::prod.int_out", "prod dtype mismatch", [In(xi), Int(1), Bool(False), Int(g.DT[F64]), Out(F32, None, shape=[4]), Ref(4)], fail=True)
    # torch 1.13's prod.out does not check this, etch does (as prod.int_out)
    case("aten::prod.out", "prod all dtype mismatch", [In(xi), Int(g.DT[F64]), Out(F32, None, shape=[]), Ref(2)], fail=True)
    case("aten::prod.int_out", "prod bad dim", [In(xi), Int(2), Bool(False), None, Out(torch.int64, None, shape=[4]), Ref(4)], fail=True)


def gen_any():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    for dt in ALL_DT:
        x = rnd([3, 4, 5], dt, lo=0, hi=1)
        if dt in FLOATS:
            x = (torch.rand(3, 4, 5) < 0.1).to(dt) * 0.5
        x[1] = 0
        outs = [torch.bool, torch.uint8] if dt in (torch.uint8, F32) else [torch.bool]
        for odt in outs:
            exact("aten::any.all_out", "any all %s %s" % (dt, odt), [In(x), Out(odt, A.any.all_out(x, out=E(odt))), Ref(1)])
            for d, keep in [(1, False), (0, True), (-1, False)]:
                exact("aten::any.out", "any %s %s %d %s" % (dt, odt, d, keep), [In(x), Int(d), Bool(keep), Out(odt, A.any.out(x, d, keep, out=E(odt))), Ref(3)])
        for dims, keep in [([1, 2], False), ([0], True), (None, False), ([], True), ([-1, 0], True)]:
            ref = (A.any(x) if dims is None or dims == [] else x.ne(0).sum(dims, keepdim=keep).ne(0)).to(torch.bool)
            if keep and (dims is None or dims == []):
                ref = ref.reshape(1, 1, 1)
            exact("aten::any.dims_out", "any dims %s %s %s" % (dt, dims, keep), [In(x), dims_arg(dims), Bool(keep), Out(torch.bool, ref), Ref(3)])
    x = torch.tensor([[0.0, float("nan")], [0.0, -0.0], [float("-inf"), 0.0]])
    exact("aten::any.out", "any special", [In(x), Int(1), Bool(False), Out(torch.bool, A.any.dim(x, 1)), Ref(3)])
    for shape in [[], [0, 3]]:
        x = rnd(shape, F32)
        exact("aten::any.all_out", "any shape %s" % shape, [In(x), Out(torch.bool, A.any(x)), Ref(1)])
        exact("aten::any.out", "any.out shape %s" % shape, [In(x), Int(0), Bool(False), Out(torch.bool, A.any.dim(x, 0)), Ref(3)])
    x = rnd([2, 3, 4, 5], torch.int8, lo=0, hi=1)
    for i, o in enumerate(g.orders(4)):
        exact("aten::any.out", "any order %d" % i, [In(x, o), Int(3), Bool(True), Out(torch.bool, A.any.dim(x, 3, True), order=o), Ref(3)])
    x = rnd([3, 4], F32)
    case("aten::any.all_out", "any out float", [In(x), Out(F32, None, shape=[]), Ref(1)], fail=True)
    case("aten::any.out", "any out int8", [In(x), Int(0), Bool(False), Out(torch.int8, None, shape=[4]), Ref(3)], fail=True)
    case("aten::any.out", "any bad dim", [In(x), Int(2), Bool(False), Out(torch.bool, None, shape=[4]), Ref(3)], fail=True)
    case("aten::any.dims_out", "any dims dup", [In(x), g.IntList([0, 0]), Bool(False), Out(torch.bool, None, shape=[4]), Ref(3)], fail=True)


def gen_cumsum():
    In, Out, Int, Ref = g.In, g.Out, g.Int, g.Ref
    op = "aten::cumsum.out"
    for dt in ALL_DT:
        odt = torch.int64 if dt in INTS + [torch.bool] else dt
        for d in [0, 1, -1, 2]:
            x = rnd([3, 4, 5], dt)
            ref = via64(lambda t: A.cumsum(t, d), x, dt=odt) if dt in FLOATS else A.cumsum(x, d)
            case(op, "cumsum %s %d" % (dt, d), [In(x), Int(d), None, Out(odt, ref), Ref(3)])
    # out dtypes / dtype argument: elements converted to out's dtype first
    x = torch.tensor([[100, 100, 100, -7], [2 ** 24, 1, 1, 1]], dtype=torch.int32)
    for odt in [torch.int8, torch.uint8, torch.int16, torch.int32, F32, F64, BF16]:
        ref = A.cumsum.out(x, 1, out=E(odt))
        case(op, "cumsum int32 out %s" % odt, [In(x), Int(1), None, Out(odt, ref), Ref(3)], rtol=g.EXACT_RTOL if odt != BF16 else 0.0)
        case(op, "cumsum int32 dtype %s" % odt, [In(x), Int(1), Int(g.DT[odt]), Out(odt, ref), Ref(3)], rtol=g.EXACT_RTOL if odt != BF16 else 0.0)
    xf = torch.tensor([1.5, -2.75, 3.25, 0.5, 1e8, 1.0])
    for odt in [torch.int64, torch.int32, F64, F16]:
        ref = A.cumsum.out(xf, 0, out=E(odt)) if odt != F16 else A.cumsum(xf.half().double(), 0).half()
        case(op, "cumsum f32 out %s" % odt, [In(xf[:4] if odt == F16 else xf), Int(0), None, Out(odt, ref[:4] if odt == F16 else ref), Ref(3)])
    x = rnd([5000], F32)
    case(op, "cumsum long", [In(x), Int(0), None, Out(F32, A.cumsum(x.double(), 0).float()), Ref(3)])
    for shape, d in [([], 0), ([], -1), ([0, 3], 0), ([0, 3], 1), ([3, 0], 0)]:
        x = rnd(shape, F32)
        case(op, "cumsum shape %s %d" % (shape, d), [In(x), Int(d), None, Out(F32, A.cumsum(x, d)), Ref(3)])
    x = rnd([2, 3, 4, 5], F32)
    for i, o in enumerate(g.orders(4)):
        for d in [1, 3]:
            ref = A.cumsum(x.double(), d).float()
            case(op, "cumsum order %d %d" % (i, d), [In(x, o), Int(d), None, Out(F32, ref, order=g.orders(4)[-1 - i]), Ref(3)])
    x = rnd([3, 4], torch.int32)
    case(op, "cumsum bool out", [In(x), Int(0), None, Out(torch.bool, None, shape=[3, 4]), Ref(3)], fail=True)
    case(op, "cumsum dtype mismatch", [In(x), Int(0), Int(g.DT[F64]), Out(F32, None, shape=[3, 4]), Ref(3)], fail=True)
    case(op, "cumsum bad dim", [In(x), Int(2), None, Out(torch.int64, None, shape=[3, 4]), Ref(3)], fail=True)
    case(op, "cumsum static wrong", [In(x), Int(0), None, Out(torch.int64, None, shape=[4, 3]), Ref(3)], fail=True)


# ---- sorting -------------------------------------------------------------------------------------


def sort_ref(x, d, desc):
    v, i = A.sort.stable(x.float() if x.dtype == F16 else x, stable=True, dim=d, descending=desc)
    return v.to(x.dtype), i


def gen_sort():
    In, Out, Int, Bool, TList = g.In, g.Out, g.Int, g.Bool, g.TList
    for dt in ALL_DT:
        for shape, d in [([3, 4, 5], 0), ([3, 4, 5], 1), ([3, 4, 5], -1), ([2, 300], 1), ([7], 0)]:
            for desc in [False, True]:
                # few distinct values: many ties, kept in their original order
                x = rnd(shape, dt, lo=0 if dt in INTS else None, hi=4 if dt in INTS else None)
                if dt in FLOATS:
                    x = (x.float() * 2).round().to(dt)
                v, i = sort_ref(x, d, desc)
                exact("aten::sort.values", "sort %s %s %d %s" % (dt, shape, d, desc),
                      [In(x), Int(d), Bool(desc), Out(dt, v), Out(torch.int64, i), TList([3, 4])])
                exact("aten::sort.values_stable", "sort stable %s %s %d %s" % (dt, shape, d, desc),
                      [In(x), Bool(True), Int(d), Bool(desc), Out(dt, v), Out(torch.int64, i), TList([4, 5])])
                ref = A.argsort.stable(x.float() if dt == F16 else x, stable=True, dim=d, descending=desc)
                assert torch.equal(ref, i)
                exact("aten::argsort.stable_out", "argsort %s %s %d %s" % (dt, shape, d, desc),
                      [In(x), Bool(True), Int(d), Bool(desc), Out(torch.int64, ref), g.Ref(4)])
    x = torch.tensor([1.0, float("nan"), 3.0, float("-inf"), -0.0, 0.0, float("inf"), float("nan"), -2.5, 0.0, -0.0])
    for dt in FLOATS:
        for desc in [False, True]:
            v, i = sort_ref(x.to(dt), 0, desc)
            exact("aten::sort.values", "sort special %s %s" % (dt, desc), [In(x.to(dt)), Int(0), Bool(desc), Out(dt, v), Out(torch.int64, i), TList([3, 4])])
        exact("aten::argsort.stable_out", "argsort special %s" % dt, [In(x.to(dt)), Bool(False), Int(-1), Bool(True), Out(torch.int64, sort_ref(x.to(dt), 0, True)[1]), g.Ref(4)])
    big = torch.tensor([(1 << 62) + 1, (1 << 62), -(1 << 62), (1 << 62) + 1, -1], dtype=torch.int64)
    v, i = sort_ref(big, 0, False)
    exact("aten::sort.values", "sort int64 exact", [In(big), Int(0), Bool(False), Out(torch.int64, v), Out(torch.int64, i), TList([3, 4])])
    for shape, d in [([], 0), ([], -1), ([0, 3], 1), ([3, 0], 1), ([4, 1], 1)]:
        x = rnd(shape, F32)
        v, i = sort_ref(x, d, True)
        exact("aten::sort.values", "sort shape %s %d" % (shape, d), [In(x), Int(d), Bool(True), Out(F32, v), Out(torch.int64, i), TList([3, 4])])
    x = rnd([2, 3, 4, 5], F32)
    for k, o in enumerate(g.orders(4)):
        for d in [1, 3]:
            v, i = sort_ref(x, d, False)
            exact("aten::sort.values", "sort order %d %d" % (k, d),
                  [In(x, o), Int(d), Bool(False), Out(F32, v, order=g.orders(4)[-1 - k]), Out(torch.int64, i, order=o), TList([3, 4])])
    x = rnd([2, 3, 4, 5], F32)
    for k, o in enumerate(g.orders(4)):
        exact("aten::argsort.stable_out", "argsort order %d" % k, [In(x, o), Bool(True), Int(2), Bool(False), Out(torch.int64, sort_ref(x, 2, False)[1], order=g.orders(4)[-1 - k]), g.Ref(4)])
    for shape in [[], [0, 3]]:
        x = rnd(shape, F32)
        exact("aten::argsort.stable_out", "argsort shape %s" % shape, [In(x), Bool(True), Int(-1), Bool(False), Out(torch.int64, sort_ref(x, -1, False)[1]), g.Ref(4)])
    case("aten::argsort.stable_out", "argsort out dtype", [In(x), Bool(True), Int(-1), Bool(False), Out(torch.int32, None, shape=[0, 3]), g.Ref(4)], fail=True)
    case("aten::argsort.stable_out", "argsort bad dim", [In(x), Bool(True), Int(2), Bool(False), Out(torch.int64, None, shape=[0, 3]), g.Ref(4)], fail=True)
    x = rnd([3, 5], F32)
    v, i = sort_ref(x, 1, False)
    # stable=None means "not necessarily stable" (torch 1.13 asserts on it); etch is stable
    exact("aten::sort.values_stable", "sort stable none", [In(x), None, Int(1), Bool(False), Out(F32, v), Out(torch.int64, i), TList([4, 5])])
    exact("aten::sort.values_stable", "sort stable false", [In(x), Bool(False), Int(1), Bool(False), Out(F32, v), Out(torch.int64, i), TList([4, 5])])
    exact("aten::sort.values", "sort dynamic", [In(x), Int(1), Bool(False), Out(F32, v, shape=[4, 4], dynamic=True, capacity=16),
                                                  Out(torch.int64, i, shape=[4, 4], dynamic=True, capacity=16), TList([3, 4])])
    case("aten::sort.values", "sort values dtype", [In(x), Int(1), Bool(False), Out(F64, None, shape=[3, 5]), Out(torch.int64, None, shape=[3, 5]), TList([3, 4])], fail=True)
    case("aten::sort.values", "sort indices dtype", [In(x), Int(1), Bool(False), Out(F32, None, shape=[3, 5]), Out(torch.int32, None, shape=[3, 5]), TList([3, 4])], fail=True)
    case("aten::sort.values", "sort bad dim", [In(x), Int(2), Bool(False), Out(F32, None, shape=[3, 5]), Out(torch.int64, None, shape=[3, 5]), TList([3, 4])], fail=True)
    case("aten::sort.values", "sort static wrong", [In(x), Int(1), Bool(False), Out(F32, None, shape=[5, 3]), Out(torch.int64, None, shape=[3, 5]), TList([3, 4])], fail=True)


def gen_topk():
    In, Out, Int, Bool, TList = g.In, g.Out, g.Int, g.Bool, g.TList
    op = "aten::topk.values"
    seed = 0
    for dt in ALL_DT:
        if dt == torch.bool:
            continue
        for shape, d in [([3, 4, 5], 1), ([3, 4, 5], 0), ([3, 4, 5], -1), ([4, 200], 1)]:
            n = shape[d]
            for k in sorted(set([0, 1, 3, n])):
                for largest in [True, False]:
                    seed += 1
                    x = distinct(shape, dt, seed)
                    v, i = A.topk(x.float() if dt == F16 else x, k, d, largest, True)
                    v = v.to(dt)
                    v2, i2 = A.topk(x.float() if dt == F16 else x, k, d, largest, False)
                    assert torch.equal(v2.sort(d, largest)[0].to(dt), v), "unsorted topk is another set"
                    for srt in [True, False]:
                        exact(op, "topk %s %s %d k%d %s %s" % (dt, shape, d, k, largest, srt),
                              [In(x), Int(k), Int(d), Bool(largest), Bool(srt), Out(dt, v), Out(torch.int64, i), TList([5, 6])])
    x = torch.tensor([[1.0, float("nan"), 3.0, float("-inf"), 2.0, float("inf")]])
    for k in [1, 2, 4, 6]:
        for largest in [True, False]:
            v, i = A.topk(x, k, 1, largest)
            exact(op, "topk special k%d %s" % (k, largest), [In(x), Int(k), Int(1), Bool(largest), Bool(True), Out(F32, v), Out(torch.int64, i), TList([5, 6])])
    x = distinct([2, 3, 4, 5], F32, 99)
    for j, o in enumerate(g.orders(4)):
        v, i = A.topk(x, 2, 1)
        exact(op, "topk order %d" % j, [In(x, o), Int(2), Int(1), Bool(True), Bool(True), Out(F32, v, order=o), Out(torch.int64, i, order=g.orders(4)[-1 - j]), TList([5, 6])])
    for shape, k, d in [([], 1, 0), ([], 0, -1), ([0, 3], 2, 1), ([3, 0], 0, 1)]:
        x = rnd(shape, F32)
        v, i = A.topk(x, k, d)
        exact(op, "topk shape %s %d %d" % (shape, k, d), [In(x), Int(k), Int(d), Bool(True), Bool(True), Out(F32, v), Out(torch.int64, i), TList([5, 6])])
    x = distinct([3, 5], F32, 7)
    for lbl, k, d in [("k big", 6, 1), ("k neg", -1, 1), ("bad dim", 1, 2), ("scalar k2", 2, 0)]:
        xx = torch.tensor(1.0) if lbl == "scalar k2" else x
        case(op, "topk %s" % lbl, [In(xx), Int(k), Int(d), Bool(True), Bool(True), Out(F32, None, shape=[3, 5], dynamic=True, capacity=15),
                                   Out(torch.int64, None, shape=[3, 5], dynamic=True, capacity=15), TList([5, 6])], fail=True)
    case(op, "topk bool", [In(x > 0), Int(1), Int(1), Bool(True), Bool(True), Out(torch.bool, None, shape=[3, 1]), Out(torch.int64, None, shape=[3, 1]), TList([5, 6])], fail=True)
    case(op, "topk indices dtype", [In(x), Int(1), Int(1), Bool(True), Bool(True), Out(F32, None, shape=[3, 1]), Out(torch.int32, None, shape=[3, 1]), TList([5, 6])], fail=True)


# ---- pooling -------------------------------------------------------------------------------------


def gen_avg_pool():
    In, Out, Int, Bool, Ref, IntList = g.In, g.Out, g.Int, g.Bool, g.Ref, g.IntList
    op = "aten::avg_pool2d.out"
    cases = [
        # name, shape, kernel, stride, padding, ceil, count_include_pad, divisor
        ("basic", [1, 1, 4, 4], [2], [], [0], False, True, None),
        ("3d", [3, 7, 7], [3, 3], [2, 2], [1, 1], False, True, None),
        ("odd", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], False, True, None),
        ("odd excl", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], False, False, None),
        ("ceil", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], True, True, None),
        ("ceil excl", [2, 3, 9, 11], [3, 2], [2, 3], [1, 1], True, False, None),
        ("ceil2", [1, 2, 5, 5], [2, 2], [2, 2], [0, 0], True, True, None),
        ("ceil3", [1, 1, 6, 6], [3, 3], [2, 2], [1, 1], True, False, None),
        ("div", [1, 2, 6, 7], [3, 3], [1, 2], [1, 1], False, True, 5),
        ("div neg", [1, 2, 6, 7], [3, 2], [2, 1], [1, 0], True, False, -2),
        ("stride1", [1, 3, 5, 6], [3, 3], [1, 1], [1, 1], False, False, None),
        ("whole", [1, 2, 5, 4], [5, 4], [], [0], False, True, None),
        ("empty batch", [0, 2, 5, 4], [2, 2], [], [0], False, True, None),
        ("wide", [1, 1, 3, 300], [3, 3], [1, 2], [1, 1], True, True, None),
    ]
    for dt in [F32, F64, BF16, F16, torch.int64]:
        for (name, xs, k, st, pd, ceil, cip, div) in cases:
            if dt != F32 and name not in ("odd", "ceil excl", "3d", "div neg", "div"):
                continue
            x = rnd(xs, dt, lo=-100, hi=100)
            fn = lambda t: A.avg_pool2d(t, k, st, pd, ceil, cip, div)
            ref = fn(x) if dt == torch.int64 else via64(fn, x)
            case(op, "avg_pool %s %s" % (name, dt), [In(x), IntList(k), IntList(st), IntList(pd), Bool(ceil), Bool(cip),
                                                      Int(div) if div is not None else None, Out(dt, ref), Ref(7)])
    # channels last, dynamic out
    x = rnd([2, 3, 6, 7], F32)
    ref = via64(lambda t: A.avg_pool2d(t, [3, 2], [2, 2], [1, 1], True, False), x)
    case(op, "avg_pool channels last", [In(x, [0, 2, 3, 1]), IntList([3, 2]), IntList([2, 2]), IntList([1, 1]), Bool(True), Bool(False), None,
                                        Out(F32, ref, order=[0, 2, 3, 1]), Ref(7)])
    case(op, "avg_pool dynamic", [In(x), IntList([3, 2]), IntList([2, 2]), IntList([1, 1]), Bool(True), Bool(False), None,
                                  Out(F32, ref, shape=[2, 3, 7, 7], dynamic=True, capacity=294), Ref(7)])
    bad = [
        ("pad too big", [1, 1, 5, 5], [2, 2], [1, 1], [2, 2], None),
        ("kernel0", [1, 1, 5, 5], [0, 3], [1, 1], [0, 0], None),
        ("stride0", [1, 1, 5, 5], [3, 3], [0, 1], [0, 0], None),
        ("negpad", [1, 1, 5, 5], [3, 3], [1, 1], [-1, 0], None),
        ("too small", [1, 1, 1, 1], [2, 2], [1, 1], [0, 0], None),
        ("rank2", [5, 5], [2, 2], [1, 1], [0, 0], None),
        ("rank5", [1, 1, 1, 5, 5], [2, 2], [1, 1], [0, 0], None),
        ("k len3", [1, 1, 5, 5], [2, 2, 2], [1, 1], [0, 0], None),
        ("pad len0", [1, 1, 5, 5], [2, 2], [1, 1], [], None),
        ("empty C", [1, 0, 5, 5], [2, 2], [1, 1], [0, 0], None),
        ("empty C 3d", [0, 5, 5], [2, 2], [1, 1], [0, 0], None),
        ("div0", [1, 1, 5, 5], [2, 2], [1, 1], [0, 0], 0),
    ]
    for (name, xs, k, st, pd, div) in bad:
        x = rnd(xs, F32)
        r, _ = g.torch_or_fail(lambda: A.avg_pool2d(x, k, st, pd, False, True, div))
        assert r is None, name
        case(op, "avg_pool bad %s" % name, [In(x), IntList(k), IntList(st), IntList(pd), Bool(False), Bool(True), Int(div) if div is not None else None,
                                            Out(F32, None, shape=[1, 1, 3, 3], dynamic=True, capacity=100), Ref(7)], fail=True)
    x = rnd([1, 2, 4, 4], F32)
    common = [IntList([2, 2]), IntList([2, 2]), IntList([0, 0]), Bool(False), Bool(True), None]
    for dt in [torch.int32, torch.uint8, torch.bool]:
        case(op, "avg_pool %s" % dt, [In(x.to(dt))] + common + [Out(dt, None, shape=[1, 2, 2, 2]), Ref(7)], fail=True)
    case(op, "avg_pool out dtype", [In(x)] + common + [Out(F64, None, shape=[1, 2, 2, 2]), Ref(7)], fail=True)
    case(op, "avg_pool static wrong", [In(x)] + common + [Out(F32, None, shape=[1, 2, 3, 3]), Ref(7)], fail=True)


def gen_adaptive():
    In, Out, Ref, IntList, TList = g.In, g.Out, g.Ref, g.IntList, g.TList
    shapes = [([1, 2, 5, 5], [3, 3]), ([2, 3, 7, 9], [2, 4]), ([3, 8, 8], [1, 1]), ([1, 2, 5, 5], [7, 8]),
              ([1, 4, 7, 7], [7, 7]), ([0, 2, 5, 5], [2, 2]), ([1, 2, 5, 5], [0, 2]), ([0, 5, 5], [2, 3]),
              ([1, 3, 1, 13], [1, 5]), ([2, 2, 10, 3], [3, 2])]
    for dt in FLOATS:
        for xs, os in shapes:
            if dt != F32 and xs not in ([2, 3, 7, 9], [1, 2, 5, 5]):
                continue
            x = rnd(xs, dt)
            ref = via64(lambda t: A._adaptive_avg_pool2d(t, os), x)
            case("aten::_adaptive_avg_pool2d.out", "adaptive_avg %s %s %s" % (dt, xs, os), [In(x), IntList(os), Out(dt, ref), Ref(2)])
            # few distinct values: ties keep the first maximum
            x = (rnd(xs, F32) * 0.7).round().to(dt)
            v, i = A.adaptive_max_pool2d(x.double(), os)
            exact("aten::adaptive_max_pool2d.out", "adaptive_max %s %s %s" % (dt, xs, os),
                  [In(x), IntList(os), Out(dt, v.to(dt)), Out(torch.int64, i), TList([2, 3])])
    x = torch.tensor([[[[1.0, float("nan"), 2.0], [float("nan"), 2.0, float("-inf")], [float("-inf"), float("-inf"), float("inf")]]]])
    for os in [[1, 1], [2, 2], [3, 2]]:
        v, i = A.adaptive_max_pool2d(x, os)
        exact("aten::adaptive_max_pool2d.out", "adaptive_max special %s" % os, [In(x), IntList(os), Out(F32, v), Out(torch.int64, i), TList([2, 3])])
    x = torch.full([1, 1, 2, 2], float("-inf"))
    v, i = A.adaptive_max_pool2d(x, [1, 1])
    exact("aten::adaptive_max_pool2d.out", "adaptive_max all -inf", [In(x), IntList([1, 1]), Out(F32, v), Out(torch.int64, i), TList([2, 3])])
    x = rnd([2, 3, 6, 7], F32)
    for k, o in enumerate(g.orders(4)):
        ref = via64(lambda t: A._adaptive_avg_pool2d(t, [4, 3]), x)
        case("aten::_adaptive_avg_pool2d.out", "adaptive_avg order %d" % k, [In(x, o), IntList([4, 3]), Out(F32, ref, order=o), Ref(2)])
        v, i = A.adaptive_max_pool2d(x, [4, 3])
        exact("aten::adaptive_max_pool2d.out", "adaptive_max order %d" % k, [In(x, o), IntList([4, 3]), Out(F32, v, order=o), Out(torch.int64, i, order=g.orders(4)[-1 - k]), TList([2, 3])])
    for name, xs, os in [("empty H", [1, 2, 0, 5], [2, 2]), ("empty C", [1, 0, 5, 5], [2, 2]), ("rank2", [5, 5], [2, 2]),
                         ("len1", [1, 2, 5, 5], [2]), ("len3", [1, 2, 5, 5], [2, 2, 2]), ("neg", [1, 2, 5, 5], [-1, 2])]:
        x = rnd(xs, F32)
        case("aten::_adaptive_avg_pool2d.out", "adaptive_avg bad %s" % name, [In(x), IntList(os), Out(F32, None, shape=[1, 2, 2, 2], dynamic=True, capacity=100), Ref(2)], fail=True)
        case("aten::adaptive_max_pool2d.out", "adaptive_max bad %s" % name, [In(x), IntList(os), Out(F32, None, shape=[1, 2, 2, 2], dynamic=True, capacity=100),
                                                                           Out(torch.int64, None, shape=[1, 2, 2, 2], dynamic=True, capacity=100), TList([2, 3])], fail=True)
    x = rnd([1, 2, 5, 5], F32)
    for dt in [torch.int32, torch.int64, torch.bool]:
        case("aten::_adaptive_avg_pool2d.out", "adaptive_avg %s" % dt, [In(x.to(dt)), IntList([2, 2]), Out(dt, None, shape=[1, 2, 2, 2]), Ref(2)], fail=True)
        case("aten::adaptive_max_pool2d.out", "adaptive_max %s" % dt, [In(x.to(dt)), IntList([2, 2]), Out(dt, None, shape=[1, 2, 2, 2]), Out(torch.int64, None, shape=[1, 2, 2, 2]), TList([2, 3])], fail=True)
    # torch 1.13 copies a float64 result into a float64 out here; etch requires self's dtype
    case("aten::_adaptive_avg_pool2d.out", "adaptive_avg out dtype", [In(x), IntList([2, 2]), Out(F64, None, shape=[1, 2, 2, 2]), Ref(2)], fail=True)
    case("aten::adaptive_max_pool2d.out", "adaptive_max indices dtype", [In(x), IntList([2, 2]), Out(F32, None, shape=[1, 2, 2, 2]), Out(torch.int32, None, shape=[1, 2, 2, 2]), TList([2, 3])], fail=True)


# ---- normalization -------------------------------------------------------------------------------


def opt64(t):
    return None if t is None else t.double()


def gen_batch_norm():
    In, Out, Dbl, Bool, TList = g.In, g.Out, g.Dbl, g.Bool, g.TList
    NT = "aten::_native_batch_norm_legit_no_training.out"
    BN = "aten::native_batch_norm.out"
    k = 0
    for dt in FLOATS:
        for shape in [[2, 3, 4, 5], [4, 3], [2, 3, 7], [1, 3, 1, 1], [3, 5, 2, 3, 2]]:
            for has_w, has_b in [(True, True), (False, False), (True, False)]:
                if dt != F32 and (shape not in ([2, 3, 4, 5], [4, 3]) or not has_w):
                    continue
                k += 1
                C = shape[1]
                x = rnd(shape, dt)
                w = rnd([C], dt) if has_w else None
                b = rnd([C], dt) if has_b else None
                rm = rnd([C], dt)
                rv = (torch.rand(C, dtype=F64) + 0.5).to(dt)
                eps = 1e-5 if k % 2 else 0.1
                r = A.native_batch_norm(x.double(), opt64(w), opt64(b), rm.double(), rv.double(), False, 0.1, eps)
                empty = torch.empty(0, dtype=dt)
                args = [In(x), In(w) if has_w else None, In(b) if has_b else None, In(rm), In(rv)]
                case(NT, "bn eval %s %s %s %s" % (dt, shape, has_w, has_b),
                     args + [Dbl(0.1), Dbl(eps), Out(dt, r[0].to(dt)), Out(dt, empty, shape=[0]), Out(dt, empty, shape=[0]), TList([7, 8, 9])])
                case(BN, "native bn eval %s %s %s %s" % (dt, shape, has_w, has_b),
                     args + [Bool(False), Dbl(0.1), Dbl(eps), Out(dt, r[0].to(dt)), Out(dt, empty), Out(dt, empty), TList([8, 9, 10])])
                r = A.native_batch_norm(x.double(), opt64(w), opt64(b), None, None, True, 0.1, eps)
                case(BN, "native bn train %s %s %s %s" % (dt, shape, has_w, has_b),
                     [In(x), In(w) if has_w else None, In(b) if has_b else None, None, None, Bool(True), Dbl(0.1), Dbl(eps),
                      Out(dt, r[0].to(dt)), Out(dt, r[1].to(dt)), Out(dt, r[2].to(dt)), TList([8, 9, 10])])
    # mixed precision: Half/BFloat16 input with Float parameters and statistics
    for dt in [BF16, F16]:
        x = rnd([2, 3, 4], dt)
        w, b, rm = rnd([3], F32), rnd([3], F32), rnd([3], F32)
        rv = torch.rand(3) + 0.5
        r = A.native_batch_norm(x.double(), w.double(), b.double(), rm.double(), rv.double(), False, 0.1, 1e-5)
        case(NT, "bn eval mixed %s" % dt, [In(x), In(w), In(b), In(rm), In(rv), Dbl(0.1), Dbl(1e-5), Out(dt, r[0].to(dt)),
                                          Out(F32, E(F32)), Out(F32, E(F32)), TList([7, 8, 9])])
        r = A.native_batch_norm(x.double(), w.double(), b.double(), None, None, True, 0.1, 1e-5)
        case(BN, "native bn train mixed %s" % dt, [In(x), In(w), In(b), None, None, Bool(True), Dbl(0.1), Dbl(1e-5), Out(dt, r[0].to(dt)),
                                                  Out(F32, r[1].float()), Out(F32, r[2].float()), TList([8, 9, 10])])
    # dim orders, special values, empty batch, dynamic outs
    x = rnd([2, 3, 4, 5], F32, special=True)
    w, b, rm = rnd([3], F32), rnd([3], F32), rnd([3], F32)
    rv = torch.rand(3) + 0.5
    r = A.native_batch_norm(x.double(), w.double(), b.double(), rm.double(), rv.double(), False, 0.1, 1e-5)
    for i, o in enumerate(g.orders(4)):
        case(NT, "bn eval order %d" % i, [In(x, o), In(w), In(b), In(rm), In(rv), Dbl(0.1), Dbl(1e-5), Out(F32, r[0].float(), order=g.orders(4)[-1 - i]),
                                         Out(F32, E(F32)), Out(F32, E(F32)), TList([7, 8, 9])])
    x = rnd([2, 3, 4, 5], F32)
    r = A.native_batch_norm(x.double(), w.double(), b.double(), None, None, True, 0.1, 1e-5)
    for i, o in enumerate(g.orders(4)):
        case(BN, "native bn train order %d" % i, [In(x, o), In(w), In(b), None, None, Bool(True), Dbl(0.1), Dbl(1e-5), Out(F32, r[0].float(), order=o),
                                                 Out(F32, r[1].float()), Out(F32, r[2].float()), TList([8, 9, 10])])
    case(BN, "native bn train dynamic", [In(x), In(w), In(b), None, None, Bool(True), Dbl(0.1), Dbl(1e-5), Out(F32, r[0].float()),
                                         Out(F32, r[1].float(), shape=[8], dynamic=True, capacity=8), Out(F32, r[2].float(), shape=[8], dynamic=True, capacity=8), TList([8, 9, 10])])
    x0 = rnd([0, 3, 2], F32)
    case(NT, "bn eval empty batch", [In(x0), In(w), In(b), In(rm), In(rv), Dbl(0.1), Dbl(1e-5), Out(F32, x0.clone()),
                                     Out(F32, E(F32)), Out(F32, E(F32)), TList([7, 8, 9])])
    rvneg = torch.tensor([-1.0, 1.0, 2.0])
    xs = rnd([1, 3, 2], F32)
    r = A.native_batch_norm(xs.double(), None, None, rm.double(), rvneg.double(), False, 0.1, 1e-5)
    case(NT, "bn eval negative var", [In(xs), None, None, In(rm), In(rvneg), Dbl(0.1), Dbl(1e-5), Out(F32, r[0].float()),
                                      Out(F32, E(F32)), Out(F32, E(F32)), TList([7, 8, 9])])
    # failures (torch 1.13 does not validate parameter shapes and reads out of bounds: etch refuses)
    x = rnd([2, 3, 4], F32)
    outs = [Out(F32, None, shape=[2, 3, 4]), Out(F32, None, shape=[0]), Out(F32, None, shape=[0]), TList([7, 8, 9])]
    for lbl, xx, ww, mm, vv in [("rank1", rnd([3], F32), w, rm, rv), ("weight size", x, rnd([4], F32), rm, rv),
                                ("mean size", x, w, rnd([2], F32), rv), ("var rank", x, w, rm, rv.reshape(3, 1)),
                                ("weight dtype", x, w.double(), rm, rv), ("int input", x.int(), None, rm.int(), rv.int()),
                                ("mixed f32 in f16 w", x, w.half(), rm, rv)]:
        case(NT, "bn bad %s" % lbl, [In(xx), In(ww) if ww is not None else None, None, In(mm), In(vv), Dbl(0.1), Dbl(1e-5)] + outs, fail=True)
    case(NT, "bn bad out dtype", [In(x), None, None, In(rm), In(rv), Dbl(0.1), Dbl(1e-5), Out(F64, None, shape=[2, 3, 4]),
                                  Out(F32, None, shape=[0]), Out(F32, None, shape=[0]), TList([7, 8, 9])], fail=True)
    case(NT, "bn bad static stats", [In(x), None, None, In(rm), In(rv), Dbl(0.1), Dbl(1e-5), Out(F32, None, shape=[2, 3, 4]),
                                     Out(F32, None, shape=[3]), Out(F32, None, shape=[3]), TList([7, 8, 9])], fail=True)
    bn_outs = [Out(F32, None, shape=[2, 3, 4]), Out(F32, None, shape=[3]), Out(F32, None, shape=[3]), TList([8, 9, 10])]
    # updating running statistics is not supported
    case(BN, "native bn train with stats", [In(x), None, None, In(rm), In(rv), Bool(True), Dbl(0.1), Dbl(1e-5)] + bn_outs, fail=True)
    # torch 1.13 crashes on this one
    case(BN, "native bn eval no stats", [In(x), None, None, None, None, Bool(False), Dbl(0.1), Dbl(1e-5)] + bn_outs, fail=True)
    case(BN, "native bn train empty", [In(rnd([0, 3, 4], F32)), None, None, None, None, Bool(True), Dbl(0.1), Dbl(1e-5)] + bn_outs, fail=True)


def gen_layer_norm():
    In, Out, Dbl, IntList, TList = g.In, g.Out, g.Dbl, g.IntList, g.TList
    op = "aten::native_layer_norm.out"
    for dt in FLOATS:
        for shape, ns in [([2, 3, 4, 5], [5]), ([2, 3, 4, 5], [4, 5]), ([2, 3, 4, 5], [2, 3, 4, 5]), ([7], [7]),
                          ([3, 1000], [1000]), ([4, 1], [1])]:
            for has_w, has_b in [(True, True), (False, False), (False, True)]:
                if dt != F32 and (shape != [2, 3, 4, 5] or not has_w):
                    continue
                x = rnd(shape, dt)
                w = rnd(ns, dt) if has_w else None
                b = rnd(ns, dt) if has_b else None
                r = A.native_layer_norm(x.double(), ns, opt64(w), opt64(b), 1e-5)
                case(op, "layer_norm %s %s %s %s %s" % (dt, shape, ns, has_w, has_b),
                     [In(x), IntList(ns), In(w) if has_w else None, In(b) if has_b else None, Dbl(1e-5),
                      Out(dt, r[0].to(dt)), Out(dt, r[1].to(dt)), Out(dt, r[2].to(dt)), TList([5, 6, 7])])
    for dt in [BF16, F16]:
        x = rnd([3, 8], dt)
        w, b = rnd([8], F32), rnd([8], F32)
        r = A.native_layer_norm(x.double(), [8], w.double(), b.double(), 1e-5)
        case(op, "layer_norm mixed %s" % dt, [In(x), IntList([8]), In(w), In(b), Dbl(1e-5), Out(dt, r[0].to(dt)),
                                             Out(F32, r[1].float()), Out(F32, r[2].float()), TList([5, 6, 7])])
    x = rnd([2, 3, 4, 5], F32, special=True)
    w, b = rnd([4, 5], F32), rnd([4, 5], F32)
    r = A.native_layer_norm(x.double(), [4, 5], w.double(), b.double(), 0.5)
    for i, o in enumerate(g.orders(4)):
        case(op, "layer_norm order %d" % i, [In(x, o), IntList([4, 5]), In(w, [1, 0]), In(b), Dbl(0.5), Out(F32, r[0].float(), order=g.orders(4)[-1 - i]),
                                            Out(F32, r[1].float(), order=o), Out(F32, r[2].float()), TList([5, 6, 7])])
    for shape, ns in [([0, 5], [5]), ([3, 0], [0]), ([1], [1])]:
        x = rnd(shape, F32)
        r = A.native_layer_norm(x.double(), ns, None, None, 1e-5)
        case(op, "layer_norm shape %s %s" % (shape, ns), [In(x), IntList(ns), None, None, Dbl(1e-5), Out(F32, r[0].float()),
                                                          Out(F32, r[1].float()), Out(F32, r[2].float()), TList([5, 6, 7])])
    x = rnd([2, 3, 4], F32)
    r = A.native_layer_norm(x.double(), [4], None, None, 1e-5)
    case(op, "layer_norm dynamic", [In(x), IntList([4]), None, None, Dbl(1e-5), Out(F32, r[0].float(), shape=[5, 5, 5], dynamic=True, capacity=125),
                                    Out(F32, r[1].float(), shape=[5, 5, 1], dynamic=True, capacity=25), Out(F32, r[2].float(), shape=[5, 5, 1], dynamic=True, capacity=25),
                                    TList([5, 6, 7])])
    outs = [Out(F32, None, shape=[2, 3, 4]), Out(F32, None, shape=[2, 3, 1]), Out(F32, None, shape=[2, 3, 1]), TList([5, 6, 7])]
    for lbl, xx, ns, ww in [("ns mismatch", x, [3], None), ("ns empty", x, [], None), ("ns too long", x, [1, 2, 3, 4], None),
                            ("weight shape", x, [4], rnd([2, 2], F32)), ("weight numel", x, [3, 4], rnd([12], F32)),
                            ("weight dtype", x, [4], rnd([4], F64)), ("int", x.int(), [4], None)]:
        case(op, "layer_norm bad %s" % lbl, [In(xx), IntList(ns), In(ww) if ww is not None else None, None, Dbl(1e-5)] + outs, fail=True)
    # torch 1.13 copies into a float64 out0 here; etch requires input's dtype
    case(op, "layer_norm bad out dtype", [In(x), IntList([4]), None, None, Dbl(1e-5), Out(F64, None, shape=[2, 3, 4]),
                                          Out(F32, None, shape=[2, 3, 1]), Out(F32, None, shape=[2, 3, 1]), TList([5, 6, 7])], fail=True)
    case(op, "layer_norm bad stat dtype", [In(x), IntList([4]), None, None, Dbl(1e-5), Out(F32, None, shape=[2, 3, 4]),
                                           Out(F64, None, shape=[2, 3, 1]), Out(F32, None, shape=[2, 3, 1]), TList([5, 6, 7])], fail=True)


def gen_group_norm():
    In, Out, Int, Dbl, TList = g.In, g.Out, g.Int, g.Dbl, g.TList
    op = "aten::native_group_norm.out"
    for dt in FLOATS:
        for shape, G in [([2, 6, 4, 5], 3), ([2, 6], 2), ([3, 4, 5], 2), ([1, 8, 2, 3, 2], 4), ([2, 6, 3, 3], 6), ([2, 6, 3, 3], 1),
                         ([2, 4, 700], 2)]:
            for has_w, has_b in [(True, True), (False, False), (True, False)]:
                if dt != F32 and (shape != [2, 6, 4, 5] or not has_w):
                    continue
                N, C = shape[0], shape[1]
                HxW = 1
                for v in shape[2:]:
                    HxW *= v
                x = rnd(shape, dt)
                w = rnd([C], dt) if has_w else None
                b = rnd([C], dt) if has_b else None
                r = A.native_group_norm(x.double(), opt64(w), opt64(b), N, C, HxW, G, 1e-5)
                case(op, "group_norm %s %s %d %s %s" % (dt, shape, G, has_w, has_b),
                     [In(x), In(w) if has_w else None, In(b) if has_b else None, Int(N), Int(C), Int(HxW), Int(G), Dbl(1e-5),
                      Out(dt, r[0].to(dt)), Out(dt, r[1].to(dt)), Out(dt, r[2].to(dt)), TList([8, 9, 10])])
    x = rnd([2, 6, 4, 5], BF16)
    w, b = rnd([6], F32), rnd([6], F32)
    r = A.native_group_norm(x.double(), w.double(), b.double(), 2, 6, 20, 3, 1e-5)
    case(op, "group_norm mixed", [In(x), In(w), In(b), Int(2), Int(6), Int(20), Int(3), Dbl(1e-5), Out(BF16, r[0].to(BF16)),
                                  Out(F32, r[1].float()), Out(F32, r[2].float()), TList([8, 9, 10])])
    x = rnd([2, 6, 4, 5], F32, special=True)
    w, b = rnd([6], F32), rnd([6], F32)
    r = A.native_group_norm(x.double(), w.double(), b.double(), 2, 6, 20, 2, 0.25)
    for i, o in enumerate(g.orders(4)):
        case(op, "group_norm order %d" % i, [In(x, o), In(w), In(b), Int(2), Int(6), Int(20), Int(2), Dbl(0.25), Out(F32, r[0].float(), order=g.orders(4)[-1 - i]),
                                            Out(F32, r[1].float(), order=[1, 0]), Out(F32, r[2].float()), TList([8, 9, 10])])
    x = rnd([0, 4, 3], F32)
    r = A.native_group_norm(x, None, None, 0, 4, 3, 2, 1e-5)
    case(op, "group_norm empty", [In(x), None, None, Int(0), Int(4), Int(3), Int(2), Dbl(1e-5), Out(F32, r[0]), Out(F32, r[1]), Out(F32, r[2]), TList([8, 9, 10])])
    x = rnd([2, 6, 4, 5], F32)
    outs = [Out(F32, None, shape=[2, 6, 4, 5]), Out(F32, None, shape=[2, 3]), Out(F32, None, shape=[2, 3]), TList([8, 9, 10])]
    for lbl, xx, N, C, HxW, G, ww in [("N", x, 3, 6, 20, 3, None), ("C", x, 2, 5, 20, 3, None), ("HxW", x, 2, 6, 21, 3, None),
                                      ("group", x, 2, 6, 20, 4, None), ("group0", x, 2, 6, 20, 0, None), ("weight", x, 2, 6, 20, 3, rnd([5], F32)),
                                      ("rank1", rnd([6], F32), 1, 6, 1, 3, None), ("int", x.int(), 2, 6, 20, 3, None),
                                      ("weight dtype", x, 2, 6, 20, 3, rnd([6], F64))]:
        case(op, "group_norm bad %s" % lbl, [In(xx), In(ww) if ww is not None else None, None, Int(N), Int(C), Int(HxW), Int(G), Dbl(1e-5)] + outs, fail=True)


# ---- embedding, padding, interpolation ------------------------------------------------------------


def gen_embedding():
    In, Out, Int, Bool, Ref = g.In, g.Out, g.Int, g.Bool, g.Ref
    op = "aten::embedding.out"
    for dt in ALL_DT:
        for idt in [torch.int64, torch.int32]:
            w = rnd([10, 7], dt)
            for ishape in [[4], [2, 3], [], [0], [2, 0, 3]]:
                ix = torch.randint(0, 10, ishape if ishape else [], dtype=idt)
                ref = A.embedding(w, ix.long())
                exact(op, "embedding %s %s %s" % (dt, idt, ishape), [In(w), In(ix), Int(-1), Bool(False), Bool(False), Out(dt, ref), Ref(5)])
    w = rnd([6, 5], F32)
    ix = torch.tensor([[5, 0, 5], [2, 2, 1]])
    ref = A.embedding(w, ix)
    for i, (wo, xo, oo) in enumerate([([1, 0], [0, 1], [0, 1, 2]), ([0, 1], [1, 0], [2, 0, 1]), ([1, 0], [1, 0], [1, 2, 0])]):
        exact(op, "embedding order %d" % i, [In(w, wo), In(ix, xo), Int(2), Bool(False), Bool(False), Out(F32, ref, order=oo), Ref(5)])
    exact(op, "embedding padding_idx ignored", [In(w), In(ix), Int(5), Bool(True), Bool(False), Out(F32, ref), Ref(5)])
    exact(op, "embedding D0", [In(rnd([4, 0], F32)), In(ix % 4), Int(-1), Bool(False), Bool(False), Out(F32, torch.empty(2, 3, 0)), Ref(5)])
    exact(op, "embedding dynamic", [In(w), In(ix), Int(-1), Bool(False), Bool(False), Out(F32, ref, shape=[4, 4, 5], dynamic=True, capacity=80), Ref(5)])
    for lbl, ww, xx, odt in [("oob", w, torch.tensor([1, 6]), F32), ("negative", w, torch.tensor([-1]), F32),
                             ("int32 oob", w, torch.tensor([[0, 1], [2, 99]], dtype=torch.int32), F32), ("empty weight", rnd([0, 5], F32), torch.tensor([0]), F32),
                             ("weight 1d", rnd([6], F32), torch.tensor([0]), F32), ("weight 3d", rnd([6, 2, 2], F32), torch.tensor([0]), F32),
                             ("int16 indices", w, torch.tensor([0], dtype=torch.int16), F32), ("float indices", w, torch.tensor([0.0]), F32),
                             ("out dtype", w, torch.tensor([0]), F64)]:
        case(op, "embedding bad %s" % lbl, [In(ww), In(xx), Int(-1), Bool(False), Bool(False), Out(odt, None, shape=[2, 5], dynamic=True, capacity=100), Ref(5)], fail=True)


def gen_pad():
    In, Out, Ref, IntList = g.In, g.Out, g.Ref, g.IntList
    op = "aten::constant_pad_nd.out"
    for dt in ALL_DT:
        for shape, pad, val in [([2, 3], [1, 2], 0), ([2, 3, 4], [1, 0, 2, 1], 1), ([2, 3, 4], [0, 0, 0, 0, 1, 1], 0),
                                ([3, 5], [-1, 2, 1, -2], 1), ([3, 5], [-2, -3], 0), ([4], [3, 3], 1), ([2, 3], [], 0)]:
            x = rnd(shape, dt)
            v = True if dt == torch.bool and val else val
            scal = g.Bool(v) if isinstance(v, bool) else g.Int(v)
            exact(op, "pad %s %s %s %r" % (dt, shape, pad, v), [In(x), IntList(pad), scal, Out(dt, A.constant_pad_nd(x, pad, v)), Ref(3)])
    for dt, val in [(F32, 2.5), (F32, float("nan")), (F32, float("-inf")), (F16, -1.5), (BF16, 1e30), (F64, 1e300), (torch.int32, 2.7),
                    (torch.int64, -(1 << 62)), (torch.uint8, -1), (torch.uint8, 255), (torch.int8, -128), (torch.bool, 0.5), (F32, True),
                    (torch.int16, -2.9), (F16, 65504.0)]:
        x = rnd([2, 3], dt)
        scal = g.Bool(val) if isinstance(val, bool) else g.Int(val) if isinstance(val, int) else g.Dbl(val)
        exact(op, "pad value %s %r" % (dt, val), [In(x), IntList([1, 1, 0, 1]), scal, Out(dt, A.constant_pad_nd(x, [1, 1, 0, 1], val)), Ref(3)])
    x = rnd([2, 3, 4, 5], F32)
    ref = A.constant_pad_nd(x, [1, 2, -1, 1, 0, 1], 0.5)
    for i, o in enumerate(g.orders(4)):
        exact(op, "pad order %d" % i, [In(x, o), IntList([1, 2, -1, 1, 0, 1]), g.Dbl(0.5), Out(F32, ref, order=g.orders(4)[-1 - i]), Ref(3)])
    for shape, pad in [([], []), ([0, 3], [1, 1, 1, 1]), ([2, 0], [1, 1]), ([2, 3], [-3, 0]), ([2, 0], [0, 0, -1, 0])]:
        x = rnd(shape, F32)
        exact(op, "pad shape %s %s" % (shape, pad), [In(x), IntList(pad), g.Int(7), Out(F32, A.constant_pad_nd(x, pad, 7)), Ref(3)])
    x = rnd([2, 3], F32)
    exact(op, "pad dynamic", [In(x), IntList([1, 1]), g.Int(0), Out(F32, A.constant_pad_nd(x, [1, 1]), shape=[4, 8], dynamic=True, capacity=32), Ref(3)])
    for lbl, dt, pad, val in [("odd", F32, [1], 0), ("empty with positive pad", F32, [-3, 0, 1, 0], 0), ("too long", F32, [1, 1, 1, 1, 1, 1], 0), ("negative size", F32, [-4, 0], 0),
                              ("u8 300", torch.uint8, [1, 1], 300), ("u8 -256", torch.uint8, [1, 1], -256), ("i32 inf", torch.int32, [1, 1], float("inf")),
                              ("i8 128", torch.int8, [1, 1], 128), ("half 1e6", F16, [1, 1], 1e6), ("f32 1e39", F32, [1, 1], 1e39),
                              ("i32 nan", torch.int32, [1, 1], float("nan"))]:
        xx = rnd([2, 3], dt)
        r, _ = g.torch_or_fail(lambda: A.constant_pad_nd(xx, pad, val))
        if lbl != "i32 nan":  # torch converts NaN to an int without complaint; etch refuses
            assert r is None, lbl
        scal = g.Int(val) if isinstance(val, int) else g.Dbl(val)
        case(op, "pad bad %s" % lbl, [In(xx), IntList(pad), scal, Out(dt, None, shape=[2, 5], dynamic=True, capacity=100), Ref(3)], fail=True)
    # torch 1.13 copies into another out dtype; etch requires self's
    case(op, "pad bad out dtype", [In(x), IntList([1, 1]), g.Int(0), Out(F64, None, shape=[2, 5]), Ref(3)], fail=True)


def up_ref(fn, x):
    """torch's result; for Half/BFloat16 the float one rounded (torch 1.13 has no Half kernel,
    and its BFloat16 bilinear kernel rounds the interpolation weights to BFloat16, which etch
    does not: etch computes coordinates and weights as for Float)."""
    if x.dtype in (F16, BF16):
        return fn(x.float()).to(x.dtype)
    return fn(x)


def gen_upsample():
    In, Out, Bool, Ref, IntList, DblList, Dbl = g.In, g.Out, g.Bool, g.Ref, g.IntList, g.DblList, g.Dbl
    NV, NO = "aten::upsample_nearest2d.vec_out", "aten::upsample_nearest2d.out"
    BV, BO = "aten::upsample_bilinear2d.vec_out", "aten::upsample_bilinear2d.out"
    sizes = [([1, 2, 5, 5], [7, 3]), ([2, 3, 4, 6], [8, 12]), ([1, 1, 4, 4], [4, 4]), ([1, 2, 7, 9], [3, 4]),
             ([2, 2, 3, 5], [10, 11]), ([1, 3, 1, 1], [5, 3]), ([0, 2, 3, 3], [5, 5]), ([1, 2, 13, 11], [17, 1])]
    scales = [([1, 2, 5, 5], [1.5, 0.7]), ([2, 3, 4, 6], [2.0, 2.0]), ([1, 2, 7, 9], [0.45, 1.0]), ([1, 1, 3, 7], [3.3, 1.7]),
              ([1, 2, 6, 6], [1.0 / 3, 2.5])]
    for dt in [F32, F64, BF16, F16, torch.uint8]:
        for shape, osz in sizes:
            x = rnd(shape, dt, lo=0, hi=255) if dt == torch.uint8 else rnd(shape, dt)
            ref = up_ref(lambda t: A.upsample_nearest2d(t, osz), x)
            exact(NO, "nearest %s %s %s" % (dt, shape, osz), [In(x), IntList(osz), None, None, Out(dt, ref), Ref(4)])
            exact(NV, "nearest vec %s %s %s" % (dt, shape, osz), [In(x), IntList(osz), None, Out(dt, ref), Ref(3)])
            if dt in FLOATS:
                for align in [False, True]:
                    ref = up_ref(lambda t: A.upsample_bilinear2d(t, osz, align), x)
                    case(BO, "bilinear %s %s %s %s" % (dt, shape, osz, align), [In(x), IntList(osz), Bool(align), None, None, Out(dt, ref), Ref(5)])
                    case(BV, "bilinear vec %s %s %s %s" % (dt, shape, osz, align), [In(x), IntList(osz), Bool(align), None, Out(dt, ref), Ref(4)])
        for shape, sf in scales:
            x = rnd(shape, dt, lo=0, hi=255) if dt == torch.uint8 else rnd(shape, dt)
            ref = up_ref(lambda t: A.upsample_nearest2d.vec(t, None, sf), x)
            exact(NV, "nearest vec %s %s sf %s" % (dt, shape, sf), [In(x), None, DblList(sf), Out(dt, ref), Ref(3)])
            osz = list(ref.shape[2:])
            ref2 = up_ref(lambda t: A.upsample_nearest2d(t, osz, sf[0], sf[1]), x)
            exact(NO, "nearest %s %s scales %s" % (dt, shape, sf), [In(x), IntList(osz), Dbl(sf[0]), Dbl(sf[1]), Out(dt, ref2), Ref(4)])
            if dt in FLOATS:
                for align in [False, True]:
                    ref = up_ref(lambda t: A.upsample_bilinear2d.vec(t, None, align, sf), x)
                    case(BV, "bilinear vec %s %s sf %s %s" % (dt, shape, sf, align), [In(x), None, Bool(align), DblList(sf), Out(dt, ref), Ref(4)])
                    ref2 = up_ref(lambda t: A.upsample_bilinear2d(t, osz, align, sf[0], sf[1]), x)
                    case(BO, "bilinear %s %s scales %s %s" % (dt, shape, sf, align), [In(x), IntList(osz), Bool(align), Dbl(sf[0]), Dbl(sf[1]), Out(dt, ref2), Ref(5)])
    # scales that do not match the sizes (they still map coordinates), one scale only
    x = rnd([1, 2, 5, 6], F32)
    for sh, sw in [(0.3, None), (None, 4.0), (-1.0, 0.0), (2.5, 0.5)]:
        ref = A.upsample_nearest2d(x, [7, 3], sh, sw)
        exact(NO, "nearest odd scales %r %r" % (sh, sw), [In(x), IntList([7, 3]), Dbl(sh) if sh is not None else None, Dbl(sw) if sw is not None else None, Out(F32, ref), Ref(4)])
        if sh == 0.3:
            continue  # torch 1.13 reads past the input here (etch clamps to the last row)
        ref = A.upsample_bilinear2d(x, [7, 3], False, sh, sw)
        case(BO, "bilinear odd scales %r %r" % (sh, sw), [In(x), IntList([7, 3]), Bool(False), Dbl(sh) if sh is not None else None, Dbl(sw) if sw is not None else None, Out(F32, ref), Ref(5)])
    # dim orders
    x = rnd([2, 3, 5, 6], F32)
    for i, o in enumerate(g.orders(4)):
        exact(NV, "nearest order %d" % i, [In(x, o), IntList([7, 4]), None, Out(F32, A.upsample_nearest2d(x, [7, 4]), order=g.orders(4)[-1 - i]), Ref(3)])
        case(BV, "bilinear order %d" % i, [In(x, o), IntList([7, 4]), Bool(False), None, Out(F32, A.upsample_bilinear2d(x, [7, 4], False), order=o), Ref(4)])
    x = rnd([1, 2, 4, 4], F32)
    case(BV, "bilinear dynamic", [In(x), None, Bool(True), DblList([2.0, 2.0]), Out(F32, A.upsample_bilinear2d.vec(x, None, True, [2.0, 2.0]), shape=[1, 2, 10, 10], dynamic=True, capacity=200), Ref(4)])
    # failures
    for lbl, shape, osz, sf in [("both", [1, 2, 5, 5], [7, 3], [1.5, 0.7]), ("neither", [1, 2, 5, 5], None, None), ("size len1", [1, 2, 5, 5], [7], None),
                                ("sf len1", [1, 2, 5, 5], None, [2.0]), ("3d", [2, 5, 5], [7, 3], None), ("out 0", [1, 2, 5, 5], [0, 3], None),
                                ("empty in", [1, 2, 0, 5], [2, 3], None), ("sf neg", [1, 2, 5, 5], None, [-1.0, 2.0]), ("sf small", [1, 2, 5, 5], None, [0.1, 2.0]),
                                ("sf nan", [1, 2, 5, 5], None, [float("nan"), 2.0])]:
        x = rnd(shape, F32)
        args = [In(x), IntList(osz) if osz is not None else None]
        outs = [Out(F32, None, shape=[1, 2, 7, 3], dynamic=True, capacity=1000)]
        sfa = DblList(sf) if sf is not None else None
        case(NV, "nearest bad %s" % lbl, args + [sfa] + outs + [Ref(3)], fail=True)
        case(BV, "bilinear bad %s" % lbl, args + [Bool(False), sfa] + outs + [Ref(4)], fail=True)
    x = rnd([1, 2, 5, 5], F32)
    for dt in [torch.int32, torch.int64, torch.bool, torch.int8]:
        case(NO, "nearest %s" % dt, [In(x.to(dt)), IntList([7, 3]), None, None, Out(dt, None, shape=[1, 2, 7, 3]), Ref(4)], fail=True)
    case(BO, "bilinear uint8", [In(x.to(torch.uint8)), IntList([7, 3]), Bool(False), None, None, Out(torch.uint8, None, shape=[1, 2, 7, 3]), Ref(5)], fail=True)
    case(NO, "nearest out dtype", [In(x), IntList([7, 3]), None, None, Out(F64, None, shape=[1, 2, 7, 3]), Ref(4)], fail=True)
    case(BO, "bilinear static wrong", [In(x), IntList([7, 3]), Bool(False), None, None, Out(F32, None, shape=[1, 2, 3, 7]), Ref(5)], fail=True)


# ---- linear -------------------------------------------------------------------------------------


def gen_linear():
    """aten::linear.out: input [..., K] x weight [N, K] (+ bias [N] / [1] / 0-d). Draws from a
    generator of its own, so the other cases keep their random values."""
    In, Out, Ref = g.In, g.Out, g.Ref
    LO = "aten::linear.out"
    rng = np.random.default_rng(4242)

    def r(shape, dt):
        if dt in INTS:
            lo = 0 if dt == torch.uint8 else -8
            return torch.from_numpy(rng.integers(lo, 9, size=shape)).to(dt)
        return torch.from_numpy(rng.uniform(-1.0, 1.0, size=shape)).to(dt)

    def ref(x, w, b, dt):
        if dt in INTS:
            y = torch.matmul(x.long(), w.long().t())
            return (y + b.long() if b is not None else y).to(dt)
        y = torch.nn.functional.linear(x.double(), w.double(), b.double() if b is not None else None)
        return y.to(dt)

    for dt in [d for d in ALL_DT if d != torch.bool]:
        for xshape, n, bshape in [([5], 3, [3]), ([4, 5], 6, None), ([4, 5], 6, [6]),
                                  ([2, 3, 7], 4, [1]), ([2, 1, 3, 9], 5, []), ([3, 0], 2, [2]),
                                  ([0, 4], 3, [3]), ([2, 130], 3, [3])]:
            x = r(xshape, dt)
            w = r([n, xshape[-1]], dt)
            b = r(bshape, dt) if bshape is not None else None
            case(LO, "linear %s %s n %d bias %s" % (NAMES[dt], xshape, n, bshape),
                 [In(x), In(w), In(b) if b is not None else None, Out(dt, ref(x, w, b, dt)), Ref(3)])
    x = r([3, 4, 5], F32)
    w = r([6, 5], F32)
    b = r([6], F32)
    case(LO, "linear orders", [In(x, [1, 0, 2]), In(w, [1, 0]), In(b), Out(F32, ref(x, w, b, F32), order=[2, 0, 1]), Ref(3)])
    case(LO, "linear weight width", [In(x), In(r([6, 4], F32)), None, Out(F32, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear bias length", [In(x), In(w), In(r([5], F32)), Out(F32, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear bias rank", [In(x), In(w), In(r([1, 6], F32)), Out(F32, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear dtype mismatch", [In(x), In(w.double()), None, Out(F32, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear bias dtype", [In(x), In(w), In(b.double()), Out(F32, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear out dtype", [In(x), In(w), None, Out(F64, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear bool", [In(x > 0), In(w > 0), None, Out(torch.bool, None, shape=[3, 4, 6]), Ref(3)], fail=True)
    case(LO, "linear weight rank", [In(x), In(r([5], F32)), None, Out(F32, None, shape=[3, 4]), Ref(3)], fail=True)
    case(LO, "linear scalar input", [In(torch.tensor(1.0)), In(w), None, Out(F32, None, shape=[6]), Ref(3)], fail=True)
    case(LO, "linear static wrong", [In(x), In(w), None, Out(F32, None, shape=[3, 6, 4]), Ref(3)], fail=True)
    case(LO, "linear dynamic out", [In(x), In(w), In(b), Out(F32, ref(x, w, b, F32), shape=[4, 4, 8], dynamic=True, capacity=128), Ref(3)])


def generate(gen):
    global g
    g = gen
    gen_softmax()
    gen_mean()
    gen_amax_amin()
    gen_arg()
    gen_max_min_dim()
    gen_var()
    gen_prod()
    gen_any()
    gen_cumsum()
    gen_sort()
    gen_topk()
    gen_avg_pool()
    gen_adaptive()
    gen_batch_norm()
    gen_layer_norm()
    gen_group_norm()
    gen_embedding()
    gen_pad()
    gen_upsample()
    gen_linear()
