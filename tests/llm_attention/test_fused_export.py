"""Llama exports with and without --fused-attention (etch::sdpa_kv) agree:

* the default export uses ExecuTorch's operators only; the fused one has exactly one
  etch-only operator, etch::sdpa_kv.out, one call per layer, and the k cache as
  [n_kv, S, head_dim];
* stories260K (GQA 2, head_dim 8) exported both ways through ``python3 -m etch.llm export``
  writes, through ``etch llm`` greedy, the reference text from BOS and the same text after a
  multi-token prompt (prefill T > 1, then decode);
* a random GQA-4 llama with head_dim 32 (and one with head_dim 48, GQA 1): logits through
  the C runtime (optimized kernels on 1 and 3 threads) equal eager PyTorch and each other
  within 1e-4 over a prefill, decode steps and a second prefill chunk, and greedy text
  through ``etch llm`` is the same for both files (the fused one with the optimized and with
  the portable kernels).

Under the sanitizer build (LLMA_NO_BINDING=1) the runtime comparisons through the Python
binding are skipped (a sanitizer-built libetch cannot load into Python) and everything else
runs, exporting without the operator check.
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

from etch.llm import export_llama, greedy  # noqa: E402
from etch.llm.model import Llama, ModelArgs  # noqa: E402

FIXTURES = Path(os.environ.get("LLMA_FIXTURES", REPO.parent / "shared" / "fixtures" / "llm"))
OUT = Path(os.environ.get("LLMA_OUT", "/tmp/etch_llm_attention"))
CLI = os.environ.get("ETCH_CLI", str(REPO / "build" / "etch"))
NO_BINDING = os.environ.get("LLMA_NO_BINDING") == "1"
CHECK = False if NO_BINDING else "auto"
GREEDY_TOKENS = 258  # tokens of stories260K_greedy.txt after BOS


def random_llama(dim, n_heads, n_kv, seed, max_seq_len=96):
    torch.manual_seed(seed)
    m = Llama(ModelArgs(dim=dim, hidden_dim=2 * dim, n_layers=2, n_heads=n_heads,
                        n_kv_heads=n_kv, vocab_size=512, max_seq_len=max_seq_len))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.5 / p.shape[-1] ** 0.5 if p.dim() > 1 else 0.1)
            if p.dim() == 1:
                p.add_(1.0)
    return m.eval()


def _first(out):
    """The logits a forward call returned (a copy: the next call reuses the memory)."""
    if isinstance(out, (list, tuple)):
        out = out[0]
    return out.clone()


def llm(model, *args):
    p = subprocess.run([CLI, "llm", "--model", str(model), "--tokenizer",
                        str(FIXTURES / "tok512.bin"), *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


class FusedExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        OUT.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        cls.stories = {}
        for fused in (False, True):
            path = OUT / ("stories260K%s.pte" % ("_fused" if fused else ""))
            cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                   str(FIXTURES / "stories260K.bin"), "-o", str(path)]
            if fused:
                cmd.append("--fused-attention")
            if NO_BINDING:
                cmd.append("--no-check")
            p = subprocess.run(cmd, env=env, capture_output=True, timeout=900)
            if p.returncode != 0:
                raise RuntimeError("export failed: %s" % p.stderr.decode("utf-8", "replace"))
            cls.stories[fused] = path
        cls.rand = {}
        for name, (dim, h, kv, seed) in {"gqa4_hd32": (128, 4, 1, 7),
                                         "gqa1_hd48": (96, 2, 2, 8)}.items():
            m = random_llama(dim, h, kv, seed)
            exps = {f: export_llama(m, check_ops=CHECK, fused_attention=f) for f in (False, True)}
            paths = {}
            for f, e in exps.items():
                paths[f] = OUT / ("%s%s.pte" % (name, "_fused" if f else ""))
                e.save(paths[f])
            cls.rand[name] = (m, exps, paths)

    def test_operators(self):
        for name, (m, exps, _) in self.rand.items():
            plain, fused = exps[False].program, exps[True].program
            self.assertEqual(plain.etch_only_operators, [])
            self.assertNotIn("etch::sdpa_kv.out", plain.operators)
            self.assertEqual(fused.etch_only_operators, ["etch::sdpa_kv.out"])
            plan = fused.method().plan
            calls = [i for i in plan.chains[0].instructions
                     if hasattr(i.instr_args, "op_index") and
                     plan.operators[i.instr_args.op_index].name == "etch::sdpa_kv"]
            self.assertEqual(len(calls), m.args.n_layers, name)
            # no [.., S] score matrix: the fused program has no bmm or softmax left
            for op in ("aten::bmm.out", "aten::_softmax.out", "aten::masked_fill.Scalar_out"):
                self.assertNotIn(op, fused.operators)
                self.assertIn(op, plain.operators)
            self.assertFalse(m.fused_attention)  # export_llama switched it back
            a = m.args
            self.assertEqual(tuple(m.layers[0].attention.k_cache.shape),
                             (a.n_kv_heads, a.head_dim, a.max_seq_len))

    def test_stories_greedy_from_bos(self):
        want = (FIXTURES / "stories260K_greedy.txt").read_bytes()
        for fused, path in self.stories.items():
            rc, out, err = llm(path, "--temperature", "0", "--max-new-tokens",
                               str(GREEDY_TOKENS))
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, want, "fused" if fused else "plain")

    def test_stories_prompt_and_threads(self):
        outs = []
        for fused, path in self.stories.items():
            for threads in ("1", "3"):
                rc, out, err = llm(path, "--prompt", "Tim had a red ball. He liked to",
                                   "--temperature", "0", "--max-new-tokens", "120",
                                   "--cpu-threads", threads)
                self.assertEqual(rc, 0, err)
                outs.append(out)
        self.assertGreater(len(outs[0]), 100)
        for o in outs[1:]:
            self.assertEqual(o, outs[0])

    def test_random_greedy_text(self):
        for name, (_, _, paths) in self.rand.items():
            texts = []
            for fused, kernels in ((False, "optimized"), (True, "optimized"),
                                   (True, "portable")):
                rc, out, err = llm(paths[fused], "--prompt", "Once upon a time",
                                   "--temperature", "0", "--max-new-tokens", "60",
                                   "--kernels", kernels)
                self.assertEqual(rc, 0, err)
                texts.append(out)
            self.assertGreater(len(texts[0]), 20)
            self.assertEqual(texts[1], texts[0], name)
            self.assertEqual(texts[2], texts[0], name + " (portable kernels)")

    @unittest.skipIf(NO_BINDING, "sanitizer build: libetch cannot load into Python")
    def test_random_logits(self):
        import etch
        steps = [(list(range(3, 16)), 0)] + [([20 + i], 13 + i) for i in range(10)] + \
                [([40, 41, 42, 43, 44], 23), ([7], 28)]
        for name, (m, exps, _) in self.rand.items():
            with torch.no_grad():
                m.reset_cache()
                ref = [m(torch.tensor([t]), torch.tensor([p])) for t, p in steps]
            # (the portable kernels run in test_random_greedy_text: the kernel registry is
            # process-wide, so one process cannot load modules with both)
            for kernels, threads in (("optimized", 1), ("optimized", 3)):
                got = {}
                for fused in (False, True):
                    mod = etch.runtime.load(exps[fused].buffer, kernels=kernels,
                                            num_threads=threads)
                    got[fused] = [_first(mod.forward(torch.tensor([t]), torch.tensor([p])))
                                  for t, p in steps]
                for i, r in enumerate(ref):
                    what = "%s %s/%d step %d" % (name, kernels, threads, i)
                    torch.testing.assert_close(got[True][i], r, rtol=1e-4, atol=1e-4,
                                               msg=what)
                    torch.testing.assert_close(got[True][i], got[False][i], rtol=1e-4,
                                               atol=1e-4, msg=what)

    def test_eager_fused_equals_plain(self):
        for name, (m, _, _) in self.rand.items():
            g0 = greedy(m, [1, 9, 30], 60)
            m.set_fused_attention(True)
            try:
                g1 = greedy(m, [1, 9, 30], 60)
            finally:
                m.set_fused_attention(False)
            self.assertEqual(g0, g1, name)


if __name__ == "__main__":
    unittest.main()
