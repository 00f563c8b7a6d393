"""etch.inspect: PyTorch eager against etch, operator by operator and layer by layer.

* a deliberately wrong kernel for one operator in the middle of a model (registered through the
  C API, etch_kernels_register, with a ctypes kernel: tanh scaled by 0.9) is the first operator
  the inspector marks, and nothing before it is;
* a float program agrees everywhere (and its outputs' SQNR is that of etch.runtime's own run);
* an int8-quantized CNN against its float model: per-layer SQNR, the layer whose weights were
  made hard to quantize (an outlier in every output channel) first by damage;
* an XNNPACK-delegated program: one row per delegate call;
* a program with a dynamic dimension, run at a smaller size: every operator compared;
* a program of another model, or other inputs, is refused (InspectError)."""

import ctypes
import io
import math
import os
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn as nn

from tests.export._common import REPO, needs_lib, python_env

import etch  # noqa: E402
from etch import _lib, zoo  # noqa: E402
from etch.inspector import InspectError, compare  # noqa: E402


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.tanh(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.fc(torch.flatten(x, 1))


def _cnn():
    torch.manual_seed(0)
    return CNN().eval(), torch.randn(1, 3, 8, 8)


_KERNEL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p,
                              ctypes.POINTER(ctypes.POINTER(_lib.etch_value)), ctypes.c_size_t)


def _numel(t):
    n = 1
    for i in range(t.dim):
        n *= t.sizes[i]
    return n


def _wrong_tanh(ctx, args, nargs):
    """aten::tanh.out(self, *, out) computing 0.9 * tanh(self)."""
    x, out = args[0].contents.u.tensor.contents, args[1].contents.u.tensor.contents
    n = _numel(x)
    src = torch.frombuffer((ctypes.c_float * n).from_address(x.data), dtype=torch.float32)
    dst = torch.frombuffer((ctypes.c_float * n).from_address(out.data), dtype=torch.float32)
    dst.copy_(torch.tanh(src) * 0.9)


# The registry keeps the pointers it was given for the life of the process (a later
# registration only takes precedence): what it points to must never be freed.
_KEEP = []


class _WrongTanh:
    """Registers the wrong kernel for aten::tanh.out, and the original back on exit."""

    def __enter__(self):
        lib = _lib.load()
        P = ctypes.POINTER
        for name, res, args in (("etch_kernels_register_optimized", ctypes.c_int, []),
                                ("etch_kernels_find", P(_lib.etch_kernel),
                                 [ctypes.c_char_p, ctypes.c_size_t]),
                                ("etch_kernels_register", ctypes.c_int,
                                 [P(_lib.etch_kernel), ctypes.c_size_t]),
                                ("etch_kernels_register_ex", ctypes.c_int,
                                 [P(_lib.etch_kernel), ctypes.c_size_t, ctypes.c_char_p,
                                  ctypes.c_uint32]),
                                ("etch_kernels_impl_of", ctypes.c_char_p, [P(_lib.etch_kernel)]),
                                ("etch_kernels_flags_of", ctypes.c_uint32,
                                 [P(_lib.etch_kernel)])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        assert lib.etch_kernels_register_optimized() == 0
        self.orig = lib.etch_kernels_find(b"aten::tanh.out", 14)
        assert self.orig
        self.impl = lib.etch_kernels_impl_of(self.orig)
        self.flags = lib.etch_kernels_flags_of(self.orig)
        self.fn = _KERNEL_FN(_wrong_tanh)
        self.table = (_lib.etch_kernel * 1)(
            _lib.etch_kernel(b"aten::tanh.out", None, ctypes.cast(self.fn, ctypes.c_void_p)))
        _KEEP.append((self.fn, self.table))
        assert lib.etch_kernels_register(self.table, 1) == 0
        return self

    def __exit__(self, *exc):
        assert self.lib.etch_kernels_register_ex(self.orig, 1, self.impl, self.flags) == 0


@needs_lib
class Inspect(unittest.TestCase):
    def test_wrong_kernel_is_named_first(self):
        model, x = _cnn()
        program = etch.export(model, (x,))
        with _WrongTanh():
            out = io.StringIO()
            report = etch.inspect(model, program, (x,), file=out)
        bad = report.first_bad
        self.assertIsNotNone(bad, out.getvalue())
        self.assertEqual(bad.op, "aten::tanh.out")
        self.assertTrue(bad.node.startswith("tanh"))
        with open(__file__) as f:
            line = f.read().splitlines()[int(bad.source.rsplit(":", 1)[1]) - 1]
        self.assertIn("torch.tanh(self.conv2(x))", line)
        # everything before it agrees to float rounding; the error is what the kernel did
        before = [r for r in report.rows if r.pc < bad.pc and r.metrics is not None]
        self.assertGreaterEqual(len(before), 3)
        for r in before:
            self.assertGreater(r.metrics.sqnr_db, 90, r)
        ref = torch.tanh(model.conv2(torch.relu(model.conv1(x))))
        self.assertAlmostEqual(bad.metrics.max_abs, float((ref * 0.1).abs().max()), places=5)
        self.assertAlmostEqual(bad.metrics.sqnr_db, 20.0, places=3)   # 10 log10(1 / 0.1^2)
        self.assertIn(">>", out.getvalue())
        self.assertIn("first operator below 40.0 dB: pc %d aten::tanh.out" % bad.pc,
                      out.getvalue())
        # with the kernel restored, nothing is marked
        again = etch.inspect(model, program, (x,), show=False)
        self.assertIsNone(again.first_bad)

    def test_float_program_agrees(self):
        model, inputs = zoo.build("lenet")
        program = etch.export(model, inputs)
        report = etch.inspect(model, program, inputs, show=False)
        self.assertEqual(len(report.rows), 11)
        self.assertIsNone(report.first_bad)
        for r in report.rows:
            self.assertGreater(r.metrics.sqnr_db, 90, r)
            self.assertGreater(r.metrics.cosine, 0.999999)
        y = etch.runtime.load(program).forward(*inputs)
        want = compare(model(*inputs), y)
        self.assertAlmostEqual(report.outputs[0].max_abs, want.max_abs, delta=1e-6)
        self.assertEqual([l.module for l in report.layers], ["bn1", "bn2", "fc1", "fc2", "fc3"])

    def test_int8_cnn_layers_by_damage(self):
        model, x = _cnn()
        with torch.no_grad():
            # conv1's channel 0 is always 0 after the relu, and every output channel of conv2
            # has a huge weight on it: no effect in float, but conv2's int8 scales become
            # 40/127, and its other weights (|w| < 0.12) round to 0
            model.conv1.weight[0] = 0
            model.conv1.bias[0] = -1
            model.conv2.weight[:, 0, 0, 0] = 40.0
        torch.manual_seed(1)
        cal = [(torch.randn(1, 3, 8, 8),) for _ in range(16)]
        q = etch.quantize(model, (x,), "int8", calibration=cal)
        program = etch.export(q, (x,))
        report = etch.inspect(model, program, (x,), show=False, threshold_db=20)
        self.assertEqual([l.module for l in report.layers], ["conv1", "conv2", "conv3", "fc"])
        for l in report.layers:
            self.assertTrue(math.isfinite(l.metrics.sqnr_db), l)
            self.assertLess(l.metrics.sqnr_db, 60, l)     # quantized: no float agreement
        worst = report.layers_by_damage()
        self.assertEqual(worst[0].module, "conv2")
        self.assertEqual(report.first_bad_layer.module, "conv2")
        self.assertGreater(report.layers[0].metrics.sqnr_db, report.layers[1].metrics.sqnr_db)
        damages = [l.damage for l in worst]
        self.assertEqual(damages, sorted(damages, reverse=True))
        self.assertLess(report.layers[1].metrics.sqnr_db, 10)
        # the float model's output against etch's own run of the program (etch.runtime, with
        # fusion and the blocked layout): the same SQNR as the inspector's run, within what a
        # few activations rounded to the neighbouring int8 step move it
        y = etch.runtime.load(program).forward(x)
        self.assertAlmostEqual(report.outputs[0].sqnr_db, compare(model(x), y).sqnr_db,
                               delta=0.25)
        # against the quantized model it came from, every operator is compared (and agrees)
        own = etch.inspect(q, program, (x,), show=False)
        self.assertGreater(len(own.rows), 20)
        self.assertIsNone(own.first_bad, str(own))
        self.assertTrue(any(r.op.startswith("quantized_decomposed::") for r in own.rows))

    def test_xnnpack_one_row_per_delegate(self):
        model, inputs = zoo.build("lenet")
        program = etch.export(model, inputs, backend="xnnpack")
        report = etch.inspect(model, program, inputs, show=False)
        delegates = [r for r in report.rows if r.op == "XnnpackBackend"]
        self.assertGreaterEqual(len(delegates), 1)
        for r in delegates:
            self.assertIsNotNone(r.metrics, r)
            self.assertGreater(r.metrics.sqnr_db, 80, r)
        self.assertIsNone(report.first_bad)

    def test_dynamic_shapes_read_at_the_eager_shape(self):
        model, inputs = zoo.build("transformer_encoder")       # [2, 16, 64]
        program = etch.export(model, inputs, dynamic_shapes=[{1: 16}])
        report = etch.inspect(model, program, (torch.randn(2, 9, 64),), show=False)
        compared = [r for r in report.rows if r.metrics is not None]
        self.assertGreater(len(compared), 20)
        self.assertTrue(any(r.shape[:2] == (2, 9) for r in compared))
        self.assertIsNone(report.first_bad)
        for r in compared:
            self.assertGreater(r.metrics.sqnr_db, 90, r)

    def test_mismatched_program_is_refused(self):
        lenet, lx = zoo.build("lenet")
        mlp, mx = zoo.build("mlp")
        program = etch.export(lenet, lx)
        with self.assertRaises(InspectError) as cm:
            etch.inspect(mlp, program, mx, show=False)
        self.assertIn("does not come from this model", str(cm.exception))
        self.assertIn("input 0 is float32 [4, 32], the program's is float32 [1, 1, 28, 28]",
                      str(cm.exception))
        with self.assertRaises(InspectError):
            etch.inspect(lenet, program, (torch.randn(2, 1, 28, 28),), show=False)
        # right inputs, other model with the same signature: the outputs differ in shape
        other = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 3)).eval()
        with self.assertRaises(InspectError) as cm:
            etch.inspect(other, program, lx, show=False)
        self.assertIn("output 0 of the model has shape [1, 3], the program's [1, 10]",
                      str(cm.exception))

    def test_program_without_debug_info(self):
        model, inputs = zoo.build("mlp")
        program = etch.export(model, inputs, debug_info=False)
        report = etch.inspect(model, program, inputs, show=False)
        self.assertEqual(report.rows, [])
        self.assertTrue(any("no debug information" in n for n in report.notes))
        self.assertGreater(report.outputs[0].sqnr_db, 90)

    def test_portable_after_optimized_is_refused(self):
        model, inputs = zoo.build("mlp")
        program = etch.export(model, inputs)
        etch.runtime.load(program).forward(*inputs)     # the optimized kernels: registered
        with self.assertRaisesRegex(etch.runtime.RuntimeError_, "process-wide"):
            etch.inspect(model, program, inputs, kernels="portable", show=False)

    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "lenet.pte")
            model, inputs = zoo.build("lenet")
            etch.export(model, inputs).save(path)
            cmd = [sys.executable, "-m", "etch", "inspect", "etch.zoo:lenet", path,
                   "--input", "1x1x28x28:float32", "--threshold", "50"]
            r = subprocess.run(cmd, capture_output=True, text=True, env=python_env(), cwd=REPO)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("first operator below 50.0 dB: none", r.stdout)
            self.assertIn("aten::convolution.out", r.stdout)
            r = subprocess.run([sys.executable, "-m", "etch", "inspect", "etch.zoo:mlp", path,
                                "--input", "4x32:float32"], capture_output=True, text=True,
                               env=python_env(), cwd=REPO)
            self.assertEqual(r.returncode, 1)
            self.assertIn("does not come from this model", r.stderr)


if __name__ == "__main__":
    unittest.main()
