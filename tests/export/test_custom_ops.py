"""Files stay portable: operators outside ExecuTorch's namespaces (aten, executorch_prim,
dim_order_ops, quantized_decomposed, llama) are refused unless allow_etch_ops=True, and
summary() lists them.  Custom operators with an out-variant are lowered like ATen ones."""

import unittest

import torch
import torch.nn as nn

from tests.export._common import etch
from etch import ops as etch_ops

_LIBS = []


def _define(ns, name):
    lib = etch_ops.library(ns)
    lib.define("%s(Tensor x, float s) -> Tensor" % name)
    lib.define("%s.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)" % name)

    def fn(x, s):
        return x * s

    def fn_out(x, s, *, out):
        out.copy_(x * s)
        return out

    lib.impl(name, fn, "CPU")
    lib.impl(name + ".out", fn_out, "CPU")
    _LIBS.append(lib)
    return getattr(getattr(torch.ops, ns), name)


etch_scale = _define("etch_custom_test", "scale")
llama_scale = _define("llama", "etch_test_scale")


class Uses(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(torch.relu(x), 2.5)


class CustomOpsTest(unittest.TestCase):
    def test_etch_only_needs_opt_in(self):
        m = Uses(etch_scale)
        x = torch.randn(5)
        with self.assertRaises(etch.ExportError) as cm:
            etch.export(m, (x,), check_ops=False)
        self.assertIn("etch_custom_test::scale.out", str(cm.exception))
        p = etch.export(m, (x,), check_ops=False, allow_etch_ops=True)
        self.assertEqual(p.etch_only_operators, ["etch_custom_test::scale.out"])
        s = p.summary()
        self.assertIn("[etch-only]", s)
        self.assertIn("not portable to ExecuTorch", s)
        plan = p.method().plan
        call = plan.chains[0].instructions[1].instr_args
        self.assertEqual(len(call.args), 4)          # x, s, out, return slot
        self.assertAlmostEqual(plan.values[call.args[1]].val.double_val, 2.5)
        torch.testing.assert_close(p.graphs["forward"].run([x])[0], m(x))

    def test_executorch_namespaces_are_portable(self):
        p = etch.export(Uses(llama_scale), (torch.randn(5),), check_ops=False)
        self.assertEqual(p.etch_only_operators, [])
        self.assertIn("llama::etch_test_scale.out", p.operators)


if __name__ == "__main__":
    unittest.main()
