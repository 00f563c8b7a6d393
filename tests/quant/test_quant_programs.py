"""Programs of ExecuTorch's quantized operators (written by gen_quant_programs.py) run through
`etch run`, with the portable and the optimized kernel sets, against the reference formulas;
the ones whose quantization parameters lie must fail naming the argument; and the exporter's
knowledge of the operators (etch.ops.QUANTIZED_SCHEMAS) must agree with what libetch registers
(etch.opcheck passes on every program).

    ETCH_CLI=build/etch ETCH_LIB=build/libetch.so QUANT_PROGRAMS=build/tests/quant/programs \
        /usr/bin/python3 -m unittest tests.quant.test_quant_programs
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from etch import ops, opcheck  # noqa: E402
from etch.serialize import pte  # noqa: E402

CLI = os.environ.get("ETCH_CLI", os.path.join(ROOT, "build", "etch"))
LIB = os.environ.get("ETCH_LIB", os.path.join(ROOT, "build", "libetch.so"))
DIR = os.environ.get("QUANT_PROGRAMS", os.path.join(ROOT, "build", "tests", "quant", "programs"))


def manifest():
    with open(os.path.join(DIR, "manifest.json")) as f:
        return json.load(f)


def run(name, n_inputs, kernels, out_dir):
    inputs = ",".join(os.path.join(DIR, "%s.in%d.npy" % (name, i)) for i in range(n_inputs))
    return subprocess.run([CLI, "run", os.path.join(DIR, name + ".pte"), "--inputs", inputs,
                           "--kernels", kernels, "--output-dir", out_dir],
                          capture_output=True, text=True)


class QuantPrograms(unittest.TestCase):
    def test_against_formulas(self):
        progs = manifest()["programs"]
        self.assertGreaterEqual(len(progs), 6)
        for p in progs:
            for kernels in ("portable", "optimized"):
                with self.subTest(program=p["name"], kernels=kernels), \
                        tempfile.TemporaryDirectory() as d:
                    r = run(p["name"], p["inputs"], kernels, d)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    for i in range(p["outputs"]):
                        want = np.load(os.path.join(DIR, "%s.out%d.npy" % (p["name"], i)))
                        got = np.load(os.path.join(d, "output_%d.npy" % i))
                        self.assertEqual(got.dtype, want.dtype, "output %d" % i)
                        self.assertEqual(got.shape, want.shape, "output %d" % i)
                        if p["rtol"][i]:
                            np.testing.assert_allclose(got, want, rtol=p["rtol"][i],
                                                       atol=p["rtol"][i])
                        else:
                            np.testing.assert_array_equal(got, want, "output %d" % i)

    def test_lying_parameters_refused(self):
        bad = manifest()["bad"]
        self.assertGreaterEqual(len(bad), 6)
        for b in bad:
            with self.subTest(program=b["name"]), tempfile.TemporaryDirectory() as d:
                for kernels in ("portable", "optimized"):
                    r = run(b["name"], 1, kernels, d)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    self.assertIn(b["message"], r.stderr)
                    self.assertIn("quantized_decomposed::", r.stderr)
                    # a lie in the call's scalars or in constants is refused when the method
                    # loads (etch_kernels_register_check); one in run-time data when it runs
                    if b["at_load"]:
                        self.assertIn("refused at load", r.stderr)
                    else:
                        self.assertNotIn("refused at load", r.stderr)

    def test_opcheck_passes(self):
        kernels = opcheck.registry(LIB)
        dtypes = opcheck.dtype_support(LIB)
        for p in manifest()["programs"]:
            with self.subTest(program=p["name"]):
                with open(os.path.join(DIR, p["name"] + ".pte"), "rb") as f:
                    prog = pte.read_pte(f.read()).program
                opcheck.check_program(prog, kernels, dtypes)

    def test_schemas_match_registry(self):
        """Every out-variant the exporter may emit is registered with a signature of one
        letter per schema argument plus the return slot, tensors where the schema has them."""
        kernels = opcheck.registry(LIB)
        for sch in ops.QUANTIZED_SCHEMAS:
            v = ops.quantized_out_variant(sch.split("(", 1)[0])
            with self.subTest(op=v.name):
                self.assertIn(v.name, kernels)
                sig = kernels[v.name]
                self.assertEqual(len(sig), len(v.schema.arguments) + 1, sig)
                for a, letter in zip(v.schema.arguments, sig):
                    t = str(a.type)
                    if t == "Tensor":
                        self.assertIn(letter, "TW")
                    elif t == "Optional[Tensor]":
                        self.assertEqual(letter, "t")
                    elif t in ("int", "ScalarType"):
                        self.assertEqual(letter, "I")
                    elif t == "Optional[ScalarType]":
                        self.assertEqual(letter, "i")
                    elif t == "float":
                        self.assertEqual(letter, "D")
        for functional, out in [("quantize_per_tensor.tensor", "quantize_per_tensor.Tensor_out"),
                                ("dequantize_per_tensor", "dequantize_per_tensor.out"),
                                ("choose_qparams.tensor", "choose_qparams.Tensor_out"),
                                ("embedding_4bit.dtype", "embedding_4bit.dtype_out"),
                                ("dequantize_per_channel_group",
                                 "dequantize_per_channel_group.out")]:
            v = ops.quantized_out_variant("quantized_decomposed::" + functional)
            self.assertEqual(v.name, "quantized_decomposed::" + out)
        self.assertIsNone(ops.quantized_out_variant("quantized_decomposed::no_such_op"))
        self.assertIsNone(ops.quantized_out_variant("aten::add.out"))


if __name__ == "__main__":
    unittest.main()
