"""etch.runtime.load's module options (etch_module_options of include/etch/module.h, mirrored
in etch/_lib.py): kernels="optimized"|"portable"|"registered" and num_threads."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import torch

from tests.export._common import etch, needs_lib, python_env


def _model():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU6(),
                            torch.nn.Conv2d(16, 16, 3, stride=2), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(16 * 7 * 7, 10),
                            torch.nn.GELU()).eval()
    return m, torch.randn(2, 3, 16, 16)


_RUN = textwrap.dedent("""
    import sys, torch, etch
    path, kernels, x_path, out_path = sys.argv[1:5]
    x = torch.load(x_path)
    outs = {}
    for threads in (0, 1, 3):
        with etch.runtime.load(path, kernels=kernels, num_threads=threads) as m:
            assert m._opts.kernels == etch._lib.KERNELS[kernels]
            assert m._opts.num_threads == threads
            outs[threads] = m.forward(x)
    try:   # the kernel registry is process-wide: portable after optimized is refused
        etch.runtime.load(path, kernels="portable" if kernels == "optimized" else "optimized")
        outs["other"] = "loaded"
    except etch.runtime.RuntimeError_ as e:
        outs["other"] = str(e)
    torch.save(outs, out_path)
""")

_REGISTERED = textwrap.dedent("""
    import sys, torch, etch
    m = etch.runtime.load(sys.argv[1], kernels="registered")
    try:
        m.forward(torch.zeros(2, 3, 16, 16))
    except etch.runtime.RuntimeError_ as e:
        print("REFUSED", e)
    else:
        print("RAN")
""")


@needs_lib
class RuntimeOptionsTest(unittest.TestCase):
    """Each kernel set in a process of its own: the C kernel registry is process-wide."""

    @classmethod
    def setUpClass(cls):
        cls.model, cls.x = _model()
        cls.program = etch.export(cls.model, (cls.x,))
        with torch.no_grad():
            cls.ref = cls.model(cls.x)
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "m.pte")
        cls.program.save(cls.path)
        cls.x_path = os.path.join(cls.dir.name, "x.pt")
        torch.save(cls.x, cls.x_path)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def _python(self, code, *args):
        r = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                           capture_output=True, text=True, env=python_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_kernel_sets_and_threads_match_eager(self):
        for kernels in ("optimized", "portable"):
            with self.subTest(kernels=kernels):
                out_path = os.path.join(self.dir.name, kernels + ".pt")
                self._python(_RUN, self.path, kernels, self.x_path, out_path)
                outs = torch.load(out_path)
                for threads in (0, 1, 3):
                    err = float((outs[threads] - self.ref).abs().max())
                    self.assertLessEqual(err, 1e-4, "%s, %d threads" % (kernels, threads))
                if kernels == "optimized":   # portable-only after optimized: refused
                    self.assertIn("process-wide", outs["other"])

    def test_bad_options_are_refused(self):
        for kw in ({"kernels": "fast"}, {"num_threads": -1}):
            with self.subTest(**kw):
                with self.assertRaises(ValueError):
                    etch.runtime.load(self.program, **kw)
        for kw in ({"kernels": 0}, {"num_threads": 1.5}, {"num_threads": True}):
            with self.subTest(**kw):
                with self.assertRaises(TypeError):
                    etch.runtime.load(self.program, **kw)
        # beyond the thread pool's limit: the C side refuses with its message
        with self.assertRaises(etch.runtime.RuntimeError_):
            etch.runtime.load(self.program, num_threads=100000)

    def test_registered_uses_only_what_the_process_registered(self):
        # a fresh process that registered nothing: loading the method names a missing kernel
        out = self._python(_REGISTERED, self.path)
        self.assertIn("REFUSED", out)
        self.assertIn("aten::", out)


if __name__ == "__main__":
    unittest.main()
