import os
import subprocess
import sys
import tempfile
import unittest

from tests.export._common import REPO, needs_cli, needs_lib, python_env, run_cli
from etch.cli import parse_input_spec


class CliTest(unittest.TestCase):
    def run_export(self, *args):
        return subprocess.run([sys.executable, "-m", "etch", "export", *args],
                              capture_output=True, text=True, env=python_env(), cwd=REPO)

    def test_input_specs(self):
        import torch
        t = parse_input_spec("1x3x8x8:float32")
        self.assertEqual((tuple(t.shape), t.dtype), ((1, 3, 8, 8), torch.float32))
        t = parse_input_spec("2x5:int64:0..7")
        self.assertEqual(t.dtype, torch.int64)
        self.assertTrue(bool(((t >= 0) & (t < 7)).all()))
        with self.assertRaises(ValueError):
            parse_input_spec("2x5:complex")

    def test_export_with_progress_and_summary(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "lenet.pte")
            r = self.run_export("etch.zoo:lenet", "--input", "1x1x28x28:float32", "-o", out,
                                "--summary", "--no-check")
            self.assertEqual(r.returncode, 0, r.stderr)
            for stage in ("tracing", "bn_fold", "emitting", "wrote"):
                self.assertIn(stage, r.stderr)
            self.assertIn("aten::convolution.out", r.stdout)
            with open(out, "rb") as f:
                self.assertEqual(f.read(4 + 4)[4:], b"ET12")

    def test_errors_are_messages_not_tracebacks(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_export("etch.zoo:no_such_model", "--input", "1x4", "-o",
                                os.path.join(d, "x.pte"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("etch export: error", r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    @needs_lib
    @needs_cli
    def test_exported_file_runs_and_bundle_verifies(self):
        with tempfile.TemporaryDirectory() as d:
            out, bpte = os.path.join(d, "mlp.pte"), os.path.join(d, "mlp.bpte")
            r = self.run_export("etch.zoo:mlp", "--input", "4x32:float32", "-o", out,
                                "--bundle", bpte, "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            self.assertEqual(run_cli("run", out).returncode, 0)
            v = run_cli("verify", bpte, "--rtol", "1e-4", "--atol", "1e-5")
            self.assertEqual(v.returncode, 0, v.stdout + v.stderr)


if __name__ == "__main__":
    unittest.main()
