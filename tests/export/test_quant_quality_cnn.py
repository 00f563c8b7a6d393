"""Smoke test of bench/quality/cnn/cnn_int8.py (the CNN int8 quality report) on a tiny
configuration: the generated data is deterministic, the trained CNN learns it, and every int8
variant (PTQ minmax / histogram, QAT) run by libetch agrees with the exporter's reference
interpreter within one output quantization step and with float32 above a bound."""

import importlib.util
import unittest

import torch

from tests.export._common import REPO, needs_lib

_spec = importlib.util.spec_from_file_location(
    "cnn_int8", str(REPO / "bench" / "quality" / "cnn" / "cnn_int8.py"))
cnn_int8 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cnn_int8)

SMOKE = dict(cnn_int8.CONFIGS["tiny"], steps=50, qat=6, eval_n=128)


class Data(unittest.TestCase):
    def test_shapes_deterministic_and_balanced(self):
        x, y = cnn_int8.shapes(256, 3, 16)
        x2, y2 = cnn_int8.shapes(256, 3, 16)
        self.assertTrue(torch.equal(x, x2) and torch.equal(y, y2))
        self.assertEqual(tuple(x.shape), (256, 3, 16, 16))
        self.assertEqual(set(y.tolist()), set(range(len(cnn_int8.CLASSES))))
        self.assertFalse(torch.equal(x, cnn_int8.shapes(256, 4, 16)[0]))


class Report(unittest.TestCase):
    @needs_lib
    def test_tiny_run(self):
        rows = cnn_int8.run(SMOKE, log=lambda *a: None)
        by = {r["variant"]: r for r in rows if r["model"] == "ShapesCNN"}
        self.assertEqual(set(by), {"float32", "minmax", "histogram", "qat"})
        self.assertGreater(by["float32"]["acc"], 0.4)          # chance is 1/8
        for v in ("minmax", "histogram", "qat"):
            with self.subTest(variant=v):
                r = by[v]
                # libetch's int8 output against the reference interpreter: at most one
                # output step apart (a product on a rounding tie requantized the other way)
                self.assertLessEqual(r["ref_steps"], 1.0 + 1e-3)
                self.assertGreaterEqual(r["ref_agree"], 0.97)
                self.assertGreater(r["acc"], 0.4)
                if v != "qat":          # QAT's weights moved away from float's
                    self.assertGreaterEqual(r["agree"], 0.9)
                    self.assertGreater(r["cos_mean"], 0.99)
        text = cnn_int8.report(rows, SMOKE, 1.0)
        self.assertIn("| ShapesCNN | int8 histogram |", text)


if __name__ == "__main__":
    unittest.main()
