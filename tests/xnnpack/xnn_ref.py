"""A reference interpreter of XNNPACK delegate payloads, on PyTorch (for golden data).

Reads the payload exactly as ExecuTorch's XnnpackBackend lays it out (XH00 header or none,
XNNGraph flatbuffer XN00/XN01, constants inline, in the constant section or in named data) and
runs each node with torch ops in NCHW terms (XNNPACK tensors are NHWC), independently of the
C backend. Quantized values are dequantized on the way in and quantized (round half to even,
clamped) on the way out, as XNNPACK's fp32 requantization does.

    python3 xnn_ref.py PROGRAM.pte INPUT.npy... -o OUT.npy   run a program whose instructions
                                                             are all XnnpackBackend calls
"""
import argparse
import math
import struct
import sys

import numpy as np
import torch

from etch.serialize.flatbuffers import Table
from etch.serialize.pte import read_pte

KINDS = ["invalid", "Add", "FullyConnected", "Softmax", "Sigmoid", "StaticTranspose", "Clamp",
         "Conv2d", "Div", "StaticResizeBilinear2D", "StaticConstantPad", "AvgPooling2d",
         "Minimum", "DepthwiseConv2d", "MaxPooling2d", "Multiply", "Subtract", "Floor",
         "Convert", "GlobalAvgPooling2d", "StaticReshape", "ArgMaxPooling2d", "SquareRoot",
         "Ceiling", "Hardswish", "LeakyReLU", "Maximum", "Negate", "Square", "ELU", "Abs",
         "PReLU", "Concatenate2", "Concatenate3", "Concatenate4", "StaticSlice",
         "ScaledDotProductAttention", "BatchMatrixMultiply", "Concatenate5", "ConvTranspose2d",
         "ReciprocalSquareRoot", "Log", "Gelu", "Tanh", "Exp", "Sin"]
FP32, FP16, QINT8, QUINT8, QINT32, QCINT8, QCINT32, QCINT4, QDINT8, QBINT4 = range(1, 11)


def f32(t, slot, default):
    p = t.field_pos(slot)
    return struct.unpack_from("<f", t.buf, p)[0] if p else default


class Value:
    def __init__(self):
        self.dtype = FP32
        self.dims = []
        self.const = None
        self.flags = 0
        self.ext = 0xffffffff
        self.q = None  # ("tensor", s, zp) | ("channel", scales, dim) | ("token", n) | ("block", ...)
        self.dq = 0  # dq_datatype (the 2023 dynamic-quantization form)


class Graph:
    def __init__(self, blob, named):
        blob = bytes(blob)
        const_base = None
        if len(blob) >= 30 and blob[4:8] == b"XH00":
            fo, fs, co, cs = struct.unpack_from("<IIIQ", blob, 10)
            fb = blob[fo:fo + fs]
            const_base = (co, cs)
        else:
            fb = blob
        assert fb[4:8] in (b"XN00", b"XN01"), fb[4:8]
        root = Table(fb, struct.unpack_from("<I", fb, 0)[0])
        cdata = root.table_vector(8) or []
        cbuf = root.table_vector(6) or []
        self.values = {}
        for xv in root.table_vector(2) or []:
            kind = xv.scalar(0, "B")
            u = xv.table(1)
            tv = u if kind == 1 else u.table(0)
            v = Value()
            v.dtype = tv.scalar(0, "h")
            v.dims = tv.scalar_vector(2, "I") or []
            cidx = tv.scalar(3, "I")
            v.ext = tv.scalar(4, "I", 0xffffffff)
            v.flags = tv.scalar(5, "I")
            vid = tv.scalar(6, "I")
            v.dq = tv.scalar(7, "h", 0) if kind == 1 else 0
            if kind == 2:
                qt, qp = u.scalar(1, "B"), u.table(2)
                if qt == 2:
                    v.q = ("tensor", f32(qp, 0, 0.0), qp.scalar(1, "i"))
                elif qt == 1:
                    v.q = ("channel", qp.scalar_vector(0, "f"), qp.scalar(1, "i"))
                elif qt == 3:
                    v.q = ("token", qp.scalar(0, "i"))
                elif qt == 4:
                    sc = qp.scalar_vector(0, "f")
                    if not sc:
                        sc = [struct.unpack("<f", struct.pack("<I", b << 16))[0]
                              for b in qp.scalar_vector(3, "H")]
                    v.q = ("block", sc, qp.scalar(1, "i"), qp.scalar(2, "i"))
            if cidx:
                if cdata:
                    e = cdata[cidx]
                    key = e.string(2)
                    if key:
                        v.const = named[key]
                    else:
                        off, size = e.scalar(0, "Q"), e.scalar(1, "Q")
                        v.const = blob[const_base[0] + off:const_base[0] + off + size]
                else:
                    v.const = cbuf[cidx].bytes_vector(0)
            self.values[vid] = v
        self.nodes = []
        for xn in root.table_vector(1) or []:
            kind = xn.scalar(0, "B")
            t = xn.table(1)
            mm = xn.table(3)
            lo, hi = (f32(mm, 0, -math.inf), f32(mm, 1, math.inf)) if mm else (-math.inf, math.inf)
            self.nodes.append((KINDS[kind], t, lo, hi))
        vals = self.values
        self.inputs = sorted(root.scalar_vector(4, "I") or [], key=lambda i: vals[i].ext)
        self.outputs = sorted(root.scalar_vector(5, "I") or [], key=lambda i: vals[i].ext)

    # ---- values as float tensors ----
    def const_tensor(self, v):
        n = int(np.prod(v.dims)) if v.dims else 1
        if v.dtype == FP32:
            a = np.frombuffer(v.const, "<f4", n)
        elif v.dtype == FP16:
            a = np.frombuffer(v.const, "<f2", n).astype(np.float32)
        elif v.dtype in (QINT8, QCINT8):
            a = np.frombuffer(v.const, "i1", n).astype(np.float32)
        elif v.dtype == QUINT8:
            a = np.frombuffer(v.const, "u1", n).astype(np.float32)
        elif v.dtype in (QINT32, QCINT32):
            a = np.frombuffer(v.const, "<i4", n).astype(np.float64)
        elif v.dtype in (QCINT4, QBINT4):
            rows, cols = v.dims
            rb = (cols + 1) // 2
            raw = np.frombuffer(v.const, "u1", rows * rb).reshape(rows, rb)
            nib = np.stack([raw & 15, raw >> 4], -1).reshape(rows, rb * 2)[:, :cols]
            a = nib.astype(np.float32) - 8
        else:
            raise NotImplementedError("constant of datatype %d" % v.dtype)
        return self.dequant(v, torch.tensor(np.array(a).reshape(v.dims)))

    def dequant(self, v, t):
        if v.q is None or v.dtype in (FP32, FP16):
            return t.float()
        if v.q[0] == "tensor":
            return ((t.double() - v.q[2]) * v.q[1]).float()
        if v.q[0] == "channel":
            sc = torch.tensor(v.q[1], dtype=torch.float64)
            shape = [1] * len(v.dims)
            shape[v.q[2]] = -1
            return (t.double() * sc.reshape(shape)).float()
        if v.q[0] == "block":
            sc, cdim, gs = torch.tensor(v.q[1]), v.q[2], v.q[3]
            rows, cols = v.dims
            if cdim == 0:
                s = sc.reshape(rows, cols // gs).repeat_interleave(gs, 1)
            else:
                s = sc.reshape(cols, rows // gs).repeat_interleave(gs, 1).t()
            return t.float() * s
        raise NotImplementedError(v.q[0])

    def quant_out(self, v, x):
        """Round float x to v's type and back (what the next node sees)."""
        if v.dtype == FP32:
            return x.float()
        if v.dtype == FP16:
            return x.half().float()
        if v.dtype in (QINT8, QUINT8, QINT32):
            s, zp = v.q[1], v.q[2]
            lo, hi = {QINT8: (-128, 127), QUINT8: (0, 255), QINT32: (-2**31, 2**31 - 1)}[v.dtype]
            inv = np.float32(1.0) / np.float32(s)
            q = torch.clamp(torch.round(x.float() * float(inv)) + zp, lo, hi)
            return ((q.double() - zp) * s).float()
        if v.dtype == QDINT8:
            nb = v.q[1]
            shape = x.shape
            rows = x.reshape(-1, int(np.prod(shape[len(shape) - nb:])) if nb else 1)
            lo = torch.clamp(rows.min(1).values, max=0)
            hi = torch.clamp(rows.max(1).values, min=0)
            s = torch.clamp((hi - lo) / 255, min=torch.finfo(torch.float32).eps)
            dmin, dmax = lo / s, hi / s
            z = torch.where((-128 + dmin) + (127 + dmax) > 0, -128 - dmin, 127 - dmax)
            z = torch.clamp(torch.round(z), -128, 127)
            q = torch.clamp(torch.round(rows * (1.0 / s)[:, None]) + z[:, None], -128, 127)
            return ((q - z[:, None]) * s[:, None]).reshape(shape).float()
        raise NotImplementedError("output datatype %d" % v.dtype)

    def run(self, inputs):
        env = {}
        for vid, v in self.values.items():
            if v.const is not None:
                env[vid] = self.const_tensor(v)
        for vid, x in zip(self.inputs, inputs):
            env[vid] = self.dequant(self.values[vid], torch.as_tensor(x))
            if self.values[vid].dq == QINT8:  # readers see it quantized per token
                tok = Value()
                tok.dtype, tok.q = QDINT8, ("token", 1)
                env[vid] = self.quant_out(tok, env[vid])
        for kind, t, lo, hi in self.nodes:
            out_id, y = self.node(kind, t, env)
            if lo > -math.inf or hi < math.inf:
                y = torch.clamp(y, lo, hi)
            env[out_id] = self.quant_out(self.values[out_id], y)
        return [env[o] for o in self.outputs]

    def node(self, kind, t, env):
        U = lambda s: t.scalar(s, "I")
        if kind in ("Add", "Subtract", "Multiply", "Div", "Minimum", "Maximum", "PReLU",
                    "BatchMatrixMultiply"):
            a, b, o = env[U(0)], env[U(1)], U(2)
            f = {"Add": torch.add, "Subtract": torch.sub, "Multiply": torch.mul,
                 "Div": torch.div, "Minimum": torch.minimum, "Maximum": torch.maximum,
                 "PReLU": lambda x, w: torch.where(x >= 0, x, x * w),
                 "BatchMatrixMultiply": lambda x, w: torch.matmul(
                     x, w.transpose(-1, -2) if U(3) & 1 else w)}[kind]
            return o, f(a, b)
        if kind == "FullyConnected":
            x, w, o = env[U(0)], env[U(1)], U(3)
            b = env.get(U(2)) if U(2) != 0xffffffff else None
            if U(4) & 1:
                w = w.t()
            if len(self.values[o].dims) == 2 and x.dim() != 2:
                x = x.reshape(-1, w.shape[1])
            return o, torch.nn.functional.linear(x, w, b)
        if kind in ("Conv2d", "DepthwiseConv2d", "ConvTranspose2d"):
            p = [U(i) for i in range(15)]
            x, w, o = env[U(15)], env[U(16)], U(18)
            b = env.get(U(17)) if U(17) != 0xffffffff else None
            pt, pr, pb, pl, kh, kw, sh, sw, dh, dw, gic, goc, groups, ah, aw = p
            xn = x.permute(0, 3, 1, 2)
            xn = torch.nn.functional.pad(xn, (pl, pr, pt, pb)) if kind != "ConvTranspose2d" else xn
            if kind == "Conv2d":
                y = torch.nn.functional.conv2d(xn, w.permute(0, 3, 1, 2), b, (sh, sw), 0,
                                               (dh, dw), groups)
            elif kind == "DepthwiseConv2d":
                y = torch.nn.functional.conv2d(xn, w.permute(3, 0, 1, 2), b, (sh, sw), 0,
                                               (dh, dw), groups)
            else:
                wt = w.reshape(groups, goc, kh, kw, gic).permute(0, 4, 1, 2, 3).reshape(
                    groups * gic, goc, kh, kw)
                y = torch.nn.functional.conv_transpose2d(xn, wt, b, (sh, sw), 0, (ah, aw),
                                                         groups, (dh, dw))
                y = y[:, :, pt:y.shape[2] - pb, pl:y.shape[3] - pr]
            return o, y.permute(0, 2, 3, 1)
        if kind in ("MaxPooling2d", "AvgPooling2d"):
            pt, pr, pb, pl, kh, kw, sh, sw, dh, dw = [U(i) for i in range(10)]
            x, o = env[U(10)], U(11)
            xn = x.permute(0, 3, 1, 2)
            if kind == "MaxPooling2d":
                xn = torch.nn.functional.pad(xn, (pl, pr, pt, pb), value=-math.inf)
                y = torch.nn.functional.max_pool2d(xn, (kh, kw), (sh, sw), 0, (max(dh, 1), max(dw, 1)))
            else:
                ones = torch.ones_like(xn[:, :1])
                s = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(xn, (pl, pr, pt, pb)), (kh, kw), (sh, sw), 0, divisor_override=1)
                c = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(ones, (pl, pr, pt, pb)), (kh, kw), (sh, sw), 0, divisor_override=1)
                y = s / c
            return o, y.permute(0, 2, 3, 1)
        if kind == "GlobalAvgPooling2d":
            x, o = env[U(0)], U(1)
            keep = len(self.values[o].dims) == x.dim()
            return o, x.mean(dim=(-3, -2), keepdim=keep)
        if kind == "StaticTranspose":
            perm = t.scalar_vector(1, "I")
            return U(3), env[U(2)].permute(*perm)
        if kind == "StaticReshape":
            shape = [d if d else -1 for d in t.scalar_vector(1, "I")]
            return U(3), env[U(2)].reshape(shape)
        if kind == "StaticSlice":
            offs, sizes = t.scalar_vector(1, "I"), t.scalar_vector(2, "I")
            x = env[U(3)]
            idx = tuple(slice(o_, o_ + (s_ if s_ else x.shape[d] - o_))
                        for d, (o_, s_) in enumerate(zip(offs, sizes)))
            return U(4), x[idx]
        if kind == "StaticConstantPad":
            pre, post = t.scalar_vector(0, "I"), t.scalar_vector(1, "I")
            pad = []
            for a, b in zip(reversed(pre), reversed(post)):
                pad += [a, b]
            return U(4), torch.nn.functional.pad(env[U(3)], pad, value=f32(t, 2, 0.0))
        if kind.startswith("Concatenate"):
            n = int(kind[-1])
            ids = [U(1), U(2), U(3), U(4), U(7)][:n]
            return U(5), torch.cat([env[i] for i in ids], dim=U(0))
        if kind == "StaticResizeBilinear2D":
            nh, nw, x, o, flags = U(0), U(1), env[U(2)], U(3), U(4)
            y = torch.nn.functional.interpolate(x.permute(0, 3, 1, 2), size=(nh, nw),
                                                mode="bilinear", align_corners=bool(flags & 8))
            return o, y.permute(0, 2, 3, 1)
        if kind in ("LeakyReLU", "ELU"):
            a, x, o = f32(t, 0, 0.01 if kind == "LeakyReLU" else 1.0), env[U(1)], U(2)
            if kind == "LeakyReLU":
                return o, torch.nn.functional.leaky_relu(x, a)
            return o, torch.nn.functional.elu(x, a)
        if kind == "ScaledDotProductAttention":
            q, k, v, s, m, o = env[U(0)], env[U(1)], env[U(2)], env[U(3)], env[U(4)], U(5)
            p = torch.softmax((q * s) @ k.transpose(-1, -2) + m, -1)
            return o, p @ v
        x, o = env[U(0)], U(1)
        f = {"Softmax": lambda a: torch.softmax(a, -1), "Sigmoid": torch.sigmoid,
             "Clamp": lambda a: a, "Convert": lambda a: a, "Floor": torch.floor,
             "Ceiling": torch.ceil, "SquareRoot": torch.sqrt, "Hardswish":
             torch.nn.functional.hardswish, "Negate": torch.neg, "Square": torch.square,
             "Abs": torch.abs, "ReciprocalSquareRoot": torch.rsqrt, "Log": torch.log,
             "Gelu": torch.nn.functional.gelu, "Tanh": torch.tanh, "Exp": torch.exp,
             "Sin": torch.sin}[kind]
        return o, f(x)


def _alloc(plan, vi):
    t = plan.values[vi].val
    a = getattr(t, "allocation_info", None)
    if a is None:
        return None
    return (a.memory_id, a.memory_offset_low, a.memory_offset_high)


def lookup(plan, env, vi):
    """Value vi, or the value planned on the same bytes (a view the exporter elided), in
    vi's shape."""
    if vi in env:
        return env[vi]
    key = _alloc(plan, vi)
    for vj, x in env.items():
        if key is not None and _alloc(plan, vj) == key:
            return x.reshape(list(plan.values[vi].val.sizes))
    raise KeyError("value %d is never written" % vi)


def run_program(path, inputs):
    """Run a program whose instructions are all XnnpackBackend delegate calls."""
    data = open(path, "rb").read()
    pte = read_pte(data)
    prog = pte.program
    named = {}
    for nd in prog.named_data or []:
        named[nd.key] = pte.segments[nd.segment_index]
    plan = prog.execution_plan[0]
    env = {}
    for vi, x in zip(plan.inputs, inputs):
        env[vi] = torch.as_tensor(x)
    for instr in plan.chains[0].instructions:
        call = instr.instr_args
        if type(call).__name__ != "DelegateCall":
            raise NotImplementedError("instruction %s" % type(call).__name__)
        d = plan.delegates[call.delegate_index]
        ref = d.processed
        blob = (pte.segments[ref.index] if int(ref.location) == 1
                else prog.backend_delegate_data[ref.index].data)
        g = Graph(blob, named)
        nin = len(g.inputs)
        outs = g.run([lookup(plan, env, a) for a in call.args[:nin]])
        for a, y in zip(call.args[nin:], outs):
            env[a] = y
    return [lookup(plan, env, o).numpy() for o in plan.outputs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("inputs", nargs="*")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    outs = run_program(a.program, [np.load(p) for p in a.inputs])
    np.save(a.output, outs[0].astype(np.float32))


if __name__ == "__main__":
    sys.exit(main())
