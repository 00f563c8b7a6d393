"""Per-node XnnpackBackend cases: small XNNPACK payloads laid out as ExecuTorch's serializer lays
them out (XH00 header, XN01 XNNGraph, 16-aligned constant section), each in a .pte with one
DelegateCall, with inputs and the outputs xnn_ref.py (torch) computes.

    python3 gen_nodes.py OUT_DIR

writes OUT_DIR/<case>.pte, <case>.in<k>.f32, <case>.out.f32 and OUT_DIR/cases.txt: one line per
case: name tolerance ninputs then, per input, rank and dims.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xnn_ref  # noqa: E402
from etch.backends.xnnpack.payload import (  # noqa: E402
    EXTERNAL_INPUT, EXTERNAL_OUTPUT, FP16, FP32, KINDS, QBINT4, QCINT4, QCINT8, QCINT32, QDINT8,
    QINT8, QUINT8, XnnGraph)
from etch.serialize.program_builder import ProgramBuilder  # noqa: E402
from etch.serialize.pte import serialize_program  # noqa: E402

# the exporter's payload writer (etch.backends.xnnpack.payload), checked here against
# xnn_ref.py's reading of the same bytes
G = XnnGraph
INPUT, OUTPUT = EXTERNAL_INPUT, EXTERNAL_OUTPUT
assert list(KINDS) == list(xnn_ref.KINDS)


def program(g, in_dims, out_dims):
    pb = ProgramBuilder()
    m = pb.method("forward")
    ins = [m.tensor(6, d) for d in in_dims]
    outs = [m.tensor(6, d) for d in out_dims]
    m.delegate("XnnpackBackend", g.blob(), ins + outs)
    m.inputs, m.outputs = ins, outs
    prog, data = pb.build()
    return serialize_program(prog, data)


def f32b(a):
    return np.ascontiguousarray(a, np.float32).tobytes()


rng = np.random.RandomState(7)


def rnd(*shape, scale=1.0):
    return (rng.randn(*shape) * scale).astype(np.float32)


def U(v):
    return ("I", v)


def F(v):
    return ("f", v)


def V(v):
    return ("IV", list(v))


CASES = []


def case(name, g, inputs, tol=1e-4):
    CASES.append((name, g, inputs, tol))


def unary(kind, x, extra=None, lo=None, hi=None, dt_in=FP32):
    g = G()
    a = g.value(x.shape, flags=INPUT, ext=0)
    o = g.value(x.shape, flags=OUTPUT, ext=1)
    if kind in ("LeakyReLU", "ELU"):
        g.node(kind, {0: F(extra), 1: U(a), 2: U(o)})
    else:
        g.node(kind, {0: U(a), 1: U(o)}, lo, hi)
    return g


def binary(kind, xs, ys, lo=None, hi=None):
    g = G()
    a = g.value(xs, flags=INPUT, ext=0)
    b = g.value(ys, flags=INPUT, ext=1)
    if kind == "BatchMatrixMultiply":
        os_ = list(xs[:-1]) + [ys[-1]]
    else:
        os_ = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
    o = g.value(os_, flags=OUTPUT, ext=2)
    g.node(kind, {0: U(a), 1: U(b), 2: U(o)}, lo, hi)
    return g


def build_cases():
    x = rnd(2, 5, 7, 3)
    pos = np.abs(x) + 0.1
    for kind in ("Sigmoid", "Floor", "Ceiling", "Hardswish", "Negate", "Square", "Abs", "Gelu",
                 "Tanh", "Exp", "Sin",
                 "Softmax"):
        case("u_" + kind, unary(kind, x), [x])
    for kind in ("SquareRoot", "ReciprocalSquareRoot", "Log"):
        case("u_" + kind, unary(kind, pos), [pos])
    case("u_Clamp", unary("Clamp", x, lo=-0.5, hi=0.75), [x])
    case("u_LeakyReLU", unary("LeakyReLU", x, 0.2), [x])
    case("u_ELU", unary("ELU", x, 0.7), [x])
    for kind in ("Add", "Subtract", "Multiply", "Div", "Minimum", "Maximum"):
        a, b = rnd(2, 1, 4, 6), rnd(3, 1, 6) + (3.0 if kind == "Div" else 0.0)
        case("b_" + kind, binary(kind, a.shape, b.shape, lo=-2.0, hi=2.5), [a, b])
    a, s = rnd(1, 3, 4, 6), rnd(6)
    case("b_PReLU", binary("PReLU", a.shape, s.shape), [a, s])
    a, b = rnd(2, 3, 5, 4), rnd(2, 3, 4, 6)
    case("b_BMM", binary("BatchMatrixMultiply", a.shape, b.shape), [a, b])

    # fully connected: bias, transposed weights, rank-3 input, output clamp
    for tw in (0, 1):
        g = G()
        xin = rnd(2, 3, 20)
        w = rnd(12, 20, scale=0.3)
        wstore = w.T.copy() if tw else w
        a = g.value(xin.shape, flags=INPUT, ext=0)
        wv = g.value(wstore.shape, const=f32b(wstore))
        bv = g.value([12], const=f32b(rnd(12)))
        o = g.value([2, 3, 12], flags=OUTPUT, ext=1)
        g.node("FullyConnected", {0: U(a), 1: U(wv), 2: U(bv), 3: U(o), 4: U(tw)}, -1.0, 1.5)
        case("fc_tw%d" % tw, g, [xin])

    # conv2d: groups, stride, dilation, asymmetric padding
    for name, (N, H, W, C, O, kh, kw, sh, sw, dh, dw, pads, groups) in {
            "conv_3x3": (1, 9, 11, 4, 8, 3, 3, 1, 1, 1, 1, (1, 1, 1, 1), 1),
            "conv_s2_pad": (2, 10, 7, 3, 5, 3, 2, 2, 1, 1, 1, (2, 0, 1, 1), 1),
            "conv_dil_grp": (1, 12, 12, 6, 4, 3, 3, 1, 2, 2, 1, (2, 1, 2, 1), 2),
            "conv_1x1": (1, 6, 5, 16, 24, 1, 1, 1, 1, 1, 1, (0, 0, 0, 0), 1)}.items():
        g = G()
        gic, goc = C // groups, O // groups
        xin = rnd(N, H, W, C)
        w = rnd(O, kh, kw, gic, scale=0.3)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        wv = g.value(w.shape, const=f32b(w))
        bv = g.value([O], const=f32b(rnd(O)))
        pt, pr, pb_, pl = pads
        OH = (H + pt + pb_ - dh * (kh - 1) - 1) // sh + 1
        OW = (W + pl + pr - dw * (kw - 1) - 1) // sw + 1
        o = g.value([N, OH, OW, O], flags=OUTPUT, ext=1)
        g.node("Conv2d", {0: U(pt), 1: U(pr), 2: U(pb_), 3: U(pl), 4: U(kh), 5: U(kw),
                          6: U(sh), 7: U(sw), 8: U(dh), 9: U(dw), 10: U(gic), 11: U(goc),
                          12: U(groups), 15: U(a), 16: U(wv), 17: U(bv), 18: U(o)}, 0.0, 6.0)
        case(name, g, [xin])

    # depthwise (multiplier 1 and 2)
    for mult in (1, 2):
        g = G()
        xin = rnd(1, 8, 9, 5)
        O = 5 * mult
        w = rnd(1, 3, 3, O, scale=0.5)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        wv = g.value(w.shape, const=f32b(w))
        bv = g.value([O], const=f32b(rnd(O)))
        o = g.value([1, 4, 5, O], flags=OUTPUT, ext=1)
        g.node("DepthwiseConv2d", {0: U(1), 1: U(1), 2: U(1), 3: U(1), 4: U(3), 5: U(3),
                                   6: U(2), 7: U(2), 8: U(1), 9: U(1), 10: U(1), 11: U(mult),
                                   12: U(5), 15: U(a), 16: U(wv), 17: U(bv), 18: U(o)})
        case("dwconv_m%d" % mult, g, [xin])

    # transposed conv
    g = G()
    xin = rnd(1, 4, 5, 3)
    w = rnd(6, 3, 3, 3, scale=0.4)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    wv = g.value(w.shape, const=f32b(w))
    bv = g.value([6], const=f32b(rnd(6)))
    OH, OW = 2 * 3 + 1 + 3 - 1 - 1, 2 * 4 + 1 + 3 - 1 - 1
    o = g.value([1, OH, OW, 6], flags=OUTPUT, ext=1)
    g.node("ConvTranspose2d", {0: U(1), 1: U(1), 2: U(1), 3: U(1), 4: U(3), 5: U(3), 6: U(2),
                               7: U(2), 8: U(1), 9: U(1), 10: U(3), 11: U(6), 12: U(1),
                               13: U(1), 14: U(1), 15: U(a), 16: U(wv), 17: U(bv), 18: U(o)})
    case("deconv", g, [xin])

    # pooling
    for kind in ("MaxPooling2d", "AvgPooling2d"):
        g = G()
        xin = rnd(2, 9, 8, 3)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        o = g.value([2, 5, 4, 3], flags=OUTPUT, ext=1)
        g.node(kind, {0: U(1), 1: U(0), 2: U(1), 3: U(1), 4: U(3), 5: U(3), 6: U(2), 7: U(2),
                      8: U(1), 9: U(1), 10: U(a), 11: U(o)})
        case("pool_" + kind, g, [xin])
    g = G()
    xin = rnd(2, 6, 7, 5)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    o = g.value([2, 1, 1, 5], flags=OUTPUT, ext=1)
    g.node("GlobalAvgPooling2d", {0: U(a), 1: U(o)})
    case("global_avg", g, [xin])

    # data movement
    xin = rnd(2, 3, 4, 5)
    g = G()
    a = g.value(xin.shape, flags=INPUT, ext=0)
    o = g.value([4, 2, 5, 3], flags=OUTPUT, ext=1)
    g.node("StaticTranspose", {0: U(4), 1: V([2, 0, 3, 1]), 2: U(a), 3: U(o)})
    case("transpose", g, [xin])
    g = G()
    a = g.value(xin.shape, flags=INPUT, ext=0)
    o = g.value([6, 20], flags=OUTPUT, ext=1)
    g.node("StaticReshape", {0: U(2), 1: V([6, 0]), 2: U(a), 3: U(o)})
    case("reshape", g, [xin])
    g = G()
    a = g.value(xin.shape, flags=INPUT, ext=0)
    o = g.value([1, 2, 2, 3], flags=OUTPUT, ext=1)
    g.node("StaticSlice", {0: U(4), 1: V([1, 1, 2, 1]), 2: V([1, 2, 2, 3]), 3: U(a), 4: U(o)})
    case("slice", g, [xin])
    g = G()
    a = g.value(xin.shape, flags=INPUT, ext=0)
    o = g.value([2, 6, 5, 7], flags=OUTPUT, ext=1)
    g.node("StaticConstantPad", {0: V([0, 1, 0, 2]), 1: V([0, 2, 1, 0]), 2: F(-1.5), 3: U(a),
                                 4: U(o)})
    case("pad", g, [xin])
    for ac in (0, 8):
        g = G()
        xr = rnd(1, 4, 5, 3)
        a = g.value(xr.shape, flags=INPUT, ext=0)
        o = g.value([1, 7, 9, 3], flags=OUTPUT, ext=1)
        g.node("StaticResizeBilinear2D", {0: U(7), 1: U(9), 2: U(a), 3: U(o), 4: U(ac)})
        case("resize_ac%d" % ac, g, [xr])
    for n in (2, 3, 5):
        g = G()
        parts = [rnd(2, k + 1, 3) for k in range(n)]
        ids = [g.value(p.shape, flags=INPUT, ext=k) for k, p in enumerate(parts)]
        o = g.value([2, sum(p.shape[1] for p in parts), 3], flags=OUTPUT, ext=n)
        slots = [1, 2, 3, 4, 7]
        fields = {0: U(1), 5: U(o)}
        for k, vid in enumerate(ids):
            fields[slots[k]] = U(vid)
        g.node("Concatenate%d" % n, fields)
        case("concat%d" % n, g, parts)

    # attention
    g = G()
    q, k_, v = rnd(1, 2, 5, 8), rnd(1, 2, 7, 8), rnd(1, 2, 7, 8)
    mask = np.triu(np.full((5, 7), -1e4, np.float32), 3)
    ids = [g.value(t.shape, flags=INPUT, ext=i) for i, t in enumerate((q, k_, v))]
    sc = g.value([8], const=f32b(np.full(8, 1 / math.sqrt(8), np.float32)))
    mk = g.value([5, 7], const=f32b(mask))
    o = g.value([1, 2, 5, 8], flags=OUTPUT, ext=3)
    g.node("ScaledDotProductAttention", {0: U(ids[0]), 1: U(ids[1]), 2: U(ids[2]), 3: U(sc),
                                         4: U(mk), 5: U(o)})
    case("sdpa", g, [q, k_, v])

    # quantized: fp32 -> qint8 -> conv (qcint8 weights) -> qint8 -> fp32
    g = G()
    xin = rnd(1, 6, 6, 4)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    xq = g.value(xin.shape, dtype=QINT8, q=("tensor", 0.03, 3))
    w = rng.randint(-127, 128, size=(8, 3, 3, 4)).astype(np.int8)
    ws = (rng.rand(8) * 0.01 + 0.002).astype(np.float32)
    wv = g.value(w.shape, dtype=QCINT8, const=w.tobytes(), q=("channel", list(ws), 0))
    bias = rng.randint(-500, 500, size=8).astype(np.int32)
    bv = g.value([8], dtype=QCINT32, const=bias.tobytes(), q=("channel", list(ws * 0.03), 0))
    yq = g.value([1, 4, 4, 8], dtype=QINT8, q=("tensor", 0.05, -4))
    o = g.value([1, 4, 4, 8], flags=OUTPUT, ext=1)
    g.node("Convert", {0: U(a), 1: U(xq)})
    g.node("Conv2d", {4: U(3), 5: U(3), 6: U(1), 7: U(1), 8: U(1), 9: U(1), 10: U(4), 11: U(8),
                      12: U(1), 15: U(xq), 16: U(wv), 17: U(bv), 18: U(yq)})
    g.node("Convert", {0: U(yq), 1: U(o)})
    case("q_conv", g, [xin], tol=0.0501)

    # quantized add on quint8
    g = G()
    xa, xb = rnd(2, 16), rnd(2, 16)
    a = g.value(xa.shape, flags=INPUT, ext=0)
    b = g.value(xb.shape, flags=INPUT, ext=1)
    qa = g.value(xa.shape, dtype=QUINT8, q=("tensor", 0.02, 128))
    qb = g.value(xb.shape, dtype=QUINT8, q=("tensor", 0.025, 120))
    qo = g.value(xa.shape, dtype=QUINT8, q=("tensor", 0.04, 125))
    o = g.value(xa.shape, flags=OUTPUT, ext=2)
    g.node("Convert", {0: U(a), 1: U(qa)})
    g.node("Convert", {0: U(b), 1: U(qb)})
    g.node("Add", {0: U(qa), 1: U(qb), 2: U(qo)})
    g.node("Convert", {0: U(qo), 1: U(o)})
    case("q_add", g, [xa, xb], tol=0.0401)

    # dynamic int8 activations x int4 weights (8da4w): per-channel and blockwise
    for dt in (QCINT4, QBINT4):
        g = G()
        xin = rnd(3, 64)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        xd = g.value(xin.shape, dtype=QDINT8, q=("token", 1))
        w = rng.randint(-8, 8, size=(10, 64))
        packed = ((w[:, 0::2] + 8) | ((w[:, 1::2] + 8) << 4)).astype(np.uint8)
        if dt == QCINT4:
            sc = (rng.rand(10) * 0.05 + 0.01).astype(np.float32)
            q = ("channel", list(sc), 0)
        else:
            sc = (rng.rand(10 * 2) * 0.05 + 0.01).astype(np.float32)
            sc = np.frombuffer((sc.view(np.uint32) & 0xffff0000).astype(np.uint32).tobytes(),
                               np.float32)
            q = ("block", list(sc), 0, 32)
        wv = g.value([10, 64], dtype=dt, const=packed.tobytes(), q=q)
        bv = g.value([10], const=f32b(rnd(10)))
        o = g.value([3, 10], flags=OUTPUT, ext=1)
        g.node("Convert", {0: U(a), 1: U(xd)})
        g.node("FullyConnected", {0: U(xd), 1: U(wv), 2: U(bv), 3: U(o)})
        case("q_8da4w_%s" % ("qc4" if dt == QCINT4 else "qb4"), g, [xin], tol=2e-3)

    # fp16 activations: fp32 -> fp16 -> add (fp16) -> fp32
    g = G()
    xa, xb = rnd(3, 7), rnd(3, 7)
    a = g.value(xa.shape, flags=INPUT, ext=0)
    b = g.value(xb.shape, flags=INPUT, ext=1)
    ha = g.value(xa.shape, dtype=FP16)
    hb = g.value(xb.shape, dtype=FP16)
    hs = g.value(xa.shape, dtype=FP16)
    o = g.value(xa.shape, flags=OUTPUT, ext=2)
    g.node("Convert", {0: U(a), 1: U(ha)})
    g.node("Convert", {0: U(b), 1: U(hb)})
    g.node("Add", {0: U(ha), 1: U(hb), 2: U(hs)})
    g.node("Convert", {0: U(hs), 1: U(o)})
    case("fp16_add", g, [xa, xb], tol=0.0)

    # fp16 weights
    g = G()
    xin = rnd(4, 9)
    w = rnd(5, 9).astype(np.float16)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    wv = g.value(w.shape, dtype=FP16, const=w.tobytes())
    o = g.value([4, 5], flags=OUTPUT, ext=1)
    g.node("FullyConnected", {0: U(a), 1: U(wv), 2: U(0xffffffff), 3: U(o)})
    case("fc_fp16_nobias", g, [xin])


def conv_node(g, a, o, w, b, pad=1, stride=1, lo=None, hi=None, depthwise=False):
    """Conv2d (w: OHWI) or DepthwiseConv2d (w: [1, KH, KW, C]) with symmetric padding."""
    kh, kw = w.shape[1], w.shape[2]
    O = w.shape[3] if depthwise else w.shape[0]
    gic, goc, groups = (1, 1, O) if depthwise else (w.shape[3], O, 1)
    wv = g.value(w.shape, const=f32b(w))
    bv = g.value([O], const=f32b(b))
    g.node("DepthwiseConv2d" if depthwise else "Conv2d",
           {0: U(pad), 1: U(pad), 2: U(pad), 3: U(pad), 4: U(kh), 5: U(kw), 6: U(stride),
            7: U(stride), 8: U(1), 9: U(1), 10: U(gic), 11: U(goc), 12: U(groups), 15: U(a),
            16: U(wv), 17: U(bv), 18: U(o)}, lo, hi)


def build_net_cases():
    """Multi-node graphs whose intermediates the backend stores channel-blocked (xnn_layout.c):
    each path between layouts once. test_xnnpack.c also runs the net_* cases with a scratch
    arena too small for the Winograd transforms (the NHWC fallback)."""
    # NCHW input -> transpose (kept NCHW) -> conv 3->16 (NCHW in, blocked out, clamp) ->
    # Winograd 3x3 16->16 -> residual add -> max pool -> depthwise -> 1x1 16->12 (NCHW out) ->
    # sigmoid (NHWC copy) -> transpose to NCHW
    g = G()
    xin = rnd(1, 3, 18, 18)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    t = g.value([1, 18, 18, 3])
    g.node("StaticTranspose", {0: U(4), 1: V([0, 2, 3, 1]), 2: U(a), 3: U(t)})
    c1 = g.value([1, 18, 18, 16])
    conv_node(g, t, c1, rnd(16, 3, 3, 3, scale=0.4), rnd(16), lo=0.0, hi=6.0)
    c2 = g.value([1, 18, 18, 16])
    conv_node(g, c1, c2, rnd(16, 3, 3, 16, scale=0.15), rnd(16))
    s = g.value([1, 18, 18, 16])
    g.node("Add", {0: U(c1), 1: U(c2), 2: U(s)}, 0.0, None)
    p = g.value([1, 9, 9, 16])
    g.node("MaxPooling2d", {0: U(0), 1: U(0), 2: U(0), 3: U(0), 4: U(2), 5: U(2), 6: U(2),
                            7: U(2), 8: U(1), 9: U(1), 10: U(s), 11: U(p)})
    d = g.value([1, 9, 9, 16])
    conv_node(g, p, d, rnd(1, 3, 3, 16, scale=0.4), rnd(16), depthwise=True, lo=-1.0, hi=1.0)
    c3 = g.value([1, 9, 9, 12])
    conv_node(g, d, c3, rnd(12, 1, 1, 16, scale=0.3), rnd(12), pad=0)
    sg = g.value([1, 9, 9, 12])
    g.node("Sigmoid", {0: U(c3), 1: U(sg)})
    o = g.value([1, 12, 9, 9], flags=OUTPUT, ext=1)
    g.node("StaticTranspose", {0: U(4), 1: V([0, 3, 1, 2]), 2: U(sg), 3: U(o)})
    case("net_blocked_cnn", g, [xin])

    # NHWC input (converted to blocked) -> 1x1 -> 3x3 -> concat over channels -> avg pool ->
    # hardswish -> global average (reads blocked) -> reshape -> fully connected
    g = G()
    xin = rnd(2, 8, 8, 8)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    c1 = g.value([2, 8, 8, 8])
    conv_node(g, a, c1, rnd(8, 1, 1, 8, scale=0.4), rnd(8), pad=0)
    c2 = g.value([2, 8, 8, 16])
    conv_node(g, c1, c2, rnd(16, 3, 3, 8, scale=0.3), rnd(16), lo=0.0, hi=None)
    cat = g.value([2, 8, 8, 24])
    g.node("Concatenate2", {0: U(3), 1: U(c1), 2: U(c2), 5: U(cat)})
    ap = g.value([2, 8, 8, 24])
    g.node("AvgPooling2d", {0: U(1), 1: U(1), 2: U(1), 3: U(1), 4: U(3), 5: U(3), 6: U(1),
                            7: U(1), 8: U(1), 9: U(1), 10: U(cat), 11: U(ap)})
    hs = g.value([2, 8, 8, 24])
    g.node("Hardswish", {0: U(ap), 1: U(hs)})
    gp = g.value([2, 1, 1, 24])
    g.node("GlobalAvgPooling2d", {0: U(hs), 1: U(gp)})
    r = g.value([2, 24])
    g.node("StaticReshape", {0: U(2), 1: V([2, 24]), 2: U(gp), 3: U(r)})
    w = rnd(5, 24, scale=0.3)
    wv = g.value(w.shape, const=f32b(w))
    bv = g.value([5], const=f32b(rnd(5)))
    o = g.value([2, 5], flags=OUTPUT, ext=1)
    g.node("FullyConnected", {0: U(r), 1: U(wv), 2: U(bv), 3: U(o)})
    case("net_blocked_concat", g, [xin])

    # inverted-residual blocks the backend runs as one (etch_opt_conv_block_run): a stem
    # (3x3 stride 2 on the NCHW image) -> depthwise -> 1x1, then 1x1 expand -> depthwise ->
    # 1x1 project -> residual add
    g = G()
    xin = rnd(1, 3, 32, 32)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    t = g.value([1, 32, 32, 3])
    g.node("StaticTranspose", {0: U(4), 1: V([0, 2, 3, 1]), 2: U(a), 3: U(t)})
    s1 = g.value([1, 16, 16, 16])
    conv_node(g, t, s1, rnd(16, 3, 3, 3, scale=0.4), rnd(16), stride=2, lo=0.0, hi=6.0)
    d1 = g.value([1, 16, 16, 16])
    conv_node(g, s1, d1, rnd(1, 3, 3, 16, scale=0.4), rnd(16), depthwise=True, lo=0.0, hi=6.0)
    p1 = g.value([1, 16, 16, 16])
    conv_node(g, d1, p1, rnd(16, 1, 1, 16, scale=0.3), rnd(16), pad=0)
    e2 = g.value([1, 16, 16, 64])
    conv_node(g, p1, e2, rnd(64, 1, 1, 16, scale=0.3), rnd(64), pad=0, lo=0.0, hi=6.0)
    d2 = g.value([1, 16, 16, 64])
    conv_node(g, e2, d2, rnd(1, 3, 3, 64, scale=0.4), rnd(64), depthwise=True, lo=0.0, hi=6.0)
    p2 = g.value([1, 16, 16, 16])
    conv_node(g, d2, p2, rnd(16, 1, 1, 64, scale=0.2), rnd(16), pad=0)
    r = g.value([1, 16, 16, 16])
    g.node("Add", {0: U(p1), 1: U(p2), 2: U(r)})
    o = g.value([1, 16, 16, 16], flags=OUTPUT, ext=1)
    g.node("StaticTranspose", {0: U(4), 1: V([0, 3, 1, 2]), 2: U(r), 3: U(o)})
    case("net_inverted_residual", g, [xin])


def build_quant_cases():
    """Quantized products on the backend's integer kernels (xnn_quant.c): static int8 fully
    connected / conv (padded, strided, pointwise over several 256-pixel tiles) / depthwise,
    qint8 and quint8; weight-only int8 and int4; dynamic int8 rows x int8 weights. The
    reference dequantizes and rounds in float: an output may differ by one step."""
    def qc8(shape, axis):
        w = rng.randint(-127, 128, size=shape).astype(np.int8)
        ws = (rng.rand(shape[axis]) * 0.01 + 0.002).astype(np.float32)
        return w, ws

    def static_fc(name, xdt, xzp, ydt, yzp, lo=None, hi=None):
        g = G()
        xin = rnd(5, 40)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        xq = g.value(xin.shape, dtype=xdt, q=("tensor", 0.03, xzp))
        w, ws = qc8((12, 40), 0)
        wv = g.value(w.shape, dtype=QCINT8, const=w.tobytes(), q=("channel", list(ws), 0))
        bias = rng.randint(-800, 800, size=12).astype(np.int32)
        bv = g.value([12], dtype=QCINT32, const=bias.tobytes(),
                     q=("channel", list(ws * np.float32(0.03)), 0))
        yq = g.value([5, 12], dtype=ydt, q=("tensor", 0.06, yzp))
        o = g.value([5, 12], flags=OUTPUT, ext=1)
        g.node("Convert", {0: U(a), 1: U(xq)})
        g.node("FullyConnected", {0: U(xq), 1: U(wv), 2: U(bv), 3: U(yq)}, lo, hi)
        g.node("Convert", {0: U(yq), 1: U(o)})
        case(name, g, [xin], tol=0.0601)

    static_fc("q_fc_static", QINT8, -3, QINT8, 5, lo=0.0)
    static_fc("q_fc_quint8", QUINT8, 128, QUINT8, 120, lo=-1.0, hi=1.5)

    def static_conv(name, N, H, W, C, O, k, stride, pad, depthwise=False):
        g = G()
        xin = rnd(N, H, W, C)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        xq = g.value(xin.shape, dtype=QINT8, q=("tensor", 0.025, 2))
        if depthwise:
            w, ws = qc8((1, k, k, O), 3)
            q = ("channel", list(ws), 3)
        else:
            w, ws = qc8((O, k, k, C), 0)
            q = ("channel", list(ws), 0)
        wv = g.value(w.shape, dtype=QCINT8, const=w.tobytes(), q=q)
        bias = rng.randint(-300, 300, size=O).astype(np.int32)
        bv = g.value([O], dtype=QCINT32, const=bias.tobytes(),
                     q=("channel", list(ws * np.float32(0.025)), 0))
        OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
        yq = g.value([N, OH, OW, O], dtype=QINT8, q=("tensor", 0.04, -6))
        o = g.value([N, OH, OW, O], flags=OUTPUT, ext=1)
        g.node("Convert", {0: U(a), 1: U(xq)})
        gic, goc, groups = (1, 1, O) if depthwise else (C, O, 1)
        g.node("DepthwiseConv2d" if depthwise else "Conv2d",
               {0: U(pad), 1: U(pad), 2: U(pad), 3: U(pad), 4: U(k), 5: U(k), 6: U(stride),
                7: U(stride), 8: U(1), 9: U(1), 10: U(gic), 11: U(goc), 12: U(groups),
                15: U(xq), 16: U(wv), 17: U(bv), 18: U(yq)}, -2.0, 3.0)
        g.node("Convert", {0: U(yq), 1: U(o)})
        case(name, g, [xin], tol=0.0401)

    static_conv("q_conv_pad_s2", 2, 9, 8, 5, 7, 3, 2, 1)
    static_conv("q_conv_1x1", 1, 20, 15, 16, 24, 1, 1, 0)
    static_conv("q_dwconv", 1, 9, 8, 16, 16, 3, 1, 1, depthwise=True)

    # weight-only int8 (8w) and dynamic int8 rows x int8 weights, float out
    for name, dyn in (("q_fc_8w", False), ("q_fc_dq8_qc8", True)):
        g = G()
        xin = rnd(4, 48)
        a = g.value(xin.shape, flags=INPUT, ext=0)
        w, ws = qc8((9, 48), 0)
        wv = g.value(w.shape, dtype=QCINT8, const=w.tobytes(), q=("channel", list(ws), 0))
        bv = g.value([9], const=f32b(rnd(9)))
        o = g.value([4, 9], flags=OUTPUT, ext=1)
        src = a
        if dyn:
            src = g.value(xin.shape, dtype=QDINT8, q=("token", 1))
            g.node("Convert", {0: U(a), 1: U(src)})
        g.node("FullyConnected", {0: U(src), 1: U(wv), 2: U(bv), 3: U(o)})
        case(name, g, [xin], tol=2e-3 if dyn else 1e-4)

    # the 2023 form of dynamic quantization: an fp32 input with dq_datatype qint8 read by
    # the FC as its per-token quantization (ExecuTorch's runtime adds the Convert)
    g = G()
    xin = rnd(3, 64)
    a = g.value(xin.shape, flags=INPUT, ext=0, dq=QINT8)
    w = rng.randint(-8, 8, size=(10, 64))
    packed = ((w[:, 0::2] + 8) | ((w[:, 1::2] + 8) << 4)).astype(np.uint8)
    sc = (rng.rand(10) * 0.05 + 0.01).astype(np.float32)
    wv = g.value([10, 64], dtype=QCINT4, const=packed.tobytes(), q=("channel", list(sc), 0))
    o = g.value([3, 10], flags=OUTPUT, ext=1)
    g.node("FullyConnected", {0: U(a), 1: U(wv), 2: U(0xffffffff), 3: U(o)})
    case("q_dq_datatype_input", g, [xin], tol=2e-3)

    # weight-only int4, blockwise (4w)
    g = G()
    xin = rnd(3, 64)
    a = g.value(xin.shape, flags=INPUT, ext=0)
    w = rng.randint(-8, 8, size=(10, 64))
    packed = ((w[:, 0::2] + 8) | ((w[:, 1::2] + 8) << 4)).astype(np.uint8)
    sc = (rng.rand(10 * 2) * 0.05 + 0.01).astype(np.float32)
    sc = np.frombuffer((sc.view(np.uint32) & 0xffff0000).astype(np.uint32).tobytes(), np.float32)
    wv = g.value([10, 64], dtype=QBINT4, const=packed.tobytes(), q=("block", list(sc), 0, 32))
    o = g.value([3, 10], flags=OUTPUT, ext=1)
    g.node("FullyConnected", {0: U(a), 1: U(wv), 2: U(0xffffffff), 3: U(o)})
    case("q_fc_4w", g, [xin])


def fallback_programs(out):
    """forward = XnnpackBackend Add, plus (in fallback.pte) its CPU twin forward__cpu =
    aten::add.out on the same inputs."""
    for name, twin in (("fallback", True), ("no_fallback", False)):
        g = G()
        a = g.value([3, 4], flags=INPUT, ext=0)
        b = g.value([3, 4], flags=INPUT, ext=1)
        o = g.value([3, 4], flags=OUTPUT, ext=2)
        g.node("Add", {0: U(a), 1: U(b), 2: U(o)})
        pb = ProgramBuilder()
        m = pb.method("forward")
        x, y, z = m.tensor(6, [3, 4]), m.tensor(6, [3, 4]), m.tensor(6, [3, 4])
        m.delegate("XnnpackBackend", g.blob(), [x, y, z])
        m.inputs, m.outputs = [x, y], [z]
        if twin:
            c = pb.method("forward__cpu")
            x, y, z = c.tensor(6, [3, 4]), c.tensor(6, [3, 4]), c.tensor(6, [3, 4])
            one = c.int(1)
            c.kernel("aten::add.out", [x, y, one, z, z])
            c.inputs, c.outputs = [x, y], [z]
        prog, data = pb.build()
        with open(os.path.join(out, name + ".pte"), "wb") as f:
            f.write(serialize_program(prog, data))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    fallback_programs(out)
    build_cases()
    build_net_cases()
    build_quant_cases()
    import torch
    lines = []
    for name, g, inputs, tol in CASES:
        blob = g.blob()
        graph = xnn_ref.Graph(blob, {})
        y = graph.run([torch.tensor(x) for x in inputs])[0].numpy().astype(np.float32)
        ins = [v for v in g.values if v["flags"] & INPUT]
        outs = [v for v in g.values if v["flags"] & OUTPUT]
        with open(os.path.join(out, name + ".pte"), "wb") as f:
            f.write(program(g, [v["dims"] for v in ins], [v["dims"] for v in outs]))
        for k, x in enumerate(inputs):
            x.astype(np.float32).tofile(os.path.join(out, "%s.in%d.f32" % (name, k)))
        y.tofile(os.path.join(out, name + ".out.f32"))
        dims = " ".join("%d %s" % (x.ndim, " ".join(map(str, x.shape))) for x in inputs)
        lines.append("%s %g %d %s" % (name, tol, len(inputs), dims))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
