"""etch bench marks the integer kernels of quantized programs (etch.quantize: 8w, 4w, 8da4w,
int8-dynamic, int8) in its per-operator table: '/int' on quantized_decomposed operators,
'/int4' on a 4w linear chain (one int4 kernel from the packed weight), and the JSON key
"integer"; float operators and the float fixture programs carry no mark."""

import json
import os
import tempfile
import unittest

import torch

from tests.export._common import etch, needs_cli, needs_lib, run_cli
from tests.export.test_prune import MLP

_Q = "quantized_decomposed::"


def _bench(path, *extra):
    r = run_cli("bench", path, "--iterations", "2", "--warmup", "1", *extra)
    if r.returncode:
        raise AssertionError("etch bench %s failed: %s" % (path, r.stderr))
    return r.stdout


class BenchIntegerMarks(unittest.TestCase):
    @needs_lib
    @needs_cli
    def test_quantized_programs(self):
        torch.manual_seed(0)
        m = MLP(64, 64, 32).eval()
        x = torch.randn(2, 64)
        cal = [(torch.randn(2, 64),) for _ in range(4)]
        schemes = {"8w": {}, "4w": {"group_size": 32}, "8da4w": {"group_size": 32},
                   "int8-dynamic": {}, "int8": {"calibration": cal}}
        with tempfile.TemporaryDirectory() as d:
            for scheme, kw in schemes.items():
                with self.subTest(scheme=scheme):
                    path = os.path.join(d, scheme + ".pte")
                    etch.export(etch.quantize(m, (x,), scheme, **kw), (x,)).save(path)
                    ops = json.loads(_bench(path, "--json"))["ops"]
                    quant = [o for o in ops if o["op"].startswith(_Q)]
                    self.assertTrue(quant, "no quantized operator in the %s program" % scheme)
                    for o in ops:
                        if not o["op"].startswith(_Q):
                            self.assertIsNone(o["integer"], o)
                        elif scheme in ("4w", "8da4w") and o["chained_calls"] > 1:
                            # the run holds the 4-bit weight's embedding_4bit: from it (4w) or
                            # from the activation's choose_qparams (8da4w)
                            self.assertEqual(o["integer"], "int4", o)
                        else:
                            self.assertEqual(o["integer"], "int", o)
                    if scheme in ("4w", "8da4w"):   # the 4w weight chain is wired
                        self.assertIn("int4", [o["integer"] for o in quant])
                    text = _bench(path)
                    for op in {o["op"] for o in quant}:
                        # one row per (operator, how it ran): the same operator may be on
                        # several rows (chained runs of different lengths, alone)
                        rows = [o for o in quant if o["op"] == op]
                        lines = [ln for ln in text.splitlines() if ln.startswith(op + " ")]
                        self.assertEqual(len(lines), len(rows), text)
                        self.assertEqual(sorted(ln.split()[1].split("/")[-1] for ln in lines),
                                         sorted(o["integer"] for o in rows), text)

    @needs_cli
    def test_float_fixture_has_no_marks(self):
        fix = os.environ.get("ETCH_FIXTURES") or os.path.join(
            os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures")
        for name in ("lenet_bundled.bpte", "linear_constant_buffer.pte"):
            path = os.path.join(fix, "pte", name)
            if not os.path.exists(path):
                self.fail("fixture %s is missing" % path)
            ops = json.loads(_bench(path, "--json"))["ops"]
            self.assertTrue(ops)
            self.assertTrue(all(o["integer"] is None for o in ops), ops)
            self.assertNotIn("/int", _bench(path))


if __name__ == "__main__":
    unittest.main()
