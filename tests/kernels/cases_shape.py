"""Golden cases for the shape kernels (joining, splitting, slicing, indexing, view copies,
creation, triangular, copy_): every operator x every dtype it supports, odd and empty shapes,
negative dims, dim orders, dynamic outs, and the failures torch raises (or etch's rules add).

All of these are exact: values are moved or converted, never rounded by arithmetic (arange
follows torch's own formula bit for bit, scatter_add/index_put accumulate in torch's order).
"""
import torch

_ALL = ["Bool", "Byte", "Char", "Short", "Int", "Long", "Half", "BFloat16", "Float", "Double"]
_NO_BOOL = [d for d in _ALL if d != "Bool"]

# (operator, self/out dtype) pairs implemented and tested here.
SUPPORTED = {
    "aten::cat.out": _ALL,
    "aten::stack.out": _ALL,
    "aten::split_copy.Tensor_out": _ALL,
    "aten::split_with_sizes_copy.out": _ALL,
    "aten::unbind_copy.int_out": _ALL,
    "aten::slice_copy.Tensor_out": _ALL,
    "aten::select_copy.int_out": _ALL,
    "aten::narrow_copy.out": _ALL,
    "aten::slice_scatter.out": _ALL,
    "aten::select_scatter.out": _ALL,
    "aten::index_select.out": _ALL,
    "aten::index.Tensor_out": _ALL,
    "aten::index_put.out": _ALL,
    "aten::index_put_": _ALL,
    "aten::gather.out": _ALL,
    "aten::scatter.src_out": _ALL,
    "aten::scatter.value_out": _ALL,
    "aten::scatter_add.out": _ALL,
    "aten::masked_fill.Scalar_out": _ALL,
    "aten::expand_copy.out": _ALL,
    "aten::unsqueeze_copy.out": _ALL,
    "aten::squeeze_copy.dim_out": _ALL,
    "aten::squeeze_copy.dims_out": _ALL,
    "aten::squeeze_copy.out": _ALL,
    "aten::transpose_copy.int_out": _ALL,
    "aten::t_copy.out": _ALL,
    "aten::alias_copy.out": _ALL,
    "aten::detach_copy.out": _ALL,
    "aten::lift_fresh_copy.out": _ALL,
    "aten::repeat.out": _ALL,
    "aten::flip.out": _ALL,
    "aten::roll.out": _ALL,
    "aten::pixel_shuffle.out": _ALL,
    "aten::full.out": _ALL,
    "aten::full_like.out": _ALL,
    "aten::zeros.out": _ALL,
    "aten::ones.out": _ALL,
    "aten::scalar_tensor.out": _ALL,
    "aten::arange.out": _NO_BOOL,
    "aten::arange.start_out": _NO_BOOL,
    "aten::fill.Scalar_out": _ALL,
    "aten::fill.Tensor_out": _ALL,
    "aten::empty.out": _ALL,
    "dim_order_ops::_empty_dim_order.out": _ALL,
    "aten::triu.out": _ALL,
    "aten::tril.out": _ALL,
    "aten::copy.out": _ALL,
    "aten::copy_": _ALL,
}

A = torch.ops.aten
g = None  # the gen_golden module


def case(op, label, args, fail=False):
    g.W.case(op, "shape %s: %s" % (op.split("::")[1], label), args, fail=fail, rtol=g.EXACT_RTOL)


def H(t, order=None):
    """An input only a list refers to (not a kernel argument of its own)."""
    return g.Hidden(g.In(t, order))


def dname(dt):
    return str(dt).replace("torch.", "")


def data(shape, dt, special=True):
    """Random values; floats include nan/inf/-0 when there are enough elements."""
    return g.rand(shape, dt, special=special and dt in g.FLOATS)


def expect(fn):
    r, _ = g.torch_or_fail(fn)
    return r


def out_of(func, outfn, od):
    """torch's result for an out of dtype od: the functional result's shape, then the out=
    variant (torch 1.13's composite out variants do not resize)."""
    r = func()
    o = torch.empty(r.shape, dtype=od)
    outfn(o)
    return o


def single(op, label, ins, res, od, fail=False, fail_rank=1, order=None, **okw):
    """ins + [out, ret]; res None (or fail) = the call must fail."""
    args = list(ins)
    if res is not None and not fail:
        args.append(g.Out(od, res, order=order, **okw))
    else:
        shape = okw.pop("shape", [1] * fail_rank)
        okw.setdefault("dynamic", True)
        okw.setdefault("capacity", 4096)
        args.append(g.Out(od, None, shape=shape, order=order, **okw))
    args.append(g.Ref(len(args) - 1))
    case(op, label, args, fail=res is None or fail)


def multi(op, label, ins, results, od, fail=False, n_fail=2, rank=1, orders=None):
    """ins + [out list, ret] with the outs as hidden slots before the list."""
    args = list(ins)
    idx = []
    if results is not None and not fail:
        for k, r in enumerate(results):
            idx.append(len(args))
            args.append(g.Hidden(g.Out(od, r, order=orders[k] if orders else None)))
    else:
        for k in range(n_fail):
            idx.append(len(args))
            args.append(g.Hidden(g.Out(od, None, shape=[1] * rank, dynamic=True, capacity=4096)))
    args.append(g.TList(idx))
    args.append(g.Ref(len(args) - 1))
    case(op, label, args, fail=results is None or fail)


# ---- joining and splitting -------------------------------------------------------------------


def gen_cat_stack():
    for dt in g.ALL:
        a, b, c = data([2, 3], dt), data([2, 1], dt), data([2, 0], dt)
        ins = [H(a), H(b), H(c)]
        for d in [1, -1]:
            args = ins + [g.TList([0, 1, 2]), g.Int(d)]
            res = torch.cat([a, b, c], d)
            args += [g.Out(dt, res), g.Ref(5)]
            case("aten::cat.out", "%s dim%d" % (dname(dt), d), args)
        x, y = data([3, 2, 5], dt), data([1, 2, 5], dt)
        args = [H(x), H(y), g.TList([0, 1]), g.Int(0), g.Out(dt, torch.cat([x, y])), g.Ref(4)]
        case("aten::cat.out", "%s dim0" % dname(dt), args)
        p, q = data([2, 3], dt), data([2, 3], dt)
        for d in [0, 1, 2, -1, -3]:
            args = [H(p), H(q), g.TList([0, 1]), g.Int(d), g.Out(dt, torch.stack([p, q], d)), g.Ref(4)]
            case("aten::stack.out", "%s dim%d" % (dname(dt), d), args)
    # promotion and out dtypes (torch decides which casts are allowed)
    pairs = [(torch.int32, torch.float32), (torch.bool, torch.int8), (torch.uint8, torch.int8),
             (torch.float16, torch.bfloat16), (torch.int64, torch.float16), (torch.bool, torch.bool)]
    for da, db in pairs:
        a = g.rand([2, 2], da, lo=-50 if da in g.INTS and da != torch.uint8 else None, hi=50 if da in g.INTS else None)
        b = g.rand([1, 2], db, lo=0 if db in g.INTS else None, hi=50 if db in g.INTS else None)
        for od in g.ALL:
            for op, fn, sb in [("aten::cat.out", torch.cat, b), ("aten::stack.out", torch.stack, b.expand(2, 2).clone())]:
                res = expect(lambda: fn([a, sb], 0, out=torch.empty(0, dtype=od)))
                lab = "promote %s %s -> %s" % (dname(da), dname(db), dname(od))
                single(op, lab, [H(a), H(sb), g.TList([0, 1]), g.Int(0)], res, od, fail_rank=2 if op == "aten::cat.out" else 3)
    # legacy [0] inputs are skipped (any rank, any dim), even alone
    x = data([2, 3], torch.float32)
    e = torch.ones(0, dtype=torch.float64)
    args = [H(e), H(x), H(e), g.TList([0, 1, 2]), g.Int(1), g.Out(torch.float64, torch.cat([e, x, e], 1)), g.Ref(5)]
    case("aten::cat.out", "legacy empty", args)
    args = [H(e), H(e), g.TList([0, 1]), g.Int(3), g.Out(torch.float64, torch.cat([e, e], 3)), g.Ref(4)]
    case("aten::cat.out", "legacy only", args)
    # empty along other dims, single input, high rank, dim orders
    z = data([0, 3], torch.int32)
    args = [H(z), H(z), g.TList([0, 1]), g.Int(1), g.Out(torch.int32, torch.cat([z, z], 1)), g.Ref(4)]
    case("aten::cat.out", "empty rows", args)
    args = [H(z), g.TList([0]), g.Int(0), g.Out(torch.int32, torch.cat([z], 0)), g.Ref(3)]
    case("aten::cat.out", "single empty", args)
    h = data([1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2], torch.int8)
    args = [H(h), H(h), g.TList([0, 1]), g.Int(-2), g.Out(torch.int8, torch.cat([h, h], -2)), g.Ref(4)]
    case("aten::cat.out", "rank16", args)
    args = [H(h), H(h), g.TList([0, 1]), g.Int(2), g.Out(torch.int8, None, shape=[1] * 16, dynamic=True, capacity=1 << 20), g.Ref(4)]
    case("aten::stack.out", "rank17", args, fail=True)
    for ao in g.orders(4):
        for oo in g.orders(4):
            a, b = data([2, 3, 4, 5], torch.float32), data([2, 3, 1, 5], torch.float32)
            args = [H(a, ao), H(b, g.orders(4)[-1]), g.TList([0, 1]), g.Int(2),
                    g.Out(torch.float32, torch.cat([a, b], 2), order=oo), g.Ref(4)]
            case("aten::cat.out", "order %s %s" % (ao, oo), args)
            s1, s2 = data([2, 3, 4], torch.bfloat16), data([2, 3, 4], torch.bfloat16)
            so = [0, 2, 3, 1] if oo == [0, 2, 3, 1] else list(range(4)) if oo == list(range(4)) else [3, 2, 1, 0]
            args = [H(s1, ao[:3] if ao == [0, 1, 2, 3] else [2, 1, 0]), H(s2), g.TList([0, 1]), g.Int(1),
                    g.Out(torch.bfloat16, torch.stack([s1, s2], 1), order=so), g.Ref(4)]
            case("aten::stack.out", "order %s %s" % (ao, oo), args)
    y = data([4, 3], torch.float32)
    args = [H(x), H(y), g.TList([0, 1]), g.Int(0), g.Out(torch.float32, torch.cat([x, y]), shape=[8, 8], dynamic=True, capacity=64), g.Ref(4)]
    case("aten::cat.out", "dynamic out", args)
    # failures
    bad = [
        ("no tensors", [], 0),
        ("zero-dim", [torch.tensor(1.0), torch.tensor(2.0)], 0),
        ("rank mismatch", [x, data([2], torch.float32)], 0),
        ("size mismatch", [x, data([3, 4], torch.float32)], 0),
        ("dim out of range", [x, x], 2),
        ("dim out of range neg", [x, x], -3),
        ("legacy 2d empty", [torch.ones(0, 3), data([2, 4], torch.float32)], 1),
    ]
    for name, ts, d in bad:
        assert expect(lambda: torch.cat(ts, d)) is None, name
        args = [H(t) for t in ts] + [g.TList(range(len(ts))), g.Int(d)]
        single("aten::cat.out", name, args, None, torch.float32, fail_rank=2)
    args = [H(x), H(x), g.TList([0, 1]), g.Int(0)]
    single("aten::cat.out", "static out wrong", args, torch.cat([x, x]), torch.float32, fail=True, shape=[4, 4], dynamic=False)
    sbad = [("no tensors", [], 0), ("shape mismatch", [x, y], 0), ("dim out of range", [x, x], 3),
            ("dim out of range neg", [x, x], -4), ("rank mismatch", [x, x.reshape(-1)], 0)]
    for name, ts, d in sbad:
        assert expect(lambda: torch.stack(ts, d)) is None, name
        args = [H(t) for t in ts] + [g.TList(range(len(ts))), g.Int(d)]
        single("aten::stack.out", name, args, None, torch.float32, fail_rank=3)
    for name, ts in [("zero-dim", [torch.tensor(1.5), torch.tensor(-2.0)]), ("empty", [torch.ones(0, 2), torch.ones(0, 2)])]:
        args = [H(t) for t in ts] + [g.TList([0, 1]), g.Int(0), g.Out(torch.float32, torch.stack(ts)), g.Ref(4)]
        case("aten::stack.out", name, args)


def gen_split():
    for dt in g.ALL:
        x = data([5, 3, 4], dt)
        for split, d in [(2, 0), (1, 1), (3, -1), (7, 0), (4, 2)]:
            r = A.split_copy.Tensor(x, split, d)
            multi("aten::split_copy.Tensor_out", "%s %d dim%d" % (dname(dt), split, d),
                  [g.In(x), g.Int(split), g.Int(d)], list(r), dt)
        for sizes, d in [([2, 0, 3], 0), ([4], -1), ([1, 2], 1), ([0, 0, 4, 0], 2)]:
            r = A.split_with_sizes_copy(x, sizes, d)
            multi("aten::split_with_sizes_copy.out", "%s %s dim%d" % (dname(dt), sizes, d),
                  [g.In(x), g.IntList(sizes), g.Int(d)], list(r), dt)
        for d in [0, 1, -1]:
            r = A.unbind_copy(x, d)
            multi("aten::unbind_copy.int_out", "%s dim%d" % (dname(dt), d), [g.In(x), g.Int(d)], list(r), dt)
    # outs of other dtypes convert (copy_), dim orders, empty
    x = g.rand([4, 6], torch.float32)
    for od in [torch.float64, torch.int32, torch.float16]:
        r = [t.to(od) for t in A.split_copy.Tensor(x, 4, 1)]
        multi("aten::split_copy.Tensor_out", "to %s" % dname(od), [g.In(x), g.Int(4), g.Int(1)], r, od)
        r = [t.to(od) for t in A.unbind_copy(x, 1)]
        multi("aten::unbind_copy.int_out", "to %s" % dname(od), [g.In(x), g.Int(1)], r, od)
        r = [t.to(od) for t in A.split_with_sizes_copy(x, [1, 3], 0)]
        multi("aten::split_with_sizes_copy.out", "to %s" % dname(od), [g.In(x), g.IntList([1, 3]), g.Int(0)], r, od)
    y = data([2, 3, 4, 5], torch.int16)
    r = A.split_copy.Tensor(y, 2, 1)
    multi("aten::split_copy.Tensor_out", "channels last", [g.In(y, [0, 2, 3, 1]), g.Int(2), g.Int(1)], list(r), torch.int16,
          orders=[[0, 2, 3, 1], [3, 2, 1, 0]])
    r = A.unbind_copy(y, 3)
    multi("aten::unbind_copy.int_out", "channels last", [g.In(y, [0, 2, 3, 1]), g.Int(3)], list(r), torch.int16,
          orders=[[2, 1, 0]] * 5)
    e = data([2, 0], torch.float32)
    multi("aten::split_copy.Tensor_out", "empty dim split 0", [g.In(e), g.Int(0), g.Int(1)], list(A.split_copy.Tensor(e, 0, 1)), torch.float32)
    multi("aten::split_copy.Tensor_out", "empty dim", [g.In(e), g.Int(3), g.Int(1)], list(A.split_copy.Tensor(e, 3, 1)), torch.float32)
    multi("aten::unbind_copy.int_out", "empty dim", [g.In(e), g.Int(1)], [], torch.float32)
    multi("aten::unbind_copy.int_out", "empty other", [g.In(e), g.Int(0)], list(A.unbind_copy(e, 0)), torch.float32)
    multi("aten::split_with_sizes_copy.out", "none", [g.In(e), g.IntList([]), g.Int(1)], [], torch.float32)
    # failures
    s = torch.tensor(3.0)
    for name, t, split, d in [("split 0", x, 0, 1), ("negative", x, -1, 1), ("zero-dim", s, 1, 0), ("dim", x, 1, 2), ("dim neg", x, 1, -3)]:
        assert expect(lambda: A.split_copy.Tensor(t, split, d)) is None, name
        multi("aten::split_copy.Tensor_out", name, [g.In(t), g.Int(split), g.Int(d)], None, torch.float32, rank=max(t.dim(), 1))
    multi("aten::split_copy.Tensor_out", "too few outs", [g.In(x), g.Int(2), g.Int(1)], None, torch.float32, n_fail=2, rank=2)
    multi("aten::split_copy.Tensor_out", "too many outs", [g.In(x), g.Int(4), g.Int(1)], None, torch.float32, n_fail=3, rank=2)
    for name, sizes, d in [("bad sum", [1, 1], 1), ("negative", [7, -1], 1), ("too big", [7], 1), ("dim", [4], 2)]:
        assert expect(lambda: A.split_with_sizes_copy(x, sizes, d)) is None, name
        multi("aten::split_with_sizes_copy.out", name, [g.In(x), g.IntList(sizes), g.Int(d)], None, torch.float32, n_fail=len(sizes), rank=2)
    multi("aten::split_with_sizes_copy.out", "wrong count", [g.In(x), g.IntList([3, 3]), g.Int(1)], None, torch.float32, n_fail=3, rank=2)
    for name, t, d in [("zero-dim", s, 0), ("dim", x, 2)]:
        assert expect(lambda: A.unbind_copy(t, d)) is None, name
        multi("aten::unbind_copy.int_out", name, [g.In(t), g.Int(d)], None, torch.float32, rank=1)
    multi("aten::unbind_copy.int_out", "wrong count", [g.In(x), g.Int(0)], None, torch.float32, n_fail=3, rank=1)
    # an out of the wrong rank / static shape fails
    r = A.split_copy.Tensor(x, 3, 1)
    args = [g.In(x), g.Int(3), g.Int(1), g.Hidden(g.Out(torch.float32, r[0])), g.Hidden(g.Out(torch.float32, None, shape=[4, 2])), g.TList([3, 4]), g.Ref(5)]
    case("aten::split_copy.Tensor_out", "static out wrong", args, fail=True)
    outs = [g.Hidden(g.Out(torch.float32, x[:, :2], shape=[5, 5], dynamic=True, capacity=25)),
            g.Hidden(g.Out(torch.float32, x[:, 2:], shape=[5, 5], dynamic=True, capacity=25))]
    case("aten::split_with_sizes_copy.out", "dynamic outs", [g.In(x), g.IntList([2, 4]), g.Int(1)] + outs + [g.TList([3, 4]), g.Ref(5)])
    xb = x.to(torch.bool)
    outs = [g.Hidden(g.Out(torch.bool, xb[:, :3])), g.Hidden(g.Out(torch.float32, xb[:, 3:].float()))]
    case("aten::split_copy.Tensor_out", "mixed out dtypes", [g.In(xb), g.Int(3), g.Int(1)] + outs + [g.TList([3, 4]), g.Ref(5)])


# ---- slicing -----------------------------------------------------------------------------------


def gen_slice_select():
    for dt in g.ALL:
        x = data([4, 5, 3], dt)
        for d, s, e, st in [(0, 1, 3, 1), (1, None, None, 2), (-1, -2, None, 1), (1, -100, 100, 3),
                            (1, 4, 2, 1), (0, 5, None, 1), (2, 0, -1, 5), (1, None, -3, 1)]:
            r = A.slice_copy.Tensor(x, d, s, e, st)
            ins = [g.In(x), g.Int(d), g.Int(s) if s is not None else None, g.Int(e) if e is not None else None, g.Int(st)]
            single("aten::slice_copy.Tensor_out", "%s %s" % (dname(dt), (d, s, e, st)), ins, r, dt)
            src = data(list(r.shape), dt)
            r2 = A.slice_scatter(x, src, d, s, e, st)
            single("aten::slice_scatter.out", "%s %s" % (dname(dt), (d, s, e, st)), [g.In(x), g.In(src)] + ins[1:], r2, dt)
        for d, i in [(0, 0), (1, -1), (2, 2), (-2, 3)]:
            r = A.select_copy.int(x, d, i)
            single("aten::select_copy.int_out", "%s %d %d" % (dname(dt), d, i), [g.In(x), g.Int(d), g.Int(i)], r, dt)
            src = data(list(r.shape), dt)
            r2 = A.select_scatter(x, src, d, i)
            single("aten::select_scatter.out", "%s %d %d" % (dname(dt), d, i), [g.In(x), g.In(src), g.Int(d), g.Int(i)], r2, dt)
        for d, s, n in [(0, 1, 2), (1, -3, 3), (2, 3, 0), (-1, 0, 3)]:
            r = A.narrow_copy(x, d, s, n)
            single("aten::narrow_copy.out", "%s %d %d %d" % (dname(dt), d, s, n), [g.In(x), g.Int(d), g.Int(s), g.Int(n)], r, dt)
    # conversions: slice/select convert to out's dtype; scatter ops convert src to self's dtype first
    x = g.rand([3, 4], torch.float32)
    for od in [torch.float64, torch.int32, torch.bool, torch.bfloat16]:
        r = expect(lambda: out_of(lambda: A.slice_copy.Tensor(x, 1, 1, 3, 1), lambda o: A.slice_copy.Tensor_out(x, 1, 1, 3, 1, out=o), od))
        single("aten::slice_copy.Tensor_out", "to %s" % dname(od), [g.In(x), g.Int(1), g.Int(1), g.Int(3), g.Int(1)], r, od)
        r = expect(lambda: out_of(lambda: A.select_copy.int(x, 0, 2), lambda o: A.select_copy.int_out(x, 0, 2, out=o), od))
        single("aten::select_copy.int_out", "to %s" % dname(od), [g.In(x), g.Int(0), g.Int(2)], r, od)
        r = expect(lambda: A.narrow_copy.out(x, 0, 1, 1, out=torch.empty([1, 4], dtype=od)))
        single("aten::narrow_copy.out", "to %s" % dname(od), [g.In(x), g.Int(0), g.Int(1), g.Int(1)], r, od, fail_rank=2)
    xi = g.rand([3, 4], torch.int32, lo=-100, hi=100)
    for sd, od in [(torch.float32, torch.float32), (torch.float64, torch.int32), (torch.int32, torch.float64), (torch.bool, torch.int32), (torch.float16, torch.bool)]:
        src = g.rand([3, 2], sd, lo=-100 if sd in g.INTS else None, hi=100 if sd in g.INTS else None) * (1 if sd == torch.bool else 1)
        r = expect(lambda: A.slice_scatter.out(xi, src, 1, 1, None, 2, out=torch.empty([3, 4], dtype=od)))
        single("aten::slice_scatter.out", "src %s out %s" % (dname(sd), dname(od)), [g.In(xi), g.In(src), g.Int(1), g.Int(1), None, g.Int(2)], r, od, fail_rank=2)
        src1 = src[:, 0].contiguous()
        r = expect(lambda: A.select_scatter.out(xi, src1, 1, -2, out=torch.empty([3, 4], dtype=od)))
        single("aten::select_scatter.out", "src %s out %s" % (dname(sd), dname(od)), [g.In(xi), g.In(src1), g.Int(1), g.Int(-2)], r, od, fail_rank=2)
    # dim orders, empty, dynamic
    y = data([2, 3, 4, 5], torch.float16)
    for io in g.orders(4):
        for oo in g.orders(4):
            r = A.slice_copy.Tensor(y, 3, 1, None, 2)
            single("aten::slice_copy.Tensor_out", "order %s %s" % (io, oo), [g.In(y, io), g.Int(3), g.Int(1), None, g.Int(2)], r, torch.float16, order=oo)
            src = data(list(r.shape), torch.float16)
            single("aten::slice_scatter.out", "order %s %s" % (io, oo), [g.In(y, io), g.In(src, oo), g.Int(3), g.Int(1), None, g.Int(2)],
                   A.slice_scatter(y, src, 3, 1, None, 2), torch.float16, order=oo)
            r = A.select_copy.int(y, 1, 1)
            single("aten::select_copy.int_out", "order %s %s" % (io, oo), [g.In(y, io), g.Int(1), g.Int(1)], r, torch.float16, order=oo[:3] if oo == [0, 1, 2, 3] else [2, 1, 0])
    e = data([0, 3], torch.float32)
    single("aten::slice_copy.Tensor_out", "empty", [g.In(e), g.Int(1), g.Int(1), None, g.Int(1)], A.slice_copy.Tensor(e, 1, 1, None, 1), torch.float32)
    single("aten::select_copy.int_out", "empty", [g.In(e), g.Int(1), g.Int(2)], A.select_copy.int(e, 1, 2), torch.float32)
    single("aten::slice_copy.Tensor_out", "dynamic", [g.In(x), g.Int(0), g.Int(1), None, g.Int(1)], A.slice_copy.Tensor(x, 0, 1, None, 1), torch.float32,
           shape=[3, 4], dynamic=True, capacity=12)
    v = data([7], torch.int64)
    single("aten::select_copy.int_out", "to zero-dim", [g.In(v), g.Int(0), g.Int(-7)], A.select_copy.int(v, 0, -7), torch.int64)
    single("aten::slice_copy.Tensor_out", "huge step", [g.In(v), g.Int(0), g.Int(2), None, g.Int(2 ** 62)], A.slice_copy.Tensor(v, 0, 2, None, 2 ** 62), torch.int64)
    single("aten::slice_copy.Tensor_out", "extreme bounds", [g.In(v), g.Int(0), g.Int(-2 ** 63), g.Int(2 ** 63 - 1), g.Int(1)], v.clone(), torch.int64)
    # failures
    s = torch.tensor(2.0)
    for name, t, d, st in [("step 0", x, 1, 0), ("step neg", x, 1, -1), ("zero-dim", s, 0, 1), ("dim", x, 2, 1), ("dim neg", x, -3, 1)]:
        assert expect(lambda: A.slice_copy.Tensor(t, d, 0, 1, st)) is None, name
        single("aten::slice_copy.Tensor_out", name, [g.In(t), g.Int(d), g.Int(0), g.Int(1), g.Int(st)], None, torch.float32, fail_rank=max(t.dim(), 1))
        single("aten::slice_scatter.out", name, [g.In(t), g.In(t), g.Int(d), g.Int(0), g.Int(1), g.Int(st)], None, torch.float32, fail_rank=max(t.dim(), 1))
    for name, t, d, i in [("index", x, 1, 4), ("index neg", x, 1, -5), ("zero-dim", s, 0, 0), ("dim", x, 2, 0)]:
        assert expect(lambda: A.select_copy.int(t, d, i)) is None, name
        single("aten::select_copy.int_out", name, [g.In(t), g.Int(d), g.Int(i)], None, torch.float32, fail_rank=1)
        src = torch.ones(4 if d == 0 else 3)
        single("aten::select_scatter.out", name, [g.In(t), g.In(src), g.Int(d), g.Int(i)], None, torch.float32, fail_rank=max(t.dim(), 1))
    for name, src, d in [("wrong src", torch.ones(3, 3), 1), ("broadcast src", torch.ones(1, 2), 1)]:
        assert expect(lambda: A.slice_scatter(x, src, d, 0, 2, 1)) is None, name
        single("aten::slice_scatter.out", name, [g.In(x), g.In(src), g.Int(d), g.Int(0), g.Int(2), g.Int(1)], None, torch.float32, fail_rank=2)
    for name, src in [("wrong src", torch.ones(4)), ("broadcast src", torch.ones(1)), ("rank src", torch.ones(1, 3))]:
        assert expect(lambda: A.select_scatter(x, src, 1, 0)) is None, name
        single("aten::select_scatter.out", name, [g.In(x), g.In(src), g.Int(1), g.Int(0)], None, torch.float32, fail_rank=2)
    for name, t, d, st, n in [("start", x, 1, 5, 0), ("start neg", x, 1, -5, 0), ("length", x, 1, 3, 2), ("length neg", x, 1, 0, -1),
                              ("zero-dim", s, 0, 0, 1), ("dim", x, 2, 0, 1)]:
        assert expect(lambda: A.narrow_copy(t, d, st, n)) is None, name
        single("aten::narrow_copy.out", name, [g.In(t), g.Int(d), g.Int(st), g.Int(n)], None, torch.float32, fail_rank=max(t.dim(), 1))
    single("aten::narrow_copy.out", "start at end", [g.In(x), g.Int(1), g.Int(4), g.Int(0)], A.narrow_copy(x, 1, 4, 0), torch.float32)
    single("aten::select_copy.int_out", "static out wrong", [g.In(x), g.Int(0), g.Int(0)], None, torch.float32, shape=[3], dynamic=False)


# ---- indexing ------------------------------------------------------------------------------------


def idx(vals, dt=torch.int64):
    return torch.tensor(vals, dtype=dt)


def gen_index_select_gather_scatter():
    for dt in g.ALL:
        x = data([4, 5, 3], dt)
        for d, ix in [(0, [3, 0, 3]), (1, [4]), (-1, [2, 1, 0, 1]), (1, []), (2, 1)]:
            for it in [torch.int64, torch.int32]:
                i = idx(ix, it)
                r = A.index_select(x, d, i)
                single("aten::index_select.out", "%s %d %s %s" % (dname(dt), d, ix, dname(it)), [g.In(x), g.Int(d), g.In(i)], r, dt)
        for d in [0, 1, -1, 2]:
            size = x.shape[d]
            index = g.rand([3, 4, 2], torch.int64, lo=0, hi=size - 1)
            r = torch.gather(x, d, index)
            single("aten::gather.out", "%s dim%d" % (dname(dt), d), [g.In(x), g.Int(d), g.In(index), g.Bool(False)], r, dt)
            src = data([3, 4, 3], dt)
            r = torch.scatter(x, d, index, src)
            single("aten::scatter.src_out", "%s dim%d" % (dname(dt), d), [g.In(x), g.Int(d), g.In(index), g.In(src)], r, dt)
            val = {torch.bool: True, torch.uint8: 200, torch.int8: -7}.get(dt, 2.5 if dt in g.FLOATS else 1000)
            r = torch.scatter(x, d, index, val)
            single("aten::scatter.value_out", "%s dim%d" % (dname(dt), d), [g.In(x), g.Int(d), g.In(index), g.scalar_value(val)], r, dt)
            srca = g.rand([3, 4, 3], dt, lo=-4 if dt in g.INTS else None, hi=4 if dt in g.INTS else None) if dt != torch.uint8 else g.rand([3, 4, 3], dt)
            r = expect(lambda: torch.scatter_add(x, d, index, srca))
            single("aten::scatter_add.out", "%s dim%d" % (dname(dt), d), [g.In(x), g.Int(d), g.In(index), g.In(srca)], r, dt, fail_rank=3)
    # accumulation order of scatter_add (rounding), float special values
    for dt in g.FLOATS:
        x = g.rand([3, 2], dt)
        src = g.rand([40, 2], dt, hi=1000.0)
        index = g.rand([40, 2], torch.int64, lo=0, hi=2)
        single("aten::scatter_add.out", "%s many" % dname(dt), [g.In(x), g.Int(0), g.In(index), g.In(src)], torch.scatter_add(x, 0, index, src), dt)
    # zero-dim and empty
    s = torch.tensor(4.5)
    for name, i in [("zero-dim", torch.tensor(0)), ("zero-dim 1-D index", idx([0, 0]))]:
        single("aten::gather.out", name, [g.In(s), g.Int(0), g.In(i), g.Bool(False)], torch.gather(s, 0, i), torch.float32)
    single("aten::scatter.src_out", "zero-dim", [g.In(s), g.Int(-1), g.In(torch.tensor(0)), g.In(torch.tensor(7.0))], torch.scatter(s, -1, torch.tensor(0), torch.tensor(7.0)), torch.float32)
    single("aten::index_select.out", "zero-dim", [g.In(s), g.Int(0), g.In(torch.tensor(0))], A.index_select(s, 0, torch.tensor(0)), torch.float32)
    single("aten::index_select.out", "zero-dim 1-D index", [g.In(s), g.Int(0), g.In(idx([0]))], A.index_select(s, 0, idx([0])), torch.float32)
    x = data([2, 3, 4], torch.float32)
    e = torch.zeros(0, dtype=torch.int64)
    single("aten::gather.out", "empty index any rank", [g.In(x), g.Int(1), g.In(e), g.Bool(False)], torch.gather(x, 1, e), torch.float32)
    single("aten::gather.out", "empty index big", [g.In(x), g.Int(1), g.In(torch.zeros(0, 7, 9, dtype=torch.int64)), g.Bool(False)],
           torch.gather(x, 1, torch.zeros(0, 7, 9, dtype=torch.int64)), torch.float32)
    single("aten::scatter.src_out", "empty index", [g.In(x), g.Int(1), g.In(e), g.In(torch.ones(2))], torch.scatter(x, 1, e, torch.ones(2)), torch.float32)
    single("aten::scatter.value_out", "empty index", [g.In(x), g.Int(1), g.In(e), g.Dbl(1.0)], torch.scatter(x, 1, e, 1.0), torch.float32)
    single("aten::scatter_add.out", "empty index", [g.In(x), g.Int(1), g.In(e), g.In(torch.ones(2))], torch.scatter_add(x, 1, e, torch.ones(2)), torch.float32)
    single("aten::scatter.src_out", "index larger in dim", [g.In(x), g.Int(1), g.In(torch.zeros(2, 5, 2, dtype=torch.int64)), g.In(torch.ones(2, 5, 2))],
           torch.scatter(x, 1, torch.zeros(2, 5, 2, dtype=torch.int64), torch.ones(2, 5, 2)), torch.float32)
    single("aten::gather.out", "index larger in dim", [g.In(x), g.Int(1), g.In(torch.ones(1, 5, 2, dtype=torch.int64)), g.Bool(False)],
           torch.gather(x, 1, torch.ones(1, 5, 2, dtype=torch.int64)), torch.float32)
    # dim orders
    y = data([2, 3, 4, 5], torch.float32)
    iy = g.rand([2, 3, 4, 5], torch.int64, lo=0, hi=2)
    for o in g.orders(4):
        single("aten::gather.out", "order %s" % o, [g.In(y, o), g.Int(1), g.In(iy, g.orders(4)[-1]), g.Bool(False)], torch.gather(y, 1, iy), torch.float32, order=o)
        single("aten::scatter.src_out", "order %s" % o, [g.In(y, o), g.Int(1), g.In(iy, g.orders(4)[1]), g.In(y * 2, o)], torch.scatter(y, 1, iy, y * 2), torch.float32, order=o)
        single("aten::scatter_add.out", "order %s" % o, [g.In(y, o), g.Int(1), g.In(iy), g.In(y * 2)], torch.scatter_add(y, 1, iy, y * 2), torch.float32, order=o)
        single("aten::index_select.out", "order %s" % o, [g.In(y, o), g.Int(2), g.In(idx([3, 0]))], A.index_select(y, 2, idx([3, 0])), torch.float32, order=o)
    # value conversions of scatter.value
    xi = data([3, 4], torch.int8)
    ii = idx([[0, 1], [2, 0]])
    for v in [2.7, -1, 300, True, float("nan")]:
        r = expect(lambda: torch.scatter(xi, 0, ii, v))
        single("aten::scatter.value_out", "int8 value %r" % v, [g.In(xi), g.Int(0), g.In(ii), g.scalar_value(v)], r, torch.int8, fail_rank=2)
    xh = data([3, 4], torch.float16)
    for v in [1e5, float("inf"), 65504.0, 3]:
        r = expect(lambda: torch.scatter(xh, 0, ii, v))
        single("aten::scatter.value_out", "half value %r" % v, [g.In(xh), g.Int(0), g.In(ii), g.scalar_value(v)], r, torch.float16, fail_rank=2)
    # failures
    x = data([2, 3, 4], torch.float32)
    i1 = idx([[[1]]])
    bad_gather = [
        ("negative index", x, 0, idx([[[-1]]])), ("index too big", x, 0, idx([[[2]]])), ("index int32", x, 0, i1.int()),
        ("rank", x, 1, torch.zeros(2, 2, dtype=torch.int64)), ("larger outside dim", x, 1, torch.zeros(3, 2, 2, dtype=torch.int64)),
        ("dim", x, 3, i1), ("dim empty index", x, 5, torch.zeros(0, 0, 0, dtype=torch.int64)),
    ]
    for name, t, d, i in bad_gather:
        assert expect(lambda: torch.gather(t, d, i)) is None, name
        single("aten::gather.out", name, [g.In(t), g.Int(d), g.In(i), g.Bool(False)], None, torch.float32, fail_rank=i.dim())
        for op, last in [("aten::scatter.src_out", g.In(torch.ones(list(i.shape)))), ("aten::scatter.value_out", g.Dbl(1.0)),
                         ("aten::scatter_add.out", g.In(torch.ones(list(i.shape))))]:
            single(op, name, [g.In(t), g.Int(d), g.In(i), last], None, torch.float32, fail_rank=3)
    single("aten::gather.out", "out dtype", [g.In(x), g.Int(0), g.In(i1), g.Bool(False)], None, torch.float64, fail_rank=3)
    for op in ["aten::scatter.src_out", "aten::scatter_add.out"]:
        for name, src in [("src dtype", torch.ones(1, 1, 1, dtype=torch.float64)), ("src smaller", torch.ones(1, 1, 0)),
                          ("src dtype empty index", torch.ones(1, dtype=torch.float64))]:
            i = i1 if "empty" not in name else torch.zeros(0, dtype=torch.int64)
            fn = torch.scatter if op == "aten::scatter.src_out" else torch.scatter_add
            assert expect(lambda: fn(x, 0, i, src)) is None, name
            single(op, name, [g.In(x), g.Int(0), g.In(i), g.In(src)], None, torch.float32, fail_rank=3)
        single(op, "out dtype", [g.In(x), g.Int(0), g.In(i1), g.In(torch.ones(1, 1, 1))], None, torch.float64, fail_rank=3)
    for name, t, d, i in [("negative", x, 0, idx([-1])), ("too big", x, 2, idx([4])), ("rank 2", x, 0, idx([[0]])),
                          ("int16", x, 0, idx([0], torch.int16)), ("dim", x, 3, idx([0])), ("zero-dim self two", s, 0, idx([0, 0])),
                          ("zero-dim self bad", s, 0, idx([1]))]:
        assert name == "zero-dim self two" or expect(lambda: A.index_select(t, d, i)) is None, name
        single("aten::index_select.out", name, [g.In(t), g.Int(d), g.In(i)], None, torch.float32, fail_rank=max(t.dim(), 1))
    single("aten::index_select.out", "out dtype", [g.In(x), g.Int(0), g.In(idx([0]))], None, torch.float64, fail_rank=3)


def gen_index():
    for dt in g.ALL:
        x = data([4, 5, 3], dt)
        lists = [
            ("long", [idx([3, 0, -1, 2])]),
            ("two", [idx([[0, 1], [3, 3]]), idx([1, -5])]),
            ("middle", [None, idx([4, 0])]),
            ("last", [None, None, idx([[2], [0]])]),
            ("split", [idx([0, 1]), None, idx([2, 0])]),
            ("mask", [g.rand([4], torch.bool)]),
            ("mask 2d", [g.rand([4, 5], torch.bool)]),
            ("mask mid", [None, g.rand([5, 3], torch.bool)]),
            ("int32", [idx([1, 2], torch.int32), idx([[0], [4]], torch.int32)]),
        ]
        for name, ind in lists:
            ind64 = [None if t is None else (t.long() if t.dtype == torch.int32 else t) for t in ind]
            r = A.index.Tensor(x, ind64)
            index_case("aten::index.Tensor_out", "%s %s" % (dname(dt), name), x, ind, r, dt)
            vals = data(list(r.shape), dt)
            r2 = A.index_put(x, ind64, vals)
            index_put_cases("%s %s" % (dname(dt), name), x, ind, vals, False, r2, dt)
            if dt != torch.bool and name in ("long", "mask", "split"):
                va = g.rand(list(r.shape), dt, lo=-4 if dt in g.INTS else None, hi=4 if dt in g.INTS else None)
                r3 = expect(lambda: A.index_put(x, ind64, va, True))
                index_put_cases("%s %s acc" % (dname(dt), name), x, ind, va, True, r3, dt)
    # broadcasting values, duplicates (last write wins; accumulate adds in order), bool accumulate
    x = data([5, 3], torch.float32)
    i = idx([0, 4, 0, 2, 0])
    for name, v in [("row", data([3], torch.float32)), ("scalar", torch.tensor(2.5)), ("column", data([5, 1], torch.float32)), ("full", data([5, 3], torch.float32))]:
        index_put_cases("bcast %s" % name, x, [i], v, False, A.index_put(x, [i], v), torch.float32)
        index_put_cases("bcast %s acc" % name, x, [i], v, True, A.index_put(x, [i], v, True), torch.float32)
    xb = g.rand([4], torch.bool)
    index_put_cases("bool acc", xb, [idx([0, 0, 3])], torch.tensor([True, False, True]), True, A.index_put(xb, [idx([0, 0, 3])], torch.tensor([True, False, True]), True), torch.bool)
    xi = g.rand([4], torch.int8)
    vi = torch.tensor([100, 100, -128], dtype=torch.int8)
    index_put_cases("int8 wrap acc", xi, [idx([1, 1, 1])], vi, True, A.index_put(xi, [idx([1, 1, 1])], vi, True), torch.int8)
    # out dtype: index needs self's (torch 1.13 copies raw bytes otherwise); index_put converts
    x = g.rand([3, 4], torch.float32)
    for od in [torch.float64, torch.int32, torch.float16]:
        index_case("aten::index.Tensor_out", "to %s" % dname(od), x, [idx([2, 0])], None, od)
        v = g.rand([4], torch.float32)
        r = expect(lambda: A.index_put.out(x, [idx([1])], v, False, out=torch.empty([3, 4], dtype=od)))
        index_case("aten::index_put.out", "to %s" % dname(od), x, [idx([1])], r, od, values=v, acc=False)
    # accumulating into an out of another dtype would need self's dtype in between: not supported
    index_case("aten::index_put.out", "acc to other dtype", x, [idx([1])], None, torch.float64, values=data([4], torch.float32), acc=True)
    y = data([2, 3, 4, 5], torch.int16)
    ind = [None, idx([2, 0]), None, idx([[4], [1]])]
    for io in g.orders(4):
        for oo in [[0, 1, 2, 3], [3, 2, 1, 0]]:
            r = A.index.Tensor(y, ind)
            index_case("aten::index.Tensor_out", "order %s %s" % (io, oo), y, ind, r, torch.int16, order=io, out_order=oo)
            v = data([2, 2, 4], torch.int16)
            r = A.index_put(y, ind, v)
            index_case("aten::index_put.out", "order %s %s" % (io, oo), y, ind, r, torch.int16, order=io, out_order=oo, values=v, acc=False)
            ind2 = [None, g.rand([3, 4], torch.bool)]
            r = A.index.Tensor(y, ind2)
            index_case("aten::index.Tensor_out", "mask order %s %s" % (io, oo), y, ind2, r, torch.int16, order=io, out_order=oo[:3] if oo == [0, 1, 2, 3] else [2, 1, 0])
    # masks broadcast with index tensors; uint8 masks; an empty index with out-of-range neighbours
    z = data([3, 4, 2], torch.float32)
    m = torch.tensor([True, False, True])
    for name, ind in [("mask+long", [m, idx([1, 3])]), ("mask+long bcast", [m, idx([[1], [3]])]), ("mask one set", [torch.tensor([False, True, False]), idx([0, 1, 3])]),
                      ("byte-dtype mask", [m.to(torch.uint8)]), ("empty", [idx([]), idx([7])]), ("empty mask", [torch.zeros(3, dtype=torch.bool)]),
                      ("zero-dim index", [idx(1)]), ("zero-dim index mid", [None, idx(-1)])]:
        r = A.index.Tensor(z, ind)
        index_case("aten::index.Tensor_out", name, z, ind, r, torch.float32)
    # failures
    bad = [
        ("out of range", [idx([3])]), ("out of range neg", [idx([-4])]), ("too many", [None, None, None, idx([0])]),
        ("mask shape", [torch.ones(4, dtype=torch.bool)]), ("mask shape 2d", [torch.ones(3, 3, dtype=torch.bool)]),
        ("no broadcast", [idx([0, 1]), idx([0, 1, 2])]), ("mask no broadcast", [m, idx([0, 1, 2])]), ("float index", [torch.tensor([1.0])]),
        ("int8 index", [idx([1], torch.int8)]), ("all none", [None, None]), ("empty list", []), ("zero-dim mask", [torch.tensor(True)]),
    ]
    for name, ind in bad:
        if name in ("all none", "empty list", "zero-dim mask"):
            pass  # torch 1.13 asserts internally; etch fails cleanly
        else:
            assert expect(lambda: A.index.Tensor(z, ind)) is None, name
        index_case("aten::index.Tensor_out", name, z, ind, None, torch.float32)
        index_put_cases(name, z, ind, torch.tensor(1.0), False, None, torch.float32)
    for name, v in [("values shape", torch.ones(3)), ("values rank", torch.ones(1, 2, 4, 2)), ("values dtype", torch.ones(2, dtype=torch.float64))]:
        ind = [idx([0, 2])]
        assert expect(lambda: A.index_put(z, ind, v)) is None, name
        index_put_cases(name, z, ind, v, False, None, torch.float32)
    index_case("aten::index.Tensor_out", "static out wrong", z, [idx([0])], None, torch.float32, out_shape=[2, 4, 2])


def index_case(op, label, x, ind, res, od, order=None, out_order=None, values=None, acc=False, out_shape=None):
    """index.Tensor_out / index_put.out: self, the index tensors (hidden: only the list refers to
    them), the list, [values, accumulate,] out and the return slot."""
    pre = [g.In(t) for t in ind if t is not None]
    k = iter(range(len(pre)))
    ref = [None if t is None else next(k) for t in ind]
    # the kernel's arguments are self, the list, ...: the index tensors are hidden slots
    lst = g.OptTList([None if j is None else j + 1 for j in ref])
    args = [g.In(x, order)] + [g.Hidden(p) for p in pre] + [lst]
    if op == "aten::index_put.out":
        args += [g.In(values), g.Bool(acc)]
    if res is not None:
        args.append(g.Out(od, res, order=out_order))
    else:
        args.append(g.Out(od, None, shape=out_shape or [1] * max(x.dim(), 1), dynamic=out_shape is None, capacity=4096 if out_shape is None else None))
    args.append(g.Ref(len(args) - 1))
    case(op, label, args, fail=res is None)


def index_put_cases(label, x, ind, values, acc, res, dt):
    """index_put.out, and index_put_ (self written in place)."""
    index_case("aten::index_put.out", label, x, ind, res, dt, values=values, acc=acc)
    pre = [g.In(t) for t in ind if t is not None]
    k = iter(range(len(pre)))
    ref = [None if t is None else next(k) for t in ind]
    args = [g.InOut(x, res)] + [g.Hidden(p) for p in pre] + [
        g.OptTList([None if j is None else j + 1 for j in ref]), g.In(values), g.Bool(acc), g.Ref(0)]
    case("aten::index_put_", label, args, fail=res is None)


def gen_masked_fill():
    for dt in g.ALL:
        x = data([3, 5], dt)
        m = g.rand([3, 5], torch.bool)
        for v in [True, 0, -3, 2.5, 100, float("nan"), 1e6]:
            r = expect(lambda: torch.masked_fill(x, m, v))
            single("aten::masked_fill.Scalar_out", "%s %r" % (dname(dt), v), [g.In(x), g.In(m), g.scalar_value(v)], r, dt, fail_rank=2)
    x = data([2, 3, 4, 5], torch.float32)
    for name, mshape, xo in [("bcast row", [5], None), ("bcast col", [4, 1], None), ("bcast self", [3, 2, 3, 4, 5], None),
                             ("zero-dim", [], None), ("channels last", [2, 3, 4, 5], [0, 2, 3, 1]), ("reversed", [1, 3, 1, 5], [3, 2, 1, 0])]:
        m = g.rand(mshape, torch.bool)
        r = torch.masked_fill(x, m, -1.5)
        single("aten::masked_fill.Scalar_out", name, [g.In(x, xo), g.In(m), g.Dbl(-1.5)], r, torch.float32, order=xo if r.dim() == 4 else None)
    xi = data([6], torch.int32)
    m = g.rand([6], torch.bool)
    for od in [torch.float32, torch.int8, torch.float64, torch.bool]:
        r = expect(lambda: A.masked_fill.Scalar_out(xi, m, 2.7, out=torch.empty([6], dtype=od)))
        single("aten::masked_fill.Scalar_out", "int32 to %s" % dname(od), [g.In(xi), g.In(m), g.Dbl(2.7)], r, od)
    e = data([0, 3], torch.float32)
    single("aten::masked_fill.Scalar_out", "empty", [g.In(e), g.In(torch.ones(3, dtype=torch.bool)), g.Int(1)], torch.masked_fill(e, torch.ones(3, dtype=torch.bool), 1), torch.float32)
    for name, mm in [("mask float", torch.ones(6)), ("mask uint8 (deprecated in torch)", torch.ones(6, dtype=torch.uint8)), ("mask shape", torch.ones(5, dtype=torch.bool))]:
        single("aten::masked_fill.Scalar_out", name, [g.In(xi), g.In(mm), g.Int(1)], None, torch.int32)


# ---- views as copies ---------------------------------------------------------------------------


def squeeze_dims(x, dims):
    """torch 2's squeeze(dims) (torch 1.13 lacks the overload): the named size-1 dims go."""
    keep = [k for k in range(x.dim()) if not (k in [d % max(x.dim(), 1) for d in dims] and x.shape[k] == 1)]
    return x.reshape([x.shape[k] for k in keep]) if x.dim() else x.clone()


def gen_views():
    views = [
        # op, label, self shape, args, torch fn
        ("aten::expand_copy.out", "bcast", [3, 1, 4], [g.IntList([2, 3, 5, 4]), g.Bool(False)], lambda x: x.expand(2, 3, 5, 4)),
        ("aten::expand_copy.out", "keep", [3, 1, 4], [g.IntList([-1, 2, -1]), g.Bool(False)], lambda x: x.expand(-1, 2, -1)),
        ("aten::expand_copy.out", "zero", [1, 3], [g.IntList([0, 3]), g.Bool(True)], lambda x: x.expand(0, 3)),
        ("aten::expand_copy.out", "scalar", [], [g.IntList([2, 3]), g.Bool(False)], lambda x: x.expand(2, 3)),
        ("aten::unsqueeze_copy.out", "0", [2, 3], [g.Int(0)], lambda x: x.unsqueeze(0)),
        ("aten::unsqueeze_copy.out", "last", [2, 3], [g.Int(2)], lambda x: x.unsqueeze(2)),
        ("aten::unsqueeze_copy.out", "neg", [2, 3], [g.Int(-2)], lambda x: x.unsqueeze(-2)),
        ("aten::unsqueeze_copy.out", "scalar", [], [g.Int(-1)], lambda x: x.unsqueeze(-1)),
        ("aten::squeeze_copy.dim_out", "1", [2, 1, 3], [g.Int(1)], lambda x: x.squeeze(1)),
        ("aten::squeeze_copy.dim_out", "not 1", [2, 1, 3], [g.Int(-1)], lambda x: x.squeeze(-1)),
        ("aten::squeeze_copy.dim_out", "scalar", [], [g.Int(0)], lambda x: x.squeeze(0)),
        ("aten::squeeze_copy.dims_out", "two", [1, 2, 1, 3, 1], [g.IntList([0, -1, 1])], lambda x: squeeze_dims(x, [0, -1, 1])),
        ("aten::squeeze_copy.dims_out", "none", [1, 2, 1], [g.IntList([])], lambda x: x.clone()),
        ("aten::squeeze_copy.dims_out", "scalar", [], [g.IntList([0])], lambda x: x.clone()),
        ("aten::squeeze_copy.out", "all", [1, 2, 1, 3, 1], [], lambda x: x.squeeze()),
        ("aten::squeeze_copy.out", "ones", [1, 1], [], lambda x: x.squeeze()),
        ("aten::squeeze_copy.out", "empty", [0, 1, 2], [], lambda x: x.squeeze()),
        ("aten::transpose_copy.int_out", "01", [2, 3], [g.Int(0), g.Int(1)], lambda x: x.transpose(0, 1)),
        ("aten::transpose_copy.int_out", "neg", [2, 3, 4], [g.Int(-1), g.Int(0)], lambda x: x.transpose(-1, 0)),
        ("aten::transpose_copy.int_out", "same", [2, 3, 4], [g.Int(1), g.Int(1)], lambda x: x.transpose(1, 1)),
        ("aten::transpose_copy.int_out", "scalar", [], [g.Int(0), g.Int(-1)], lambda x: x.transpose(0, -1)),
        ("aten::t_copy.out", "2d", [3, 5], [], lambda x: x.t()),
        ("aten::t_copy.out", "1d", [4], [], lambda x: x.t()),
        ("aten::t_copy.out", "scalar", [], [], lambda x: x.t()),
        ("aten::alias_copy.out", "3d", [2, 3, 4], [], lambda x: x.clone()),
        ("aten::detach_copy.out", "3d", [2, 3, 4], [], lambda x: x.clone()),
        ("aten::lift_fresh_copy.out", "3d", [2, 3, 4], [], lambda x: x.clone()),
        ("aten::alias_copy.out", "scalar", [], [], lambda x: x.clone()),
        ("aten::repeat.out", "2d", [2, 3], [g.IntList([2, 3])], lambda x: x.repeat(2, 3)),
        ("aten::repeat.out", "more dims", [2, 3], [g.IntList([2, 1, 2])], lambda x: x.repeat(2, 1, 2)),
        ("aten::repeat.out", "zero", [2, 3], [g.IntList([1, 0])], lambda x: x.repeat(1, 0)),
        ("aten::repeat.out", "scalar", [], [g.IntList([3])], lambda x: x.repeat(3)),
        ("aten::repeat.out", "scalar none", [], [g.IntList([])], lambda x: A.repeat(x, [])),
        ("aten::flip.out", "0", [3, 4], [g.IntList([0])], lambda x: x.flip(0)),
        ("aten::flip.out", "all", [2, 3, 4], [g.IntList([-1, 0, 1])], lambda x: x.flip(-1, 0, 1)),
        ("aten::flip.out", "none", [2, 3], [g.IntList([])], lambda x: x.flip([])),
        ("aten::flip.out", "scalar", [], [g.IntList([0])], lambda x: x.flip(0)),
        ("aten::roll.out", "1 dim", [3, 4], [g.IntList([1]), g.IntList([1])], lambda x: x.roll(1, 1)),
        ("aten::roll.out", "2 dims", [3, 4, 5], [g.IntList([-2, 7]), g.IntList([0, 2])], lambda x: x.roll((-2, 7), (0, 2))),
        ("aten::roll.out", "same dim", [3, 4], [g.IntList([1, 2]), g.IntList([1, 1])], lambda x: x.roll((1, 2), (1, 1))),
        ("aten::roll.out", "flat", [3, 4], [g.IntList([5]), g.IntList([])], lambda x: x.roll(5)),
        ("aten::roll.out", "flat neg", [3, 4], [g.IntList([-13]), g.IntList([])], lambda x: x.roll(-13)),
        ("aten::roll.out", "zero shift", [3, 4], [g.IntList([4]), g.IntList([-1])], lambda x: x.roll(4, -1)),
        ("aten::roll.out", "scalar", [], [g.IntList([1]), g.IntList([])], lambda x: x.roll(1)),
        ("aten::roll.out", "empty", [0, 3], [g.IntList([1]), g.IntList([0])], lambda x: x.roll(1, 0)),
        ("aten::pixel_shuffle.out", "4d", [2, 8, 3, 2], [g.Int(2)], lambda x: torch.pixel_shuffle(x, 2)),
        ("aten::pixel_shuffle.out", "3d", [9, 2, 1], [g.Int(3)], lambda x: torch.pixel_shuffle(x, 3)),
        ("aten::pixel_shuffle.out", "5d", [2, 1, 4, 2, 3], [g.Int(2)], lambda x: torch.pixel_shuffle(x, 2)),
        ("aten::pixel_shuffle.out", "r1", [1, 3, 2, 2], [g.Int(1)], lambda x: torch.pixel_shuffle(x, 1)),
        ("aten::pixel_shuffle.out", "empty", [0, 4, 2, 2], [g.Int(2)], lambda x: torch.pixel_shuffle(x, 2)),
    ]
    for op, label, shape, extra, fn in views:
        for dt in g.ALL:
            x = data(shape, dt)
            r = fn(x).contiguous()
            single(op, "%s %s" % (label, dname(dt)), [g.In(x)] + extra, r, dt)
    # out dtypes convert; dim orders of self and out
    for op, label, shape, extra, fn in views:
        if label not in ("bcast", "neg", "two", "all", "2d", "3d", "2 dims", "flat", "4d") or op == "aten::unsqueeze_copy.out" and label != "neg":
            continue
        x = g.rand(shape, torch.float32)
        for od in [torch.float64, torch.int32, torch.bool]:
            r = fn(x).to(od)
            single(op, "%s to %s" % (label, dname(od)), [g.In(x)] + extra, r, od)
        r = fn(x)
        for io in g.orders(len(shape)):
            for oo in g.orders(r.dim()):
                single(op, "%s order %s %s" % (label, io, oo), [g.In(x, io)] + extra, r, torch.float32, order=oo)
        single(op, "%s dynamic" % label, [g.In(x)] + extra, r, torch.float32, shape=[7] * r.dim(), dynamic=True, capacity=7 ** r.dim())
    # failures
    x = data([2, 3], torch.float32)
    s = torch.tensor(1.5)
    bad = [
        ("aten::expand_copy.out", "fewer sizes", x, [g.IntList([3]), g.Bool(False)], lambda: x.expand(3), 1),
        ("aten::expand_copy.out", "mismatch", x, [g.IntList([2, 4]), g.Bool(False)], lambda: x.expand(2, 4), 2),
        ("aten::expand_copy.out", "new -1", x, [g.IntList([-1, 2, 3]), g.Bool(False)], lambda: x.expand(-1, 2, 3), 3),
        ("aten::expand_copy.out", "-2", x[:1], [g.IntList([-2, 3]), g.Bool(False)], lambda: x[:1].expand(-2, 3), 2),
        ("aten::expand_copy.out", "17 dims", x, [g.IntList([1] * 15 + [2, 3]), g.Bool(False)], None, 16),
        ("aten::unsqueeze_copy.out", "dim", x, [g.Int(3)], lambda: x.unsqueeze(3), 3),
        ("aten::unsqueeze_copy.out", "dim neg", x, [g.Int(-4)], lambda: x.unsqueeze(-4), 3),
        ("aten::squeeze_copy.dim_out", "dim", x, [g.Int(2)], lambda: x.squeeze(2), 2),
        ("aten::squeeze_copy.dim_out", "scalar dim", s, [g.Int(1)], lambda: s.squeeze(1), 1),
        ("aten::squeeze_copy.dims_out", "dim", x, [g.IntList([0, 2])], None, 2),
        ("aten::squeeze_copy.dims_out", "repeated", x, [g.IntList([0, -2])], None, 2),
        ("aten::transpose_copy.int_out", "dim", x, [g.Int(0), g.Int(2)], lambda: x.transpose(0, 2), 2),
        ("aten::transpose_copy.int_out", "dim neg", x, [g.Int(-3), g.Int(0)], lambda: x.transpose(-3, 0), 2),
        ("aten::t_copy.out", "3d", data([2, 3, 4], torch.float32), [], lambda: torch.ones(2, 3, 4).t(), 3),
        ("aten::repeat.out", "fewer", x, [g.IntList([2])], lambda: x.repeat(2), 2),
        ("aten::repeat.out", "negative", x, [g.IntList([1, -1])], lambda: x.repeat(1, -1), 2),
        ("aten::repeat.out", "17 dims", x, [g.IntList([1] * 17)], None, 16),
        ("aten::flip.out", "repeated", x, [g.IntList([0, -2])], lambda: x.flip(0, -2), 2),
        ("aten::flip.out", "dim", x, [g.IntList([2])], lambda: x.flip(2), 2),
        ("aten::roll.out", "no shifts", x, [g.IntList([]), g.IntList([])], lambda: A.roll(x, [], []), 2),
        ("aten::roll.out", "misaligned", x, [g.IntList([1, 2]), g.IntList([0])], lambda: x.roll((1, 2), (0,)), 2),
        ("aten::roll.out", "flat two", x, [g.IntList([1, 2]), g.IntList([])], lambda: A.roll(x, [1, 2], []), 2),
        ("aten::roll.out", "dim", x, [g.IntList([1]), g.IntList([2])], lambda: x.roll(1, 2), 2),
        ("aten::roll.out", "scalar dim", s, [g.IntList([1]), g.IntList([0])], lambda: s.roll(1, 0), 1),
        ("aten::pixel_shuffle.out", "channels", data([1, 3, 2, 2], torch.float32), [g.Int(2)], lambda: torch.pixel_shuffle(torch.ones(1, 3, 2, 2), 2), 4),
        ("aten::pixel_shuffle.out", "rank 2", data([4, 2], torch.float32), [g.Int(2)], lambda: torch.pixel_shuffle(torch.ones(4, 2), 2), 2),
        ("aten::pixel_shuffle.out", "factor 0", data([1, 4, 2, 2], torch.float32), [g.Int(0)], lambda: torch.pixel_shuffle(torch.ones(1, 4, 2, 2), 0), 4),
        ("aten::pixel_shuffle.out", "factor neg", data([1, 4, 2, 2], torch.float32), [g.Int(-2)], lambda: torch.pixel_shuffle(torch.ones(1, 4, 2, 2), -2), 4),
    ]
    for op, label, t, extra, fn, rank in bad:
        if fn is not None:
            assert expect(fn) is None, (op, label)
        single(op, label, [g.In(t)] + extra, None, torch.float32, fail_rank=rank)
    big = data([1] * 16, torch.int8)
    single("aten::unsqueeze_copy.out", "17 dims", [g.In(big), g.Int(0)], None, torch.int8, fail_rank=16)
    single("aten::transpose_copy.int_out", "static out wrong", [g.In(x), g.Int(0), g.Int(1)], None, torch.float32, shape=[2, 3], dynamic=False)
    single("aten::expand_copy.out", "out too small", [g.In(x), g.IntList([4, 2, 3]), g.Bool(False)], None, torch.float32, shape=[2, 2, 3], dynamic=True, capacity=20)


# ---- creation ---------------------------------------------------------------------------------


VALUES = [0, 1, -1, 7, 255, 256, -129, 300, 70000, 2 ** 40, 2 ** 63 - 1, True, False, 2.5, -0.5, 0.1, 1e10, 65504.0,
          65520.0, 3.5e38, 1e39, float("inf"), float("-inf"), float("nan"), -0.0]


def gen_creation():
    for dt in g.ALL:
        for v in VALUES:
            r = expect(lambda: A.full.out([2, 3], v, out=torch.empty(0, dtype=dt)))
            single("aten::full.out", "%s %r" % (dname(dt), v), [g.IntList([2, 3]), g.scalar_value(v)], r, dt, fail_rank=2)
            r = expect(lambda: A.scalar_tensor.out(v, out=torch.empty([], dtype=dt)))
            single("aten::scalar_tensor.out", "%s %r" % (dname(dt), v), [g.scalar_value(v)], r, dt, fail_rank=0, shape=[], dynamic=False)
        x = data([3, 4], dt)
        for v in [0, -3, 2.7, True, 300, float("nan")]:
            r = expect(lambda: A.full_like.out(x, v, out=torch.empty(0, dtype=dt)))
            single("aten::full_like.out", "%s %r" % (dname(dt), v), [g.In(x), g.scalar_value(v), None], r, dt, fail_rank=2)
            r = expect(lambda: A.fill.Scalar_out(x, v, out=torch.empty([3, 4], dtype=dt)))
            single("aten::fill.Scalar_out", "%s %r" % (dname(dt), v), [g.In(x), g.scalar_value(v)], r, dt, fail_rank=2)
        for vt in [torch.tensor(5, dtype=torch.uint8), torch.tensor(-2.75, dtype=torch.float16), torch.tensor(True),
                   torch.tensor(1e10, dtype=torch.float64), torch.tensor(-100, dtype=torch.int64)]:
            r = expect(lambda: A.fill.Tensor_out(x, vt, out=torch.empty([3, 4], dtype=dt)))
            single("aten::fill.Tensor_out", "%s %s %s" % (dname(dt), dname(vt.dtype), vt.item()), [g.In(x), g.In(vt)], r, dt, fail_rank=2)
        for shape in [[2, 3], [], [0, 4], [1, 1, 5]]:
            single("aten::zeros.out", "%s %s" % (dname(dt), shape), [g.IntList(shape)], torch.zeros(shape, dtype=dt), dt)
            single("aten::ones.out", "%s %s" % (dname(dt), shape), [g.IntList(shape)], torch.ones(shape, dtype=dt), dt)
        # empty: only the shape is checked (the contents are whatever out held)
        for shape, o in [([2, 3], None), ([4, 0, 2], None), ([2, 3, 4, 5], [0, 2, 3, 1])]:
            args = [g.IntList(shape), None, g.Out(dt, None, shape=[7] * len(shape), order=o, dynamic=True, capacity=7 ** len(shape)), g.Ref(2)]
            case("aten::empty.out", "%s %s" % (dname(dt), shape), args)
            args = [g.IntList(shape), g.IntList(o) if o else None, g.Out(dt, None, shape=[7] * len(shape), order=o, dynamic=True, capacity=7 ** len(shape)), g.Ref(2)]
            case("dim_order_ops::_empty_dim_order.out", "%s %s" % (dname(dt), shape), args)
    # out dtypes of fill (value -> self's dtype -> out's) and full_like (value -> out's)
    xi = g.rand([2, 3], torch.int8)
    for od in [torch.float32, torch.int64, torch.bool, torch.float16]:
        for v in [2.7, 300, -1]:
            r = expect(lambda: A.fill.Scalar_out(xi, v, out=torch.empty([2, 3], dtype=od)))
            single("aten::fill.Scalar_out", "int8 to %s %r" % (dname(od), v), [g.In(xi), g.scalar_value(v)], r, od, fail_rank=2)
            r = expect(lambda: A.full_like.out(xi, v, out=torch.empty(0, dtype=od)))
            single("aten::full_like.out", "int8 to %s %r" % (dname(od), v), [g.In(xi), g.scalar_value(v), None], r, od, fail_rank=2)
            vt = torch.tensor(v)
            r = expect(lambda: A.fill.Tensor_out(xi, vt, out=torch.empty([2, 3], dtype=od)))
            single("aten::fill.Tensor_out", "int8 to %s %r" % (dname(od), v), [g.In(xi), g.In(vt)], r, od, fail_rank=2)
    # dim orders, memory formats, dynamic outs
    x4 = data([2, 3, 4, 5], torch.float32)
    for o in g.orders(4):
        single("aten::full_like.out", "order %s" % o, [g.In(x4, o), g.Dbl(1.5), None], torch.full_like(x4, 1.5), torch.float32, order=o)
        single("aten::fill.Scalar_out", "order %s" % o, [g.In(x4), g.Dbl(-1.5)], torch.full_like(x4, -1.5), torch.float32, order=o)
        single("aten::full.out", "order %s" % o, [g.IntList([2, 3, 4, 5]), g.Int(3)], torch.full([2, 3, 4, 5], 3.0), torch.float32, order=o)
    for mf, o, ok in [(0, None, True), (1, [0, 2, 3, 1], True), (2, [0, 2, 3, 1], True), (0, [0, 2, 3, 1], False), (2, None, False), (5, None, False)]:
        single("aten::full_like.out", "memory_format %d %s" % (mf, o), [g.In(x4), g.Int(1), g.Int(mf)],
               torch.ones_like(x4) if ok else None, torch.float32, order=o, fail_rank=4, shape=[2, 3, 4, 5], dynamic=False)
    single("aten::full.out", "dynamic", [g.IntList([3, 2]), g.Dbl(0.5)], torch.full([3, 2], 0.5), torch.float32, shape=[5, 5], dynamic=True, capacity=25)
    single("aten::zeros.out", "dynamic", [g.IntList([3, 2])], torch.zeros([3, 2]), torch.float32, shape=[5, 5], dynamic=True, capacity=25)
    args = [g.IntList([2, 3]), g.Int(1), g.Out(torch.float32, None, shape=[2, 3]), g.Ref(2)]
    case("aten::empty.out", "memory_format preserve (etch accepts it)", args)
    args = [g.IntList([2, 3, 4, 5]), g.Int(2), g.Out(torch.float32, None, shape=[2, 3, 4, 5], order=[0, 2, 3, 1]), g.Ref(2)]
    case("aten::empty.out", "memory_format channels last", args, fail=True)
    # failures
    for op, ins in [("aten::full.out", [g.IntList([2, -1]), g.Int(1)]), ("aten::zeros.out", [g.IntList([-2])]), ("aten::ones.out", [g.IntList([3, -1])]),
                    ("aten::empty.out", [g.IntList([-1]), None]), ("dim_order_ops::_empty_dim_order.out", [g.IntList([-1]), None])]:
        single(op, "negative size", ins, None, torch.float32, fail_rank=len(ins[0].v))
    single("aten::full.out", "static out wrong", [g.IntList([2, 3]), g.Int(1)], None, torch.float32, shape=[3, 2], dynamic=False)
    single("aten::scalar_tensor.out", "out rank 1", [g.Int(1)], None, torch.float32, shape=[1], dynamic=False)
    single("aten::fill.Tensor_out", "value rank 1", [g.In(x4), g.In(torch.tensor([2.0]))], None, torch.float32, fail_rank=4)
    args = [g.IntList([2, 3, 4, 5]), g.IntList([0, 1, 2, 3]), g.Out(torch.float32, None, shape=[2, 3, 4, 5], order=[0, 2, 3, 1]), g.Ref(2)]
    case("dim_order_ops::_empty_dim_order.out", "dim_order mismatch", args, fail=True)


def arange_ref(start, end, step, dt):
    return A.arange.start_out(start, end, step, out=torch.empty(0, dtype=dt))


def gen_arange():
    ranges = [(0, 10, 1), (0, 2, 0.1), (0.3, 10.7, 0.37), (-5.5, 5, 0.3), (1, 100, 1.1), (10, -3, -0.7), (0, 1, 1 / 3),
              (-3.7, 5.2, 1.1), (5, -3, -2), (0.5, 5, 1.5), (250, 260, 1), (3, 3, 1), (1e6, 1e6 + 50, 0.7),
              (-2.5, 40.0, 0.125), (True, 5, True), (0, 1000, 1.7), (-100, 100, 3), (0, 33, 1)]
    for dt in [d for d in g.ALL if d != torch.bool]:
        for start, end, step in ranges:
            r = expect(lambda: arange_ref(start, end, step, dt))
            single("aten::arange.start_out", "%s %r %r %r" % (dname(dt), start, end, step),
                   [g.scalar_value(start), g.scalar_value(end), g.scalar_value(step)], r, dt, fail_rank=1)
        for end in [5, 7.5, 0, 40, 1000]:
            r = expect(lambda: A.arange.out(end, out=torch.empty(0, dtype=dt)))
            single("aten::arange.out", "%s %r" % (dname(dt), end), [g.scalar_value(end)], r, dt)
    # random float ranges: the vectorised blocks and the tail, fused multiply-adds
    import random
    rnd = random.Random(7)
    for k in range(60):
        s = rnd.uniform(-50, 50)
        st = rnd.choice([-1, 1]) * rnd.uniform(0.01, 3)
        e = s + st * rnd.randint(0, 300) + rnd.uniform(-1, 1) * st
        for dt in g.FLOATS:
            r = expect(lambda: arange_ref(s, e, st, dt))
            single("aten::arange.start_out", "random %d %s" % (k, dname(dt)), [g.Dbl(s), g.Dbl(e), g.Dbl(st)], r, dt)
    # an out of another shape with the right element count keeps its shape (torch does)
    single("aten::arange.start_out", "2d out", [g.Int(0), g.Int(6), g.Int(1)], A.arange.start_out(0, 6, 1, out=torch.empty([2, 3], dtype=torch.int64)), torch.int64)
    single("aten::arange.out", "dynamic", [g.Int(5)], torch.arange(5), torch.int64, shape=[9], dynamic=True, capacity=9)
    # failures
    for name, st, e, sp, dt in [("step 0", 0, 5, 0, torch.float32), ("int step rounds to 0", 0, 5, 0.5, torch.int64),
                                ("inf", 0, float("inf"), 1, torch.float32), ("nan", float("nan"), 5, 1, torch.float32),
                                ("sign", 0, -5, 1, torch.float32), ("sign neg", 0, 5, -1, torch.int32),
                                ("half overflow", 0, 1e39, 1e38, torch.float16), ("int overflow", 0, 1e30, 1, torch.int64)]:
        assert expect(lambda: arange_ref(st, e, sp, dt)) is None, name
        single("aten::arange.start_out", name, [g.scalar_value(st), g.scalar_value(e), g.scalar_value(sp)], None, dt)
    single("aten::arange.start_out", "bool", [g.Int(0), g.Int(2), g.Int(1)], None, torch.bool)
    single("aten::arange.out", "static out wrong", [g.Int(5)], None, torch.float32, shape=[4], dynamic=False)


# ---- triangular, copy ----------------------------------------------------------------------------


def gen_tri_copy():
    for dt in g.ALL:
        x = data([2, 4, 5], dt)
        for k in [0, 1, -2, 10, -10]:
            single("aten::triu.out", "%s %d" % (dname(dt), k), [g.In(x), g.Int(k)], torch.triu(x, k), dt)
            single("aten::tril.out", "%s %d" % (dname(dt), k), [g.In(x), g.Int(k)], torch.tril(x, k), dt)
        for sd in g.ALL:
            src = g.rand([3], sd, lo=0 if sd in g.INTS else None, hi=100 if sd in g.INTS else None)
            self_ = data([2, 3], dt)
            r = expect(lambda: A.copy(self_, src))
            single("aten::copy.out", "%s from %s" % (dname(dt), dname(sd)), [g.In(self_), g.In(src), g.Bool(False)], r, dt, fail_rank=2)
            args = [g.InOut(self_, r), g.In(src), g.Bool(False), g.Ref(0)]
            case("aten::copy_", "%s from %s" % (dname(dt), dname(sd)), args, fail=r is None)
    # copy.out converts src to self's dtype, then to out's
    xi = g.rand([2, 3], torch.int32, lo=-100, hi=100)
    src = g.rand([2, 3], torch.float32, hi=50.0)
    for od in [torch.float32, torch.float64, torch.int8, torch.bool]:
        r = expect(lambda: A.copy.out(xi, src, False, out=torch.empty([2, 3], dtype=od)))
        single("aten::copy.out", "int32 self to %s" % dname(od), [g.In(xi), g.In(src), g.Bool(False)], r, od)
    # broadcasting, dim orders, empty
    y = data([2, 3, 4, 5], torch.float32)
    for name, sshape in [("row", [5]), ("col", [4, 1]), ("scalar", []), ("lead", [1, 3, 1, 5]), ("same", [2, 3, 4, 5])]:
        src = data(sshape, torch.float32)
        for o in g.orders(4):
            r = A.copy(y, src)
            single("aten::copy.out", "bcast %s %s" % (name, o), [g.In(y, o), g.In(src), g.Bool(False)], r, torch.float32, order=o)
            args = [g.InOut(y, r, order=o), g.In(src), g.Bool(True), g.Ref(0)]
            case("aten::copy_", "bcast %s %s" % (name, o), args)
    for o in g.orders(4):
        single("aten::triu.out", "order %s" % o, [g.In(y, o), g.Int(1)], torch.triu(y, 1), torch.float32, order=g.orders(4)[-1])
        single("aten::tril.out", "order %s" % o, [g.In(y, o), g.Int(-1)], torch.tril(y, -1), torch.float32, order=o)
    e = data([0, 3], torch.float32)
    single("aten::triu.out", "empty", [g.In(e), g.Int(0)], torch.triu(e), torch.float32)
    single("aten::copy.out", "empty", [g.In(e), g.In(data([3], torch.float32)), g.Bool(False)], A.copy(e, data([3], torch.float32)), torch.float32)
    # failures
    for name, t in [("rank 1", data([4], torch.float32)), ("rank 0", torch.tensor(1.0))]:
        for op, fn in [("aten::triu.out", torch.triu), ("aten::tril.out", torch.tril)]:
            assert expect(lambda: fn(t)) is None
            single(op, name, [g.In(t), g.Int(0)], None, torch.float32)
    for op in ["aten::triu.out", "aten::tril.out"]:
        single(op, "out dtype", [g.In(y), g.Int(0)], None, torch.float64, fail_rank=4)
    for name, src in [("src bigger", data([2, 2, 3, 4, 5], torch.float32)), ("src mismatch", data([3], torch.float32)),
                      ("src lead 1", data([1, 2, 3, 4, 5], torch.float32))]:
        assert expect(lambda: A.copy(y, src)) is None, name
        single("aten::copy.out", name, [g.In(y), g.In(src), g.Bool(False)], None, torch.float32, fail_rank=4)
        args = [g.InOut(y, None), g.In(src), g.Bool(False), g.Ref(0)]
        case("aten::copy_", name, args, fail=True)


def generate(gen):
    global g
    g = gen
    gen_cat_stack()
    gen_split()
    gen_slice_select()
    gen_index_select_gather_scatter()
    gen_index()
    gen_masked_fill()
    gen_views()
    gen_creation()
    gen_arange()
    gen_tri_copy()
