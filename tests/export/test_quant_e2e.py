"""Quantized programs end to end through libetch: export with the operator check, run with
etch.runtime, compare with the exporter's reference interpreter (the same quantized math in
PyTorch).

The operator check must pass: libetch registers every quantized_decomposed kernel a scheme
emits (src/kernels/portable, table_quant.inc); a missing one fails the test, naming it."""

import os
import tempfile
import unittest

import torch

from tests.export._common import etch, lib_path, needs_lib, rel_err
from tests.export.test_quant_schemes import STORIES, MLP, _cos

_SCHEME_OPS = {
    "8w": ["quantized_decomposed::dequantize_per_channel.out"],
    "4w": ["quantized_decomposed::embedding_4bit.dtype_out"],
    "int8-dynamic": ["quantized_decomposed::choose_qparams_per_token_asymmetric.out",
                     "quantized_decomposed::quantize_per_token.out",
                     "quantized_decomposed::dequantize_per_token.out",
                     "quantized_decomposed::dequantize_per_channel.out"],
    "int8": ["quantized_decomposed::quantize_per_tensor.out",
             "quantized_decomposed::dequantize_per_tensor.out",
             "quantized_decomposed::dequantize_per_channel.out"],
    "8da4w": ["quantized_decomposed::choose_qparams_per_token_asymmetric.out",
              "quantized_decomposed::quantize_per_token.out",
              "quantized_decomposed::dequantize_per_token.out",
              "quantized_decomposed::embedding_4bit.dtype_out"],
}


def _missing(names):
    from etch import opcheck
    have = opcheck.registry(lib_path())
    return [n for n in names if n not in have]


class QuantE2E(unittest.TestCase):
    def _export(self, model, inputs, scheme, **kw):
        q = etch.quantize(model, inputs, scheme, **kw)
        self.assertEqual(_missing(_SCHEME_OPS[scheme]), [], "libetch lacks these kernels")
        return q, etch.export(q, inputs, check_ops=True)

    @needs_lib
    def test_mlp_all_schemes(self):
        torch.manual_seed(0)
        m = MLP().eval()
        for scheme in ("8w", "4w", "int8-dynamic", "8da4w"):
            with self.subTest(scheme=scheme):
                kw = {"group_size": 32} if "4" in scheme else {}
                q, p = self._export(m, (torch.randn(5, 64),), scheme, **kw)
                rt = etch.runtime.load(p)
                for seed in range(3):
                    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(seed))
                    ref = p.graphs["forward"].run([x])[0]
                    got = rt.forward(x)
                    if scheme in ("8w", "4w"):
                        self.assertLessEqual(rel_err(got, ref), 1e-5)
                    else:
                        # a tie rounded the other way moves one activation by one step
                        self.assertLessEqual(rel_err(got, ref), 2e-2)
                        self.assertGreater(_cos(got, ref), 0.9999)

    @needs_lib
    def test_cnn_static_int8(self):
        from tests.export.test_quant_static import _data, _trained_cnn
        m = _trained_cnn()
        x, _ = _data(8, 3)
        cal = [(_data(8, 10 + i)[0],) for i in range(4)]
        q, p = self._export(m, (x,), "int8", calibration=cal)
        got = etch.runtime.load(p).forward(x)
        ref = p.graphs["forward"].run([x])[0]
        # a product landing on a rounding tie may requantize one step apart
        self.assertGreater(_cos(got, ref), 0.9999)
        self.assertTrue(torch.equal(got.argmax(1), ref.argmax(1)))

    @needs_lib
    def test_stories260k_8da4w_file(self):
        from etch.llm.checkpoint import build_model
        from etch.llm.export import export_llama
        m = build_model(STORIES, None)
        tokens = torch.tensor([[1, 403, 407, 261, 378]])
        start = torch.zeros(1, dtype=torch.long)
        self.assertEqual(_missing(_SCHEME_OPS["8da4w"]), [], "libetch lacks these kernels")
        exp = export_llama(m, check_ops=True, quantize="8da4w", group_size=32,
                           pad_groups=True, embedding_quantize="4,32")
        ref = exp.program.graphs["forward"].run([tokens, start])[0]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.pte")
            exp.save(path)
            got = etch.runtime.load(path).forward(tokens, start)
        self.assertGreater(_cos(got, ref), 0.999)
        self.assertEqual(int(got.argmax()), int(ref.argmax()))


if __name__ == "__main__":
    unittest.main()
