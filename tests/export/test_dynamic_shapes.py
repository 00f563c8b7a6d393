"""dynamic_shapes: one {dim: max} per input.  Sizes that depend on a dynamic dimension are
fitted from several traces, computed at run time (aten::sym_size.int + executorch_prim
arithmetic), tensors are DYNAMIC_BOUND with their upper bound planned, and views of
dynamically shaped tensors become executorch_prim::et_view."""

import unittest

import torch
import torch.nn as nn

from tests.export._common import etch, lib_path, needs_lib, rel_err
from tests.export._planfile import analyze
from etch import opcheck, symbolic, zoo
from etch.capture import CaptureError, _resize
from etch.serialize import schema as S


class Fit(unittest.TestCase):
    def test_multilinear_fit(self):
        pts = [(8, 4), (8, 2), (3, 4), (3, 2), (4, 3)]
        vals = [a * b * 2 + a + 7 for a, b in pts]
        e = symbolic.fit(pts, vals, 2, [0, 1, 2, 3])
        self.assertIsInstance(e, symbolic.SymExpr)
        self.assertEqual(e.evaluate((10, 10)), 217)
        self.assertEqual(symbolic.fit(pts, [5] * 5, 2, [0, 1, 2, 3]), 5)
        floor = [(a - 3) // 2 for a, _ in pts]              # not a polynomial
        self.assertIs(symbolic.fit(pts, floor, 2, [0, 1, 2, 3]), symbolic.UNKNOWN)


class Flatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)

    def forward(self, x):                     # x: [B, T, 12]
        return self.fc(x).reshape(-1, 5).relu()


class DynamicShapesTest(unittest.TestCase):
    def export(self, name_or_model, inputs, dyn):
        m = name_or_model
        return etch.export(m, inputs, dynamic_shapes=dyn, check_ops=False)

    def test_file_marks_bounds_and_computes_sizes(self):
        m = Flatten().eval()
        x = torch.randn(2, 3, 12)
        p = self.export(m, (x,), [{0: 4, 1: 6}])
        plan = p.method().plan
        inp = plan.values[plan.inputs[0]].val
        self.assertEqual(inp.sizes, [4, 6, 12])                   # upper bounds
        self.assertEqual(inp.shape_dynamism, S.TensorShapeDynamism.DYNAMIC_BOUND)
        ops = p.method().op_calls
        self.assertEqual(ops["aten::sym_size.int"], 2)
        self.assertIn("executorch_prim::mul.Scalar", ops)         # B*T for the reshape
        out = plan.values[plan.outputs[0]].val
        self.assertEqual(out.sizes, [24, 5])
        facts = analyze(p.buffer)
        self.assertEqual(facts.overlaps, [])
        self.assertLessEqual(facts.arena, 1.10 * facts.lower_bound)
        eg = p.graphs["forward"]
        for b, t in ((4, 6), (1, 1), (3, 2)):
            xs = torch.randn(b, t, 12)
            torch.testing.assert_close(eg.run([xs])[0], m(xs))

    def test_structure_that_depends_on_size_is_refused(self):
        m, x = zoo.build("lstm")                  # unrolled over time
        with self.assertRaises(CaptureError):
            self.export(m, x, [{1: 12}])

    def test_bad_specs(self):
        m, x = zoo.build("mlp")
        with self.assertRaises(ValueError):
            self.export(m, x, [{0: 8}, {0: 8}])
        with self.assertRaises(ValueError):
            self.export(m, x, [{5: 8}])

    @needs_lib
    def test_runtime_with_smaller_inputs(self):
        for name, dyn in (("mlp", [{0: 8}]), ("lenet", [{0: 4}])):
            with self.subTest(model=name):
                m, x = zoo.build(name)
                p = etch.export(m, x, dynamic_shapes=dyn, check_ops=True)
                rt = etch.runtime.load(p)
                for b in (dyn[0][0], 1, 3, 2):
                    xs = _resize(x[0], 0, b)
                    got = rt.forward(xs)
                    with torch.no_grad():
                        ref = m(xs)
                    self.assertEqual(got.shape, ref.shape)
                    self.assertLessEqual(rel_err(got, ref), 1e-4)

    def test_sequence_models(self):
        reg = opcheck.registry(lib_path()) if lib_path() else None
        for name in ("transformer_encoder", "llama_block", "audio_conv1d"):
            with self.subTest(model=name):
                m, x = zoo.build(name)
                d = 2 if name == "audio_conv1d" else 1
                mx = x[0].shape[d]
                p = etch.export(m, x, dynamic_shapes=[{d: mx}], check_ops=False)
                eg = p.graphs["forward"]
                rt = None
                if reg is not None and all(o in reg for o in p.operators):
                    rt = etch.runtime.load(p)
                for size in (mx, mx - 1, mx // 3, mx):
                    xs = _resize(x[0], d, size)
                    with torch.no_grad():
                        ref = m(xs)
                    self.assertLessEqual(rel_err(eg.run([xs])[0], ref), 1e-4)
                    if rt is not None:
                        got = rt.forward(xs)
                        self.assertEqual(got.shape, ref.shape)
                        self.assertLessEqual(rel_err(got, ref), 1e-4)


if __name__ == "__main__":
    unittest.main()
