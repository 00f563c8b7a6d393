"""End to end through the C runtime: export, run with etch.runtime (ctypes over libetch) and
with the `etch run` CLI (same bits), compare with PyTorch eager:
max|etch - torch| / max(max|torch|, 1e-6) <= 1e-4."""

import os
import tempfile
import unittest

import numpy as np
import torch

from tests.export._common import etch, needs_cli, needs_lib, rel_err, run_cli
from etch import zoo

TOL = 1e-4


class RuntimeE2E(unittest.TestCase):
    MODELS = ("mlp", "lenet")

    @needs_lib
    def test_python_binding_matches_eager(self):
        for name in self.MODELS:
            with self.subTest(model=name):
                model, inputs = zoo.build(name)
                program = etch.export(model, inputs, check_ops=True)
                m = etch.runtime.load(program)
                for seed in range(3):
                    g = torch.Generator().manual_seed(seed)
                    x = tuple(torch.randn(t.shape, generator=g) for t in inputs)
                    with torch.no_grad():
                        ref = model(*x)
                    got = m.forward(*x)
                    self.assertEqual(got.shape, ref.shape)
                    self.assertEqual(got.dtype, ref.dtype)
                    self.assertLessEqual(rel_err(got, ref), TOL)

    @needs_lib
    def test_run_method_from_path_and_repeat(self):
        model, inputs = zoo.build("mlp")
        program = etch.export(model, inputs)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mlp.pte")
            program.save(path)
            m = etch.runtime.load(path)
            a = m.run_method("forward", *inputs)
            b = m.run_method("forward", *inputs)
            self.assertEqual(len(a), 1)
            self.assertTrue(torch.equal(a[0], b[0]))

    @needs_lib
    def test_runtime_errors_are_reported(self):
        model, inputs = zoo.build("mlp")
        m = etch.runtime.load(etch.export(model, inputs))
        with self.assertRaises(etch.runtime.RuntimeError_) as cm:
            m.forward(torch.randn(3, 3))
        self.assertIn("input 0", str(cm.exception))
        with self.assertRaises(etch.runtime.RuntimeError_):
            etch.runtime.load(b"not a program at all, not at all" * 4)

    @needs_cli
    def test_repeated_execution_without_new_inputs(self):
        """Input memory is never reused, so execute() can run again on the same inputs."""
        with tempfile.TemporaryDirectory() as d:
            model, inputs = zoo.build("lenet")
            pte = os.path.join(d, "m.pte")
            etch.export(model, inputs, check_ops=False).save(pte)
            once = run_cli("run", pte, "--print-output")
            thrice = run_cli("run", pte, "--print-output", "--num-executions", "3")
            self.assertEqual(once.returncode, 0, once.stderr)
            self.assertEqual(thrice.returncode, 0, thrice.stderr)
            last = [l for l in once.stdout.splitlines() if l.startswith("output 0")]
            self.assertEqual(last, [l for l in thrice.stdout.splitlines()
                                    if l.startswith("output 0")])

    @needs_lib
    @needs_cli
    def test_cli_and_binding_agree_bit_for_bit(self):
        for name in self.MODELS:
            with self.subTest(model=name), tempfile.TemporaryDirectory() as d:
                model, inputs = zoo.build(name)
                program = etch.export(model, inputs)
                pte = os.path.join(d, "m.pte")
                program.save(pte)
                paths = []
                for i, x in enumerate(inputs):
                    p = os.path.join(d, "in%d.npy" % i)
                    np.save(p, x.numpy())
                    paths.append(p)
                r = run_cli("run", pte, "--inputs", ",".join(paths), "--output-dir", d)
                self.assertEqual(r.returncode, 0, r.stderr)
                cli_out = torch.from_numpy(np.load(os.path.join(d, "output_0.npy")))
                py_out = etch.runtime.load(pte).forward(*inputs)
                self.assertTrue(torch.equal(cli_out, py_out))
                with torch.no_grad():
                    self.assertLessEqual(rel_err(cli_out, model(*inputs)), TOL)


if __name__ == "__main__":
    unittest.main()
