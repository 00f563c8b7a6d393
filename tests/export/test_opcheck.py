import unittest

import torch
import torch.nn as nn

from tests.export._common import etch, lib_path, needs_lib
from etch import opcheck, zoo


class OpCheckTest(unittest.TestCase):
    def program(self):
        model, inputs = zoo.build("lenet")
        return etch.export(model, inputs, check_ops=False)

    def test_names_every_missing_operator(self):
        p = self.program()
        kernels = {"aten::relu.out": "TWW"}
        with self.assertRaises(opcheck.OperatorCheckError) as cm:
            opcheck.check_program(p.program, kernels)
        msg = str(cm.exception)
        for name in ("aten::convolution.out", "aten::max_pool2d_with_indices.out",
                     "aten::addmm.out"):
            self.assertIn("missing operator " + name, msg)
        self.assertNotIn("missing operator aten::relu.out", msg)

    def test_signature_mismatch(self):
        p = self.program()
        kernels = {n: None for n in p.operators}
        kernels["aten::relu.out"] = "TTWW"          # wrong arity
        kernels["aten::addmm.out"] = "TTTIIWW"      # alpha/beta given as Int: fine
        with self.assertRaises(opcheck.OperatorCheckError) as cm:
            opcheck.check_program(p.program, kernels)
        self.assertIn("aten::relu.out takes 4 arguments", str(cm.exception))
        kernels["aten::relu.out"] = "TWW"
        opcheck.check_program(p.program, kernels)

    def test_dtype_without_a_kernel(self):
        p = self.program()
        kernels = {n: None for n in p.operators}
        kernels["aten::relu.out"] = "TWW"
        float_bit, double_bit = 1 << 6, 1 << 7
        dtypes = {"aten::relu.out": double_bit}       # pretend relu has Double kernels only
        with self.assertRaises(opcheck.OperatorCheckError) as cm:
            opcheck.check_program(p.program, kernels, dtypes)
        self.assertIn("aten::relu.out has no kernel for Float inputs in this build (it has: "
                      "Double)", str(cm.exception))
        dtypes["aten::relu.out"] |= float_bit
        opcheck.check_program(p.program, kernels, dtypes)

    @needs_lib
    def test_dtype_table_from_the_library(self):
        d = opcheck.dtype_support(lib_path())
        self.assertTrue(d["aten::add.out"] >> 6 & 1)          # Float
        self.assertFalse(d["aten::_softmax.out"] >> 3 & 1)    # no Int softmax (torch has none)
        opcheck.check_program(self.program().program, opcheck.registry(lib_path()), d)

    @needs_lib
    def test_registry_from_the_library(self):
        reg = opcheck.registry(lib_path())
        self.assertIn("aten::add.out", reg)
        self.assertIn("executorch_prim::et_view.default", reg)
        p = self.program()
        opcheck.check_program(p.program, reg)       # LeNet runs on this build

    @needs_lib
    def test_export_fails_naming_missing_kernels(self):
        class M(nn.Module):
            def forward(self, x, y):
                return _PROBE(torch.relu(x) + y, 2.0)

        with self.assertRaises(opcheck.OperatorCheckError) as cm:
            etch.export(M(), (torch.randn(3), torch.randn(3)), check_ops=True)
        msg = str(cm.exception)
        self.assertIn("missing operator dim_order_ops::etch_probe.out", msg)
        self.assertNotIn("aten::relu.out", msg)


# An operator in an ExecuTorch namespace that no runtime registers.
_LIB = torch.library.Library("dim_order_ops", "DEF")
_LIB.define("etch_probe(Tensor x, float s) -> Tensor")
_LIB.define("etch_probe.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)")
_LIB.impl("etch_probe", lambda x, s: x * s, "CPU")
_PROBE = torch.ops.dim_order_ops.etch_probe

if __name__ == "__main__":
    unittest.main()
