import unittest

import torch
import torch.nn as nn

from tests.export._common import count, graph_of
from etch import decomp
from etch.passes import normalize


class Artefacts(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 4))
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):                       # x: [2, 3, 4]
        a, b, c = x.unbind(1)                   # unbind_copy
        p, q = x.split([1, 3], dim=2)           # split_with_sizes_copy
        y = (a + b + c) @ self.w.t()            # t_copy
        y = self.bn(y)                          # native_batch_norm (eval)
        z = torch.zeros_like(y) + y.reshape(2, 6)
        return z, p.squeeze(2), q.transpose(1, 2), x.unsqueeze(0)


class NormalizeTest(unittest.TestCase):
    def test_rewrites_to_portable_ops(self):
        torch.manual_seed(0)
        m = Artefacts().eval()
        m.bn.running_mean.uniform_(-1, 1)
        x = torch.randn(2, 3, 4)
        eg = graph_of(m, x)
        before = [o.clone() for o in eg.run([x])]
        n = normalize.run(eg)
        eg.propagate()
        self.assertGreater(n, 0)
        names = set(eg.op_counts())
        for gone in ("aten::t_copy", "aten::unbind_copy", "aten::split_with_sizes_copy",
                     "aten::native_batch_norm", "aten::transpose_copy", "aten::zeros_like",
                     "aten::squeeze_copy", "aten::unsqueeze_copy"):
            self.assertFalse(any(k.startswith(gone) for k in names), (gone, names))
        self.assertEqual(count(eg, "aten::_native_batch_norm_legit_no_training"), 1)
        self.assertGreaterEqual(count(eg, "aten::select_copy"), 3)
        self.assertGreaterEqual(count(eg, "aten::slice_copy"), 2)
        self.assertEqual(decomp.unsupported_ops(eg.graph), [])
        after = eg.run([x])
        for a, b in zip(after, before):
            torch.testing.assert_close(a, b)
        with torch.no_grad():
            for a, b in zip(after, m(x)):
                torch.testing.assert_close(a, b)

    def test_memory_formats_and_scalars(self):
        class M(nn.Module):
            def forward(self, x):
                y = x.to(memory_format=torch.channels_last).clone(
                    memory_format=torch.channels_last)
                return (y + 1) * 2.5, y.sum(), y.mean()

        x = torch.randn(1, 3, 4, 4)
        eg = graph_of(M(), x)
        normalize.run(eg)
        eg.propagate()
        for n in eg.call_nodes():
            self.assertNotIn("memory_format", n.kwargs, n)
        ops = eg.op_counts()
        self.assertIn("aten::add.Scalar", ops)
        self.assertIn("aten::mul.Scalar", ops)
        self.assertIn("aten::sum.dim_IntList", ops)
        self.assertIn("aten::mean.dim", ops)
        for a, b in zip(eg.run([x]), M()(x)):
            torch.testing.assert_close(a, b)

    def test_training_batch_norm_is_left_alone(self):
        m = nn.BatchNorm1d(4, track_running_stats=False).eval()
        eg = graph_of(m, torch.randn(3, 4))
        normalize.run(eg)
        self.assertEqual(count(eg, "aten::_native_batch_norm_legit_no_training"), 0)


if __name__ == "__main__":
    unittest.main()
