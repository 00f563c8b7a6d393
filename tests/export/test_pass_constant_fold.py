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


class ConstantFoldTest(unittest.TestCase):
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
