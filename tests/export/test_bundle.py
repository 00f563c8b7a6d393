import os
import tempfile
import unittest

import torch

from tests.export._common import etch, needs_cli, needs_lib, run_cli
from etch import zoo
from etch.serialize import read_bpte, read_pte


class BundleTest(unittest.TestCase):
    def test_bpte_structure(self):
        model, inputs = zoo.build("mlp")
        p = etch.export(model, inputs, check_ops=False)
        cases = [inputs, (torch.randn(4, 32),)]
        data = etch.bundle(p, cases, verify=False)
        bp = read_bpte(data)
        self.assertEqual(data[4:8], b"BP08")
        self.assertEqual(bp.program, p.buffer)
        read_pte(bp.program)
        suite, = bp.method_test_suites
        self.assertEqual(suite.method_name, "forward")
        self.assertEqual(len(suite.test_cases), 2)
        case = suite.test_cases[1]
        exp = case.expected_outputs[0].val
        with torch.no_grad():
            ref = model(*cases[1])
        got = torch.frombuffer(bytearray(exp.data), dtype=torch.float32).reshape(exp.sizes)
        torch.testing.assert_close(got, ref)

    def test_explicit_expected_outputs(self):
        model, inputs = zoo.build("mlp")
        p = etch.export(model, inputs, check_ops=False)
        wrong = torch.zeros(4, 10)
        data = etch.bundle(p, [(inputs, (wrong,))], verify=False)
        case = read_bpte(data).method_test_suites[0].test_cases[0]
        self.assertEqual(bytes(case.expected_outputs[0].val.data), wrong.numpy().tobytes())

    @needs_lib
    def test_refuses_cases_the_runtime_does_not_reproduce(self):
        model, inputs = zoo.build("mlp")
        p = etch.export(model, inputs)
        with self.assertRaises(etch.bundling.BundleError):
            etch.bundle(p, [(inputs, (torch.zeros(4, 10),))])

    @needs_lib
    @needs_cli
    def test_etch_verify_passes(self):
        for name in ("mlp", "lenet"):
            with self.subTest(model=name), tempfile.TemporaryDirectory() as d:
                model, inputs = zoo.build(name)
                p = etch.export(model, inputs)
                g = torch.Generator().manual_seed(5)
                cases = [inputs, tuple(torch.randn(t.shape, generator=g) for t in inputs)]
                data = etch.bundle(p, cases, rtol=1e-4, atol=1e-5)
                path = os.path.join(d, name + ".bpte")
                with open(path, "wb") as f:
                    f.write(data)
                r = run_cli("verify", path, "--rtol", "1e-4", "--atol", "1e-5")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("2 passed, 0 failed", r.stdout)


if __name__ == "__main__":
    unittest.main()
