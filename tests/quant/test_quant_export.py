"""The exporter lowers graphs holding ExecuTorch's quantized operators (captured as the
functional quantized_decomposed::* operators) to their out-variants with ExecuTorch's schemas
(etch.ops.QUANTIZED_SCHEMAS), the operator check against libetch passes, and `etch run`
gives what the functional operators compute.

torch 1.13 has no quantized_decomposed operators: when nothing (etch.quant) has defined them,
this test defines the ones it uses, with the reference formulas of
tests/kernels/cases_quant.py (ExecuTorch's single-precision arithmetic) as their kernels.

    ETCH_CLI=build/etch ETCH_LIB=build/libetch.so /usr/bin/python3 -m unittest \
        tests.quant.test_quant_export
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))

import etch  # noqa: E402  (may define the operators: etch.quant)
import cases_quant as cq  # noqa: E402

CLI = os.environ.get("ETCH_CLI", os.path.join(ROOT, "build", "etch"))
_LIBS = []


def _has(name):
    try:
        getattr(torch.ops.quantized_decomposed, name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _define():
    """The functional operators this test uses, unless defined already (all or none)."""
    if _has("quantize_per_tensor"):
        return
    lib = torch.library.Library("quantized_decomposed", "DEF")
    lib.define("quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
               "int quant_max, ScalarType dtype) -> Tensor")
    lib.define("dequantize_per_tensor(Tensor input, float scale, int zero_point, "
               "int quant_min, int quant_max, ScalarType dtype, *, "
               "ScalarType? out_dtype=None) -> Tensor")
    lib.define("dequantize_per_channel_group(Tensor input, Tensor scales, Tensor? zero_points, "
               "int quant_min, int quant_max, ScalarType dtype, int group_size, "
               "ScalarType output_dtype) -> Tensor")
    lib.define("embedding_4bit.dtype(Tensor weight, Tensor weight_scales, "
               "Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, "
               "Tensor indices, *, ScalarType? dtype=None) -> Tensor")

    def q(x, scale, zp, qmin, qmax, dtype):
        return torch.from_numpy(cq.et_quantize(x, [scale], [zp], 1, qmin, qmax)).to(dtype)

    def dq(x, scale, zp, qmin, qmax, dtype, out_dtype=None):
        return cq.et_dequantize(x.long().numpy(), [scale], [zp], 1, out_dtype or torch.float32)

    def dqg(x, scales, zps, qmin, qmax, dtype, group_size, output_dtype):
        return cq.group_ref(x, scales, zps, group_size, output_dtype)

    def emb4(w, scales, zps, qmin, qmax, idx, dtype=None):
        hi, lo = (w >> 4).long() - 8, (w & 15).long() - 8
        vals = torch.stack([hi, lo], -1).reshape(w.shape[0], -1)
        return cq.emb_ref(vals, scales, zps, idx, dtype or scales.dtype)

    lib.impl("quantize_per_tensor", q, "CPU")
    lib.impl("dequantize_per_tensor", dq, "CPU")
    lib.impl("dequantize_per_channel_group", dqg, "CPU")
    lib.impl("embedding_4bit.dtype", emb4, "CPU")
    _LIBS.append(lib)


_define()
qd = torch.ops.quantized_decomposed


class Quantized(nn.Module):
    """An 8-bit activation round trip, a 4-bit group-wise linear weight and a 4-bit
    embedding: the shapes of what etch.quant's schemes emit."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.register_buffer("w", torch.randint(-8, 8, (6, 32), generator=g, dtype=torch.int8))
        self.register_buffer("w_scales", torch.rand(12, generator=g) * 0.1 + 0.01)
        self.register_buffer("w_zeros", torch.randint(-8, 8, (12,), generator=g,
                                                      dtype=torch.int32))
        vals = torch.randint(-8, 8, (9, 8), generator=g)
        self.register_buffer("e_packed", cq.pack4(vals))
        self.register_buffer("e_scales", (torch.rand(9, 2, generator=g) * 0.2 + 0.05).half())

    def forward(self, x, idx):
        q = qd.quantize_per_tensor(x, 0.05, 3, -128, 127, torch.int8)
        h = qd.dequantize_per_tensor(q, 0.05, 3, -128, 127, torch.int8)
        w = qd.dequantize_per_channel_group(self.w, self.w_scales, self.w_zeros, -8, 7,
                                            torch.int8, 16, torch.float32)
        e = qd.embedding_4bit.dtype(self.e_packed, self.e_scales, None, -8, 7, idx,
                                    dtype=torch.float32)
        return F.linear(h, w), e


@unittest.skipUnless(os.path.exists(CLI), "etch CLI not built (set ETCH_CLI)")
class QuantExport(unittest.TestCase):
    def test_export_and_run(self):
        m = Quantized()
        x = torch.randn(3, 32) * 4
        idx = torch.tensor([[0, 8], [4, 4]])
        want = m(x, idx)
        p = etch.export(m, (x, idx))   # the operator check against libetch runs here
        names = set(p.operators)
        for op in ("quantize_per_tensor.out", "dequantize_per_tensor.out",
                   "dequantize_per_channel_group.out", "embedding_4bit.dtype_out"):
            self.assertIn("quantized_decomposed::" + op, names)
        self.assertEqual(p.etch_only_operators, [])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "q.pte")
            p.save(path)
            np.save(os.path.join(d, "x.npy"), x.numpy())
            np.save(os.path.join(d, "idx.npy"), idx.numpy())
            for kernels in ("portable", "optimized"):
                with self.subTest(kernels=kernels):
                    r = subprocess.run([CLI, "run", path, "--inputs",
                                        os.path.join(d, "x.npy") + "," +
                                        os.path.join(d, "idx.npy"),
                                        "--kernels", kernels, "--output-dir", d],
                                       capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    y = np.load(os.path.join(d, "output_0.npy"))
                    e = np.load(os.path.join(d, "output_1.npy"))
                    np.testing.assert_allclose(y, want[0].numpy(), rtol=1e-5, atol=1e-5)
                    np.testing.assert_array_equal(e, want[1].numpy())


if __name__ == "__main__":
    unittest.main()
