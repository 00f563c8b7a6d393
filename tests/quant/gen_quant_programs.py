#!/usr/bin/python3
"""Writes small programs made of ExecuTorch's quantized operators (quantized_decomposed::*),
with their inputs and the reference formulas' results, for tests/quant/test_quant_programs.py
(`etch run` against the formulas) and the robustness corpus (mutated scales and packed sizes).

Usage: gen_quant_programs.py OUTPUT_DIR/manifest.json   (CMake runs it at build time; nothing
generated is committed). Beside the manifest, per program NAME: NAME.pte, NAME.in<i>.npy (its
inputs) and NAME.out<i>.npy (the expected outputs), plus "lying" variants NAME.bad-*.pte whose
quantization parameters contradict the data (refused when the kernel runs, naming the
argument).

The programs are written with python/etch/serialize's ProgramBuilder in ExecuTorch's calling
convention, so the argument order is the schemas' (python/etch/ops.py QUANTIZED_SCHEMAS); the
expected values come from tests/kernels/cases_quant.py's formulas.
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))

import cases_quant as cq  # noqa: E402
from etch.serialize import ProgramBuilder, ScalarType  # noqa: E402

Q = "quantized_decomposed::"
ST = ScalarType
F32, F64, I64, I32, U8, I8, F16 = (ST.FLOAT, ST.DOUBLE, ST.LONG, ST.INT, ST.BYTE, ST.CHAR,
                                   ST.HALF)
RNG = np.random.default_rng(1700)


def blob(a):
    return np.ascontiguousarray(a).tobytes()


class Prog:
    def __init__(self, name):
        self.name = name
        self.pb = ProgramBuilder()
        self.m = self.pb.method("forward")
        self.inputs, self.expected, self.rtol = [], [], []

    def input(self, arr, dtype, offset=None):
        v = self.m.tensor(dtype, list(arr.shape), offset=offset)
        self.m.inputs.append(v)
        self.inputs.append(arr)
        return v

    def const(self, arr, dtype):
        return self.m.tensor(dtype, list(arr.shape), constant=blob(arr))

    def out(self, v, expected, rtol=0.0):
        """rtol 0: bit for bit (the formulas are the kernels' own arithmetic)."""
        self.m.outputs.append(v)
        self.expected.append(expected)
        self.rtol.append(rtol)

    def write(self, d, manifest):
        with open(os.path.join(d, self.name + ".pte"), "wb") as f:
            f.write(self.pb.serialize())
        for i, a in enumerate(self.inputs):
            np.save(os.path.join(d, "%s.in%d.npy" % (self.name, i)), a)
        for i, a in enumerate(self.expected):
            np.save(os.path.join(d, "%s.out%d.npy" % (self.name, i)), a)
        manifest["programs"].append({"name": self.name, "inputs": len(self.inputs),
                                     "outputs": len(self.expected), "rtol": self.rtol})


def qdq_tensor(d, manifest, scale=0.04, zp=120, name="qdq_tensor"):
    p = Prog(name)
    m = p.m
    x = (RNG.standard_normal([5, 7]) * 4).astype(np.float32)
    x[0, :3] = [100.0, -100.0, 0.0]  # saturation both ways
    xi = p.input(x, F32)
    q = m.tensor(U8, [5, 7])
    y = m.tensor(F32, [5, 7])
    m.kernel(Q + "quantize_per_tensor.out", [xi, m.double(scale), m.int(zp), m.int(0),
                                             m.int(255), m.int(int(U8)), q, q])
    m.kernel(Q + "dequantize_per_tensor.out", [q, m.double(scale), m.int(zp), m.int(0),
                                               m.int(255), m.int(int(U8)), m.null(), y, y])
    qe = cq.et_quantize(torch.from_numpy(x), [scale], [zp], 1, 0, 255)
    p.out(q, qe.astype(np.uint8))
    p.out(y, cq.et_dequantize(qe, [scale], [zp], 1, torch.float32).numpy())
    p.write(d, manifest)


def qdq_channel(d, manifest, scales=None, name="qdq_channel"):
    p = Prog(name)
    m = p.m
    x = (RNG.standard_normal([4, 3, 5]) * 2).astype(np.float32)
    sc = np.array([0.01, 0.02, 0.05] if scales is None else scales, dtype=np.float64)
    zp = np.array([-128, 0, 127], dtype=np.int64)
    xi = p.input(x, F32)
    s = p.const(sc, F64)
    z = p.const(zp, I64)
    q = m.tensor(I8, [4, 3, 5])
    y = m.tensor(F32, [4, 3, 5])
    m.kernel(Q + "quantize_per_channel.out", [xi, s, z, m.int(1), m.int(-128), m.int(127),
                                              m.int(int(I8)), q, q])
    m.kernel(Q + "dequantize_per_channel.out", [q, s, z, m.int(1), m.int(-128), m.int(127),
                                                m.int(int(I8)), m.int(int(F32)), y, y])
    if scales is None:
        qe = cq.et_quantize(torch.from_numpy(x), list(sc), list(zp), 5, -128, 127)
        p.out(q, qe.astype(np.int8))
        p.out(y, cq.et_dequantize(qe, list(sc), list(zp), 5, torch.float32).numpy())
    else:
        p.out(q, np.zeros([4, 3, 5], np.int8))
        p.out(y, np.zeros([4, 3, 5], np.float32))
    p.write(d, manifest)


def dynamic_token(d, manifest):
    """8da's activation path: choose per-token qparams, quantize, dequantize."""
    p = Prog("dynamic_token")
    m = p.m
    x = (RNG.standard_normal([3, 16]) * 3).astype(np.float32)
    x[1] = np.abs(x[1])          # a token with no negative values
    xi = p.input(x, F32)
    s = m.tensor(F64, [3, 1])
    z = m.tensor(I64, [3, 1])
    q = m.tensor(I8, [3, 16])
    y = m.tensor(F32, [3, 16])
    sz = m.tensor_list([s, z])
    m.kernel(Q + "choose_qparams_per_token_asymmetric.out", [xi, m.int(int(I8)), s, z, sz])
    m.kernel(Q + "quantize_per_token.out", [xi, s, z, m.int(-128), m.int(127), m.int(int(I8)),
                                            q, q])
    m.kernel(Q + "dequantize_per_token.out", [q, s, z, m.int(-128), m.int(127), m.int(int(I8)),
                                              m.int(int(F32)), y, y])
    sc, zp = zip(*[cq.et_choose(r.min(), r.max(), -128, 127) for r in x])
    qe = cq.et_quantize(torch.from_numpy(x), list(sc), list(zp), 16, -128, 127)
    p.out(s, np.array(sc, np.float64).reshape(3, 1))
    p.out(z, np.array(zp, np.int64).reshape(3, 1))
    p.out(q, qe.astype(np.int8))
    p.out(y, cq.et_dequantize(qe, list(sc), list(zp), 16, torch.float32).numpy())
    p.write(d, manifest)


def linear_4w(d, manifest, nscales=None, name="linear_4w"):
    """A 4-bit group-wise weight (G = 16) dequantized, then x @ w.T."""
    p = Prog(name)
    m = p.m
    N, K, G = 8, 32, 16
    w = RNG.integers(-8, 7, [N, K], endpoint=True).astype(np.int8)
    sc = RNG.uniform(0.01, 0.1, N * K // G if nscales is None else nscales).astype(np.float32)
    zp = RNG.integers(-8, 7, len(sc), endpoint=True).astype(np.int32)
    x = RNG.standard_normal([2, K]).astype(np.float32)
    xi = p.input(x, F32)
    wc, sc_v, zp_v = p.const(w, I8), p.const(sc, F32), p.const(zp, I32)
    wd = m.tensor(F32, [N, K])
    wt = m.tensor(F32, [K, N])
    y = m.tensor(F32, [2, N])
    m.kernel(Q + "dequantize_per_channel_group.out",
             [wc, sc_v, zp_v, m.int(-8), m.int(7), m.int(int(I8)), m.int(G), m.int(int(F32)),
              wd, wd])
    m.kernel("aten::permute_copy.out", [wd, m.int_list_of([1, 0]), wt, wt])
    m.kernel("aten::mm.out", [xi, wt, y, y])
    if nscales is None:
        wdq = cq.group_ref(torch.from_numpy(w), torch.from_numpy(sc), torch.from_numpy(zp), G,
                           torch.float32)
        p.out(wd, wdq.numpy())
        p.out(y, (torch.from_numpy(x).double() @ wdq.double().t()).float().numpy(), 1e-5)
    else:
        p.out(wd, np.zeros([N, K], np.float32))
        p.out(y, np.zeros([2, N], np.float32))
    p.write(d, manifest)


def embeddings(d, manifest, packed_cols=None, alias=False, name="embeddings"):
    """embedding_4bit.dtype_out (Half scales and zero points, groups of 4) and
    embedding_byte.out (int8, one scale per row) on the same indices. alias: the second's out
    lies on the indices' bytes (a planner's lie), so writing a row overwrites the indices."""
    p = Prog(name)
    m = p.m
    V, D, G = 10, 16, 4
    vals = torch.from_numpy(RNG.integers(-8, 7, [V, D], endpoint=True))
    packed = cq.pack4(vals).numpy()
    if packed_cols is not None:
        packed = packed[:, :packed_cols]
    sc4 = RNG.uniform(0.05, 0.5, [V, G]).astype(np.float16)
    zp4 = RNG.integers(-2, 2, [V, G], endpoint=True).astype(np.float16)
    w8 = RNG.integers(-128, 127, [V, 12], endpoint=True).astype(np.int8)
    sc8 = RNG.uniform(0.001, 0.02, [V]).astype(np.float32)
    idx = np.array([[0, 9, 3], [3, 1, 7]], dtype=np.int64)
    ii = p.input(idx, I64, offset=0 if alias else None)
    w4c, s4c, z4c = p.const(packed, U8), p.const(sc4, F16), p.const(zp4, F16)
    w8c, s8c = p.const(w8, I8), p.const(sc8, F32)
    e4 = m.tensor(F32, [2, 3, D])
    e8 = m.tensor(F32, [2, 3, 12], offset=0 if alias else None)
    m.kernel(Q + "embedding_4bit.dtype_out", [w4c, s4c, z4c, m.int(-8), m.int(7), ii,
                                              m.int(int(F32)), e4, e4])
    m.kernel(Q + "embedding_byte.out", [w8c, s8c, m.null(), m.int(-128), m.int(127), ii, e8, e8])
    if packed_cols is None and not alias:
        t_idx = torch.from_numpy(idx)
        p.out(e4, cq.emb_ref(vals, torch.from_numpy(sc4), torch.from_numpy(zp4), t_idx,
                             torch.float32).numpy())
        p.out(e8, cq.emb_ref(torch.from_numpy(w8).long(), torch.from_numpy(sc8), None, t_idx,
                             torch.float32).numpy())
    else:
        p.out(e4, np.zeros([2, 3, D], np.float32))
        p.out(e8, np.zeros([2, 3, 12], np.float32))
    p.write(d, manifest)


def choose_tensor(d, manifest):
    """choose_qparams.Tensor_out feeding the Tensor_out overloads of (de)quantize."""
    p = Prog("choose_tensor")
    m = p.m
    x = (RNG.standard_normal([6, 5]) * 2 + 1).astype(np.float32)
    xi = p.input(x, F32)
    s = m.tensor(F64, [1])
    z = m.tensor(I64, [1])
    q = m.tensor(U8, [6, 5])
    y = m.tensor(F32, [6, 5])
    m.kernel(Q + "choose_qparams.Tensor_out", [xi, m.int(0), m.int(255), m.double(1.19e-7),
                                               m.int(int(U8)), s, z, m.tensor_list([s, z])])
    m.kernel(Q + "quantize_per_tensor.Tensor_out", [xi, s, z, m.int(0), m.int(255),
                                                    m.int(int(U8)), q, q])
    m.kernel(Q + "dequantize_per_tensor.Tensor_out", [q, s, z, m.int(0), m.int(255),
                                                      m.int(int(U8)), m.null(), y, y])
    sc, zp = cq.et_choose(x.min(), x.max(), 0, 255)
    qe = cq.et_quantize(torch.from_numpy(x), [sc], [zp], 1, 0, 255)
    p.out(s, np.array([sc], np.float64))
    p.out(z, np.array([zp], np.int64))
    p.out(q, qe.astype(np.uint8))
    p.out(y, cq.et_dequantize(qe, [sc], [zp], 1, torch.float32).numpy())
    p.write(d, manifest)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_quant_programs.py OUTPUT_DIR/manifest.json")
    out = sys.argv[1]
    d = os.path.dirname(os.path.abspath(out))
    os.makedirs(d, exist_ok=True)
    manifest = {"programs": [], "bad": []}
    qdq_tensor(d, manifest)
    qdq_channel(d, manifest)
    dynamic_token(d, manifest)
    linear_4w(d, manifest)
    embeddings(d, manifest)
    choose_tensor(d, manifest)
    # programs whose quantization parameters lie: (file, the message the run must print,
    # whether loading refuses it: the lie is in the call's scalars or in constants that
    # define its shapes (a weight and its scales), not in what arrives at run time)
    good = list(manifest["programs"])
    for fn, kw, msg, at_load in [
            (qdq_tensor, {"scale": -0.5}, "scale", True),
            (qdq_tensor, {"zp": 300}, "zero_point", True),
            # quantize_per_channel of an input: its channel count comes with the input
            (qdq_channel, {"scales": [0.01, 0.0, 0.05]}, "scales[1]", False),
            (qdq_channel, {"scales": [0.01, 0.02]}, "scales has 2 elements", False),
            (linear_4w, {"nscales": 15}, "scales has 15 elements", True),
            (embeddings, {"packed_cols": 7}, "do not divide", True),
            # regression: this once read weight rows at the float bits it had
            # written over the indices (UBSan: signed overflow; ASan: a wild read)
            (embeddings, {"alias": True}, "indices changed while out was written", False)]:
        name = "bad-%s-%d" % (fn.__name__, len(manifest["bad"]))
        fn(d, manifest, name=name, **kw)
        manifest["programs"].pop()
        manifest["bad"].append({"name": name, "message": msg, "at_load": at_load})
    assert manifest["programs"] == good
    with open(out, "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
