"""The reference llama module and the exported program (python/etch/llm):

* the .bin and .pt checkpoints of stories260K load to the same model;
* eager greedy generation from BOS reproduces stories260K_greedy.txt (llama2.c's math), and
  one prefill call gives the logits of feeding the prompt token by token;
* the programs exported by llm_runner.export.* carry ExecuTorch's metadata methods, update
  the KV cache in place (aten::index_put_, no copy of the cache), start it at zero, and take
  a dynamic number of tokens;
* a small export run through libetch matches eager over a prefill and decode steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from tests.llm_runner._common import (FIXTURES, GREEDY_TOKENS, REPO, greedy_text,
                                      llama2c_decode, llama2c_pieces, model_path)

import torch  # noqa: E402

from etch.llm import METADATA_METHODS, build_model, export_llama, greedy  # noqa: E402
from etch.llm.checkpoint import load_checkpoint  # noqa: E402
from etch.serialize import read_pte  # noqa: E402
from etch.serialize import schema as S  # noqa: E402


def _lib():
    from etch import _lib
    return _lib.find_library()


class CheckpointTest(unittest.TestCase):
    def test_bin_and_pt_agree(self):
        a1, s1 = load_checkpoint(str(FIXTURES / "stories260K.bin"))
        a2, s2 = load_checkpoint(str(FIXTURES / "stories260K.pt"))
        self.assertEqual(a1, a2)
        self.assertEqual((a1.dim, a1.hidden_dim, a1.n_layers, a1.n_heads, a1.n_kv_heads,
                          a1.vocab_size, a1.max_seq_len, a1.shared_classifier),
                         (64, 172, 5, 8, 4, 512, 512, True))
        self.assertEqual(sorted(s1), sorted(s2))
        for k in s1:
            self.assertTrue(torch.equal(s1[k], s2[k]), k)

    def test_rejects_garbage(self, tmp="/tmp/etch_llmr_bad.bin"):
        with open(tmp, "wb") as f:
            f.write(b"\x40\x00\x00\x00" * 7 + b"\x00" * 100)
        try:
            with self.assertRaises(ValueError):
                load_checkpoint(tmp)
        finally:
            os.unlink(tmp)


class EagerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = build_model(str(FIXTURES / "stories260K.bin"))

    def test_greedy_reproduces_reference(self):
        ids = greedy(self.model, [1], 1 + GREEDY_TOKENS)
        pieces = llama2c_pieces(FIXTURES / "tok512.bin")
        self.assertEqual(llama2c_decode(pieces, ids), greedy_text())

    def test_prefill_equals_token_by_token(self):
        m = self.model
        prompt = [1, 403, 407, 261, 378, 430, 271, 394, 283, 300]
        with torch.no_grad():
            m.reset_cache()
            a = m(torch.tensor([prompt]), torch.tensor([0]))
            m.reset_cache()
            for i, t in enumerate(prompt):
                b = m(torch.tensor([[t]]), torch.tensor([i]))
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


class ProgramTest(unittest.TestCase):
    def check_file(self, kind):
        path = model_path(kind)
        if not path.exists():
            self.skipTest("%s not exported (run llm_runner.export.%s)" % (path, kind))
        pf = read_pte(path.read_bytes())
        plans = {p.name: p for p in pf.program.execution_plan}
        self.assertEqual(sorted(plans), sorted(("forward",) + METADATA_METHODS))
        want = {"get_vocab_size": [512], "get_max_seq_len": [512],
                "get_max_context_len": [512], "get_bos_id": [1], "get_eos_ids": [1, 2],
                "get_n_layers": [5], "use_kv_cache": [True], "enable_dynamic_shape": [True]}
        for name, vals in want.items():
            p = plans[name]
            self.assertEqual(p.inputs, [])
            self.assertEqual(sum(len(c.instructions) for c in p.chains), 0)
            got = []
            for i in p.outputs:
                v = p.values[i].val
                self.assertIsInstance(v, S.Bool if isinstance(vals[0], bool) else S.Int)
                got.append(v.bool_val if isinstance(v, S.Bool) else v.int_val)
            self.assertEqual(got, vals, name)
        fwd = plans["forward"]
        ops = [o.name + ("." + o.overload if o.overload else "") for o in fwd.operators]
        self.assertIn("aten::index_put_", ops)
        self.assertNotIn("aten::index_put.out", ops)
        self.assertNotIn("aten::clone.out", ops)      # no write-back copy of the cache
        tokens, pos = (fwd.values[i].val for i in fwd.inputs)
        self.assertEqual((tokens.sizes, tokens.shape_dynamism),
                         ([1, 512], S.TensorShapeDynamism.DYNAMIC_BOUND))
        self.assertEqual(pos.sizes, [1])
        # the caches: 5 layers x (k, v) x 4 kv heads x 512 positions x 8 floats, all zero
        seg = pf.program.mutable_data_segments[0]
        blob = pf.segments[seg.segment_index]
        self.assertEqual(len(blob), 5 * 2 * 4 * 512 * 8 * 4)
        self.assertEqual(blob.count(0), len(blob))

    def test_bin_program(self):
        self.check_file("bin")

    def test_pt_program(self):
        self.check_file("pt")

    @unittest.skipUnless(_lib(), "libetch not built (set ETCH_LIB)")
    def test_runtime_matches_eager(self):
        import etch
        m = build_model(str(FIXTURES / "stories260K.pt"), max_seq_len=16)
        exp = export_llama(m, eos_ids=[2])
        self.assertEqual(exp.metadata["get_eos_ids"], (2,))
        self.assertEqual(exp.metadata["get_max_context_len"], (16,))
        rt = etch.runtime.load(exp.program)
        prompt = [1, 403, 407, 261, 378]
        with torch.no_grad():
            m.reset_cache()
            got = rt.forward(torch.tensor([prompt]), torch.tensor([0]))
            want = m(torch.tensor([prompt]), torch.tensor([0]))
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            for i, t in enumerate([300, 301, 302], len(prompt)):
                got = rt.forward(torch.tensor([[t]]), torch.tensor([i]))
                want = m(torch.tensor([[t]]), torch.tensor([i]))
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    def test_cli_errors(self):
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        p = subprocess.run([sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                            "/nonexistent.bin", "-o", "/tmp/x.pte"], capture_output=True,
                           env=env, timeout=300)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"error", p.stderr)


if __name__ == "__main__":
    unittest.main()
