"""The int8 KV cache (``python3 -m etch.llm export --kv-cache int8``), with and without
--fused-attention:

* representation: the default int8 export has ExecuTorch's operators only (the new k / v rows
  quantized by quantized_decomposed::choose_qparams_per_token_asymmetric + quantize_per_token,
  the whole cache dequantized by dequantize_per_token before the masked attention); the fused
  one has exactly one etch-only operator, etch::sdpa_kv_q8.out, once per layer, and no
  dequantize / bmm / softmax;
* KV bytes per token: n_layers * 2 * n_kv * (head_dim + 4 + 1) (int8 values, a float32 scale,
  an int8 zero point per position and kv head), stated by the export summary, the
  get_kv_cache_* metadata and `etch llm`'s model line; the values alone are 4x smaller than
  float32, and with head_dim 64 the whole cache is >= 3.5x smaller (stories260K's head_dim 8
  makes a per-row scale and zero point cost 5 bytes per 8 values: 2.46x there);
* quality on stories260K (../shared/fixtures/llm), through the C runtime: teacher-forced along
  the float32 greedy sequence from BOS, the int8 files' argmax agrees with float32's at
  >= 90% of 200 positions, and over the first 16 steps every logit is within 5% of the
  largest float32 logit (the bound: each cached element is off by at most half a step,
  range / 510 = 0.2% of its row's range; the errors of five layers' keys and values add up
  through the residual stream: 2% measured); free-running greedy text through `etch llm`
  keeps the float32 text for at least 100 bytes; the plain and fused int8 files write the same
  text, on 1 and 3 threads, and the fused one with the portable kernels too;
* the runtime's int8 logits equal eager PyTorch's int8 model within 1e-3 (a row element at a
  rounding tie may land one step apart), on a random llama with head_dim 64;
* bad input: ``--kv-cache int4`` or an unknown value is a clear error and writes no file;
  ``export_llama(kv_cache=...)`` raises before tracing; a program whose
  get_kv_cache_bytes_per_token lies (negative) is refused by `etch llm` naming it.

Under the sanitizer build (LLMA_NO_BINDING=1) the comparisons through the Python binding are
skipped and the rest runs through `etch llm`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402

from etch.llm import export_llama  # noqa: E402
from etch.llm.checkpoint import build_model  # noqa: E402
from tests.llm_attention.test_fused_export import (CHECK, CLI, FIXTURES, NO_BINDING,  # noqa: E402
                                                   OUT, llm, random_llama)

STEPS = 200          # teacher-forced positions compared
CLOSE_STEPS = 16     # steps whose logits are compared


def _logits(mod, tok, pos):
    out = mod.forward(torch.tensor([[tok]]), torch.tensor([pos]))
    return (out[0] if isinstance(out, (list, tuple)) else out).clone()[0]


class KvInt8Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        OUT.mkdir(parents=True, exist_ok=True)
        cls.model = build_model(str(FIXTURES / "stories260K.bin"), None)
        cls.exps, cls.paths = {}, {}
        for name, fused, kv in (("f32", False, "float32"), ("q8", False, "int8"),
                                ("q8_fused", True, "int8")):
            e = export_llama(cls.model, check_ops=CHECK, fused_attention=fused, kv_cache=kv)
            cls.exps[name] = e
            cls.paths[name] = OUT / ("stories260K_kv_%s.pte" % name)
            e.save(cls.paths[name])

    def test_operators(self):
        plain, fused = self.exps["q8"].program, self.exps["q8_fused"].program
        n_layers = self.model.args.n_layers
        self.assertEqual(plain.etch_only_operators, [])
        for op in ("choose_qparams_per_token_asymmetric.out", "quantize_per_token.out",
                   "dequantize_per_token.out"):
            self.assertIn("quantized_decomposed::" + op, plain.operators)
        self.assertEqual(fused.etch_only_operators, ["etch::sdpa_kv_q8.out"])
        plan = fused.method().plan
        calls = [i for i in plan.chains[0].instructions
                 if hasattr(i.instr_args, "op_index") and
                 plan.operators[i.instr_args.op_index].name == "etch::sdpa_kv_q8"]
        self.assertEqual(len(calls), n_layers)
        for op in ("aten::bmm.out", "aten::_softmax.out",
                   "quantized_decomposed::dequantize_per_token.out"):
            self.assertNotIn(op, fused.operators)
        # export_llama put the model back as it was
        self.assertEqual(self.model.kv_cache_dtype, "float32")
        self.assertFalse(self.model.fused_attention)
        self.assertEqual(self.model.layers[0].attention.k_cache.dtype, torch.float32)

    def test_bytes_per_token(self):
        a = self.model.args
        want = a.n_layers * 2 * a.n_kv_heads * (a.head_dim + 4 + 1)
        f32 = a.n_layers * 2 * a.n_kv_heads * a.head_dim * 4
        self.assertEqual(self.exps["f32"].kv_cache, ("float32", f32))
        for name in ("q8", "q8_fused"):
            e = self.exps[name]
            self.assertEqual(e.kv_cache, ("int8", want))
            self.assertEqual(e.metadata["get_kv_cache_dtype"], ("int8",))
            self.assertEqual(e.metadata["get_kv_cache_bytes_per_token"], (want,))
            self.assertIn("kv cache: int8, %d bytes per token" % want, e.summary())
            rc, _, err = llm(self.paths[name], "--max-new-tokens", "1")
            self.assertEqual(rc, 0, err)
            self.assertIn("kv cache int8, %d bytes/token" % want, err)
        # the values alone: 4x; the float file states nothing (it is byte for byte the
        # default export)
        self.assertEqual(f32 // (a.n_layers * 2 * a.n_kv_heads * a.head_dim), 4)
        self.assertNotIn("get_kv_cache_dtype", self.exps["f32"].metadata)
        # head_dim 64: the scales and zero points cost 5 of 69 bytes a row
        m = random_llama(128, 2, 2, 11, max_seq_len=32)
        e = export_llama(m, check_ops=False, kv_cache="int8")
        self.assertEqual(e.kv_cache[1], 2 * 2 * 2 * (64 + 5))
        self.assertGreaterEqual(2 * 2 * 2 * 64 * 4 / e.kv_cache[1], 3.5)

    @unittest.skipIf(NO_BINDING, "sanitizer build: libetch cannot load into Python")
    def test_teacher_forced_agreement(self):
        import etch
        mods = {k: etch.runtime.load(e.buffer) for k, e in self.exps.items()}
        tok, agree, worst = 1, {"q8": 0, "q8_fused": 0}, {"q8": 0.0, "q8_fused": 0.0}
        for pos in range(STEPS):
            ref = _logits(mods["f32"], tok, pos)
            for k in agree:
                got = _logits(mods[k], tok, pos)
                agree[k] += int(torch.argmax(got) == torch.argmax(ref))
                if pos < CLOSE_STEPS:
                    worst[k] = max(worst[k], float((got - ref).abs().max() / ref.abs().max()))
            tok = int(torch.argmax(ref))
        print("\nint8 KV cache, stories260K, teacher-forced on the float32 greedy sequence: "
              "argmax agreement %s of %d; largest |dlogit| / max|logit| over %d steps %s"
              % (agree, STEPS, CLOSE_STEPS, {k: round(v, 4) for k, v in worst.items()}),
              file=sys.stderr)
        for k in agree:
            self.assertGreaterEqual(agree[k], 0.9 * STEPS, k)
            self.assertLessEqual(worst[k], 0.05, k)

    @unittest.skipIf(NO_BINDING, "sanitizer build: libetch cannot load into Python")
    def test_runtime_equals_eager(self):
        import etch
        m = random_llama(128, 2, 2, 12, max_seq_len=48)
        steps = [(list(range(3, 16)), 0)] + [([20 + i], 13 + i) for i in range(8)] + \
                [([40, 41, 42], 21)]
        for fused in (False, True):
            e = export_llama(m, check_ops=CHECK, fused_attention=fused, kv_cache="int8")
            m.set_fused_attention(fused)
            m.set_kv_cache("int8")
            try:
                with torch.no_grad():
                    ref = [m(torch.tensor([t]), torch.tensor([p])) for t, p in steps]
            finally:
                m.set_kv_cache("float32")
                m.set_fused_attention(False)
            for threads in (1, 3):
                mod = etch.runtime.load(e.buffer, num_threads=threads)
                for i, (t, p) in enumerate(steps):
                    out = mod.forward(torch.tensor([t]), torch.tensor([p]))
                    got = (out[0] if isinstance(out, (list, tuple)) else out).clone()
                    torch.testing.assert_close(got, ref[i], rtol=1e-3, atol=1e-3,
                                               msg="fused %s threads %d step %d"
                                               % (fused, threads, i))

    def test_greedy_text(self):
        rc, want, err = llm(self.paths["f32"], "--temperature", "0", "--max-new-tokens", "200")
        self.assertEqual(rc, 0, err)
        texts = []
        for name, kernels, threads in (("q8", "optimized", "1"), ("q8", "optimized", "3"),
                                       ("q8_fused", "optimized", "1"),
                                       ("q8_fused", "optimized", "3"),
                                       ("q8_fused", "portable", "1")):
            rc, out, err = llm(self.paths[name], "--temperature", "0", "--max-new-tokens",
                               "200", "--kernels", kernels, "--cpu-threads", threads)
            self.assertEqual(rc, 0, err)
            texts.append(out)
        common = 0
        while common < min(len(want), len(texts[0])) and want[common] == texts[0][common]:
            common += 1
        print("\nint8 KV cache: greedy text equal to float32's for the first %d of %d bytes"
              % (common, len(want)), file=sys.stderr)
        self.assertGreaterEqual(common, 100)
        for t in texts[1:]:
            self.assertEqual(t, texts[0])

    def test_bad_input(self):
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        for bad in ("int4", "bogus"):
            path = OUT / "kv_bad.pte"
            if path.exists():
                path.unlink()
            p = subprocess.run([sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                                str(FIXTURES / "stories260K.bin"), "-o", str(path),
                                "--kv-cache", bad], env=env, capture_output=True, timeout=300)
            err = p.stderr.decode("utf-8", "replace")
            self.assertEqual(p.returncode, 2, err)
            self.assertIn("--kv-cache", err)
            self.assertIn("invalid choice", err)
            self.assertFalse(path.exists())
        with self.assertRaisesRegex(ValueError, "kv-cache 'int4'"):
            export_llama(self.model, check_ops=False, kv_cache="int4")
        self.assertEqual(self.model.kv_cache_dtype, "float32")
        # a program whose metadata lies about its cache
        m = random_llama(64, 2, 2, 13, max_seq_len=16)
        e = export_llama(m, check_ops=False,
                         extra_metadata={"get_kv_cache_bytes_per_token": (-5,)})
        path = OUT / "kv_lying.pte"
        e.save(path)
        rc, _, err = llm(path, "--max-new-tokens", "1")
        self.assertNotEqual(rc, 0)
        self.assertIn("get_kv_cache_bytes_per_token", err)


if __name__ == "__main__":
    unittest.main()
