import unittest

import torch
import torch.nn as nn

from tests.export._common import count, graph_of
from etch.passes import bn_fold, constant_fold, dce, normalize
from etch.zoo import _randomize_bn


def prepared(model, x):
    eg = graph_of(_randomize_bn(model).eval(), x)
    for p in (normalize.run, dce.run, constant_fold.run):
        p(eg)
        eg.propagate()
    return eg


BN = "aten::_native_batch_norm_legit_no_training"


class BnFoldTest(unittest.TestCase):
    def check(self, model, x, folded=1):
        model = _randomize_bn(model).eval()
        eg = prepared(model, x)
        self.assertEqual(count(eg, BN), folded)
        n = bn_fold.run(eg)
        eg.propagate()
        self.assertEqual(n, folded)
        self.assertEqual(count(eg, BN), 0)
        with torch.no_grad():
            torch.testing.assert_close(eg.run([x])[0], model(x), rtol=1e-5, atol=1e-5)
        return eg

    def test_conv2d(self):
        self.check(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)), torch.randn(2, 3, 9, 9))

    def test_conv2d_without_bias_and_groups(self):
        self.check(nn.Sequential(nn.Conv2d(4, 8, 3, groups=2, bias=False), nn.BatchNorm2d(8)),
                   torch.randn(1, 4, 7, 7))

    def test_conv1d(self):
        self.check(nn.Sequential(nn.Conv1d(2, 5, 3), nn.BatchNorm1d(5)), torch.randn(1, 2, 20))

    def test_transposed_conv_with_groups(self):
        self.check(nn.Sequential(nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2),
                                 nn.BatchNorm2d(6)), torch.randn(1, 4, 5, 5))

    def test_linear(self):
        eg = self.check(nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5)), torch.randn(3, 6))
        self.assertEqual(count(eg, "aten::addmm"), 1)

    def test_linear_without_bias(self):
        self.check(nn.Sequential(nn.Linear(6, 5, bias=False), nn.BatchNorm1d(5)),
                   torch.randn(3, 6))

    def test_conv_with_other_users_is_kept(self):
        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
                self.bn = nn.BatchNorm2d(4)

            def forward(self, x):
                y = self.conv(x)
                return self.bn(y) + y

        m = _randomize_bn(Two()).eval()
        x = torch.randn(1, 3, 6, 6)
        eg = prepared(m, x)
        self.assertEqual(bn_fold.run(eg), 0)
        self.assertEqual(count(eg, BN), 1)


if __name__ == "__main__":
    unittest.main()
