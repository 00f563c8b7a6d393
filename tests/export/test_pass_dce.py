import unittest

import torch
import torch.nn as nn

from tests.export._common import graph_of
from etch.passes import dce


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)

    def forward(self, x):
        _ = torch.sigmoid(self.unused(x)) * 3     # computed, never used
        return self.used(x)


class Counter(nn.Module):
    """Writes into a buffer: the write must survive DCE although nothing reads it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls.add_(1)
        return x * 2


class DceTest(unittest.TestCase):
    def test_removes_dead_nodes_and_constants(self):
        m = Unused().eval()
        x = torch.randn(2, 4)
        eg = graph_of(m, x)
        self.assertIn("unused.weight", eg.constants)
        n_before = len(eg.graph.nodes)
        removed = dce.run(eg)
        self.assertGreater(removed, 0)
        self.assertLess(len(eg.graph.nodes), n_before)
        self.assertNotIn("unused.weight", eg.constants)
        self.assertNotIn("aten::sigmoid", eg.op_counts())
        with torch.no_grad():
            torch.testing.assert_close(eg.run([x])[0], m(x))

    def test_keeps_writes_to_state(self):
        eg = graph_of(Counter(), torch.randn(3))
        self.assertIn("calls", eg.mutable)
        dce.run(eg)
        self.assertIn("aten::copy_", eg.op_counts())
        state = {"calls": torch.zeros(1)}
        eg.run([torch.randn(3)], state)
        eg.run([torch.randn(3)], state)
        self.assertEqual(float(state["calls"]), 2.0)


if __name__ == "__main__":
    unittest.main()
