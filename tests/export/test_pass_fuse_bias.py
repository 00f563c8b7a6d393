import unittest

import torch
import torch.nn as nn

from tests.export._common import count, graph_of
from etch.passes import constant_fold, dce, fuse_bias, normalize


def prepared(model, x):
    eg = graph_of(model.eval(), x)
    for p in (normalize.run, dce.run, constant_fold.run):
        p(eg)
        eg.propagate()
    return eg


class ConvPlusBias(nn.Module):
    def __init__(self, with_bias):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=with_bias)
        self.b = nn.Parameter(torch.randn(4, 1, 1))

    def forward(self, x):
        return self.b + self.conv(x)


class MmPlusBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 7))
        self.b = nn.Parameter(torch.randn(7))

    def forward(self, x):
        return torch.mm(x, self.w) + self.b


class NotPerChannel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.b = nn.Parameter(torch.randn(4, 4, 4))     # varies over H and W too

    def forward(self, x):
        return self.conv(x) + self.b


class FuseBiasTest(unittest.TestCase):
    def run_pass(self, m, x, fused):
        eg = prepared(m, x)
        self.assertEqual(fuse_bias.run(eg), fused)
        eg.propagate()
        with torch.no_grad():
            torch.testing.assert_close(eg.run([x])[0], m(x))
        return eg

    def test_conv_without_bias(self):
        eg = self.run_pass(ConvPlusBias(False), torch.randn(1, 3, 8, 8), 1)
        self.assertEqual(count(eg, "aten::add."), 0)

    def test_conv_with_bias(self):
        eg = self.run_pass(ConvPlusBias(True), torch.randn(1, 3, 8, 8), 1)
        self.assertEqual(count(eg, "aten::add."), 0)

    def test_mm_becomes_addmm(self):
        eg = self.run_pass(MmPlusBias(), torch.randn(3, 5), 1)
        self.assertEqual(count(eg, "aten::addmm"), 1)
        self.assertEqual(count(eg, "aten::mm"), 0)
        self.assertEqual(count(eg, "aten::add."), 0)

    def test_not_per_channel_is_kept(self):
        eg = self.run_pass(NotPerChannel(), torch.randn(1, 3, 6, 6), 0)
        self.assertEqual(count(eg, "aten::add."), 1)


if __name__ == "__main__":
    unittest.main()
