import unittest

import torch
import torch.nn as nn

from tests.export._common import graph_of
from etch.passes import constant_fold, dce, normalize


class Foldable(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 4))
        self.register_buffer("scale", torch.tensor(3.0))

    def forward(self, x):
        w = self.w.t() * (self.scale + 1)          # all constant
        bias = torch.arange(8).float() / 8          # no tensor inputs at all
        return x @ w + bias


class Growth(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.randn(1, 1))

    def forward(self, x):
        return x + self.b.expand(256, 256)           # 256 KiB from 4 bytes: not folded


class QuantizedWeights(nn.Module):
    """A small int8 weight (its float form is far below SMALL_BYTES) and a float constant that
    is quantized: the dequantization must stay, the quantization of the constant folds."""

    def __init__(self):
        super().__init__()
        import etch.quant  # noqa: F401  (defines torch.ops.quantized_decomposed)
        self.register_buffer("wq", torch.randint(-127, 128, (4, 4), dtype=torch.int8))
        self.register_buffer("s", torch.rand(4) + 0.1)
        self.register_buffer("z", torch.zeros(4, dtype=torch.long))
        self.register_buffer("c", torch.randn(4))

    def forward(self, x):
        qd = torch.ops.quantized_decomposed
        w = qd.dequantize_per_channel(self.wq, self.s, self.z, 0, -127, 127, torch.int8)
        cq = qd.quantize_per_tensor(self.c, 0.05, 0, -128, 127, torch.int8)
        c = qd.dequantize_per_tensor(cq, 0.05, 0, -128, 127, torch.int8)
        return x @ w + c


class ConstantFoldTest(unittest.TestCase):
    def test_keeps_dequantization_of_constants(self):
        m = QuantizedWeights().eval()
        x = torch.randn(2, 4)
        eg = graph_of(m, x)
        constant_fold.run(eg)
        dce.run(eg)
        names = [str(n.target) for n in eg.graph.nodes if n.op == "call_function"]
        self.assertEqual(sum("dequantize_per_channel" in t for t in names), 1)
        self.assertEqual(sum("dequantize_per_tensor" in t for t in names), 1)
        self.assertFalse(any(".quantize_per_tensor" in t for t in names))   # folded
        torch.testing.assert_close(eg.run([x])[0], m(x))


    def test_folds_weight_math(self):
        m = Foldable().eval()
        x = torch.randn(3, 4)
        eg = graph_of(m, x)
        normalize.run(eg)
        eg.propagate()
        folded = constant_fold.run(eg)
        dce.run(eg)
        self.assertGreaterEqual(folded, 3)
        ops = eg.op_counts()
        self.assertEqual(set(ops) - {"aten::mm", "aten::add.Tensor"}, set(), ops)
        with torch.no_grad():
            torch.testing.assert_close(eg.run([x])[0], m(x))

    def test_does_not_blow_up_the_file(self):
        m = Growth().eval()
        x = torch.randn(256, 256)
        eg = graph_of(m, x)
        eg.propagate()
        constant_fold.run(eg)
        self.assertTrue(all(v.numel() < 100 for v in eg.constants.values()))
        torch.testing.assert_close(eg.run([x])[0], m(x))


if __name__ == "__main__":
    unittest.main()
