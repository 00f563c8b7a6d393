"""The model zoo end to end: every model exports; the exported graph equals eager; the memory
plan, recomputed from the file, is within 1.10x of its lower bound; and, where this build of
libetch registers every operator the file uses, the C runtime (Python binding and `etch run`,
bit for bit) matches eager within 1e-4 relative to the largest output magnitude, and the
bundled program (eager outputs as expectations) passes `etch verify`.  A model whose kernels
are not all registered, or a missing python3-torchvision, fails the test (CI installs it)."""

import os
import tempfile
import unittest

import numpy as np
import torch

from tests.export._common import cli_path, etch, lib_path, rel_err, run_cli
from tests.export._planfile import analyze
from etch import opcheck, zoo

TOL = 1e-4
BUNDLE_RTOL, BUNDLE_ATOL = 1e-4, 1e-5


def _registry():
    return opcheck.registry(lib_path()) if lib_path() else None


class ZooTest(unittest.TestCase):
    registry = None

    @classmethod
    def setUpClass(cls):
        cls.registry = _registry()

    def check_model(self, name):
        if name in ("mobilenet_v2", "resnet18"):
            try:
                import torchvision  # noqa: F401
            except ImportError:
                self.fail("torchvision is not installed (Debian: python3-torchvision)")
        model, inputs = zoo.build(name)
        program = etch.export(model, inputs, check_ops=False)
        with torch.no_grad():
            ref = model(*inputs)
        graph_out = program.graphs["forward"].run(list(inputs))[0]
        self.assertLessEqual(rel_err(graph_out, ref), TOL, "exported graph vs eager")
        facts = analyze(program.buffer)
        self.assertEqual(facts.overlaps, [])
        self.assertLessEqual(facts.arena, 1.10 * facts.lower_bound)
        self.assertEqual(program.etch_only_operators, [])
        if cli_path():
            with tempfile.TemporaryDirectory() as d:
                pte = os.path.join(d, name + ".pte")
                program.save(pte)
                info = run_cli("info", pte)
                self.assertEqual(info.returncode, 0, info.stderr)
                self.assertIn("method 'forward'", info.stdout)
        if self.registry is None:
            self.skipTest("libetch not built")
        missing = [op for op in program.operators if op not in self.registry]
        if missing:
            self.fail("kernels missing from this build: " + ", ".join(missing))
        opcheck.check_program(program.program, self.registry)
        got = etch.runtime.load(program).forward(*inputs)
        self.assertLessEqual(rel_err(got, ref), TOL, "etch runtime vs eager")
        if cli_path():
            with tempfile.TemporaryDirectory() as d:
                pte = os.path.join(d, "m.pte")
                program.save(pte)
                ins = []
                for i, x in enumerate(inputs):
                    ins.append(os.path.join(d, "in%d.npy" % i))
                    np.save(ins[-1], x.numpy())
                r = run_cli("run", pte, "--inputs", ",".join(ins), "--output-dir", d)
                self.assertEqual(r.returncode, 0, r.stderr)
                cli = torch.from_numpy(np.load(os.path.join(d, "output_0.npy")))
                self.assertTrue(torch.equal(cli, got), "CLI and binding differ")
                # the bundled program passes etch verify
                g = torch.Generator().manual_seed(7)
                other = tuple(torch.randn(x.shape, generator=g).to(x.dtype) for x in inputs)
                bpte = os.path.join(d, "m.bpte")
                with open(bpte, "wb") as f:
                    with torch.no_grad():
                        cases = [(xs, (model(*xs),)) for xs in (inputs, other)]
                    f.write(etch.bundle(program, cases, rtol=BUNDLE_RTOL, atol=BUNDLE_ATOL))
                v = run_cli("verify", bpte, "--rtol", BUNDLE_RTOL, "--atol", BUNDLE_ATOL)
                self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
                self.assertIn("2 passed, 0 failed", v.stdout)


def _make(name):
    def test(self):
        self.check_model(name)
    test.__name__ = "test_" + name
    return test


for _name in zoo.names():
    setattr(ZooTest, "test_" + _name, _make(_name))


if __name__ == "__main__":
    unittest.main()
