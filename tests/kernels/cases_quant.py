"""Golden cases for the quantized operators (quantized_decomposed::*, src/kernels/portable/
op_*quant*.c, op_choose_qparams*.c, op_embedding_{byte,4bit,2bit}.c).

torch 1.13 has no quantized_decomposed operators, so the expected values come from the
reference formulas written here in numpy/torch, following ExecuTorch's kernels
(kernels/quantized/cpu) where they define the op and torch.ao's _decomposed.py where
ExecuTorch has no kernel (dequantize_per_channel_group):

  quantize:   q = clamp(zp + rint(float32(float32(1 / float32(scale)) * x)), qmin, qmax)
              (rint: round half to even; NaN -> qmin)
  dequantize: float32(q - zp) * float32(scale), rounded once to the out dtype
  choose_qparams: ExecuTorch's calculate_scale_and_zero_point (fbgemm's), ported below

and are cross-checked where torch has the same operation: torch.quantize_per_tensor /
quantize_per_channel / dequantize (quint8, qint8, qint32 with the full dtype range) and
torch._choose_qparams_per_tensor (the same fbgemm algorithm over [0, 255]) must agree with
the formulas, else generation stops. UInt16 (which torch 1.13 lacks) travels as int16 bytes
with the dtype number 27.
"""
import numpy as np
import torch

Q = "quantized_decomposed::"
UINT16 = 27
RNG = np.random.default_rng(1717)
F32 = np.float32
RANGE = {torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-32768, 32767),
         torch.int32: (-(2 ** 31), 2 ** 31 - 1), UINT16: (0, 65535)}
QDTYPES = [torch.uint8, torch.int8, torch.int16, UINT16, torch.int32]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
OUT_FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def name(dt):
    return "uint16" if dt == UINT16 else str(dt).replace("torch.", "")


def code(dt):
    return UINT16 if dt == UINT16 else {torch.uint8: 0, torch.int8: 1, torch.int16: 2,
                                        torch.int32: 3, torch.int64: 4, torch.float16: 5,
                                        torch.float32: 6, torch.float64: 7,
                                        torch.bfloat16: 15}[dt]


def qtensor(g, v, dt):
    """int64 numpy values -> the tensor etch reads (uint16 as int16 bytes)."""
    v = np.asarray(v, dtype=np.int64)
    if dt == UINT16:
        return torch.from_numpy(v.astype(np.uint16).view(np.int16).copy())
    return torch.from_numpy(v).to(dt)


def QIn(g, v, dt, order=None):
    a = g.In(qtensor(g, v, dt), order)
    if dt == UINT16:
        a.code = UINT16
    return a


def QOut(g, dt, expected=None, shape=None, order=None):
    tdt = torch.int16 if dt == UINT16 else dt
    a = g.Out(tdt, None if expected is None else qtensor(g, expected, dt), shape=shape,
              order=order)
    if dt == UINT16:
        a.code = UINT16
    return a


def fvals(shape, dt, scale=3.0, special=False):
    v = RNG.standard_normal(int(np.prod(shape, dtype=np.int64))) * scale
    if special and v.size >= 4:
        v[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return torch.from_numpy(v.reshape(shape)).to(dt)


def param_index(n, inner, count):
    return (np.arange(n) // inner) % count


def et_quantize(x, scales, zps, inner, qmin, qmax):
    """x: a float tensor; scales/zps: per-parameter arrays; element i uses (i // inner) % n."""
    flat = x.reshape(-1)
    c = param_index(flat.numel(), inner, len(scales))
    inv = (F32(1.0) / np.asarray(scales, dtype=np.float64).astype(F32))[c]
    with np.errstate(all="ignore"):
        if x.dtype == torch.float64:
            p = (inv.astype(np.float64) * flat.numpy()).astype(F32)
        else:
            p = inv * flat.float().numpy()
        r = np.rint(p).astype(np.float64)
        q = np.asarray(zps, dtype=np.float64)[c] + r
        q = np.where(np.isnan(q), qmin, np.clip(q, qmin, qmax))
    return q.astype(np.int64).reshape(list(x.shape))


def et_dequantize(q, scales, zps, inner, out_dt):
    flat = np.asarray(q, dtype=np.int64).reshape(-1)
    c = param_index(flat.size, inner, len(scales))
    z = np.asarray(zps, dtype=np.int64)[c]
    v = (flat - z).astype(F32) * np.asarray(scales, dtype=np.float64).astype(F32)[c]
    return torch.from_numpy(v.reshape(np.shape(q))).to(out_dt)


def et_choose(mn, mx, qmin, qmax):
    """ExecuTorch's calculate_scale_and_zero_point (op_choose_qparams.cpp), in its precisions."""
    small = F32(6.1e-5)
    mn, mx = F32(min(F32(mn), F32(0))), F32(max(F32(mx), F32(0)))
    scale = (float(mx) - float(mn)) / float(qmax - qmin)
    with np.errstate(all="ignore"):
        if F32(scale) == 0 or np.isinf(F32(1) / F32(scale)):
            scale = 0.1
    if scale < float(small):
        org = F32(scale)
        scale = float(small)
        if mn == 0:
            mx = F32(small * F32(qmax - qmin))
        elif mx == 0:
            mn = F32(-small * F32(qmax - qmin))
        else:
            amp = F32(small / org)
            mn, mx = F32(mn * amp), F32(mx * amp)
    zfm = qmin - float(mn) / scale
    zfx = qmax - float(mx) / scale
    emin = abs(qmin) - abs(float(mn) / scale)
    emax = abs(qmax) - abs(float(mx) / scale)
    init = zfm if emin < emax else zfx
    if not init >= qmin:
        z = qmin
    elif init > qmax:
        z = qmax
    else:
        z = int(np.rint(F32(init)))
    return scale, min(max(z, qmin), qmax)


TORCH_Q = {torch.uint8: torch.quint8, torch.int8: torch.qint8, torch.int32: torch.qint32}


def cross_check_per_tensor(x, scale, zp, dt, q):
    if dt not in TORCH_Q or x.dtype != torch.float32 or abs(zp) >= 1 << 24:
        return  # (torch's qint32 adds a huge zero point in float, losing its low bits)
    t = torch.quantize_per_tensor(x, scale, zp, TORCH_Q[dt])
    got = t.int_repr().to(torch.int64).numpy()
    fin = torch.isfinite(x).numpy()  # torch: NaN/inf -> int is undefined (x86: qmin)
    assert (got[fin] == q[fin]).all(), ("torch.quantize_per_tensor disagrees", scale, zp, dt)
    deq = t.dequantize().numpy()
    ref = et_dequantize(got, [scale], [zp], 1, torch.float32).numpy()
    assert (deq == ref).all(), ("torch dequantize disagrees", scale, zp, dt)


def cross_check_per_channel(x, scales, zps, axis, dt, q):
    if dt not in (torch.uint8, torch.int8) or x.dtype != torch.float32:
        return
    t = torch.quantize_per_channel(x, torch.tensor(scales, dtype=torch.float64),
                                   torch.tensor(zps, dtype=torch.int64), axis, TORCH_Q[dt])
    got = t.int_repr().to(torch.int64).numpy()
    fin = torch.isfinite(x).numpy()
    assert (got[fin] == q[fin]).all(), ("torch.quantize_per_channel disagrees", dt)


def gen_per_tensor(g):
    W, In, Out, Int, Dbl, Ref = g.W, g.In, g.Out, g.Int, g.Dbl, g.Ref
    k = 0
    for dt in QDTYPES:
        lo, hi = RANGE[dt]
        mid = (lo + hi) // 2 if dt != torch.int32 else 0
        # zero points at both ends and in the middle; a narrowed range (4-bit in an int8)
        for zp, qmin, qmax, scale in [(mid, lo, hi, 0.05), (lo, lo, hi, 0.013),
                                      (hi, lo, hi, 0.02), (0 if lo < 0 else 3, max(lo, -8),
                                                            min(hi, 7) if lo < 0 else 15, 0.31)]:
            for idt in FLOATS:
                k += 1
                shape = [[7], [3, 5], [2, 3, 4], [33]][k % 4]
                x = fvals(shape, idt, scale=scale * 200, special=(k % 3 == 0))
                q = et_quantize(x, [scale], [zp], 1, qmin, qmax)
                cross_check_per_tensor(x, scale, zp, dt, q) if qmin == lo and qmax == hi else None
                lab = "qpt %s->%s zp%d [%d,%d] %s" % (name(idt), name(dt), zp, qmin, qmax, shape)
                W.case(Q + "quantize_per_tensor.out", lab,
                       [In(x), Dbl(scale), Int(zp), Int(qmin), Int(qmax), Int(code(dt)),
                        QOut(g, dt, q), Ref(6)])
                W.case(Q + "quantize_per_tensor.Tensor_out", "T " + lab,
                       [In(x), In(torch.tensor([scale], dtype=torch.float64)),
                        In(torch.tensor([zp], dtype=torch.int64)), Int(qmin), Int(qmax),
                        Int(code(dt)), QOut(g, dt, q), Ref(6)])
                odt = OUT_FLOATS[k % 4]
                qv = RNG.integers(qmin, qmax, int(np.prod(shape)), endpoint=True).reshape(shape)
                qv.reshape(-1)[0], qv.reshape(-1)[-1] = qmin, qmax
                ref = et_dequantize(qv, [scale], [zp], 1, odt)
                given = k % 2 == 0
                W.case(Q + "dequantize_per_tensor.out", "dqpt %s->%s zp%d %s%s" % (
                           name(dt), name(odt), zp, shape, " out_dtype" if given else ""),
                       [QIn(g, qv, dt), Dbl(scale), Int(zp), Int(qmin), Int(qmax),
                        Int(code(dt)), Int(code(odt)) if given else None, Out(odt, ref), Ref(7)])
                W.case(Q + "dequantize_per_tensor.Tensor_out", "T dqpt %s->%s zp%d %s" % (
                           name(dt), name(odt), zp, shape),
                       [QIn(g, qv, dt), In(torch.tensor([scale], dtype=torch.float32)),
                        In(torch.tensor([zp], dtype=torch.int32)), Int(qmin), Int(qmax),
                        Int(code(dt)), None, Out(odt, ref), Ref(7)])
    # rounding half to even and saturation, exactly representable
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 1e9, -1e9, 3.49999],
                     dtype=torch.float32)
    q = et_quantize(x, [1.0], [0], 1, -128, 127)
    assert list(q[:6]) == [0, 2, 2, 0, -2, -2], q
    W.case(Q + "quantize_per_tensor.out", "qpt half to even",
           [In(x), Dbl(1.0), Int(0), Int(-128), Int(127), Int(1), QOut(g, torch.int8, q), Ref(6)])
    # strided input and output
    x = fvals([4, 6], torch.float32, 2.0)
    q = et_quantize(x, [0.02], [10], 1, 0, 255)
    W.case(Q + "quantize_per_tensor.out", "qpt transposed",
           [In(x, [1, 0]), Dbl(0.02), Int(10), Int(0), Int(255), Int(0),
            QOut(g, torch.uint8, q, order=[1, 0]), Ref(6)])
    # bad arguments: each must fail with a message, never crash
    x = fvals([2, 3], torch.float32)
    bad = [("scale 0", 0.0, 0, -128, 127, 1, torch.int8),
           ("negative scale", -0.1, 0, -128, 127, 1, torch.int8),
           ("nan scale", float("nan"), 0, -128, 127, 1, torch.int8),
           ("tiny scale", 1e-300, 0, -128, 127, 1, torch.int8),
           ("qmin > qmax", 0.1, 0, 5, 4, 1, torch.int8),
           ("qmin below dtype", 0.1, 0, -129, 127, 1, torch.int8),
           ("qmax above uint8", 0.1, 0, 0, 256, 0, torch.uint8),
           ("zero point outside", 0.1, 300, 0, 255, 0, torch.uint8),
           ("dtype Long", 0.1, 0, 0, 255, 4, torch.int64),
           ("dtype Float", 0.1, 0, 0, 255, 6, torch.float32),
           ("dtype unknown", 0.1, 0, 0, 255, 99, torch.uint8),
           ("out dtype mismatch", 0.1, 0, 0, 255, 0, torch.int8)]
    for lab, s, z, a, b, d, odt in bad:
        W.case(Q + "quantize_per_tensor.out", "qpt bad " + lab,
               [In(x), Dbl(s), Int(z), Int(a), Int(b), Int(d), Out(odt, None, shape=[2, 3]),
                Ref(6)], fail=True)
    W.case(Q + "quantize_per_tensor.out", "qpt bad int input",
           [In(torch.ones(2, 3, dtype=torch.int32)), Dbl(0.1), Int(0), Int(-128), Int(127),
            Int(1), Out(torch.int8, None, shape=[2, 3]), Ref(6)], fail=True)
    for lab, s, z in [("scale two elements", torch.tensor([0.1, 0.2], dtype=torch.float64),
                       torch.tensor([0])),
                      ("scale int", torch.tensor([1]), torch.tensor([0])),
                      ("zero point float", torch.tensor([0.1]), torch.tensor([0.0])),
                      ("zero point empty", torch.tensor([0.1]), torch.zeros(0, dtype=torch.long))]:
        W.case(Q + "quantize_per_tensor.Tensor_out", "qpt bad " + lab,
               [In(x), In(s), In(z), Int(-128), Int(127), Int(1),
                Out(torch.int8, None, shape=[2, 3]), Ref(6)], fail=True)
    qv = qtensor(g, [[1, 2, 3], [4, 5, 6]], torch.int8)
    for lab, d, od, odt in [("input dtype mismatch", 0, None, torch.float32),
                            ("out_dtype mismatch", 1, 5, torch.float32),
                            ("int out", 1, None, torch.int32),
                            ("out_dtype int", 1, 3, torch.int32)]:
        W.case(Q + "dequantize_per_tensor.out", "dqpt bad " + lab,
               [In(qv), Dbl(0.1), Int(0), Int(-128), Int(127), Int(d),
                None if od is None else Int(od), Out(odt, None, shape=[2, 3]), Ref(7)], fail=True)
    W.case(Q + "dequantize_per_tensor.out", "dqpt bad negative scale",
           [In(qv), Dbl(-0.5), Int(0), Int(-128), Int(127), Int(1), None,
            Out(torch.float32, None, shape=[2, 3]), Ref(7)], fail=True)
    W.case(Q + "dequantize_per_tensor.out", "dqpt bad inf scale",
           [In(qv), Dbl(float("inf")), Int(0), Int(-128), Int(127), Int(1), None,
            Out(torch.float32, None, shape=[2, 3]), Ref(7)], fail=True)
    W.case(Q + "dequantize_per_tensor.out", "dqpt bad float input",
           [In(torch.ones(2, 3)), Dbl(0.5), Int(0), Int(-128), Int(127), Int(6), None,
            Out(torch.float32, None, shape=[2, 3]), Ref(7)], fail=True)
    W.case(Q + "dequantize_per_tensor.Tensor_out", "dqpt bad scale shape",
           [In(qv), In(torch.ones(3)), In(torch.tensor([0])), Int(-128), Int(127), Int(1),
            None, Out(torch.float32, None, shape=[2, 3]), Ref(7)], fail=True)


def gen_per_channel(g):
    W, In, Out, Int, Ref = g.W, g.In, g.Out, g.Int, g.Ref
    k = 0
    for dt in QDTYPES:
        lo, hi = RANGE[dt]
        for shape, axis in [([5, 3], 0), ([4, 6], 1), ([2, 3, 5], -2), ([3, 2, 2, 3], 3),
                            ([9], 0)]:
            k += 1
            a = axis % len(shape)
            C = shape[a]
            inner = int(np.prod(shape[a + 1:], dtype=np.int64))
            scales = list(RNG.uniform(0.005, 0.4, C))
            zps = [int(v) for v in RNG.integers(lo if dt != torch.int32 else -1000,
                                                hi if dt != torch.int32 else 1000, C,
                                                endpoint=True)]
            zps[0] = lo if dt != torch.int32 else zps[0]
            zps[-1] = hi if dt != torch.int32 else zps[-1]
            idt = FLOATS[k % 4]
            x = fvals(shape, idt, 25.0, special=(k % 4 == 1))
            q = et_quantize(x, scales, zps, inner, lo, hi)
            cross_check_per_channel(x, scales, zps, a, dt, q)
            sdt = torch.float64 if k % 2 else torch.float32
            zdt = torch.int64 if k % 3 else torch.int32
            lab = "%s->%s %s axis %d" % (name(idt), name(dt), shape, axis)
            W.case(Q + "quantize_per_channel.out", "qpc " + lab,
                   [In(x), In(torch.tensor(scales, dtype=sdt)), In(torch.tensor(zps, dtype=zdt)),
                    Int(axis), Int(lo), Int(hi), Int(code(dt)), QOut(g, dt, q), Ref(7)])
            odt = OUT_FLOATS[k % 4]
            has_z = k % 5 != 0
            ref = et_dequantize(q, scales, zps if has_z else [0] * C, inner, odt)
            W.case(Q + "dequantize_per_channel.out", "dqpc %s->%s %s axis %d%s" % (
                       name(dt), name(odt), shape, axis, "" if has_z else " no zp"),
                   [QIn(g, q, dt), In(torch.tensor(scales, dtype=torch.float32)),
                    In(torch.tensor(zps, dtype=torch.int64)) if has_z else None,
                    Int(axis), Int(lo), Int(hi), Int(code(dt)),
                    Int(code(odt)) if k % 2 else None, Out(odt, ref), Ref(8)])
    # strided (channels-last) input
    x = fvals([2, 4, 3, 3], torch.float32, 10.0)
    scales = list(RNG.uniform(0.01, 0.2, 4))
    zps = [0, -5, 5, 127]
    q = et_quantize(x, scales, zps, 9, -128, 127)
    W.case(Q + "quantize_per_channel.out", "qpc channels-last",
           [In(x, [0, 2, 3, 1]), In(torch.tensor(scales, dtype=torch.float64)),
            In(torch.tensor(zps)), Int(1), Int(-128), Int(127), Int(1),
            QOut(g, torch.int8, q, order=[0, 2, 3, 1]), Ref(7)])
    x = fvals([4, 3], torch.float32)
    s4, z4 = torch.full([4], 0.1, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    for lab, s, z, axis in [("scales count", s4, z4, 1),
                            ("zero points count", s4, torch.zeros(3, dtype=torch.long), 0),
                            ("axis out of range", s4, z4, 2), ("axis below", s4, z4, -3),
                            ("zero scale", torch.tensor([0.1, 0.0, 0.1, 0.1], dtype=torch.float64),
                             z4, 0),
                            ("negative scale", torch.tensor([0.1, -0.1, 0.1, 0.1]), z4, 0),
                            ("zero point range", s4, torch.tensor([0, 0, 128, 0]), 0),
                            ("int scales", torch.ones(4, dtype=torch.long), z4, 0),
                            ("float zero points", s4, torch.zeros(4), 0)]:
        W.case(Q + "quantize_per_channel.out", "qpc bad " + lab,
               [In(x), In(s), In(z), Int(axis), Int(-128), Int(127), Int(1),
                Out(torch.int8, None, shape=[4, 3]), Ref(7)], fail=True)
    qv = qtensor(g, np.ones([4, 3]), torch.int8)
    W.case(Q + "dequantize_per_channel.out", "dqpc bad scales count",
           [In(qv), In(torch.ones(3)), None, Int(0), Int(-128), Int(127), Int(1), None,
            Out(torch.float32, None, shape=[4, 3]), Ref(8)], fail=True)
    W.case(Q + "dequantize_per_channel.out", "dqpc bad 0-dim input",
           [In(qtensor(g, 3, torch.int8)), In(torch.ones(1)), None, Int(0), Int(-128), Int(127),
            Int(1), None, Out(torch.float32, None, shape=[]), Ref(8)], fail=True)
    W.case(Q + "dequantize_per_channel.out", "dqpc bad qrange",
           [In(qv), In(torch.ones(4)), None, Int(0), Int(-128), Int(128), Int(1), None,
            Out(torch.float32, None, shape=[4, 3]), Ref(8)], fail=True)


def gen_per_token(g):
    W, In, Out, Int, Ref = g.W, g.In, g.Out, g.Int, g.Ref
    k = 0
    for shape in [[1, 8], [3, 5], [2, 3, 7], [4, 1], [2, 2, 2, 33], [6]]:
        k += 1
        idt = FLOATS[k % 4]
        x = fvals(shape, idt, 4.0)
        if k == 2:
            x[1] = 0.0       # an all-zero token: scale 0.1 path
        if k == 3:
            x[0, 0] = x[0, 0].abs() + 1e-6   # tiny positive-only tokens: threshold path
            x[0, 0] = x[0, 0] * 1e-6
        tokens = int(np.prod(shape[:-1], dtype=np.int64))
        last = shape[-1]
        xf = x.float().reshape(tokens, last).numpy()
        sc, zp = zip(*[et_choose(xf[t].min(), xf[t].max(), -128, 127) for t in range(tokens)])
        # cross-check: torch.ao's formula picks the same scale (up to its eps) on normal rows
        tmin = np.minimum(xf.min(1), 0)
        tmax = np.maximum(xf.max(1), 0)
        ts = (tmax.astype(np.float64) - tmin) / 255.0
        ok = ts > 1e-4
        assert np.allclose(np.array(sc)[ok], ts[ok], rtol=1e-6), (sc, ts)
        qshape = shape[:-1] + [1]
        sdt, zdt = (torch.float64, torch.int64) if k % 2 else (torch.float32, torch.int32)
        s_t = torch.tensor(sc, dtype=torch.float64).reshape(qshape)
        z_t = torch.tensor(zp, dtype=torch.int64).reshape(qshape)
        lab = "%s %s" % (name(idt), shape)
        W.case(Q + "choose_qparams_per_token_asymmetric.out", "cqpt " + lab,
               [In(x), Int(1), Out(sdt, s_t.to(sdt)), Out(zdt, z_t.to(zdt)), g.TList([2, 3])])
        sc32 = [float(F32(v)) for v in sc] if sdt == torch.float32 else list(sc)
        q = et_quantize(x, sc32, zp, last, -128, 127)
        W.case(Q + "quantize_per_token.out", "qtok " + lab,
               [In(x), In(s_t.to(sdt)), In(z_t.to(zdt)), Int(-128), Int(127), Int(1),
                QOut(g, torch.int8, q), Ref(6)])
        odt = OUT_FLOATS[k % 4]
        ref = et_dequantize(q, sc32, zp, last, odt)
        W.case(Q + "dequantize_per_token.out", "dqtok %s->%s %s" % (name(idt), name(odt), shape),
               [QIn(g, q, torch.int8), In(s_t.to(sdt)), In(z_t.to(zdt)), Int(-128), Int(127),
                Int(1), Int(code(odt)), Out(odt, ref), Ref(7)])
    # uint8 per-token quantization with given parameters
    x = fvals([3, 4], torch.float32, 2.0)
    q = et_quantize(x, [0.01, 0.02, 0.05], [0, 128, 255], 4, 0, 255)
    W.case(Q + "quantize_per_token.out", "qtok uint8 given",
           [In(x), In(torch.tensor([0.01, 0.02, 0.05], dtype=torch.float64)),
            In(torch.tensor([0, 128, 255])), Int(0), Int(255), Int(0),
            QOut(g, torch.uint8, q), Ref(6)])
    for odt in (torch.float32, torch.float16):
        W.case(Q + "dequantize_per_token.out", "dqtok uint8 given -> %s" % name(odt),
               [QIn(g, q, torch.uint8), In(torch.tensor([0.01, 0.02, 0.05])),
                In(torch.tensor([0, 128, 255], dtype=torch.int32)), Int(0), Int(255), Int(0),
                Int(code(odt)), Out(odt, et_dequantize(q, [0.01, 0.02, 0.05], [0, 128, 255], 4,
                                                       odt)), Ref(7)])
    q16 = et_quantize(x, [0.001, 0.002, 0.0005], [0, 30000, 65535], 4, 0, 65535)
    W.case(Q + "quantize_per_token.out", "qtok uint16 given",
           [In(x), In(torch.tensor([0.001, 0.002, 0.0005], dtype=torch.float64)),
            In(torch.tensor([0, 30000, 65535])), Int(0), Int(65535), Int(UINT16),
            QOut(g, UINT16, q16), Ref(6)])
    W.case(Q + "dequantize_per_token.out", "dqtok uint16 given",
           [QIn(g, q16, UINT16), In(torch.tensor([0.001, 0.002, 0.0005], dtype=torch.float64)),
            In(torch.tensor([0, 30000, 65535])), Int(0), Int(65535), Int(UINT16), Int(6),
            Out(torch.float32, et_dequantize(q16, [0.001, 0.002, 0.0005], [0, 30000, 65535], 4,
                                             torch.float32)), Ref(7)])
    W.case(Q + "quantize_per_token.out", "qtok bad scales count",
           [In(x), In(torch.ones(4, dtype=torch.float64)), In(torch.zeros(4, dtype=torch.long)),
            Int(0), Int(255), Int(0), Out(torch.uint8, None, shape=[3, 4]), Ref(6)], fail=True)
    W.case(Q + "dequantize_per_token.out", "dqtok bad output_dtype",
           [In(qtensor(g, np.zeros([3, 4]), torch.int8)), In(torch.ones(3)),
            In(torch.zeros(3, dtype=torch.long)), Int(-128), Int(127), Int(1), Int(7),
            Out(torch.float32, None, shape=[3, 4]), Ref(7)], fail=True)
    W.case(Q + "choose_qparams_per_token_asymmetric.out", "cqpt bad infinite",
           [In(torch.tensor([[1.0, float("inf")]])), Int(1),
            Out(torch.float64, None, shape=[1, 1]), Out(torch.int64, None, shape=[1, 1]),
            g.TList([2, 3])], fail=True)
    W.case(Q + "choose_qparams_per_token_asymmetric.out", "cqpt bad 0-dim",
           [In(torch.tensor(1.0)), Int(1), Out(torch.float64, None, shape=[]),
            Out(torch.int64, None, shape=[]), g.TList([2, 3])], fail=True)
    W.case(Q + "choose_qparams_per_token_asymmetric.out", "cqpt bad scale dtype",
           [In(torch.ones(2, 3)), Int(1), Out(torch.float16, None, shape=[2, 1]),
            Out(torch.int64, None, shape=[2, 1]), g.TList([2, 3])], fail=True)


def gen_choose(g):
    W, In, Out, Int, Dbl = g.W, g.In, g.Out, g.Int, g.Dbl
    k = 0
    for dt, qmin, qmax in [(torch.uint8, 0, 255), (torch.int8, -128, 127),
                           (torch.int8, -8, 7), (torch.int16, -32768, 32767)]:
        for shape, mode in [([17], "mixed"), ([3, 4], "positive"), ([2, 5], "negative"),
                            ([4], "zeros"), ([6], "tiny")]:
            k += 1
            idt = FLOATS[k % 4] if mode != "tiny" else torch.float32
            x = fvals(shape, torch.float64, 3.0)
            if mode == "positive":
                x = x.abs() + 0.5
            elif mode == "negative":
                x = -x.abs() - 0.25
            elif mode == "zeros":
                x = torch.zeros(shape, dtype=torch.float64)
            elif mode == "tiny":
                x = x * 1e-6
            x = x.to(idt)
            xf = x.float().numpy()
            scale, zp = et_choose(xf.min(), xf.max(), qmin, qmax)
            if (qmin, qmax) == (0, 255) and idt == torch.float32:
                ts, tz = torch._choose_qparams_per_tensor(x, False)
                assert ts == scale and tz == zp, ("torch._choose_qparams_per_tensor", ts, scale,
                                                  tz, zp)
            sdt, zdt = (torch.float64, torch.int64) if k % 3 else (torch.float32, torch.int32)
            W.case(Q + "choose_qparams.Tensor_out", "cqp %s %s %s [%d,%d]" % (
                       name(idt), mode, shape, qmin, qmax),
                   [In(x), Int(qmin), Int(qmax), Dbl(1.19e-7), Int(code(dt)),
                    Out(sdt, torch.tensor([scale], dtype=sdt)),
                    Out(zdt, torch.tensor([zp], dtype=zdt)), g.TList([5, 6])])
    x = torch.ones(3)
    for lab, xi, a, b, d, sshape in [("qmin == qmax", x, 3, 3, 1, [1]),
                                     ("qmax outside", x, 0, 256, 0, [1]),
                                     ("empty input", torch.ones(0), 0, 255, 0, [1]),
                                     ("two scales", x, 0, 255, 0, [2]),
                                     ("int input", torch.ones(3, dtype=torch.int32), 0, 255, 0,
                                      [1]),
                                     ("nan and inf", torch.tensor([float("nan"), float("inf")]),
                                      0, 255, 0, [1])]:
        W.case(Q + "choose_qparams.Tensor_out", "cqp bad " + lab,
               [In(xi), Int(a), Int(b), Dbl(1e-7), Int(d), Out(torch.float64, None, shape=sshape),
                Out(torch.int64, None, shape=[1]), g.TList([5, 6])], fail=True)


def group_ref(w, scales, zps, G, odt):
    """torch.ao's dequantize_per_channel_group (_decomposed.py), on torch tensors."""
    wg = w.reshape(-1, G)
    zp = zps.reshape(-1, 1) if zps is not None else torch.zeros([], dtype=torch.int32)
    return wg.sub(zp).mul(scales.reshape(-1, 1)).reshape_as(w).to(odt)


def gen_group(g):
    W, In, Out, Int, Ref = g.W, g.In, g.Out, g.Int, g.Ref
    k = 0
    for M, N, G in [(3, 32, 32), (4, 64, 16), (2, 24, 3), (5, 10, 5), (1, 256, 128), (3, 6, 64)]:
        for wdt, qmin, qmax, zdt in [(torch.int8, -8, 7, torch.int32),
                                     (torch.int8, -128, 127, torch.int64),
                                     (torch.uint8, 0, 15, torch.float32),
                                     (torch.int16, -32768, 32767, torch.int32),
                                     (torch.int32, -100000, 100000, torch.int64)]:
            k += 1
            groups = M * (N // G if G <= N else 1)
            w = torch.from_numpy(RNG.integers(qmin, qmax, [M, N], endpoint=True)).to(wdt)
            sdt = [torch.float32, torch.float16, torch.float64, torch.bfloat16][k % 4]
            scales = torch.from_numpy(RNG.uniform(0.001, 0.3, groups)).to(sdt)
            if G > N:
                scales = scales.reshape(M, 1)
            zps = None
            if k % 3:
                zps = torch.from_numpy(RNG.integers(qmin, qmax, groups, endpoint=True)).to(zdt)
                zps.reshape(-1)[0] = qmin
                zps.reshape(-1)[-1] = qmax
            odt = OUT_FLOATS[k % 4]
            ref = group_ref(w, scales, zps, N if G > N else G, odt)
            W.case(Q + "dequantize_per_channel_group.out", "dqg %s [%d,%d] G%d %s zp %s -> %s" % (
                       name(wdt), M, N, G, name(sdt), "none" if zps is None else name(zdt),
                       name(odt)),
                   [In(w), In(scales), In(zps) if zps is not None else None, Int(qmin),
                    Int(qmax), Int(code(wdt)), Int(G), Int(code(odt)), Out(odt, ref), Ref(8)])
    w = torch.zeros(4, 12, dtype=torch.int8)
    s = torch.ones(8)
    for lab, wi, si, G, zi in [("group not dividing", w, s, 5, None),
                               ("group 1", w, torch.ones(48), 1, None),
                               ("group 0", w, s, 0, None),
                               ("scales count", w, torch.ones(7), 6, None),
                               ("zero points count", w, s, 6, torch.zeros(7, dtype=torch.int32)),
                               ("3-D input", torch.zeros(2, 2, 12, dtype=torch.int8), s, 6, None),
                               ("int scales", w, torch.ones(8, dtype=torch.int32), 6, None),
                               ("negative scale", w, -torch.ones(8), 6, None),
                               ("nan zero point", w, s, 6, torch.full([8], float("nan")))]:
        W.case(Q + "dequantize_per_channel_group.out", "dqg bad " + lab,
               [In(wi), In(si), In(zi) if zi is not None else None, Int(-8), Int(7), Int(1),
                Int(G), Int(6), Out(torch.float32, None, shape=list(wi.shape)), Ref(8)],
               fail=True)


def pack4(v):
    """int values in [-8, 7], [V, D] -> ExecuTorch's bytes [V, D/2] (even column high)."""
    u = (v + 8).to(torch.uint8)
    return (u[:, 0::2] << 4) | u[:, 1::2]


def pack2(v):
    u = (v + 2).to(torch.uint8)
    return u[:, 0::4] | (u[:, 1::4] << 2) | (u[:, 2::4] << 4) | (u[:, 3::4] << 6)


def emb_ref(vals, scales, zps, idx, odt):
    V, D = vals.shape
    G = scales.shape[1] if scales.dim() == 2 else 1
    col = torch.arange(D) // (D // G)
    s2 = scales.float().reshape(V, G)[:, col]
    z2 = zps.float().reshape(V, G)[:, col] if zps is not None else torch.zeros(V, D)
    deq = (vals.float() - z2) * s2
    return deq[idx.long()].to(odt)


def gen_embedding(g):
    W, In, Out, Int, Ref = g.W, g.In, g.Out, g.Int, g.Ref
    k = 0
    for bits, op in [(8, "embedding_byte"), (4, "embedding_4bit"), (2, "embedding_2bit")]:
        lo, hi = {8: (-128, 127), 4: (-8, 7), 2: (-2, 1)}[bits]
        for V, D, G in [(10, 16, 1), (7, 32, 4), (5, 24, 3), (12, 8, 8), (3, 64, 2)]:
            for wdt in ([torch.uint8, torch.int8] if bits == 8 else [torch.uint8]):
                k += 1
                wlo, whi = (0, 255) if (bits == 8 and wdt == torch.uint8) else (lo, hi)
                vals = torch.from_numpy(RNG.integers(wlo, whi, [V, D], endpoint=True))
                vals[0, 0], vals[-1, -1] = wlo, whi
                if bits == 8:
                    weight = vals.to(wdt)
                else:
                    weight = pack4(vals) if bits == 4 else pack2(vals)
                pdt = [torch.float32, torch.float16][k % 2]
                odt = [torch.float32, torch.float16, torch.bfloat16, torch.float32][k % 4]
                scales = torch.from_numpy(RNG.uniform(0.01, 0.5, [V, G] if G > 1 or k % 2
                                                      else [V])).to(pdt)
                zps = None
                if k % 3:
                    zps = torch.from_numpy(RNG.integers(wlo, whi, list(scales.shape),
                                                        endpoint=True)).to(
                        pdt if k % 2 else torch.float32)
                ishape = [[4], [2, 3], [1], [3, 2, 2], []][k % 5]
                idx = torch.from_numpy(np.asarray(RNG.integers(0, V, ishape))).to(
                    torch.int64 if k % 2 else torch.int32).reshape(ishape)
                ref = emb_ref(vals, scales, zps, idx, odt)
                lab = "%s %s V%d D%d G%d %s->%s idx%s" % (op, name(wdt), V, D, G, name(pdt),
                                                          name(odt), ishape)
                args = [In(weight), In(scales), In(zps) if zps is not None else None,
                        Int(wlo if bits == 8 else lo), Int(whi if bits == 8 else hi), In(idx)]
                W.case(Q + op + ".out", lab, args + [Out(odt, ref), Ref(6)])
                W.case(Q + op + ".dtype_out", "dtype " + lab,
                       args + [Int(code(odt)) if k % 2 else None, Out(odt, ref), Ref(7)])
        # bad inputs
        P = 16 * bits // 8
        weight = torch.zeros(4, P, dtype=torch.uint8)
        s = torch.ones(4, 2)
        idx = torch.tensor([0, 3])
        bad = [("index out of range", weight, s, None, torch.tensor([0, 4]), torch.float32),
               ("negative index", weight, s, None, torch.tensor([-1]), torch.float32),
               ("groups not dividing", weight, torch.ones(4, 3), None, idx, torch.float32),
               ("scales rows", weight, torch.ones(3, 2), None, idx, torch.float32),
               ("3-D scales", weight, torch.ones(4, 2, 1), None, idx, torch.float32),
               ("zero points shape", weight, s, torch.zeros(4, 1), idx, torch.float32),
               ("float indices", weight, s, None, torch.tensor([0.0]), torch.float32),
               ("int out", weight, s, None, idx, torch.int32),
               ("1-D weight", torch.zeros(P, dtype=torch.uint8), s, None, idx, torch.float32),
               ("int16 weight", torch.zeros(4, P, dtype=torch.int16), s, None, idx,
                torch.float32),
               ("nan scale", weight, torch.full([4, 2], float("nan")), None, idx,
                torch.float32)]
        if bits != 8:
            bad.append(("int8 packed weight", weight.to(torch.int8), s, None, idx,
                        torch.float32))
        for lab, wi, si, zi, ii, odt in bad:
            W.case(Q + op + ".out", "%s bad %s" % (op, lab),
                   [In(wi), In(si), In(zi) if zi is not None else None, Int(lo), Int(hi),
                    In(ii), Out(odt, None, shape=[0]), Ref(6)], fail=True)
        W.case(Q + op + ".out", "%s bad quant range" % op,
               [In(weight), In(s), None, Int(hi), Int(lo), In(idx),
                Out(torch.float32, None, shape=[2, 16]), Ref(6)], fail=True)
        W.case(Q + op + ".out", "%s bad quant range outside the width" % op,
               [In(weight), In(s), None, Int(lo - 1 if bits != 8 else -129), Int(hi), In(idx),
                Out(torch.float32, None, shape=[2, 16]), Ref(6)], fail=True)
        W.case(Q + op + ".dtype_out", "%s bad dtype mismatch" % op,
               [In(weight), In(s), None, Int(lo), Int(hi), In(idx), Int(5),
                Out(torch.float32, None, shape=[2, 16]), Ref(7)], fail=True)


class UniqueLabels:
    """g.W with repeated labels numbered (cases differing only in random data), every result
    compared bit for bit (the formulas are the kernels' own single-precision arithmetic)."""

    def __init__(self, w, exact):
        self.w = w
        self.exact = exact

    def case(self, op, label, args, fail=False, rtol=0.0):
        base, n = label, 1
        while label in self.w.labels:
            n += 1
            label = "%s #%d" % (base, n)
        self.w.case(op, label, args, fail=fail, rtol=rtol or self.exact)


class _G:
    def __init__(self, g):
        self.__dict__.update({k: getattr(g, k) for k in dir(g) if not k.startswith("__")})
        self.W = UniqueLabels(g.W, g.EXACT_RTOL)


def generate(g):
    g = _G(g)
    gen_per_tensor(g)
    gen_per_channel(g)
    gen_per_token(g)
    gen_choose(g)
    gen_group(g)
    gen_embedding(g)
