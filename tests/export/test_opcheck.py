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

    @needs_lib
    def test_registry_from_the_library(self):
        reg = opcheck.registry(lib_path())
        self.assertIn("aten::add.out", reg)
        self.assertIn("executorch_prim::et_view.default", reg)
        p = self.program()
        opcheck.check_program(p.program, reg)       # LeNet runs on this build

    @needs_lib
    def test_export_fails_naming_missing_kernels(self):
        reg = opcheck.registry(lib_path())
        if "aten::atan2.out" in reg:
            self.skipTest("atan2 is registered now")

        class M(nn.Module):
            def forward(self, x, y):
                return torch.atan2(x, y)

        with self.assertRaises(opcheck.OperatorCheckError) as cm:
            etch.export(M(), (torch.randn(3), torch.randn(3)), check_ops=True)
        self.assertIn("aten::atan2.out", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
