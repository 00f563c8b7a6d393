"""Golden cases for the math kernels: comparisons, selection, logical/bitwise ops, arithmetic,
unary math and activations (see gen_golden.py for the file format and helpers).

References come from torch 1.13 through its Python API (a Python number is a wrapped scalar, as
etch treats Scalar arguments). Where torch 1.13 has no CPU kernel for Half, the reference is
torch's float result rounded to Half (what etch computes: Float opmath, one rounding).

Tolerances: ops whose result is fixed by IEEE rules (selections, comparisons, integer ops,
rounding, remainder/fmod/floor_divide, sqrt/rsqrt/reciprocal, clamp, hardswish/hardsigmoid,
leaky_relu, ...) are compared bit for bit (g.EXACT_RTOL); transcendental functions (exp, log,
trig, erf, pow, sigmoid, gelu, ...) are computed by etch in double and rounded once, and use the
out dtype's default tolerance (Float 1e-5, Double 1e-12, Half 2e-3, BFloat16 1.6e-2, relative
to max(1, |expected|)), which covers torch's vectorised float kernels being an ulp or two off.
"""
import math

import torch

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
B, U8, I8, I16, I32, I64 = torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64
ALL_DT = [B, U8, I8, I16, I32, I64, F16, BF16, F32, F64]
FLOATS = [F16, BF16, F32, F64]
INTS = [U8, I8, I16, I32, I64]
NAMES = {B: "Bool", U8: "Byte", I8: "Char", I16: "Short", I32: "Int", I64: "Long", F16: "Half",
         BF16: "BFloat16", F32: "Float", F64: "Double"}


def names(dts):
    return [NAMES[d] for d in dts]


NO_BOOL = [d for d in ALL_DT if d != B]
BOOL_INT = [B] + INTS

CMP = ["eq", "ne", "lt", "le", "gt", "ge"]
UNARY_FLOAT = ["exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
               "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
               "sigmoid", "reciprocal"]
ROUNDING = ["floor", "ceil", "round", "trunc"]

# (op, dtype) pairs implemented and tested here (dtype of the main input; for the Scalar
# overloads the tensor operand).
SUPPORTED = {}
for _n in CMP:
    SUPPORTED["aten::%s.Tensor_out" % _n] = names(ALL_DT)
    SUPPORTED["aten::%s.Scalar_out" % _n] = names(ALL_DT)
for _n in ["maximum", "minimum"]:
    SUPPORTED["aten::%s.out" % _n] = names(ALL_DT)
SUPPORTED["aten::where.self_out"] = names(ALL_DT)  # self/other dtypes; condition Bool or Byte
for _n in ["logical_and", "logical_or", "logical_xor", "logical_not"]:
    SUPPORTED["aten::%s.out" % _n] = names(ALL_DT)
for _n in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    SUPPORTED["aten::%s.Tensor_out" % _n] = names(BOOL_INT)
    SUPPORTED["aten::%s.Scalar_out" % _n] = names(BOOL_INT)
SUPPORTED["aten::bitwise_not.out"] = names(BOOL_INT)
SUPPORTED["aten::isnan.out"] = names(ALL_DT)
SUPPORTED["aten::isinf.out"] = names(ALL_DT)
for _n in ["remainder.Tensor_out", "remainder.Scalar_out", "fmod.Tensor_out", "fmod.Scalar_out",
           "floor_divide.out", "pow.Tensor_Tensor_out", "pow.Tensor_Scalar_out", "pow.Scalar_out",
           "rsub.Scalar_out"]:
    SUPPORTED["aten::" + _n] = names(NO_BOOL)  # Bool only mixed with another dtype
for _n in ["neg", "abs"] + ROUNDING:
    SUPPORTED["aten::%s.out" % _n] = names(NO_BOOL)
SUPPORTED["aten::sign.out"] = names(ALL_DT)
for _n in UNARY_FLOAT + ["logit"]:
    SUPPORTED["aten::%s.out" % _n] = names(ALL_DT)  # Bool/integral compute in Float
SUPPORTED["aten::atan2.out"] = names(ALL_DT)
for _n in ["gelu", "silu", "hardswish", "hardsigmoid", "leaky_relu", "elu", "softplus", "glu"]:
    SUPPORTED["aten::%s.out" % _n] = names(FLOATS)
SUPPORTED["aten::hardtanh.out"] = names(NO_BOOL)
SUPPORTED["aten::clamp.out"] = names(NO_BOOL)
SUPPORTED["aten::clamp.Tensor_out"] = names(ALL_DT)

A = torch.ops.aten
g = None  # the gen_golden module, set by generate()
NAN, INF = float("nan"), float("inf")


def E(dt):
    return torch.empty(0, dtype=dt)


def dn(dt):
    return NAMES[dt]


# ---- data -------------------------------------------------------------------------------------


def data(shape, dt, kind="any", special=False):
    """Values for dtype dt. kind: "any" (g.rand's wide ranges), "small" (integers in [-20, 20],
    [0, 40] for Byte; floats scaled by 3), "unit" (floats mostly in [-1, 1]), "pos" (positive
    floats), "prob" (floats mostly in (0, 1))."""
    if dt == B:
        return g.rand(shape, dt)
    if dt in INTS:
        if kind == "any":
            return g.rand(shape, dt)
        lo = 0 if dt == U8 else -20
        hi = 40 if dt == U8 else 20
        if kind in ("pos", "prob"):
            lo, hi = 0, 20
        return g.rand(shape, dt, lo=lo, hi=hi)
    x = g.rand(shape, F64)
    if kind == "unit":
        x = x / 2.5
    elif kind == "pos":
        x = x.abs() + 0.01
    elif kind == "prob":
        x = torch.sigmoid(x)
    x = x.to(dt)
    if special and x.numel() >= 6:
        f = x.reshape(-1)
        for i, v in enumerate([NAN, INF, -INF, -0.0, 0.0, 1.0]):
            f[i] = v
    return x


def result_dtype(ins):
    ts = [x for x in ins if isinstance(x, torch.Tensor)]
    if len(ins) == 1:
        return ins[0].dtype
    if len(ins) == 2:
        return torch.result_type(ins[0], ins[1])
    return ts[0].dtype


def ref(fn, ins, od=None, kw=None):
    """torch's result of fn(*ins, **kw[, out=empty(od)]): (tensor, None) or (None, error).
    Half inputs without a torch kernel compute in float and round the result to Half."""
    kw = kw or {}

    def call(xs, o):
        if o is None:
            return fn(*xs, **kw)
        return fn(*xs, **kw, out=E(o))

    try:
        return call(ins, od), None
    except Exception as e:  # noqa: BLE001 - torch's error means the case must fail
        msg = str(e)
    if "not implemented for 'Half'" not in msg:
        return None, msg
    fins = [x.float() if isinstance(x, torch.Tensor) and x.dtype == F16 else x for x in ins]
    try:
        r = call(fins, F32 if od == F16 else od)
    except Exception as e:  # noqa: BLE001
        return None, str(e)
    if r.is_floating_point() and (od == F16 or (od is None and result_dtype(ins) == F16)):
        r = r.half()
    return r, None


def arg_of(x, order=None):
    if isinstance(x, torch.Tensor):
        return g.In(x, order)
    return g.scalar_value(x)


def bshape(ins):
    shapes = [list(x.shape) for x in ins if isinstance(x, torch.Tensor)]
    try:
        return list(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return shapes[0]


def emit(op, label, ins, fn, od=None, kw=None, pre=None, post=(), rtol=0.0, orders=None,
         out_order=None, out_kw=None, fail=False, res=None, loose=()):
    """One case: args = pre (default: the inputs) + post + [out, Ref(out)]. The reference is
    fn(*ins, **kw, out=) unless res is given; od defaults to torch's functional result dtype."""
    comp = None  # the dtype torch computes in
    if res is None:
        probe, _ = ref(fn, ins, None, kw)
        comp = probe.dtype if probe is not None else None
        if od is None:
            od = probe.dtype if probe is not None else F32
        res, _ = ref(fn, ins, od, kw)
        if comp in loose or (res is not None and res.dtype in loose):
            rtol = 0.0  # the default tolerance
        if rtol == 0.0 and probe is not None and probe.dtype in TOL and od in TOL:
            # computed in probe's dtype: its rounding decides the tolerance
            rtol = max(TOL[probe.dtype], TOL[od])
    if pre is None:
        orders = orders or [None] * len(ins)
        pre = [arg_of(x, o) for x, o in zip(ins, orders)]
    okw = dict(out_kw or {})
    if res is not None and res.dtype in loose:
        rtol = 0.0  # the dtype's default tolerance
    if res is not None and not fail:
        assert res.dtype == od, (label, res.dtype, od)
        out = g.Out(od, res, order=out_order, **okw)
    else:
        shape = okw.pop("shape", list(res.shape) if res is not None else bshape(ins))
        out = g.Out(od, None, shape=shape, order=out_order, **okw)
    args = list(pre) + list(post)
    args += [out, g.Ref(len(args))]
    g.W.case(op, label, args, fail=fail or res is None, rtol=rtol)
    return res


TOL = {F32: 1e-5, F64: 1e-12, F16: 2e-3, BF16: 1.6e-2}  # test_kernels.c's defaults


# ---- comparisons, maximum/minimum, logical, bitwise ------------------------------------------------


def gen_binary_family(opname, fn, tensor_op, scalar_op, dts, rtol, kind="any", scalars=(),
                      divisor=False, extra_pairs=(), loose=()):
    """Same-dtype pairs with broadcasting, mixed pairs, Scalar overloads, out dtypes, shapes,
    dim orders, special values and out-tensor rules for one binary operator."""
    def fix(b):
        if divisor and not b.is_floating_point():
            return torch.where(b == 0, torch.ones_like(b), b)
        return b

    for dt in ALL_DT:
        a = data([2, 3, 5], dt, kind, special=dt in FLOATS)
        b = fix(data([3, 1], dt, kind, special=dt in FLOATS))
        emit(tensor_op, "%s %s" % (opname, dn(dt)), [a, b], fn, rtol=rtol, loose=loose)
        if dt in (F32, I32, I64, U8):
            a = data([130], dt, kind, special=dt in FLOATS)
            b = fix(data([130], dt, kind))
            emit(tensor_op, "%s long %s" % (opname, dn(dt)), [a, b], fn, rtol=rtol, loose=loose)
    pairs = [(I32, F32), (U8, I8), (B, I32), (F16, BF16), (I64, F64), (F32, F64), (I8, B),
             (BF16, F32), (U8, I64), (F16, I16)] + list(extra_pairs)
    for da, db in pairs:
        a = data([4, 3], da, kind)
        b = fix(data([3], db, kind))
        emit(tensor_op, "%s %s+%s" % (opname, dn(da), dn(db)), [a, b], fn, rtol=rtol, loose=loose)
    # zero-dim tensors take part in promotion by category only
    for da, db in [(I32, F64), (F32, F64), (I8, I64), (F16, F32), (U8, I8), (B, I64)]:
        a = data([3], da, kind)
        b = fix(data([], db, kind))
        emit(tensor_op, "%s zerodim %s+%s" % (opname, dn(da), dn(db)), [a, b], fn, rtol=rtol, loose=loose)
        emit(tensor_op, "%s zerodim rev %s+%s" % (opname, dn(db), dn(da)), [fix(b), fix(a)], fn,
             rtol=rtol, loose=loose)
    # out dtypes (torch decides which are allowed)
    for da, db in [(F32, F32), (I32, I32), (B, B), (U8, I8)]:
        for od in ALL_DT:
            a = data([5], da, kind)
            b = fix(data([5], db, kind))
            emit(tensor_op, "%s out %s %s->%s" % (opname, dn(da), dn(db), dn(od)), [a, b], fn, od=od,
                 rtol=rtol, loose=loose)
    # shapes: broadcasting, empty, zero-dim, high rank, odd sizes
    shapes = [([], []), ([5], []), ([], [4]), ([3, 1], [1, 4]), ([2, 1, 4], [3, 1]), ([0, 3], [3]),
              ([0], [1]), ([2, 0, 3], [1, 1, 3]), ([1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2], [2, 1]),
              ([33, 65], [65]), ([9, 300], [9, 1])]
    for i, (sa, sb) in enumerate(shapes):
        dt = F32 if i % 2 == 0 else I32
        if F32 not in dts:
            dt = dts[-1]
        a = data(sa, dt, kind)
        b = fix(data(sb, dt, kind))
        emit(tensor_op, "%s shape%d %s" % (opname, i, dn(dt)), [a, b], fn, rtol=rtol, loose=loose)
    dt = F32 if F32 in dts else I32
    for i, (sa, sb) in enumerate([([3], [4]), ([2, 3], [3, 2]), ([0], [2])]):
        emit(tensor_op, "%s badshape%d" % (opname, i), [data(sa, dt, kind), fix(data(sb, dt, kind))],
             fn, rtol=rtol, loose=loose)
    # dim orders on inputs and out
    dt = F32 if F32 in dts else I16
    for ao, oo in [([0, 2, 3, 1], [0, 2, 3, 1]), ([3, 2, 1, 0], [0, 1, 2, 3]), ([0, 1, 2, 3], [0, 2, 3, 1]),
                   ([0, 2, 3, 1], [3, 2, 1, 0])]:
        a = data([2, 3, 4, 5], dt, kind)
        b = fix(data([2, 3, 4, 5], dt, kind))
        emit(tensor_op, "%s order %s %s" % (opname, ao, oo), [a, b], fn, orders=[ao, [0, 2, 3, 1]],
             out_order=oo, rtol=rtol, loose=loose)
    a = data([2, 3, 4, 5], dt, kind)
    b = fix(data([3, 1, 1], dt, kind))
    emit(tensor_op, "%s order bcast" % opname, [a, b], fn, orders=[[0, 2, 3, 1], [2, 0, 1]],
         out_order=[0, 2, 3, 1], rtol=rtol, loose=loose)
    # out tensors: dynamic with room, dynamic without room, static with the wrong shape
    a = data([3, 5], dt, kind)
    b = fix(data([5], dt, kind))
    emit(tensor_op, "%s dynamic out" % opname, [a, b], fn, out_kw=dict(shape=[4, 8], dynamic=True, capacity=32), rtol=rtol, loose=loose)
    emit(tensor_op, "%s dynamic out small" % opname, [a, b], fn, out_kw=dict(shape=[2, 2], dynamic=True, capacity=4), fail=True)
    emit(tensor_op, "%s static out wrong" % opname, [a, b], fn, out_kw=dict(shape=[5, 3]), fail=True)
    emit(tensor_op, "%s out wrong rank" % opname, [a, b], fn, out_kw=dict(shape=[3, 5, 1], dynamic=True, capacity=100), fail=True)
    # Scalar overloads: every tensor dtype with Int, Double and Bool scalars
    if scalar_op:
        for dt in ALL_DT:
            for s in scalars:
                if divisor and s in (0, False) and not isinstance(s, float):
                    continue
                a = data([2, 7], dt, kind, special=dt in FLOATS)
                emit(scalar_op, "%s scalar %s %r" % (opname, dn(dt), s), [a, s], fn, rtol=rtol, loose=loose)
        for s in scalars[:2]:
            for od in [F64, I16, B]:
                a = data([3], I32, kind)
                emit(scalar_op, "%s scalar out %s %r" % (opname, dn(od), s), [a, s], fn, od=od,
                     rtol=rtol)
        a = data([2, 3, 4, 5], F32 if F32 in dts else I32, kind)
        emit(scalar_op, "%s scalar order" % opname, [a, scalars[0]], fn, orders=[[0, 2, 3, 1], None],
             out_order=[3, 2, 1, 0], rtol=rtol, loose=loose)
        emit(scalar_op, "%s scalar empty" % opname, [data([0, 4], dts[-1], kind), scalars[0]], fn,
             rtol=rtol, loose=loose)
        emit(scalar_op, "%s scalar zerodim" % opname, [data([], dts[-1], kind), scalars[0]], fn,
             rtol=rtol, loose=loose)


def gen_comparisons():
    ints = torch.tensor([0, 1, 2, 127, 200, 255], dtype=U8)
    for name in CMP:
        fn = getattr(torch, name)
        gen_binary_family(name, fn, "aten::%s.Tensor_out" % name, "aten::%s.Scalar_out" % name,
                          ALL_DT, g.EXACT_RTOL, kind="small", scalars=(3, -2.5, 0.5, True, False, 0, -1, 300))
        # equal values meet ties; Int scalars wrap to an integral tensor's width
        x = torch.tensor([[1.0, 2.0, NAN], [INF, -INF, -0.0]])
        y = torch.tensor([[1.0, 3.0, NAN], [INF, INF, 0.0]])
        emit("aten::%s.Tensor_out" % name, "%s ties" % name, [x, y], fn, rtol=g.EXACT_RTOL)
        for s in [-1, 256, 255.5, 2 ** 40 + 1]:
            emit("aten::%s.Scalar_out" % name, "%s byte %r" % (name, s), [ints, s], fn, rtol=g.EXACT_RTOL)
        big = torch.tensor([2 ** 53 + 1, 2 ** 62, -(2 ** 63)], dtype=I64)
        emit("aten::%s.Tensor_out" % name, "%s big long" % name, [big, torch.tensor([2 ** 53, 2 ** 62, -(2 ** 63)])], fn,
             rtol=g.EXACT_RTOL)
        emit("aten::%s.Scalar_out" % name, "%s big long scalar" % name, [big, 2 ** 53], fn, rtol=g.EXACT_RTOL)
        emit("aten::%s.Scalar_out" % name, "%s nan scalar" % name, [x, NAN], fn, rtol=g.EXACT_RTOL)


def gen_minmax():
    for name in ["maximum", "minimum"]:
        fn = getattr(torch, name)
        gen_binary_family(name, fn, "aten::%s.out" % name, None, ALL_DT, g.EXACT_RTOL)
        x = torch.tensor([NAN, 1.0, NAN, -0.0, INF, -INF])
        y = torch.tensor([1.0, NAN, NAN, 0.0, 2.0, 3.0])
        for dt in FLOATS:
            emit("aten::%s.out" % name, "%s nan %s" % (name, dn(dt)), [x.to(dt), y.to(dt)], fn,
                 rtol=g.EXACT_RTOL)


def gen_where():
    op = "aten::where.self_out"
    fn = torch.where
    for dt in ALL_DT:
        c = data([4, 1, 5], B)
        a = data([4, 3, 5], dt, special=dt in FLOATS)
        b = data([3, 1], dt)
        emit(op, "where %s" % dn(dt), [c, a, b], fn, rtol=g.EXACT_RTOL)
    for da, db in [(I32, F32), (U8, I8), (B, I64), (F16, BF16), (F32, F64), (I64, F16)]:
        c = data([2, 3], B)
        emit(op, "where %s+%s" % (dn(da), dn(db)), [c, data([2, 3], da), data([3], db)], fn,
             rtol=g.EXACT_RTOL)
        emit(op, "where zerodim %s+%s" % (dn(da), dn(db)), [c, data([2, 3], da), data([], db)], fn,
             rtol=g.EXACT_RTOL)
    c = torch.tensor([0, 1, 2, 255, 0], dtype=U8)
    emit(op, "where byte condition", [c, data([5], F32), data([5], F32)], fn, rtol=g.EXACT_RTOL)
    for cd in [I32, F32]:
        emit(op, "where bad condition %s" % dn(cd), [data([5], cd), data([5], F32), data([5], F32)], fn,
             od=F32, fail=True)
    # out must have the result type exactly
    for od in [F64, I32, F16]:
        emit(op, "where out %s" % dn(od), [data([5], B), data([5], F32), data([5], F32)], fn, od=od,
             fail=True)
    emit(op, "where out promoted", [data([5], B), data([5], F32), data([5], F64)], fn, od=F64,
         rtol=g.EXACT_RTOL)
    for i, (sc, sa, sb) in enumerate([([], [], []), ([3, 1, 1], [1, 4, 1], [1, 1, 5]), ([0, 3], [3], [1]),
                                      ([2, 1], [0], [1]), ([130], [130], [1])]):
        emit(op, "where shape%d" % i, [data(sc, B), data(sa, F32), data(sb, F32)], fn, rtol=g.EXACT_RTOL)
    emit(op, "where badshape", [data([3], B), data([4], F32), data([4], F32)], fn, od=F32, fail=True)
    c, a, b = data([2, 3, 4, 5], B), data([2, 3, 4, 5], F32), data([2, 3, 4, 5], F32)
    emit(op, "where orders", [c, a, b], fn, orders=[[0, 2, 3, 1], [3, 2, 1, 0], None],
         out_order=[0, 2, 3, 1], rtol=g.EXACT_RTOL)
    emit(op, "where dynamic", [c, a, b], fn, out_kw=dict(shape=[2, 3, 4, 6], dynamic=True, capacity=150),
         rtol=g.EXACT_RTOL)
    emit(op, "where static wrong", [c, a, b], fn, out_kw=dict(shape=[2, 3, 4, 6]), fail=True)


def gen_logical():
    for name in ["logical_and", "logical_or", "logical_xor"]:
        fn = getattr(torch, name)
        gen_binary_family(name, fn, "aten::%s.out" % name, None, ALL_DT, g.EXACT_RTOL, kind="small")
        x = torch.tensor([NAN, 0.0, -0.0, INF, 0.5, 0.0])
        y = torch.tensor([0.0, NAN, 1.0, -0.0, 0.0, 0.0])
        emit("aten::%s.out" % name, "%s special" % name, [x, y], fn, rtol=g.EXACT_RTOL)
    op = "aten::logical_not.out"
    for dt in ALL_DT:
        x = data([3, 7], dt, "small", special=dt in FLOATS)
        for od in ALL_DT if dt in (F32, I32, B) else [B]:
            emit(op, "logical_not %s->%s" % (dn(dt), dn(od)), [x], torch.logical_not, od=od,
                 rtol=g.EXACT_RTOL)
    gen_unary_shapes("logical_not", op, torch.logical_not, F32, g.EXACT_RTOL)


def gen_bitwise():
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        fn = getattr(torch, name)
        gen_binary_family(name, fn, "aten::%s.Tensor_out" % name, "aten::%s.Scalar_out" % name,
                          BOOL_INT, g.EXACT_RTOL, scalars=(3, -2, True, False, 300, 2 ** 40 + 5, 2.5))
    op = "aten::bitwise_not.out"
    for dt in ALL_DT:
        emit(op, "bitwise_not %s" % dn(dt), [data([3, 7], dt)], torch.bitwise_not, rtol=g.EXACT_RTOL)
    emit(op, "bitwise_not out mismatch", [data([4], I32)], torch.bitwise_not, od=I64)
    gen_unary_shapes("bitwise_not", op, torch.bitwise_not, I32, g.EXACT_RTOL)


def gen_classification():
    for name in ["isnan", "isinf"]:
        op = "aten::%s.out" % name
        fn = getattr(A, name).out

        def call(x, out=None, _name=name):
            if out is None:
                return getattr(torch, _name)(x)
            return getattr(A, _name).out(x, out=out)

        for dt in ALL_DT:
            x = data([3, 7], dt, special=dt in FLOATS)
            for od in ALL_DT if dt in (F32, I32) else [B]:
                emit(op, "%s %s->%s" % (name, dn(dt), dn(od)), [x], call, od=od, rtol=g.EXACT_RTOL)
        gen_unary_shapes(name, op, call, F32, g.EXACT_RTOL, special=True)
        del fn


# ---- unary ops ----------------------------------------------------------------------------------


def gen_unary_shapes(name, op, fn, dt, rtol, kind="any", special=False, kw=None, pre_extra=()):
    """Shapes, dim orders and out-tensor rules of a unary op (args: self, extra..., out)."""
    def pre(x, order=None):
        return [g.In(x, order)] + list(pre_extra)

    for shape in [[], [0], [0, 4], [1000], [7, 1, 3]]:
        x = data(shape, dt, kind, special=special)
        emit(op, "%s shape %s" % (name, shape), [x], fn, kw=kw, pre=pre(x), rtol=rtol)
    x = data([2, 3, 4, 5], dt, kind, special=special)
    for io, oo in [([0, 2, 3, 1], [0, 2, 3, 1]), ([0, 2, 3, 1], [0, 1, 2, 3]), ([3, 2, 1, 0], [0, 2, 3, 1])]:
        emit(op, "%s order %s %s" % (name, io, oo), [x], fn, kw=kw, pre=pre(x, io), out_order=oo,
             rtol=rtol)
    x = data([4, 4], dt, kind)
    emit(op, "%s dynamic" % name, [x], fn, kw=kw, pre=pre(x),
         out_kw=dict(shape=[1, 20], dynamic=True, capacity=20), rtol=rtol)
    emit(op, "%s static wrong" % name, [x], fn, kw=kw, pre=pre(x), out_kw=dict(shape=[16]), fail=True)
    emit(op, "%s dynamic too small" % name, [x], fn, kw=kw, pre=pre(x),
         out_kw=dict(shape=[2, 2], dynamic=True, capacity=4), fail=True)


UNARY_KIND = {"log": "pos", "log1p": "pos", "log2": "pos", "log10": "pos", "sqrt": "pos", "rsqrt": "pos",
              "asin": "unit", "acos": "unit", "atanh": "unit", "acosh": "pos"}


def gen_unary_float():
    for name in UNARY_FLOAT:
        op = "aten::%s.out" % name
        fn = getattr(torch, name)
        kind = UNARY_KIND.get(name, "small")
        # one IEEE rounding (sqrt, 1/x) or two (rsqrt = 1/sqrt, but torch's BFloat16 rsqrt
        # rounds differently) are bit-exact; the rest computes in double, rounded once
        exact = name in ("sqrt", "reciprocal", "rsqrt")
        tol = dict(rtol=g.EXACT_RTOL if exact else 0.0, loose=(BF16,) if name == "rsqrt" else ())
        for dt in ALL_DT:
            x = data([3, 7], dt, kind, special=dt in FLOATS)
            if dt in FLOATS and kind != "small":
                # the edges of the domain: negative values, values past 1
                f = x.reshape(-1)
                f[6], f[7], f[8] = -0.5, 1.0, 1.5
            emit(op, "%s %s" % (name, dn(dt)), [x], fn, **tol)
            if dt in INTS + [B]:
                emit(op, "%s wide %s" % (name, dn(dt)), [data([40], dt)], fn, **tol)
        x = data([130], F32, kind, special=True)
        emit(op, "%s long" % name, [x], fn, **tol)
        for dt, od in [(F32, F64), (F32, F16), (F32, BF16), (F64, F32), (I32, F64), (B, F16),
                       (F32, I32), (I32, I64), (F32, B), (BF16, F32)]:
            x = data([6], dt, kind)
            emit(op, "%s out %s->%s" % (name, dn(dt), dn(od)), [x], fn, od=od, **tol)
        gen_unary_shapes(name, op, fn, F32, tol["rtol"], kind=kind, special=True)


def gen_unary_same():
    specs = [("neg", torch.neg), ("abs", torch.abs), ("sign", torch.sign), ("floor", torch.floor),
             ("ceil", torch.ceil), ("round", torch.round), ("trunc", torch.trunc)]
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e30, -1e-30, 8388609.0,
                           4503599627370497.0, NAN, INF, -INF, -0.0, 0.0], dtype=F64)
    for name, fn in specs:
        op = "aten::%s.out" % name
        for dt in ALL_DT:
            x = data([3, 7], dt, "small" if dt in FLOATS else "any", special=dt in FLOATS)
            if dt in INTS:
                x.reshape(-1)[0] = torch.iinfo(dt).min
                x.reshape(-1)[1] = torch.iinfo(dt).max
            emit(op, "%s %s" % (name, dn(dt)), [x], fn, rtol=g.EXACT_RTOL)
        for dt in FLOATS:
            emit(op, "%s halves %s" % (name, dn(dt)), [halves.to(dt)], fn, rtol=g.EXACT_RTOL)
        emit(op, "%s long" % name, [data([130], F32, special=True)], fn, rtol=g.EXACT_RTOL)
        for dt, od in [(F32, F64), (I32, I64), (I32, F32), (F32, I32)]:
            emit(op, "%s out %s->%s" % (name, dn(dt), dn(od)), [data([5], dt)], fn, od=od,
                 rtol=g.EXACT_RTOL)
        gen_unary_shapes(name, op, fn, F32, g.EXACT_RTOL, kind="small", special=True)


def gen_logit():
    op = "aten::logit.out"
    # (eps > 0.5 is left out: torch's scalar and vectorised kernels disagree there)
    for eps in [None, 0.1, 0.0, -0.5, 1e-6]:
        for dt in ALL_DT:
            x = data([3, 7], dt, "prob", special=dt in FLOATS)
            if dt in FLOATS:
                f = x.reshape(-1)
                f[6], f[7], f[8] = -0.5, 1.5, 0.5
            if eps not in (None, 0.1) and dt not in (F32, F64, I32):
                continue
            emit(op, "logit %s eps=%r" % (dn(dt), eps), [x], torch.logit, kw=dict(eps=eps),
                 pre=[g.In(x), g.NONE if eps is None else g.Dbl(eps)])
    x = data([130], F32, "prob", special=True)
    emit(op, "logit long", [x], torch.logit, pre=[g.In(x), g.NONE])
    emit(op, "logit int eps", [x], torch.logit, kw=dict(eps=0), pre=[g.In(x), g.Int(0)])
    for od in [F64, F16, I32]:
        emit(op, "logit out %s" % dn(od), [x], torch.logit, od=od, pre=[g.In(x), g.NONE])
    gen_unary_shapes("logit", op, torch.logit, F32, 0.0, kind="prob", pre_extra=[g.NONE])


# ---- arithmetic ---------------------------------------------------------------------------------


def gen_division():
    for name, tensor_op, scalar_op in [("remainder", "aten::remainder.Tensor_out", "aten::remainder.Scalar_out"),
                                       ("fmod", "aten::fmod.Tensor_out", "aten::fmod.Scalar_out"),
                                       ("floor_divide", "aten::floor_divide.out", None)]:
        fn = getattr(torch, name)
        # torch's Half/BFloat16 floor division rounds each step to the dtype in its vectorised
        # loop but keeps Float in the scalar tail: etch follows the vectorised loop, so the
        # tail's elements may differ in the last place
        loose = (F16, BF16) if name == "floor_divide" else ()
        gen_binary_family(name, fn, tensor_op, scalar_op, NO_BOOL, g.EXACT_RTOL, divisor=True,
                          scalars=(3, -2.5, 0.75, True, -7, 2 ** 40 + 3), loose=loose)
        # signs, zeros, infinities, exact multiples, the integer extremes
        a = torch.tensor([7.0, -7.0, 7.0, -7.0, 6.0, -6.0, 0.0, -0.0, 5.0, INF, -INF, NAN, 5.0, -5.0, 1e30, 3.0])
        b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 3.0, -3.0, 0.0, 2.0, 2.0, 2.0, INF, INF, 7.0, -0.0])
        for dt in FLOATS:
            emit(tensor_op, "%s signs %s" % (name, dn(dt)), [a.to(dt), b.to(dt)], fn, rtol=g.EXACT_RTOL,
                 loose=loose)
        for dt in INTS:
            info = torch.iinfo(dt)
            ia = torch.tensor([7, -7, 7, -7, 6, -6, 0, info.min, info.min, info.max, info.min], dtype=I64)
            ib = torch.tensor([2, 2, -2, -2, 3, 3, 3, 1, 3, -1, -2], dtype=I64)
            if dt == U8:
                ia, ib = ia.abs(), ib.abs()
            emit(tensor_op, "%s signs %s" % (name, dn(dt)), [ia.to(dt), ib.to(dt)], fn, rtol=g.EXACT_RTOL)
        # integral division by zero fails (torch raises ZeroDivisionError)
        for dt in [I32, I64, U8]:
            emit(tensor_op, "%s int by zero %s" % (name, dn(dt)), [data([3], dt), torch.tensor([1, 0, 2], dtype=dt)],
                 fn, od=dt, fail=True)
        emit(tensor_op, "%s int by false" % name, [data([3], I32), torch.tensor([True, False, True])], fn,
             od=I32, fail=True)
        emit(tensor_op, "%s empty by zero" % name, [data([0], I32), torch.tensor([0], dtype=I32)], fn,
             rtol=g.EXACT_RTOL)
        if scalar_op:
            emit(scalar_op, "%s scalar int zero" % name, [data([3], I32), 0], fn, od=I32, fail=True)
            emit(scalar_op, "%s scalar wraps to zero" % name, [data([3], I8), 256], fn, od=I8, fail=True)
            emit(scalar_op, "%s scalar float zero" % name, [data([3], I32), 0.0], fn, rtol=g.EXACT_RTOL)
            emit(scalar_op, "%s bool tensor int scalar" % name, [data([4], B), 2], fn, rtol=g.EXACT_RTOL)
        emit(tensor_op, "%s bool" % name, [data([4], B), data([4], B)], fn, od=B, fail=True)
        # torch traps on INT_MIN / -1 (SIGFPE): etch's own expectation, the wrapped quotient
        # (floor_divide) and a zero remainder (remainder, fmod)
        for dt in [I64, I32, I8]:
            lo = torch.iinfo(dt).min
            ia = torch.tensor([lo, lo, 5], dtype=dt)
            ib = torch.tensor([-1, 1, -1], dtype=dt)
            want = torch.tensor([lo, lo, -5] if name == "floor_divide" else [0, 0, 0], dtype=dt)
            emit(tensor_op, "%s min by -1 %s" % (name, dn(dt)), [ia, ib], None, od=dt, res=want,
                 rtol=g.EXACT_RTOL)


def gen_pow():
    tt, ts, st = "aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out", "aten::pow.Scalar_out"
    for dt in ALL_DT:
        if dt in INTS:
            a = data([3, 6], dt, "small")
            b = g.rand([6], dt, lo=0 if dt == U8 else -3, hi=9)
        else:
            a = data([3, 6], dt, "pos" if dt != B else "any", special=dt in FLOATS)
            b = data([6], dt, "small", special=False)
        emit(tt, "pow %s" % dn(dt), [a, b], torch.pow)
    for da, db in [(I32, F32), (F32, I32), (U8, I8), (B, I32), (I32, B), (F16, BF16), (I64, F64),
                   (F32, F64), (F16, I64)]:
        a = data([4, 3], da, "small")
        b = data([3], db, "small")
        emit(tt, "pow %s+%s" % (dn(da), dn(db)), [a.abs() if da not in (U8, B) else a, b.abs() if db not in (U8, B) else b],
             torch.pow)
    # integral powers: negative exponents, wrap-around
    a = torch.tensor([0, 1, -1, 2, -2, 3, 7, -7, 1, -1, 0, 3], dtype=I64)
    b = torch.tensor([-1, -5, -3, -2, -1, 40, 0, 3, 0, 0, 0, 41], dtype=I64)
    for dt in [I64, I32, I16, I8]:
        emit(tt, "pow int edges %s" % dn(dt), [a.to(dt), b.to(dt)], torch.pow, rtol=g.EXACT_RTOL)
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, NAN, INF, -INF, 0.5, -8.0, 1e30])
    y = torch.tensor([0.0, -1.0, NAN, INF, -INF, 0.5, 0.0, -1.0, 3.0, -INF, 1.0 / 3.0, 2.0])
    for dt in FLOATS:
        emit(tt, "pow special %s" % dn(dt), [x.to(dt), y.to(dt)], torch.pow)
    for od in ALL_DT:
        emit(tt, "pow out f32->%s" % dn(od), [data([5], F32, "pos"), data([5], F32, "small")], torch.pow, od=od)
        emit(tt, "pow out i32->%s" % dn(od), [data([5], I32, "small"), g.rand([5], I32, lo=0, hi=5)], torch.pow,
             od=od, rtol=g.EXACT_RTOL)
    emit(tt, "pow bool", [data([4], B), data([4], B)], torch.pow, od=B, fail=True)
    emit(tt, "pow badshape", [data([3], F32), data([4], F32)], torch.pow, od=F32, fail=True)
    emit(tt, "pow order", [data([2, 3, 4, 5], F32, "pos"), data([2, 3, 4, 5], F32, "small")], torch.pow,
         orders=[[0, 2, 3, 1], [3, 2, 1, 0]], out_order=[0, 2, 3, 1])
    emit(tt, "pow long", [data([130], F32, "pos"), data([130], F32, "small")], torch.pow)
    emit(tt, "pow empty", [data([0, 3], F32), data([3], F32)], torch.pow)

    # Tensor_Scalar: torch's special exponents and the exact out dtype
    for dt in ALL_DT:
        for e in [0, 1, 2, 3, 0.5, -0.5, -1, -2, 2.5, -1.5, 1.0, 3.0, True, False, 7]:
            if dt in INTS + [B] and isinstance(e, int) and not isinstance(e, bool) and e < 0:
                continue
            if dt not in (F32, F64, I32, I64, F16, BF16) and e not in (2, 3, 0.5, 7, True):
                continue
            kind = "small" if dt not in FLOATS else "any"
            x = data([2, 7], dt, kind, special=dt in FLOATS)
            exact_ok = e in (0, 1, 2, 0.5, -0.5, -1, -2, 1.0, True, False) or dt not in FLOATS
            if dt in (F16, BF16) and e not in (0, 1, 1.0, True, False):
                exact_ok = False
            emit(ts, "pow_ts %s %r" % (dn(dt), e), [x, e], torch.pow,
                 rtol=g.EXACT_RTOL if exact_ok else 0.0)
    for dt in [I32, I64, I8, U8, B]:
        emit(ts, "pow_ts negative int %s" % dn(dt), [data([3], dt, "small"), -1], torch.pow,
             od=I64 if dt == B else dt, fail=True)
    emit(ts, "pow_ts int float exponent", [data([5], I32, "small"), 2.5], torch.pow)
    emit(ts, "pow_ts int negative float exponent", [data([5], I32, "pos"), -2.0], torch.pow)
    for od in [F64, F16, I64]:
        emit(ts, "pow_ts out %s" % dn(od), [data([5], F32), 2], torch.pow, od=od)
    emit(ts, "pow_ts out int->f32", [data([5], I32, "small"), 2], torch.pow, od=F32)
    emit(ts, "pow_ts bool", [data([5], B), True], torch.pow, od=B, fail=True)
    emit(ts, "pow_ts bool int", [data([5], B), 3], torch.pow, rtol=g.EXACT_RTOL)
    x = torch.tensor([NAN, INF, -INF, -0.0, 0.0, -8.0, 4.0, 1e-30])
    for e in [0, 1, 2, 3, 0.5, -0.5, -1, -2, 1.0 / 3.0, -INF, INF, NAN]:
        emit(ts, "pow_ts special %r" % e, [x, e], torch.pow)
    gen_unary_shapes("pow_ts", ts, lambda t, out=None: torch.pow(t, 2.5, out=out), F32, 0.0, kind="pos",
                     pre_extra=[g.Dbl(2.5)])

    # Scalar_out: scalar base, tensor exponent
    for dt in ALL_DT:
        for base in [2, -2, 2.5, 0.5, 0, 1, 1.0, True, False, -1]:
            if dt not in (F32, I32, I64, B, F64) and base not in (2, 2.5, 1):
                continue
            e = data([2, 6], dt, "small")
            if dt in INTS + [B] and not isinstance(base, float) and dt != U8:
                e = e.clamp(-3, 40) if dt != B else e
            emit(st, "pow_st %s %r" % (dn(dt), base), [base, e], torch.pow,
                 rtol=g.EXACT_RTOL if dt in INTS + [B] and not isinstance(base, float) else 0.0)
    for od in ALL_DT:
        emit(st, "pow_st base1 out %s" % dn(od), [1, data([3, 2], F32)], torch.pow, od=od, rtol=g.EXACT_RTOL)
        emit(st, "pow_st out %s" % dn(od), [2, data([4], I32, "pos")], torch.pow, od=od, rtol=g.EXACT_RTOL)
    emit(st, "pow_st bool", [False, data([4], B)], torch.pow, od=B, fail=True)
    emit(st, "pow_st order", [1.5, data([2, 3, 4, 5], F32, "small")], torch.pow, orders=[None, [0, 2, 3, 1]],
         out_order=[3, 2, 1, 0])
    emit(st, "pow_st empty", [2.0, data([0], F32)], torch.pow)
    emit(st, "pow_st static wrong", [2.0, data([4], F32)], torch.pow, out_kw=dict(shape=[5]), fail=True)


def gen_rsub():
    op = "aten::rsub.Scalar_out"

    def fn(x, other, alpha=1, out=None):
        if out is None:
            return torch.rsub(x, other, alpha=alpha)
        # torch.rsub has no out=: sub with the operands swapped is the same computation
        r = torch.rsub(x, other, alpha=alpha)
        if not torch.can_cast(r.dtype, out.dtype):
            raise RuntimeError("result type %s can't be cast to %s" % (r.dtype, out.dtype))
        return r.to(out.dtype)

    for dt in ALL_DT:
        for s in [3, -2.5, 0.1, True, 300]:
            for alpha in [1, 2, 0.5]:
                if alpha != 1 and s != 3 and not (alpha == 0.5 and s == -2.5):
                    continue
                x = data([3, 5], dt, "any", special=dt in FLOATS)
                fused = alpha not in (1,)  # torch may fuse the multiply-add (see gen_golden)
                emit(op, "rsub %s %r alpha %r" % (dn(dt), s, alpha), [x, s], fn, kw=dict(alpha=alpha),
                     pre=[g.In(x), g.scalar_value(s), g.scalar_value(alpha)],
                     rtol=0.0 if fused else g.EXACT_RTOL)
    for od in ALL_DT:
        x = data([4], I32)
        emit(op, "rsub out %s" % dn(od), [x, 2], fn, od=od, pre=[g.In(x), g.Int(2), g.Int(1)],
             rtol=g.EXACT_RTOL)
    x = data([4], F32)
    emit(op, "rsub zerodim", [torch.tensor(1.5), 0.1], fn, pre=[g.In(torch.tensor(1.5)), g.Dbl(0.1), g.Int(1)],
         rtol=g.EXACT_RTOL)
    emit(op, "rsub zerodim int", [torch.tensor(7), 0.1], fn, pre=[g.In(torch.tensor(7)), g.Dbl(0.1), g.Int(1)],
         rtol=g.EXACT_RTOL)
    emit(op, "rsub bool scalar", [data([4], I32), True], fn, od=I32, pre=[g.In(data([4], I32)), g.Bool(True), g.Int(1)],
         fail=True)
    x = data([2, 3, 4, 5], F32)
    emit(op, "rsub order", [x, 2.5], fn, pre=[g.In(x, [0, 2, 3, 1]), g.Dbl(2.5), g.Int(1)], out_order=[3, 2, 1, 0],
         rtol=g.EXACT_RTOL)
    emit(op, "rsub empty", [data([0, 2], F32), 2.5], fn, pre=[g.In(data([0, 2], F32)), g.Dbl(2.5), g.Int(1)],
         rtol=g.EXACT_RTOL)


def gen_atan2():
    op = "aten::atan2.out"
    for dt in ALL_DT:
        emit(op, "atan2 %s" % dn(dt), [data([3, 5], dt, "small", special=dt in FLOATS),
                                       data([5], dt, "small", special=dt in FLOATS)], torch.atan2)
    for da, db in [(I32, F32), (U8, I8), (B, I32), (F16, BF16), (F32, F64), (I64, F16)]:
        emit(op, "atan2 %s+%s" % (dn(da), dn(db)), [data([2, 3], da, "small"), data([3], db, "small")], torch.atan2)
    x = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, -INF, INF, NAN, 1.0])
    y = torch.tensor([0.0, 0.0, -0.0, -0.0, INF, INF, INF, INF, -INF, 1.0, NAN])
    emit(op, "atan2 special", [x, y], torch.atan2)
    for od in ALL_DT:
        emit(op, "atan2 out %s" % dn(od), [data([5], F32), data([5], F32)], torch.atan2, od=od)
    emit(op, "atan2 badshape", [data([3], F32), data([2], F32)], torch.atan2, od=F32, fail=True)
    emit(op, "atan2 order", [data([2, 3, 4, 5], F32), data([5], F32)], torch.atan2,
         orders=[[0, 2, 3, 1], None], out_order=[0, 2, 3, 1])
    emit(op, "atan2 long", [data([130], F32), data([130], F32)], torch.atan2)
    emit(op, "atan2 empty", [data([0], F32), data([1], F32)], torch.atan2)


# ---- activations --------------------------------------------------------------------------------


def gen_simple_activation(name, op, fn, rtol, kind="small", pre_extra=(), kw=None, special=True):
    for dt in ALL_DT:
        x = data([3, 7], dt, kind, special=special and dt in FLOATS)
        pre = [g.In(x)] + list(pre_extra)
        emit(op, "%s %s" % (name, dn(dt)), [x], fn, kw=kw, pre=pre, rtol=rtol)
    x = data([130], F32, kind, special=special)
    emit(op, "%s long" % name, [x], fn, kw=kw, pre=[g.In(x)] + list(pre_extra), rtol=rtol)
    x = data([8], F64, kind)
    emit(op, "%s wide" % name, [x * 20], fn, kw=kw, pre=[g.In(x * 20)] + list(pre_extra), rtol=rtol)
    for od in [F64, F16, I32]:
        x = data([5], F32, kind)
        emit(op, "%s out %s" % (name, dn(od)), [x], fn, od=od, kw=kw, pre=[g.In(x)] + list(pre_extra),
             rtol=rtol)
    gen_unary_shapes(name, op, fn, F32, rtol, kind=kind, special=special, kw=kw, pre_extra=pre_extra)


def gen_activations():
    # sigmoid is a unary float op (integral inputs compute in Float): covered by gen_unary_float
    for name, rtol in [("silu", 0.0), ("hardswish", g.EXACT_RTOL), ("hardsigmoid", g.EXACT_RTOL)]:
        def f(x, out=None, _n=name):
            if out is None:
                return getattr(A, _n)(x)
            return getattr(A, _n).out(x, out=out)
        gen_simple_activation(name, "aten::%s.out" % name, f, rtol)
    for approx in ["none", "tanh"]:
        def gelu(x, out=None, _a=approx):
            if out is None:
                return A.gelu(x, approximate=_a)
            return A.gelu.out(x, approximate=_a, out=out)
        gen_simple_activation("gelu %s" % approx, "aten::gelu.out", gelu, 0.0, pre_extra=[g.Str(approx)])
    x = data([4], F32)
    emit("aten::gelu.out", "gelu bad approximate", [x], lambda t, out=None: A.gelu.out(t, approximate="erf", out=out),
         od=F32, pre=[g.In(x), g.Str("erf")], fail=True)

    def leaky(slope):
        def f(x, out=None):
            if out is None:
                return A.leaky_relu(x, slope)
            return A.leaky_relu.out(x, slope, out=out)
        return f
    for slope in [0.01, 0.2, -1.5, 2, True]:
        gen_simple_activation("leaky_relu %r" % slope, "aten::leaky_relu.out", leaky(slope), g.EXACT_RTOL,
                              pre_extra=[g.scalar_value(slope)])

    def elu(alpha, scale, iscale):
        def f(x, out=None):
            if out is None:
                return A.elu(x, alpha, scale, iscale)
            return A.elu.out(x, alpha, scale, iscale, out=out)
        return f
    for alpha, scale, iscale in [(1, 1, 1), (1.5, 2.0, 0.5), (0.3, 1.0507, 1.7)]:
        gen_simple_activation("elu %r %r %r" % (alpha, scale, iscale), "aten::elu.out", elu(alpha, scale, iscale),
                              0.0, pre_extra=[g.scalar_value(alpha), g.scalar_value(scale), g.scalar_value(iscale)])

    def softplus(beta, thr):
        def f(x, out=None):
            if out is None:
                return A.softplus(x, beta, thr)
            return A.softplus.out(x, beta, thr, out=out)
        return f
    for beta, thr in [(1, 20), (2, 1), (0.5, 3.0), (-2, 1)]:
        gen_simple_activation("softplus %r %r" % (beta, thr), "aten::softplus.out", softplus(beta, thr), 0.0,
                              pre_extra=[g.scalar_value(beta), g.scalar_value(thr)])
    gen_hardtanh_clamp()
    gen_glu()


def half_overflow(dt, *vals):
    """etch refuses Half limits beyond Half's range, as c10's checked conversion does (torch 1.13
    has no Half clamp to ask)."""
    return dt == F16 and any(v is not None and not isinstance(v, bool) and math.isfinite(v) and abs(v) > 65504
                             for v in vals)


def gen_hardtanh_clamp():
    op = "aten::hardtanh.out"

    def ht(lo, hi):
        def f(x, out=None):
            if out is None:
                return A.hardtanh(x, lo, hi)
            return A.hardtanh.out(x, lo, hi, out=out)
        return f
    for lo, hi in [(-1, 1), (-0.5, 1.5), (0, 6), (2, -2), (NAN, 1), (-INF, 0.5), (True, 3)]:
        for dt in ALL_DT:
            if (isinstance(lo, float) and (math.isnan(lo) or math.isinf(lo))) and dt not in FLOATS:
                continue
            x = data([3, 7], dt, "small", special=dt in FLOATS)
            emit(op, "hardtanh %s %r %r" % (dn(dt), lo, hi), [x], ht(lo, hi),
                 pre=[g.In(x), g.scalar_value(lo), g.scalar_value(hi)], od=dt, rtol=g.EXACT_RTOL)
    # limits that do not fit the dtype
    for dt, lo, hi in [(I8, -200, 1), (I8, -0.5, 127.5), (I8, -128.5, 0), (I8, 0, 128.0), (U8, -1, 1), (U8, 0, -1),
                       (U8, -0.5, 255.9), (U8, 0, 256), (I64, 1e20, 2), (I64, -1e10, 1e10), (I32, NAN, 1),
                       (F32, -1e300, 1), (BF16, -3e38, 1), (BF16, -4e38, 1), (F32, 1, INF), (F64, -1e300, 1e300),
                       (F16, -65504.0, 1), (F16, -70000.0, 1)]:
        x = data([5], dt, "small")
        emit(op, "hardtanh limits %s %r %r" % (dn(dt), lo, hi), [x], ht(lo, hi),
             pre=[g.In(x), g.scalar_value(lo), g.scalar_value(hi)], od=dt, rtol=g.EXACT_RTOL,
             fail=half_overflow(dt, lo, hi))
    x = data([5], F32)
    emit(op, "hardtanh out mismatch", [x], ht(-1, 1), pre=[g.In(x), g.Int(-1), g.Int(1)], od=F64, fail=True)
    gen_unary_shapes("hardtanh", op, ht(-1, 1), F32, g.EXACT_RTOL, kind="small", special=True,
                     pre_extra=[g.Int(-1), g.Int(1)])

    op = "aten::clamp.out"

    def cl(lo, hi):
        def f(x, out=None):
            if out is None:
                return torch.clamp(x, lo, hi)
            return A.clamp.out(x, lo, hi, out=out)
        return f

    def sv(v):
        return g.NONE if v is None else g.scalar_value(v)
    for lo, hi in [(-1, 1), (-0.5, 1.5), (None, 2), (3, None), (2, -2), (NAN, 1), (0.5, NAN), (True, None),
                   (-2.5, None), (None, 0.1), (-300, 300)]:
        for dt in ALL_DT:
            x = data([3, 7], dt, "small", special=dt in FLOATS)
            emit(op, "clamp %s %r %r" % (dn(dt), lo, hi), [x], cl(lo, hi), pre=[g.In(x), sv(lo), sv(hi)],
                 rtol=g.EXACT_RTOL)
    for dt, lo, hi in [(U8, -1, 2), (U8, -255, None), (U8, -256, None), (U8, None, 256), (I8, -129, None),
                       (I64, 2 ** 62, None), (F32, -1e300, None), (F32, None, INF), (BF16, 3e38, None),
                       (BF16, 4e38, None), (F16, -65504.0, None), (F16, -70000.0, None), (F16, 70000, None),
                       (I32, -INF, None)]:
        x = data([5], dt, "small")
        emit(op, "clamp limits %s %r %r" % (dn(dt), lo, hi), [x], cl(lo, hi), pre=[g.In(x), sv(lo), sv(hi)],
             rtol=g.EXACT_RTOL, fail=half_overflow(dt, lo, hi))
    x = data([5], F32)
    emit(op, "clamp none none", [x], cl(None, None), od=F32, pre=[g.In(x), g.NONE, g.NONE], fail=True)
    # a single NaN bound: torch 1.13's clamp_min/clamp_max kernels ignore it, etch propagates NaN
    # as torch does when both bounds are given (and as clamp.Tensor_out does)
    xn = torch.tensor([1.0, NAN, -2.0])
    emit(op, "clamp nan min only", [xn], None, od=F32, pre=[g.In(xn), g.Dbl(NAN), g.NONE],
         res=torch.full([3], NAN), rtol=g.EXACT_RTOL)
    emit(op, "clamp nan max only", [xn], None, od=F32, pre=[g.In(xn), g.NONE, g.Dbl(NAN)],
         res=torch.full([3], NAN), rtol=g.EXACT_RTOL)
    for od in [F64, I32, F16]:
        emit(op, "clamp out %s" % dn(od), [x], cl(-1, 1), od=od, pre=[g.In(x), g.Int(-1), g.Int(1)])
    xi = data([5], I32, "small")
    emit(op, "clamp out int float bounds", [xi], cl(0.5, 3.5), od=I32, pre=[g.In(xi), g.Dbl(0.5), g.Dbl(3.5)])
    emit(op, "clamp bool", [data([5], B)], cl(True, True), od=B, pre=[g.In(data([5], B)), g.Bool(True), g.Bool(True)],
         fail=True)
    gen_unary_shapes("clamp", op, cl(-0.5, 0.5), F32, g.EXACT_RTOL, kind="small", special=True,
                     pre_extra=[g.Dbl(-0.5), g.Dbl(0.5)])

    op = "aten::clamp.Tensor_out"

    def clt(x, lo, hi, out=None):
        if out is None:
            return torch.clamp(x, lo, hi)
        return A.clamp.Tensor_out(x, lo, hi, out=out)

    def targ(t):
        return g.NONE if t is None else g.In(t)
    for dt in ALL_DT:
        x = data([3, 4, 5], dt, "small", special=dt in FLOATS)
        lo = data([4, 1], dt, "small")
        hi = data([5], dt, "small")
        if dt == U8:
            hi = hi + 20
        for name, l, h in [("both", lo, hi), ("min", lo, None), ("max", None, hi)]:
            emit(op, "clamp_t %s %s" % (dn(dt), name), [x, l, h], clt, pre=[g.In(x), targ(l), targ(h)],
                 rtol=g.EXACT_RTOL)
    for dx, dl, dh in [(I8, I16, None), (I32, F32, F32), (B, I64, None), (F16, BF16, None), (F32, F64, F32),
                       (U8, I8, I8), (I64, None, F16)]:
        x = data([2, 5], dx, "small")
        l = None if dl is None else data([5], dl, "small")
        h = None if dh is None else data([2, 1], dh, "small")
        emit(op, "clamp_t %s %s %s" % (dn(dx), dl and dn(dl), dh and dn(dh)), [x, l, h], clt,
             pre=[g.In(x), targ(l), targ(h)], rtol=g.EXACT_RTOL)
    x = torch.tensor([NAN, 1.0, 2.0, -3.0, 0.5, 4.0])
    lo = torch.tensor([0.0, NAN, 0.0, 0.0, 1.0, 5.0])
    hi = torch.tensor([1.0, 1.0, NAN, 1.0, 0.0, 4.5])
    emit(op, "clamp_t nan", [x, lo, hi], clt, pre=[g.In(x), g.In(lo), g.In(hi)], rtol=g.EXACT_RTOL)
    emit(op, "clamp_t zerodim", [x, torch.tensor(0.5), None], clt, pre=[g.In(x), g.In(torch.tensor(0.5)), g.NONE],
         rtol=g.EXACT_RTOL)
    xi = data([5], I8, "small")
    emit(op, "clamp_t zerodim promote", [xi, torch.tensor(0.5), None], clt,
         pre=[g.In(xi), g.In(torch.tensor(0.5)), g.NONE], rtol=g.EXACT_RTOL)
    emit(op, "clamp_t none none", [x, None, None], clt, od=F32, pre=[g.In(x), g.NONE, g.NONE], fail=True)
    for od in ALL_DT:
        xi = data([5], I32, "small")
        lo = torch.tensor([0], dtype=I32)
        emit(op, "clamp_t out %s" % dn(od), [xi, lo, None], clt, od=od, pre=[g.In(xi), g.In(lo), g.NONE],
             rtol=g.EXACT_RTOL)
    xb, lb = data([3], F32), data([4], F32)
    emit(op, "clamp_t badshape", [xb, lb, None], clt, od=F32, pre=[g.In(xb), g.In(lb), g.NONE], fail=True)
    x4, l4, h4 = data([2, 3, 4, 5], F32), data([3, 1, 1], F32), data([2, 3, 4, 5], F32) + 2
    emit(op, "clamp_t order", [x4, l4, h4], clt, pre=[g.In(x4, [0, 2, 3, 1]), g.In(l4, [2, 1, 0]), g.In(h4, [3, 2, 1, 0])],
         out_order=[0, 2, 3, 1], rtol=g.EXACT_RTOL)
    xe = data([0, 3], F32)
    le = data([3], F32)
    emit(op, "clamp_t empty", [xe, le, None], clt, pre=[g.In(xe), g.In(le), g.NONE], rtol=g.EXACT_RTOL)
    xs, ls = data([3], F32), data([2, 1], F32)
    emit(op, "clamp_t broadcast out", [xs, ls, None], clt, pre=[g.In(xs), g.In(ls), g.NONE], rtol=g.EXACT_RTOL)


def gen_glu():
    op = "aten::glu.out"

    def glu(dim):
        def f(x, out=None):
            if out is None:
                return A.glu(x, dim)
            return A.glu.out(x, dim, out=out)
        return f
    for dt in ALL_DT:
        for shape, dim in [([3, 8], -1), ([4, 6], 0), ([2, 4, 6], 1)]:
            x = data(shape, dt, "small", special=dt in FLOATS)
            emit(op, "glu %s %s %d" % (dn(dt), shape, dim), [x], glu(dim), pre=[g.In(x), g.Int(dim)],
                 od=dt if dt in FLOATS else F32)
    for shape, dim in [([3, 5], 1), ([], 0), ([4, 2], 2), ([4, 2], -3), ([0, 4], 1), ([0, 4], 0), ([2, 130], 1)]:
        x = data(shape, F32, "small")
        emit(op, "glu F32 %s %d" % (shape, dim), [x], glu(dim), pre=[g.In(x), g.Int(dim)], od=F32)
    x = data([2, 3, 4, 6], F32, "small")
    for io, oo in [([0, 2, 3, 1], [0, 2, 3, 1]), ([3, 2, 1, 0], [0, 1, 2, 3])]:
        emit(op, "glu order %s %s" % (io, oo), [x], glu(1), pre=[g.In(x, io), g.Int(1)], od=F32, out_order=oo)
    x = data([4, 6], F32, "small")
    for od in [F64, F16, I32]:
        emit(op, "glu out %s" % dn(od), [x], glu(1), pre=[g.In(x), g.Int(1)], od=od)
    emit(op, "glu dynamic", [x], glu(1), pre=[g.In(x), g.Int(1)], od=F32,
         out_kw=dict(shape=[4, 6], dynamic=True, capacity=24))
    emit(op, "glu static wrong", [x], glu(1), pre=[g.In(x), g.Int(1)], od=F32, out_kw=dict(shape=[4, 6]), fail=True)


def generate(gen):
    global g
    g = gen
    gen_comparisons()
    gen_minmax()
    gen_where()
    gen_logical()
    gen_bitwise()
    gen_classification()
    gen_unary_same()
    gen_unary_float()
    gen_logit()
    gen_division()
    gen_pow()
    gen_rsub()
    gen_atan2()
    gen_activations()
