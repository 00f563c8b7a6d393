import unittest

import torch
import torch.nn as nn

from tests.export._common import graph_of
from etch import ops
from etch.emit import ConstantTable, emit_method
from etch.passes import constant_fold, dce, normalize, views
from etch.serialize import schema as S


class Reshapes(nn.Module):
    def forward(self, x):                        # x: [2, 3, 4]
        y = torch.relu(x)
        a = y.flatten(1).clone()                 # view + redundant copy
        b = y.unsqueeze(1).permute(0, 2, 1, 3)   # moves a unit dim only: same bytes
        c = y.transpose(1, 2)                    # real data movement
        return torch.sigmoid(a), b.reshape(2, -1) * 2, c


class ConstantOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.arange(4.0))

    def forward(self, x):
        return x + 1, self.k.view(2, 2)


def prepared(m, x):
    eg = graph_of(m.eval(), x)
    normalize.run(eg)
    dce.run(eg)
    eg.propagate()
    return eg


class ViewsTest(unittest.TestCase):
    def test_views_become_aliases(self):
        m = Reshapes()
        x = torch.randn(2, 3, 4)
        eg = prepared(m, x)
        n = views.run(eg)
        dce.run(eg)
        eg.propagate()
        self.assertGreaterEqual(n, 3)
        counts = eg.op_counts()
        self.assertNotIn("aten::view_copy", counts)
        self.assertNotIn("aten::clone", counts)
        self.assertEqual(counts.get("aten::permute_copy"), 1)      # the transpose stays
        # aliases point at roots, never at other aliases
        for node in eg.call_nodes():
            if node.target is ops.alias:
                self.assertIsNot(node.args[0].target, ops.alias)
        for a, b in zip(eg.run([x]), m(x)):
            torch.testing.assert_close(a, b)

    def test_elided_alias_shares_allocation(self):
        m = Reshapes()
        x = torch.randn(2, 3, 4)
        eg = prepared(m, x)
        views.run(eg)
        dce.run(eg)
        eg.propagate()
        em = emit_method(eg, ConstantTable())
        names = [o.name for o in em.plan.operators]
        self.assertNotIn("executorch_prim::et_view", names)
        self.assertNotIn("aten::view_copy", names)
        # the relu result and its aliases: several Tensor values, one allocation
        allocs = {}
        for v in em.plan.values:
            t = v.val
            if isinstance(t, S.Tensor) and t.allocation_info is not None:
                allocs.setdefault(t.allocation_info.memory_offset, []).append(t.sizes)
        shapes = [s for group in allocs.values() for s in group]
        self.assertIn([2, 3, 4], shapes)
        relu_group = [g for g in allocs.values() if [2, 3, 4] in g and len(g) > 1]
        self.assertTrue(relu_group, allocs)

    def test_constant_outputs_get_their_own_memory(self):
        m = ConstantOut()
        x = torch.randn(3)
        eg = prepared(m, x)
        constant_fold.run(eg)           # the output becomes a constant...
        eg.propagate()
        self.assertTrue(eg.is_constant(eg.outputs[1]))
        views.run(eg)                   # ...and gets a copy
        eg.propagate()
        out = eg.outputs[1]
        self.assertEqual(out.target, torch.ops.aten.clone.default)
        for a, b in zip(eg.run([x]), m(x)):
            torch.testing.assert_close(a, b)


if __name__ == "__main__":
    unittest.main()
