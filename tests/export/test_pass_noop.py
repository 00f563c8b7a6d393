import unittest

import torch
import torch.nn as nn

from tests.export._common import graph_of
from etch.passes import constant_fold, dce, noop, normalize


class NoOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("one", torch.ones(1))

    def forward(self, x):                     # x: [2, 3]
        y = torch.relu(x)
        y = y.view(2, 3).permute(0, 1).to(torch.float32)
        y = y * 1 + 0
        y = y[:, 0:3] * self.one
        y = torch.cat([y], 0).expand(2, 3)
        return torch.nn.functional.pad(y, (0, 0)) - 0


class NoopTest(unittest.TestCase):
    def test_drops_identities(self):
        m = NoOps().eval()
        x = torch.randn(2, 3)
        eg = graph_of(m, x)
        for p in (normalize.run, dce.run, constant_fold.run):
            p(eg)
            eg.propagate()
        n = noop.run(eg)
        dce.run(eg)
        eg.propagate()
        self.assertGreaterEqual(n, 6)
        self.assertEqual(list(eg.op_counts()), ["aten::relu"])
        torch.testing.assert_close(eg.run([x])[0], m(x))

    def test_keeps_real_work(self):
        class Real(nn.Module):
            def forward(self, x):
                return x.view(3, 2) * 2, x.permute(1, 0), x.to(torch.float64)

        x = torch.randn(2, 3)
        eg = graph_of(Real(), x)
        normalize.run(eg)
        eg.propagate()
        self.assertEqual(noop.run(eg), 0)


if __name__ == "__main__":
    unittest.main()
