"""Golden cases for ExecuTorch's Cortex-M operators (cortex_m::*, src/kernels/portable/
op_cortex_m_*.c).

torch has no cortex_m operators, so the expected values come from the numpy model of
CMSIS-NN's integer arithmetic below, written from CMSIS-NN's documentation of its support
functions (arm_nnsupportfunctions.h) and kernels, in whole-array numpy with Python integer
semantics rather than the C kernels' per-element 32-bit steps:

  doubling high multiply   dhm(a, b)  = floor((a * b + 2**30) / 2**31)
  rounding divide          rdiv(x, e) = x / 2**e to nearest, halves away from zero
  requantize(v, m, s)      = rdiv(dhm(wrap32(v * 2**max(s, 0)), m), max(-s, 0))
  activations: int8 with an int32 accumulator that wraps modulo 2**32; output =
  clamp(requantize(acc) + output_offset, activation_min, activation_max).

The same functions run the whole KWS program in tests/cortex_m/kws_reference.py.
"""
import numpy as np
import torch

CM = "cortex_m::"
RNG = np.random.default_rng(20261204)
CL = [0, 2, 3, 1]  # channels-last dim order of an NCHW tensor

# ---- CMSIS-NN arithmetic (numpy, int64 arrays) ---------------------------------------------


def wrap32(v):
    v = np.asarray(v, dtype=np.int64)
    return ((v + 2 ** 31) & 0xFFFFFFFF) - 2 ** 31


def dhm(a, b):
    a = np.asarray(a, dtype=np.int64)
    return (a * np.int64(b) + 2 ** 30) // 2 ** 31  # numpy's // floors


def rdiv(x, e):
    x = np.asarray(x, dtype=np.int64)
    if e == 0:
        return x
    half = np.int64(1) << (e - 1)
    mag = (np.abs(x) + half) >> e  # magnitude rounded, halves up
    return np.where(x < 0, -mag, mag)


def requantize(v, m, s):
    v = wrap32(np.asarray(v, dtype=np.int64) * (2 ** max(s, 0)))
    return rdiv(dhm(v, m), max(-s, 0))


def requantize_channels(acc, mults, shifts, axis):
    """Per-channel requantization along `axis` of acc."""
    acc = np.moveaxis(np.asarray(acc, dtype=np.int64), axis, 0)
    out = np.stack([requantize(acc[c], int(mults[c]), int(shifts[c])) for c in range(acc.shape[0])])
    return np.moveaxis(out, 0, axis)


# ---- reference operators (logical NCHW numpy arrays in, int64 / float32 out) ----------------


def ref_quantize(x, scale, zp, qmin, qmax):
    inv = np.float32(1.0) / np.float32(scale)
    q = np.rint((x.astype(np.float32) * inv).astype(np.float32)).astype(np.int64) + zp
    return np.clip(q, qmin, qmax)


def ref_dequantize(q, scale, zp):
    return (q.astype(np.int64) - zp).astype(np.float32) * np.float32(scale)


def _pad_hw(x, ph, pw):
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _out_hw(h, k, s, p, d):
    return (h + 2 * p - d * (k - 1) - 1) // s + 1


def ref_conv(x, w_ohwi, bias, stride, pad, dil, in_off, out_off, mults, shifts, amin, amax):
    """cortex_m::quantized_conv2d: x [N, C, H, W], weight OHWI."""
    N, C, H, W = x.shape
    O, KH, KW, CK = w_ohwi.shape
    groups = C // CK
    xp = _pad_hw(x.astype(np.int64) + in_off, pad[0], pad[1])
    OH, OW = _out_hw(H, KH, stride[0], pad[0], dil[0]), _out_hw(W, KW, stride[1], pad[1], dil[1])
    acc = np.zeros((N, O, OH, OW), dtype=np.int64)
    opg = O // groups
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dil[0], kw * dil[1]
            win = xp[:, :, h0:h0 + stride[0] * (OH - 1) + 1:stride[0],
                     w0:w0 + stride[1] * (OW - 1) + 1:stride[1]]
            for g in range(groups):
                wg = w_ohwi[g * opg:(g + 1) * opg, kh, kw, :].astype(np.int64)  # [opg, CK]
                acc[:, g * opg:(g + 1) * opg] += np.einsum("nchw,oc->nohw",
                                                           win[:, g * CK:(g + 1) * CK], wg)
    if bias is not None:
        acc += bias.astype(np.int64)[None, :, None, None]
    r = requantize_channels(wrap32(acc), mults, shifts, 1) + out_off
    return np.clip(r, amin, amax)


def ref_dwconv(x, w_ihwo, bias, stride, pad, dil, cm, in_off, out_off, mults, shifts, amin,
               amax):
    """cortex_m::quantized_depthwise_conv2d: weight IHWO [1, kH, kW, C * cm]; output channel
    o reads input channel o // cm."""
    xe = np.repeat(x, cm, axis=1)  # channel o of xe is input channel o // cm
    O = w_ihwo.shape[3]
    w_ohwi = np.transpose(w_ihwo, (3, 1, 2, 0))  # [O, kH, kW, 1]: one input channel per group
    return ref_conv(xe, w_ohwi, bias, stride, pad, dil, in_off, out_off, mults, shifts, amin,
                    amax) if O == xe.shape[1] else None


def ref_linear(x, w, bias, ksum, in_off, f_off, out_off, mults, shifts, amax, amin):
    K = w.shape[1]
    xr = x.reshape(-1, K).astype(np.int64)
    if ksum is not None:
        acc = xr @ w.astype(np.int64).T + xr.sum(axis=1, keepdims=True) * f_off + ksum[None, :]
    else:
        acc = (xr + in_off) @ (w.astype(np.int64) + f_off).T
        if bias is not None:
            acc = acc + bias.astype(np.int64)[None, :]
    acc = wrap32(acc)
    if len(mults) == 1:
        r = requantize(acc, mults[0], shifts[0])
    else:
        r = requantize_channels(acc, mults, shifts, 1)
    return np.clip(r + out_off, amin, amax).reshape(x.shape[:-1] + (w.shape[0],))


def _pool_out(h, k, s, p, ceil):
    span = h + 2 * p - k
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= h + p:
        o -= 1
    return o


def _windows(x, k, s, p, ceil):
    """Yield (oh, ow, values in the window inside the input) for [N, C, H, W] x."""
    N, C, H, W = x.shape
    OH, OW = _pool_out(H, k[0], s[0], p[0], ceil), _pool_out(W, k[1], s[1], p[1], ceil)
    for oh in range(OH):
        for ow in range(OW):
            h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
            yield OH, OW, oh, ow, x[:, :, max(h0, 0):min(h0 + k[0], H), max(w0, 0):min(w0 + k[1], W)]


def ref_avgpool(x, k, s, p, ceil):
    out = None
    for OH, OW, oh, ow, win in _windows(x.astype(np.int64), k, s, p, ceil):
        if out is None:
            out = np.zeros(x.shape[:2] + (OH, OW), dtype=np.int64)
        cnt = win.shape[2] * win.shape[3]
        tot = win.sum(axis=(2, 3))
        if cnt == 0:
            continue
        mag = (np.abs(tot) + cnt // 2) // cnt  # nearest, halves away from zero
        out[:, :, oh, ow] = np.where(tot < 0, -mag, mag)
    return np.clip(out, -128, 127)


def ref_maxpool(x, k, s, p, ceil, amin, amax):
    out = None
    for OH, OW, oh, ow, win in _windows(x.astype(np.int64), k, s, p, ceil):
        if out is None:
            out = np.zeros(x.shape[:2] + (OH, OW), dtype=np.int64)
        out[:, :, oh, ow] = win.max(axis=(2, 3))
    return np.clip(out, amin, amax)


def ref_pad(x, order, pre, post, value):
    """pre/post: 4 entries over the dims in memory order (right-aligned)."""
    r = x.ndim
    widths = [(0, 0)] * r
    for j in range(r):
        widths[order[j]] = (pre[4 - r + j], post[4 - r + j])
    return np.pad(x.astype(np.int64), widths, constant_values=value)


def ref_add(a, za, ma, sa, b, zb, mb, sb, zo, mo, so, amin, amax):
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    u = requantize((a - za) * 2 ** 20, ma, sa)
    v = requantize((b - zb) * 2 ** 20, mb, sb)
    return np.clip(wrap32(requantize(wrap32(u + v), mo, so) + zo), amin, amax)


def ref_mul(a, za, b, zb, zo, mo, so):
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    return np.clip(requantize((a - za) * (b - zb), mo, so) + zo, -128, 127)


def ref_bmm(lhs, lz, rhs_t, rz, zo, mo, so):
    acc = np.einsum("bmk,bnk->bmn", lhs.astype(np.int64) + lz, rhs_t.astype(np.int64) + rz)
    return np.clip(requantize(wrap32(acc), mo, so) + zo, -128, 127)


def ref_tconv(x, w_ohwi, bias, stride, pad, opad, dil, in_off, out_off, mults, shifts, amin,
              amax):
    """Transposed convolution as the adjoint scatter of each input pixel."""
    N, C, H, W = x.shape
    O, KH, KW, _ = w_ohwi.shape
    OH = (H - 1) * stride[0] - 2 * pad[0] + dil[0] * (KH - 1) + opad[0] + 1
    OW = (W - 1) * stride[1] - 2 * pad[1] + dil[1] * (KW - 1) + opad[1] + 1
    big = np.zeros((N, O, (H - 1) * stride[0] + dil[0] * (KH - 1) + 1 + opad[0] + pad[0],
                    (W - 1) * stride[1] + dil[1] * (KW - 1) + 1 + opad[1] + pad[1]), np.int64)
    xo = x.astype(np.int64) + in_off
    for kh in range(KH):
        for kw in range(KW):
            contrib = np.einsum("nchw,oc->nohw", xo, w_ohwi[:, kh, kw, :].astype(np.int64))
            h0, w0 = kh * dil[0], kw * dil[1]
            big[:, :, h0:h0 + (H - 1) * stride[0] + 1:stride[0],
                w0:w0 + (W - 1) * stride[1] + 1:stride[1]] += contrib
    acc = big[:, :, pad[0]:pad[0] + OH, pad[1]:pad[1] + OW]
    if bias is not None:
        acc = acc + bias.astype(np.int64)[None, :, None, None]
    r = requantize_channels(wrap32(acc), mults, shifts, 1) + out_off
    return np.clip(r, amin, amax)


def ref_div(a, za, b, zb, zo, scale32, lo, hi):
    """Single precision as the kernel: q = f32(a - za) / f32(b - zb), round(q * scale) with
    halves away from zero."""
    num = (a.astype(np.int64) - za).astype(np.float32)
    den = (b.astype(np.int64) - zb).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(den != 0, num / np.where(den != 0, den, np.float32(1)), np.float32(0))
    p = (q.astype(np.float32) * np.float32(scale32)).astype(np.float32).astype(np.float64)
    r = np.sign(p) * np.floor(np.abs(p) + 0.5)
    return np.clip(np.clip(r, -2 ** 30, 2 ** 30).astype(np.int64) + zo, lo, hi)


# gemmlowp fixed point, as CMSIS-NN's softmax uses it (Python integers, one value at a time)

def _sat_rdhm(a, b):
    """Saturating rounding doubling high multiply: round(a * b / 2**31), halves away from
    zero; the one overflowing case saturates."""
    if a == b == -2 ** 31:
        return 2 ** 31 - 1
    t = a * b + (2 ** 30 if (a < 0) == (b < 0) else 1 - 2 ** 30)
    q = abs(t) >> 31
    return q if t >= 0 else -q


def _rdiv1(x, e):
    return int(rdiv(np.int64(x), e))


def _i32(v):
    return ((v + 2 ** 31) % 2 ** 32) - 2 ** 31


def _mul_pow2(v, e):
    lim = 2 ** (31 - e) - 1
    return 2 ** 31 - 1 if v > lim else -2 ** 31 if v < -lim else v * 2 ** e


def _exp_neg(a):
    """exp(a / 2**26) in Q0.31 for a <= 0: exp on [-1/4, 0) by a Taylor polynomial around
    -1/8, then one constant factor exp(-2**k / 4) per set bit k of the rest."""
    if a == 0:
        return 2 ** 31 - 1
    frac = (a % 2 ** 24) - 2 ** 24  # a mod 1/4, in [-1/4, 0)
    rest = frac - a
    x = frac * 32 + 2 ** 28  # (frac + 1/8) in Q0.31
    x2 = _sat_rdhm(x, x)
    x3 = _sat_rdhm(x2, x)
    x4_over_4 = _rdiv1(_sat_rdhm(x2, x2), 2)
    poly = _rdiv1(_sat_rdhm(x4_over_4 + x3, 715827883) + x2, 1)  # x2/2 + x3/6 + x4/24
    r = 1895147668 + _sat_rdhm(1895147668, x + poly)  # exp(-1/8) * (1 + x + ...)
    for k, c in enumerate([1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242]):
        if rest & (1 << (24 + k)):
            r = _sat_rdhm(r, c)
    return r


def _one_over_one_plus(x):
    """1 / (1 + x) for x in [0, 1) (Q0.31 in, Q0.31 out), three Newton-Raphson steps."""
    s = x + 2 ** 31 - 1
    half = (s + 1) // 2 if s >= 0 else -((-s + 1) // 2)
    r = 1515870810 + _sat_rdhm(half, -1010580540)  # 48/17 - 32/17 * d
    for _ in range(3):
        r += _mul_pow2(_sat_rdhm(r, 2 ** 29 - _sat_rdhm(half, r)), 2)
    return _mul_pow2(r, 1)


def ref_softmax(x, mult, shift, diff_min):
    flat = x.reshape(-1, x.shape[-1]).astype(np.int64)
    out = np.full(flat.shape, -128, dtype=np.int64)
    for r, row in enumerate(flat):
        mx = int(row.max())
        ex = [None if int(v) - mx < diff_min else
              _exp_neg(_sat_rdhm(_i32((int(v) - mx) * 2 ** shift), mult)) for v in row]
        total = sum(_rdiv1(e, 12) for e in ex if e is not None)
        head = 32 - total.bit_length()
        scale = _one_over_one_plus(total * 2 ** head - 2 ** 31)
        for c, e in enumerate(ex):
            if e is not None:
                out[r, c] = min(max(_rdiv1(_sat_rdhm(scale, e), 35 - head) - 128, -128), 127)
    return out.reshape(x.shape)


# ---- case helpers ---------------------------------------------------------------------------


def i8(shape, lo=-128, hi=127):
    return RNG.integers(lo, hi + 1, size=shape).astype(np.int64)


def T8(v):
    return torch.from_numpy(np.asarray(v, dtype=np.int64)).to(torch.int8)


def T32(v):
    return torch.from_numpy(np.asarray(v, dtype=np.int64)).to(torch.int32)


def mults_shifts(n, lo_shift=-12, hi_shift=2):
    m = RNG.integers(2 ** 30, 2 ** 31 - 1, size=n)
    s = RNG.integers(lo_shift, hi_shift + 1, size=n)
    return m, s


class Cases:
    def __init__(self, g):
        self.g = g

    def case(self, op, label, args, fail=False, rtol=0.0):
        self.g.W.case(CM + op, "cortex_m " + label, args, fail=fail, rtol=rtol)


# ---- conv2d ---------------------------------------------------------------------------------


def conv_args(g, x, w, bias, stride, pad, dil, in_off, out_off, m, s, amin, amax, expected,
              x_order=CL, out_order=CL, extra=()):
    out = g.Out(torch.int8, None if expected is None else T8(expected), order=out_order,
                shape=None if expected is not None else [x.shape[0], w.shape[0], 1, 1])
    n = 14
    return [g.In(T8(x), x_order), g.In(T8(w)), None if bias is None else g.In(T32(bias)),
            g.IntList(stride), g.IntList(pad), g.IntList(dil), g.Int(in_off), g.Int(out_off),
            g.In(T32(m)), g.In(T32(s)), g.Int(amin), g.Int(amax),
            g.In(torch.zeros(0, dtype=torch.int8)), out, g.Ref(n - 1)]


def gen_conv(c):
    g = c.g
    configs = [  # N, C, H, W, O, KH, KW, groups, stride, pad, dil
        (1, 3, 7, 5, 4, 3, 3, 1, (1, 1), (1, 1), (1, 1)),
        (2, 4, 6, 9, 6, 3, 2, 2, (2, 1), (1, 0), (1, 2)),
        (1, 1, 5, 4, 3, 1, 1, 1, (1, 1), (0, 0), (1, 1)),
        (1, 6, 8, 8, 6, 3, 3, 3, (2, 2), (2, 1), (2, 1)),
        (1, 5, 4, 3, 7, 4, 3, 1, (1, 2), (0, 1), (1, 1)),
    ]
    for i, (N, C, H, W, O, KH, KW, G, st, pd, dl) in enumerate(configs):
        x, w = i8((N, C, H, W)), i8((O, KH, KW, C // G))
        bias = RNG.integers(-20000, 20000, size=O)
        m, s = mults_shifts(O, -10, -4)
        for in_off, out_off, amin, amax in [(128, -128, -128, 127), (-127, 127, -128, 127),
                                             (5, -3, -60, 90)]:
            e = ref_conv(x, w, bias, st, pd, dl, in_off, out_off, m, s, amin, amax)
            c.case("quantized_conv2d.out", "conv2d %d offsets %d %d act %d %d" %
                   (i, in_off, out_off, amin, amax),
                   conv_args(g, x, w, bias, st, pd, dl, in_off, out_off, m, s, amin, amax, e))
    # no bias, contiguous (NCHW) tensors: the result does not depend on the dim order
    x, w = i8((1, 2, 5, 5)), i8((3, 3, 3, 2))
    m, s = mults_shifts(3, -9, -6)
    e = ref_conv(x, w, None, (1, 1), (1, 1), (1, 1), 0, 0, m, s, -128, 127)
    c.case("quantized_conv2d.out", "conv2d no bias nchw",
           conv_args(g, x, w, None, (1, 1), (1, 1), (1, 1), 0, 0, m, s, -128, 127, e,
                     x_order=[0, 1, 2, 3], out_order=[0, 1, 2, 3]))
    # positive shifts (left shift before the multiply) and wrapping of the shifted value
    x, w = i8((1, 2, 3, 3), -3, 3), i8((2, 1, 1, 2), -2, 2)
    bias = np.array([2 ** 29 + 12345, -(2 ** 28) - 777])
    m, s = np.array([2 ** 30 + 3, 2 ** 31 - 1]), np.array([3, 30])
    e = ref_conv(x, w, bias, (1, 1), (0, 0), (1, 1), 0, 0, m, s, -128, 127)
    c.case("quantized_conv2d.out", "conv2d left shifts wrap",
           conv_args(g, x, w, bias, (1, 1), (0, 0), (1, 1), 0, 0, m, s, -128, 127, e))
    # refusals
    x, w = i8((1, 4, 5, 5)), i8((4, 3, 3, 4))
    m, s = mults_shifts(4, -8, -6)
    bad = [
        ("wrong multiplier count", dict(m=m[:3], s=s[:3])),
        ("shift out of range", dict(s=np.array([-8, 31, -7, -7]))),
        ("multiplier int32 min", dict(m=np.array([-(2 ** 31), 2 ** 30, 2 ** 30, 2 ** 30]))),
        ("bad input offset", dict(in_off=129)),
        ("activation min above max", dict(amin=10, amax=5)),
        ("groups do not divide", dict(w=i8((4, 3, 3, 3)))),
        ("bias count", dict(bias=np.zeros(3, dtype=np.int64))),
        ("padding list length", dict(pd=(1,))),
    ]
    for label, kw in bad:
        a = dict(x=x, w=w, bias=np.zeros(4, dtype=np.int64), st=(1, 1), pd=(1, 1), dl=(1, 1),
                 in_off=0, out_off=0, m=m, s=s, amin=-128, amax=127)
        a.update(kw)
        c.case("quantized_conv2d.out", "conv2d refuses " + label,
               conv_args(g, a["x"], a["w"], a["bias"], a["st"], a["pd"], a["dl"], a["in_off"],
                         a["out_off"], a["m"], a["s"], a["amin"], a["amax"], None), fail=True)
    # float input
    args = conv_args(g, x, w, None, (1, 1), (1, 1), (1, 1), 0, 0, m, s, -128, 127, None)
    args[0] = g.In(torch.zeros(1, 4, 5, 5), CL)
    c.case("quantized_conv2d.out", "conv2d refuses float input", args, fail=True)


def dw_args(g, x, w, bias, st, pd, dl, cm, in_off, out_off, m, s, amin, amax, expected):
    out = g.Out(torch.int8, None if expected is None else T8(expected), order=CL,
                shape=None if expected is not None else [x.shape[0], w.shape[3], 1, 1])
    return [g.In(T8(x), CL), g.In(T8(w)), None if bias is None else g.In(T32(bias)),
            g.IntList(st), g.IntList(pd), g.IntList(dl), g.Int(cm), g.Int(in_off),
            g.Int(out_off), g.In(T32(m)), g.In(T32(s)), g.Int(amin), g.Int(amax),
            g.In(torch.zeros(0, dtype=torch.int8)), out, g.Ref(14)]


def gen_dwconv(c):
    g = c.g
    configs = [  # N, C, H, W, cm, KH, KW, stride, pad, dil
        (1, 4, 7, 6, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
        (1, 1, 9, 5, 8, 4, 3, (2, 2), (1, 1), (1, 1)),  # KWS's first layer: one channel
        (2, 3, 6, 7, 2, 3, 2, (1, 2), (0, 1), (2, 1)),
        (1, 5, 5, 5, 1, 5, 5, (1, 1), (2, 2), (1, 1)),
    ]
    for i, (N, C, H, W, cmul, KH, KW, st, pd, dl) in enumerate(configs):
        x, w = i8((N, C, H, W)), i8((1, KH, KW, C * cmul))
        O = C * cmul
        bias = RNG.integers(-5000, 5000, size=O)
        m, s = mults_shifts(O, -9, -3)
        for in_off, out_off, amin, amax in [(128, -128, -128, 127), (-100, 20, -30, 127)]:
            e = ref_dwconv(x, w, bias, st, pd, dl, cmul, in_off, out_off, m, s, amin, amax)
            c.case("quantized_depthwise_conv2d.out", "dwconv %d offsets %d %d" %
                   (i, in_off, out_off),
                   dw_args(g, x, w, bias, st, pd, dl, cmul, in_off, out_off, m, s, amin, amax, e))
    x, w = i8((1, 3, 4, 4)), i8((1, 3, 3, 6))
    m, s = mults_shifts(6)
    for label, kw in [("depth multiplier mismatch", dict(cm=3)),
                      ("per-channel count", dict(m=m[:5], s=s[:5])),
                      ("weight dim 0", dict(w=i8((2, 3, 3, 3)))),
                      ("shift below -31", dict(s=np.full(6, -32)))]:
        a = dict(w=w, cm=2, m=m, s=s)
        a.update(kw)
        c.case("quantized_depthwise_conv2d.out", "dwconv refuses " + label,
               dw_args(g, x, a["w"], None, (1, 1), (1, 1), (1, 1), a["cm"], 0, 0, a["m"], a["s"],
                       -128, 127, None), fail=True)


# ---- linear ---------------------------------------------------------------------------------


def lin_args(g, x, w, bias, ksum, in_off, f_off, out_off, m, s, amax, amin, expected,
             out_shape=None):
    if expected is not None:
        out = g.Out(torch.int8, T8(expected))
    else:
        out = g.Out(torch.int8, None, shape=out_shape or list(x.shape[:-1]) + [w.shape[0]])
    return [g.In(T8(x)), g.In(T8(w)), None if bias is None else g.In(T32(bias)),
            None if ksum is None else g.In(T32(ksum)), g.Int(in_off), g.Int(f_off),
            g.Int(out_off), g.IntList(m), g.IntList(s), g.Int(amax), g.Int(amin), out, g.Ref(11)]


def gen_linear(c):
    g = c.g
    for i, (shape, N) in enumerate([((1, 64), 12), ((3, 17), 5), ((2, 3, 9), 4), ((1, 1), 1)]):
        K = shape[-1]
        x, w = i8(shape), i8((N, K))
        bias = RNG.integers(-30000, 30000, size=N)
        m, s = mults_shifts(1, -11, -6)
        for in_off, f_off, out_off, amin, amax in [(128, 0, 23, -128, 127),
                                                   (-127, 3, -128, -100, 100)]:
            e = ref_linear(x, w, bias, None, in_off, f_off, out_off, m, s, amax, amin)
            c.case("quantized_linear.out", "linear %d offsets %d %d %d" % (i, in_off, f_off, out_off),
                   lin_args(g, x, w, bias, None, in_off, f_off, out_off, m, s, amax, amin, e))
        # per channel, no bias
        m, s = mults_shifts(N, -11, -6)
        e = ref_linear(x, w, None, None, 7, 0, -5, m, s, 127, -128)
        c.case("quantized_linear.out", "linear %d per channel" % i,
               lin_args(g, x, w, None, None, 7, 0, -5, m, s, 127, -128, e))
        # kernel_sum (the MVE contract)
        ksum = RNG.integers(-40000, 40000, size=N)
        e = ref_linear(x, w, None, ksum, 0, 2, 1, m[:1], s[:1], 127, -128)
        c.case("quantized_linear.out", "linear %d kernel_sum" % i,
               lin_args(g, x, w, None, ksum, 0, 2, 1, m[:1], s[:1], 127, -128, e))
    # The requantization itself, fed straight from the bias (input 0, offsets 0: acc = bias):
    # ties in both directions, every shift sign, wrap of the left-shifted value.
    accs = [0, 1, -1, 2, -2, 3, -3, 5, -5, 7, -7, 2 ** 31 - 1, -(2 ** 31), 12345, -12345,
            2 ** 20 + 1, -(2 ** 20) - 1, 3 * 2 ** 27, -3 * 2 ** 27, 6, -6, 10, -10, 1000001]
    for m_, s_ in [(2 ** 30, 0), (2 ** 30, -1), (2 ** 30, -2), (2 ** 30 + 1, -3),
                   (2 ** 31 - 1, -31), (2 ** 31 - 1, 0), (1, 30), (2 ** 30, 1), (2 ** 30, 4),
                   (2 ** 30 + 2 ** 29, 2), (-(2 ** 31) + 1, -1), (-(2 ** 30), -2),
                   (1518500250, -7), (2 ** 30, 30)]:
        N = len(accs)
        x, w = np.zeros((1, 1), dtype=np.int64), np.zeros((N, 1), dtype=np.int64)
        bias = np.array(accs)
        e = ref_linear(x, w, bias, None, 0, 0, 0, [m_], [s_], 127, -128)
        c.case("quantized_linear.out", "requantize mult %d shift %d" % (m_, s_),
               lin_args(g, x, w, bias, None, 0, 0, 0, [m_], [s_], 127, -128, e))
    # int32 wrap of the accumulator: K large with extreme values
    K = 70000
    x, w = np.full((1, K), 127), np.full((2, K), 127)
    w[1] = -128
    e = ref_linear(x, w, np.array([2 ** 31 - 1000, 0]), None, 128, 0, 0, [2 ** 30], [-20], 127,
                   -128)
    c.case("quantized_linear.out", "linear accumulator wraps",
           lin_args(g, x, w, np.array([2 ** 31 - 1000, 0]), None, 128, 0, 0, [2 ** 30], [-20],
                    127, -128, e))
    x, w = i8((2, 8)), i8((3, 8))
    for label, kw in [("feature mismatch", dict(w=i8((3, 7)))),
                      ("multiplier count", dict(m=[2 ** 30, 2 ** 30])),
                      ("shift count", dict(s=[-3, -3, -3, -3])),
                      ("shift 31", dict(s=[31])),
                      ("output offset", dict(out_off=128)),
                      ("activation order", dict(amax=-128, amin=127)),
                      ("bias dtype", dict(bias_dt=True))]:
        a = dict(w=w, m=[2 ** 30], s=[-3], out_off=0, amax=127, amin=-128)
        a.update(kw)
        args = lin_args(g, x, a["w"], None, None, 0, 0, a["out_off"], a["m"], a["s"], a["amax"],
                        a["amin"], None, out_shape=[2, 3])
        if kw.get("bias_dt"):
            args[2] = g.In(torch.zeros(3, dtype=torch.int64))
        c.case("quantized_linear.out", "linear refuses " + label, args, fail=True)


# ---- pooling, pad, quantize -----------------------------------------------------------------


def gen_pool(c):
    g = c.g
    for i, (shape, k, s, p, ceil) in enumerate([((1, 64, 25, 5), (25, 5), (25, 5), (0, 0), False),
                                                ((1, 3, 7, 6), (3, 3), (2, 2), (1, 1), False),
                                                ((2, 2, 8, 5), (2, 3), (2, 2), (0, 1), True),
                                                ((1, 4, 5, 5), (3, 2), (1, 1), (1, 1), False)]):
        x = i8(shape)
        e = ref_avgpool(x, k, s, p, ceil)
        c.case("quantized_avg_pool2d.out", "avgpool %d" % i,
               [g.In(T8(x), CL), g.IntList(k), g.IntList(s), g.IntList(p), g.Bool(ceil),
                g.Int(-128), g.Int(2077939072), g.Int(-4), g.In(torch.zeros(16, dtype=torch.int8)),
                g.Out(torch.int8, T8(e), order=CL), g.Ref(9)])
        for amin, amax in [(-128, 127), (-20, 40)]:
            e = ref_maxpool(x, k, s, p, ceil, amin, amax)
            c.case("quantized_max_pool2d.out", "maxpool %d act %d %d" % (i, amin, amax),
                   [g.In(T8(x), CL), g.IntList(k), g.IntList(s), g.IntList(p), g.IntList([1, 1]),
                    g.Bool(ceil), g.Int(3), g.Int(3), g.Int(amin), g.Int(amax),
                    g.Out(torch.int8, T8(e), order=CL), g.Ref(10)])
    # averages that are exact halves, both signs (round half away from zero)
    x = np.array([[[[1, 2], [-1, -2]], [[3, 0], [-3, 0]]]]).reshape(1, 2, 2, 2)
    e = ref_avgpool(x, (1, 2), (1, 2), (0, 0), False)
    c.case("quantized_avg_pool2d.out", "avgpool ties",
           [g.In(T8(x), CL), g.IntList([1, 2]), g.IntList([1, 2]), g.IntList([0, 0]),
            g.Bool(False), g.Int(0), g.Int(2 ** 30), g.Int(0), g.In(torch.zeros(0, dtype=torch.int8)),
            g.Out(torch.int8, T8(e), order=CL), g.Ref(9)])
    x = i8((1, 2, 4, 4))
    c.case("quantized_avg_pool2d.out", "avgpool refuses padding over half the kernel",
           [g.In(T8(x), CL), g.IntList([2, 2]), g.IntList([1, 1]), g.IntList([2, 0]),
            g.Bool(False), g.Int(0), g.Int(2 ** 30), g.Int(0), g.In(torch.zeros(0, dtype=torch.int8)),
            g.Out(torch.int8, None, shape=[1, 2, 5, 3], order=CL), g.Ref(9)], fail=True)
    c.case("quantized_avg_pool2d.out", "avgpool refuses bad shift",
           [g.In(T8(x), CL), g.IntList([2, 2]), g.IntList([1, 1]), g.IntList([0, 0]),
            g.Bool(False), g.Int(0), g.Int(2 ** 30), g.Int(40), g.In(torch.zeros(0, dtype=torch.int8)),
            g.Out(torch.int8, None, shape=[1, 2, 3, 3], order=CL), g.Ref(9)], fail=True)
    c.case("quantized_max_pool2d.out", "maxpool refuses zero point mismatch",
           [g.In(T8(x), CL), g.IntList([2, 2]), g.IntList([1, 1]), g.IntList([0, 0]),
            g.IntList([1, 1]), g.Bool(False), g.Int(3), g.Int(4), g.Int(-128), g.Int(127),
            g.Out(torch.int8, None, shape=[1, 2, 3, 3], order=CL), g.Ref(10)], fail=True)
    c.case("quantized_max_pool2d.out", "maxpool refuses dilation",
           [g.In(T8(x), CL), g.IntList([2, 2]), g.IntList([1, 1]), g.IntList([0, 0]),
            g.IntList([2, 1]), g.Bool(False), g.Int(0), g.Int(0), g.Int(-128), g.Int(127),
            g.Out(torch.int8, None, shape=[1, 2, 2, 3], order=CL), g.Ref(10)], fail=True)


def gen_pad(c):
    g = c.g
    for i, (shape, order, pre, post, v) in enumerate([
            ((1, 64, 25, 5), CL, [0, 0, 0, 0], [0, 0, 0, 0], -128),
            ((1, 3, 4, 5), CL, [0, 1, 2, 0], [0, 2, 0, 1], 7),  # N, H, W, C in memory
            ((2, 3, 4, 5), [0, 1, 2, 3], [1, 0, 1, 2], [0, 1, 0, 1], -3),
            ((4, 6), [0, 1], [0, 0, 1, 2], [0, 0, 3, 0], 127),
            ((5,), [0], [0, 0, 0, 2], [0, 0, 0, 1], -1)]):
        x = i8(shape)
        e = ref_pad(x, order, pre, post, v)
        c.case("pad.out", "pad %d" % i,
               [g.In(T8(x), order), g.IntList(pre), g.IntList(post), g.Int(v),
                g.Out(torch.int8, T8(e), order=order), g.Ref(4)])
    x = i8((4, 6))
    c.case("pad.out", "pad refuses padding a missing dim",
           [g.In(T8(x)), g.IntList([1, 0, 0, 0]), g.IntList([0, 0, 0, 0]), g.Int(0),
            g.Out(torch.int8, None, shape=[4, 6]), g.Ref(4)], fail=True)
    c.case("pad.out", "pad refuses pad value",
           [g.In(T8(x)), g.IntList([0, 0, 0, 0]), g.IntList([0, 0, 0, 0]), g.Int(200),
            g.Out(torch.int8, None, shape=[4, 6]), g.Ref(4)], fail=True)
    c.case("pad.out", "pad refuses int32",
           [g.In(T32(x)), g.IntList([0, 0, 0, 0]), g.IntList([0, 0, 0, 0]), g.Int(0),
            g.Out(torch.int8, None, shape=[4, 6]), g.Ref(4)], fail=True)


def gen_quant(c):
    g = c.g
    x = torch.from_numpy(RNG.standard_normal((1, 1, 49, 10)).astype(np.float32) * 40)
    xs = x.numpy().copy()
    xs.reshape(-1)[:6] = [0.5 * 2.822781801223755, -0.5 * 2.822781801223755, 1e9, -1e9, 0.0, -0.0]
    x = torch.from_numpy(xs)
    for scale, zp in [(2.822781801223755, 68), (0.05, -128), (1.0, 0)]:
        e = ref_quantize(x.numpy(), scale, zp, -128, 127)
        c.case("quantize_per_tensor.out", "quantize scale %g zp %d" % (scale, zp),
               [g.In(x, [0, 2, 1, 3]), g.Dbl(scale), g.Int(zp), g.Int(-128), g.Int(127),
                g.Int(1), g.Out(torch.int8, T8(e), order=[0, 2, 1, 3]), g.Ref(6)])
        q = i8((3, 12))
        f = ref_dequantize(q, scale, zp)
        c.case("dequantize_per_tensor.out", "dequantize scale %g zp %d" % (scale, zp),
               [g.In(T8(q)), g.Dbl(scale), g.Int(zp), g.Int(-128), g.Int(127), g.Int(1),
                g.Out(torch.float32, torch.from_numpy(f)), g.Ref(6)], rtol=g.EXACT_RTOL)
    c.case("quantize_per_tensor.out", "quantize refuses double input",
           [g.In(x.double()), g.Dbl(0.1), g.Int(0), g.Int(-128), g.Int(127), g.Int(1),
            g.Out(torch.int8, None, shape=list(x.shape)), g.Ref(6)], fail=True)
    c.case("quantize_per_tensor.out", "quantize refuses uint8 dtype",
           [g.In(x), g.Dbl(0.1), g.Int(0), g.Int(0), g.Int(255), g.Int(0),
            g.Out(torch.uint8, None, shape=list(x.shape)), g.Ref(6)], fail=True)
    c.case("quantize_per_tensor.out", "quantize refuses zero point out of range",
           [g.In(x), g.Dbl(0.1), g.Int(300), g.Int(-128), g.Int(127), g.Int(1),
            g.Out(torch.int8, None, shape=list(x.shape)), g.Ref(6)], fail=True)
    c.case("dequantize_per_tensor.out", "dequantize refuses int32 input",
           [g.In(T32(i8((2, 2)))), g.Dbl(0.1), g.Int(0), g.Int(-128), g.Int(127), g.Int(1),
            g.Out(torch.float32, None, shape=[2, 2]), g.Ref(6)], fail=True)


def gen_elementwise(c):
    g = c.g
    shapes = [((2, 3, 4, 5), (2, 3, 4, 5), CL, CL), ((1, 8, 3, 3), (1, 8, 1, 1), CL, CL),
              ((7,), (7,), [0], [0]), ((4, 1, 6), (1, 5, 6), [0, 1, 2], [0, 1, 2]),
              ((3, 5), (5,), [0, 1], [0])]
    for i, (sa_, sb_, oa, ob) in enumerate(shapes):
        a, b = i8(sa_), i8(sb_)
        ms = RNG.integers(2 ** 30, 2 ** 31 - 1, size=3)
        for za, zb, zo, sh, amin, amax in [(-128, 127, 5, (-2, -3, -19), -128, 127),
                                           (10, -7, -128, (0, -1, -20), -100, 60)]:
            e = ref_add(a, za, ms[0], sh[0], b, zb, ms[1], sh[1], zo, ms[2], sh[2], amin, amax)
            out_order = oa if len(e.shape) == len(oa) else list(range(e.ndim))
            c.case("quantized_add.out", "add %d zp %d %d %d" % (i, za, zb, zo),
                   [g.In(T8(a), oa), g.Int(za), g.Int(ms[0]), g.Int(sh[0]), g.In(T8(b), ob),
                    g.Int(zb), g.Int(ms[1]), g.Int(sh[1]), g.Int(zo), g.Int(ms[2]), g.Int(sh[2]),
                    g.Int(amin), g.Int(amax), g.Out(torch.int8, T8(e), order=out_order), g.Ref(13)])
        for za, zb, zo, mo, so in [(0, 0, 0, 2 ** 30, -6), (-128, 127, -3, 1518500250, -9),
                                   (5, -5, 127, 2 ** 31 - 1, 0)]:
            e = ref_mul(a, za, b, zb, zo, mo, so)
            out_order = oa if len(e.shape) == len(oa) else list(range(e.ndim))
            c.case("quantized_mul.out", "mul %d zp %d %d %d" % (i, za, zb, zo),
                   [g.In(T8(a), oa), g.Int(za), g.In(T8(b), ob), g.Int(zb), g.Int(zo), g.Int(mo),
                    g.Int(so), g.Out(torch.int8, T8(e), order=out_order), g.Ref(7)])
        for op, fn in [("maximum.out", np.maximum), ("minimum.out", np.minimum)]:
            e = fn(*np.broadcast_arrays(a, b))
            out_order = oa if len(e.shape) == len(oa) else list(range(e.ndim))
            c.case(op, "%s %d" % (op, i), [g.In(T8(a), oa), g.In(T8(b), ob),
                                          g.Out(torch.int8, T8(e), order=out_order), g.Ref(2)])
    a, b = i8((2, 3)), i8((3, 2))
    c.case("quantized_add.out", "add refuses mismatched shapes",
           [g.In(T8(a)), g.Int(0), g.Int(2 ** 30), g.Int(-1), g.In(T8(b)), g.Int(0),
            g.Int(2 ** 30), g.Int(-1), g.Int(0), g.Int(2 ** 30), g.Int(-20), g.Int(-128),
            g.Int(127), g.Out(torch.int8, None, shape=[2, 3]), g.Ref(13)], fail=True)
    c.case("quantized_add.out", "add refuses shift 31",
           [g.In(T8(a)), g.Int(0), g.Int(2 ** 30), g.Int(31), g.In(T8(a)), g.Int(0),
            g.Int(2 ** 30), g.Int(-1), g.Int(0), g.Int(2 ** 30), g.Int(-20), g.Int(-128),
            g.Int(127), g.Out(torch.int8, None, shape=[2, 3]), g.Ref(13)], fail=True)
    c.case("quantized_mul.out", "mul refuses zero point 128",
           [g.In(T8(a)), g.Int(128), g.In(T8(a)), g.Int(0), g.Int(0), g.Int(2 ** 30),
            g.Int(-3), g.Out(torch.int8, None, shape=[2, 3]), g.Ref(7)], fail=True)
    c.case("maximum.out", "maximum refuses int32",
           [g.In(T32(a)), g.In(T32(a)), g.Out(torch.int32, None, shape=[2, 3]), g.Ref(2)],
           fail=True)
    c.case("minimum.out", "minimum refuses mismatched shapes",
           [g.In(T8(a)), g.In(T8(b)), g.Out(torch.int8, None, shape=[2, 3]), g.Ref(2)], fail=True)


def gen_transpose_activation(c):
    g = c.g
    for i, (shape, perm, order) in enumerate([((2, 3, 4, 5), [0, 2, 3, 1], [0, 1, 2, 3]),
                                              ((2, 3, 4, 5), [3, 1, 0, 2], CL),
                                              ((6, 7), [1, 0], [0, 1]), ((3, 1, 4), [2, 0, 1], [0, 1, 2]),
                                              ((5,), [0], [0])]):
        x = i8(shape)
        e = np.transpose(x, perm)
        c.case("transpose.out", "transpose %d" % i,
               [g.In(T8(x), order), g.IntList(perm), g.Out(torch.int8, T8(e)), g.Ref(2)])
    x = i8((2, 3))
    c.case("transpose.out", "transpose refuses repeated dim",
           [g.In(T8(x)), g.IntList([0, 0]), g.Out(torch.int8, None, shape=[2, 2]), g.Ref(2)],
           fail=True)
    c.case("transpose.out", "transpose refuses short perm",
           [g.In(T8(x)), g.IntList([0]), g.Out(torch.int8, None, shape=[2, 3]), g.Ref(2)],
           fail=True)
    lut = i8((256,))
    for i, (shape, order) in enumerate([((1, 4, 5, 6), CL), ((17,), [0])]):
        x = i8(shape)
        x.reshape(-1)[:2] = [-128, 127]
        e = lut[x + 128]
        c.case("quantized_activation.out", "activation %d" % i,
               [g.In(T8(x), order), g.In(T8(lut)), g.Out(torch.int8, T8(e), order=order), g.Ref(2)])
    c.case("quantized_activation.out", "activation refuses a short lut",
           [g.In(T8(i8((3,)))), g.In(T8(lut[:255])), g.Out(torch.int8, None, shape=[3]), g.Ref(2)],
           fail=True)


def gen_bmm(c):
    g = c.g
    for i, (B, M, K, N) in enumerate([(1, 4, 8, 3), (3, 5, 7, 6), (2, 1, 33, 1)]):
        lhs, rhs = i8((B, M, K)), i8((B, N, K))
        for lz, rz, zo, mo, so in [(128, 0, -128, 2 ** 30 + 5, -8), (-3, 7, 20, 1518500250, -10)]:
            e = ref_bmm(lhs, lz, rhs, rz, zo, mo, so)
            c.case("quantized_batch_matmul.out", "bmm %d offsets %d %d" % (i, lz, rz),
                   [g.In(T8(lhs)), g.Int(lz), g.In(T8(rhs)), g.Int(rz), g.Int(zo), g.Int(mo),
                    g.Int(so), g.In(torch.zeros(0, dtype=torch.int8)), g.Out(torch.int8, T8(e)),
                    g.Ref(8)])
    lhs, rhs = i8((2, 3, 4)), i8((2, 5, 3))
    c.case("quantized_batch_matmul.out", "bmm refuses inner mismatch",
           [g.In(T8(lhs)), g.Int(0), g.In(T8(rhs)), g.Int(0), g.Int(0), g.Int(2 ** 30),
            g.Int(-8), g.In(torch.zeros(0, dtype=torch.int8)),
            g.Out(torch.int8, None, shape=[2, 3, 5]), g.Ref(8)], fail=True)


def gen_softmax(c):
    g = c.g
    for i, (shape, mult, shift, diff_min) in enumerate([((2, 10), 1077952576, 23, -248),
                                                        ((1, 3, 7), 1717986918, 25, -90),
                                                        ((4, 1), 2 ** 30, 20, -128),
                                                        ((1, 511), 1431655765, 26, -64),
                                                        ((3, 33), 2147483647, 30, -255)]):
        x = i8(shape)
        x.reshape(-1)[:3] = [127, 127, -128]  # ties for the maximum and the far end
        e = ref_softmax(x, mult, shift, diff_min)
        c.case("softmax.out", "softmax %d" % i,
               [g.In(T8(x)), g.Int(-1), g.Int(7), g.Int(-128), g.Int(mult), g.Int(shift),
                g.Int(diff_min), g.Out(torch.int8, T8(e)), g.Ref(7)])
    x = i8((2, 10))
    for label, dim, ozp, shift in [("not the last dim", 0, -128, 20), ("output zero point", 1, 0, 20),
                                   ("negative shift", 1, -128, -1)]:
        c.case("softmax.out", "softmax refuses " + label,
               [g.In(T8(x)), g.Int(dim), g.Int(0), g.Int(ozp), g.Int(2 ** 30), g.Int(shift),
                g.Int(-100), g.Out(torch.int8, None, shape=[2, 10]), g.Ref(7)], fail=True)
    x = i8((1, 512))
    c.case("softmax.out", "softmax refuses rows over 511",
           [g.In(T8(x)), g.Int(-1), g.Int(0), g.Int(-128), g.Int(2 ** 30), g.Int(20),
            g.Int(-100), g.Out(torch.int8, None, shape=[1, 512]), g.Ref(7)], fail=True)


def gen_tconv(c):
    g = c.g
    for i, (N, C, H, W, O, KH, KW, st, pd, op, dl) in enumerate([
            (1, 3, 4, 5, 2, 3, 3, (2, 2), (1, 1), (1, 0), (1, 1)),
            (2, 2, 3, 3, 4, 2, 2, (1, 1), (0, 0), (0, 0), (1, 1)),
            (1, 4, 3, 2, 3, 3, 2, (3, 2), (1, 0), (2, 1), (1, 2))]):
        x, w = i8((N, C, H, W)), i8((O, KH, KW, C))
        bias = RNG.integers(-3000, 3000, size=O)
        m, s = mults_shifts(O, -9, -5)
        e = ref_tconv(x, w, bias, st, pd, op, dl, 17, -4, m, s, -128, 127)
        args = [g.In(T8(x), CL), g.In(T8(w)), g.In(T32(bias)), g.IntList(st), g.IntList(pd),
                g.IntList(op), g.IntList(dl), g.Int(17), g.Int(-4), g.In(T32(m)), g.In(T32(s)),
                g.Int(-128), g.Int(127), g.In(torch.zeros(0, dtype=torch.int8)),
                g.In(torch.zeros(0, dtype=torch.int8)), g.Out(torch.int8, T8(e), order=CL),
                g.Ref(15)]
        c.case("quantized_transpose_conv2d.out", "transpose conv %d" % i, args)
    x, w = i8((1, 3, 4, 4)), i8((2, 3, 3, 2))
    m, s = mults_shifts(2)
    c.case("quantized_transpose_conv2d.out", "transpose conv refuses channel mismatch",
           [g.In(T8(x), CL), g.In(T8(w)), None, g.IntList([1, 1]), g.IntList([0, 0]),
            g.IntList([0, 0]), g.IntList([1, 1]), g.Int(0), g.Int(0), g.In(T32(m)), g.In(T32(s)),
            g.Int(-128), g.Int(127), g.In(torch.zeros(0, dtype=torch.int8)),
            g.In(torch.zeros(0, dtype=torch.int8)), g.Out(torch.int8, None, shape=[1, 2, 6, 6]),
            g.Ref(15)], fail=True)


def gen_div(c):
    g = c.g
    for dt, lo, hi in [(torch.int8, -128, 127), (torch.int16, -32768, 32767)]:
        a = RNG.integers(lo, hi + 1, size=(3, 4, 5))
        b = RNG.integers(lo, hi + 1, size=(3, 4, 5))
        b.reshape(-1)[:4] = [3, 3, -5, -5]  # b == zb: quotient 0
        a.reshape(-1)[:4] = [6, 8, 10, 4]  # exact halves: (6-1)/(3-3)... and ties below
        for za, zb, zo, scale in [(1, 3, -2, 2.5), (0, -5, 7, 0.75), (-128, 127, 0, 0.001953125)]:
            e = ref_div(a, za, b, zb, zo, np.float32(scale), lo, hi)
            c.case("quantized_div.out", "div %s zp %d %d scale %g" % (dt, za, zb, scale),
                   [g.In(torch.from_numpy(a).to(dt)), g.Int(za), g.In(torch.from_numpy(b).to(dt)),
                    g.Int(zb), g.Int(zo), g.Dbl(scale),
                    g.Out(dt, torch.from_numpy(e).to(dt)), g.Ref(6)])
        # the multiplier / shift form: scale = ldexp(f32(m) / 2^31, s)
        for m, sh in [(1610612736, 1), (1431655765, -3), (2 ** 31 - 1, 0)]:
            sc = np.float32(np.float32(m) / np.float32(2 ** 31)) * np.float32(2.0 ** sh)
            e = ref_div(a, 2, b, -1, 3, sc, lo, hi)
            c.case("quantized_div.out", "div %s multiplier %d shift %d" % (dt, m, sh),
                   [g.In(torch.from_numpy(a).to(dt)), g.Int(2), g.In(torch.from_numpy(b).to(dt)),
                    g.Int(-1), g.Int(3), g.Int(m), g.Int(sh),
                    g.Out(dt, torch.from_numpy(e).to(dt)), g.Ref(7)])
    # ties: 5 / 2 * 1 = 2.5 -> 3, -5 / 2 = -2.5 -> -3
    a, b = np.array([5, -5, 7, -7, 1, -1]), np.array([2, 2, 2, 2, 2, 2])
    e = ref_div(a, 0, b, 0, 0, np.float32(1.0), -128, 127)
    assert e.tolist() == [3, -3, 4, -4, 1, -1], e
    c.case("quantized_div.out", "div ties away from zero",
           [g.In(T8(a)), g.Int(0), g.In(T8(b)), g.Int(0), g.Int(0), g.Dbl(1.0),
            g.Out(torch.int8, T8(e)), g.Ref(6)])
    a = i8((2, 3))
    c.case("quantized_div.out", "div refuses broadcasting",
           [g.In(T8(a)), g.Int(0), g.In(T8(i8((1, 3)))), g.Int(0), g.Int(0), g.Dbl(1.0),
            g.Out(torch.int8, None, shape=[2, 3]), g.Ref(6)], fail=True)
    c.case("quantized_div.out", "div refuses int32",
           [g.In(T32(a)), g.Int(0), g.In(T32(a)), g.Int(0), g.Int(0), g.Dbl(1.0),
            g.Out(torch.int32, None, shape=[2, 3]), g.Ref(6)], fail=True)
    c.case("quantized_div.out", "div refuses a zero scale",
           [g.In(T8(a)), g.Int(0), g.In(T8(a)), g.Int(0), g.Int(0), g.Dbl(0.0),
            g.Out(torch.int8, None, shape=[2, 3]), g.Ref(6)], fail=True)


def gen_nhwc(c):
    """The *_nhwc operators: [N, H, W, C] tensors (contiguous), the NCHW results permuted."""
    g = c.g
    nhwc = lambda a: np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))
    z8 = lambda: g.In(torch.zeros(0, dtype=torch.int8))
    x, w = i8((1, 6, 7, 5)), i8((4, 3, 2, 3))
    bias = RNG.integers(-9000, 9000, size=4)
    m, s = mults_shifts(4, -9, -5)
    e = ref_conv(x, w, bias, (2, 1), (1, 1), (1, 2), 3, -7, m, s, -120, 110)
    c.case("quantized_conv2d_nhwc.out", "conv2d nhwc",
           [g.In(T8(nhwc(x))), g.In(T8(w)), g.In(T32(bias)), g.IntList([2, 1]), g.IntList([1, 1]),
            g.IntList([1, 2]), g.Int(3), g.Int(-7), g.In(T32(m)), g.In(T32(s)), g.Int(-120),
            g.Int(110), z8(), g.Out(torch.int8, T8(nhwc(e))), g.Ref(13)])
    x, w = i8((2, 3, 6, 6)), i8((1, 3, 3, 6))
    m, s = mults_shifts(6, -9, -4)
    e = ref_dwconv(x, w, None, (1, 2), (1, 0), (1, 1), 2, -1, 9, m, s, -128, 127)
    c.case("quantized_depthwise_conv2d_nhwc.out", "dwconv nhwc",
           [g.In(T8(nhwc(x))), g.In(T8(w)), None, g.IntList([1, 2]), g.IntList([1, 0]),
            g.IntList([1, 1]), g.Int(2), g.Int(-1), g.Int(9), g.In(T32(m)), g.In(T32(s)),
            g.Int(-128), g.Int(127), z8(), g.Out(torch.int8, T8(nhwc(e))), g.Ref(14)])
    x, w = i8((1, 2, 3, 4)), i8((3, 2, 3, 2))
    m, s = mults_shifts(3, -9, -5)
    e = ref_tconv(x, w, None, (2, 2), (0, 1), (1, 1), (1, 1), 0, 0, m, s, -128, 127)
    c.case("quantized_transpose_conv2d_nhwc.out", "transpose conv nhwc",
           [g.In(T8(nhwc(x))), g.In(T8(w)), None, g.IntList([2, 2]), g.IntList([0, 1]),
            g.IntList([1, 1]), g.IntList([1, 1]), g.Int(0), g.Int(0), g.In(T32(m)), g.In(T32(s)),
            g.Int(-128), g.Int(127), z8(), z8(), g.Out(torch.int8, T8(nhwc(e))), g.Ref(15)])
    x = i8((1, 5, 6, 7))
    e = ref_avgpool(x, (3, 2), (2, 2), (1, 1), True)
    c.case("quantized_avg_pool2d_nhwc.out", "avgpool nhwc",
           [g.In(T8(nhwc(x))), g.IntList([3, 2]), g.IntList([2, 2]), g.IntList([1, 1]),
            g.Bool(True), g.Int(0), g.Int(2 ** 30), g.Int(0), z8(),
            g.Out(torch.int8, T8(nhwc(e))), g.Ref(9)])
    e = ref_maxpool(x, (2, 3), (1, 2), (1, 1), False, -50, 100)
    c.case("quantized_max_pool2d_nhwc.out", "maxpool nhwc",
           [g.In(T8(nhwc(x))), g.IntList([2, 3]), g.IntList([1, 2]), g.IntList([1, 1]),
            g.IntList([1, 1]), g.Bool(False), g.Int(0), g.Int(0), g.Int(-50), g.Int(100),
            g.Out(torch.int8, T8(nhwc(e))), g.Ref(10)])
    c.case("quantized_max_pool2d_nhwc.out", "maxpool nhwc refuses rank 3",
           [g.In(T8(i8((5, 6, 7)))), g.IntList([2, 3]), g.IntList([1, 2]), g.IntList([1, 1]),
            g.IntList([1, 1]), g.Bool(False), g.Int(0), g.Int(0), g.Int(-50), g.Int(100),
            g.Out(torch.int8, None, shape=[1, 1, 1, 1]), g.Ref(10)], fail=True)


def self_check():
    """The arithmetic against values worked out by hand from the definitions."""
    assert dhm(3, 2 ** 30) == 2 and dhm(-3, 2 ** 30) == -1  # 1.5 -> 2, -1.5 -> -1 (ties up)
    assert rdiv(5, 1) == 3 and rdiv(-5, 1) == -3 and rdiv(-6, 2) == -2 and rdiv(6, 2) == 2
    assert rdiv(7, 2) == 2 and rdiv(-7, 2) == -2 and rdiv(-(2 ** 31), 31) == -1
    assert requantize(1, 1, 30) == 1 and requantize(2 ** 31 - 1, 2 ** 30, 1) == -1  # wraps
    assert requantize(100, 2 ** 30, -1) == 25 and requantize(-102, 2 ** 30, -2) == -13


def generate(g):
    self_check()
    c = Cases(g)
    gen_quant(c)
    gen_conv(c)
    gen_dwconv(c)
    gen_linear(c)
    gen_pool(c)
    gen_pad(c)
    gen_elementwise(c)
    gen_transpose_activation(c)
    gen_bmm(c)
    gen_softmax(c)
    gen_tconv(c)
    gen_div(c)
    gen_nhwc(c)
