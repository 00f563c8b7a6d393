"""Llama exports with ExecuTorch's LLM custom operators (``--executorch-llm-ops``:
llama::update_cache + llama::custom_sdpa) generate what the default export generates:

* stories260K exported once normally and once with ``--executorch-llm-ops`` through
  ``python3 -m etch.llm export``: ``etch llm`` greedy (temperature 0) writes IDENTICAL text
  from BOS (the reference text of the fixtures) and after a multi-token prompt (prefill T > 1,
  then decode), on 1 and 3 threads and with the portable kernels;
* every operator of the file (read back with ``etch info --json``) is in an ExecuTorch
  namespace (aten, quantized_decomposed, llama, and executorch_prim: the primitive operators
  every ExecuTorch runtime registers), none is etch-only, the attention is 2 update_cache and
  1 custom_sdpa call per layer (no bmm, softmax, masked_fill or index_put_ left), the file
  says ``use_sdpa_with_kv_cache``, and the caches are ``[1, S, n_kv, head_dim]``;
* a random GQA-4 llama (head_dim 32) and a GQA-1 one (head_dim 48): logits through the C
  runtime (1 and 3 threads) equal eager PyTorch within 1e-4 over a prefill, decode steps and
  a second prefill chunk, greedy text through ``etch llm`` equals the default export's, and
  eager greedy ids with the operators equal the default module's; an 8da4w-quantized export
  keeps to ExecuTorch's namespaces too;
* a file shaped as ExecuTorch's own llama export (tokens bounded at get_max_seq_len - 1, no
  get_max_context_len) runs through ``etch llm`` with the same text;
* torch.ops.llama.* run eagerly (CPU against torch's own attention, .out, Meta shapes, bad
  arguments raise);
* executorch_llm_ops with fused_attention or an int8 KV cache is refused;
* stories260K exported with ``--executorch-llm-ops --backend xnnpack`` (what XNNPACK computes
  lowered to XnnpackBackend payloads, dynamic prefill lengths included; attention and the KV
  cache as llama:: operators between them, as ExecuTorch's llama export with -X writes it)
  generates the same text through the backend on 1 and 3 threads, and keeps to ExecuTorch's
  namespaces; so does its 8da4w export (the linears as XNNPACK's dynamically quantized
  FullyConnected nodes with 4-bit weights) against the plain 8da4w export.

Under the sanitizer build (LLMA_NO_BINDING=1) the comparisons through the Python binding are
skipped and everything else runs, exporting without the operator check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402

from etch.llm import export_llama, greedy  # noqa: E402
from tests.llm_attention.test_fused_export import (  # noqa: E402
    CHECK, CLI, FIXTURES, GREEDY_TOKENS, NO_BINDING, OUT, _first, llm, random_llama)

EXECUTORCH_NAMESPACES = ("aten", "executorch_prim", "quantized_decomposed", "llama")


def file_operators(path):
    p = subprocess.run([CLI, "info", "--json", str(path)], capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode("utf-8", "replace"))
    info = json.loads(p.stdout)
    fwd = [m for m in info["methods"] if m["name"] == "forward"][0]
    return {op["name"]: op["calls"] for op in fwd["operators"]}, info


class ExecuTorchOpsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        OUT.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        cls.stories = {}
        for et in (False, True, "xnnpack"):
            path = OUT / ("stories260K%s.pte" % {False: "_plain", True: "_etops",
                                                  "xnnpack": "_etops_xnn"}[et])
            cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                   str(FIXTURES / "stories260K.bin"), "-o", str(path)]
            if et:
                cmd.append("--executorch-llm-ops")
            if et == "xnnpack":
                cmd += ["--backend", "xnnpack"]
            if NO_BINDING:
                cmd.append("--no-check")
            p = subprocess.run(cmd, env=env, capture_output=True, timeout=900)
            if p.returncode != 0:
                raise RuntimeError("export failed: %s" % p.stderr.decode("utf-8", "replace"))
            cls.stories[et] = path
        cls.rand = {}
        for name, (dim, h, kv, seed) in {"gqa4_hd32": (128, 4, 1, 7),
                                         "gqa1_hd48": (96, 2, 2, 8)}.items():
            m = random_llama(dim, h, kv, seed)
            exps = {et: export_llama(m, check_ops=CHECK, executorch_llm_ops=et)
                    for et in (False, True)}
            paths = {}
            for et, e in exps.items():
                paths[et] = OUT / ("%s%s.pte" % (name, "_etops" if et else "_plain"))
                e.save(paths[et])
            cls.rand[name] = (m, exps, paths)

    def test_stories_greedy_identical(self):
        want = (FIXTURES / "stories260K_greedy.txt").read_bytes()
        texts = {}
        for et, path in self.stories.items():
            rc, out, err = llm(path, "--temperature", "0", "--max-new-tokens",
                               str(GREEDY_TOKENS))
            self.assertEqual(rc, 0, err)
            texts[et] = out
        self.assertEqual(texts[True], texts[False])
        self.assertEqual(texts[True], want)
        self.assertEqual(texts["xnnpack"], want)

    def test_stories_prompt_threads_kernels(self):
        args = ["--prompt", "Tim had a red ball. He liked to", "--temperature", "0",
                "--max-new-tokens", "120"]
        rc, want, err = llm(self.stories[False], *args)
        self.assertEqual(rc, 0, err)
        self.assertGreater(len(want), 100)
        for extra in (["--cpu-threads", "1"], ["--cpu-threads", "3"], ["--kernels", "portable"]):
            rc, out, err = llm(self.stories[True], *args, *extra)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, want, " ".join(extra))

    def test_stories_xnnpack(self):
        ops, info = file_operators(self.stories["xnnpack"])
        bad = [n for n in ops if n.split("::", 1)[0] not in EXECUTORCH_NAMESPACES]
        self.assertEqual(bad, [], "operators outside ExecuTorch's namespaces")
        fwd = [m for m in info["methods"] if m["name"] == "forward"][0]
        delegates = fwd["delegates"]
        self.assertGreaterEqual(len(delegates), 5)   # at least the linears of every layer
        self.assertTrue(all(d["id"] == "XnnpackBackend" and d["available"] for d in delegates))
        self.assertEqual(ops.get("llama::custom_sdpa.out"), 5)
        for op in ("aten::mm.out", "aten::addmm.out"):   # every linear went to the backend
            self.assertNotIn(op, ops)
        args = ["--prompt", "Tim had a red ball. He liked to", "--temperature", "0",
                "--max-new-tokens", "120"]
        rc, want, err = llm(self.stories[False], *args)
        self.assertEqual(rc, 0, err)
        for threads in ("1", "3"):
            rc, out, err = llm(self.stories["xnnpack"], *args, "--cpu-threads", threads)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, want, "%s threads" % threads)

    def test_stories_8da4w_xnnpack(self):
        # ExecuTorch's usual LLM file: 8da4w linears delegated to XNNPACK (Convert to qdint8 +
        # FullyConnected with qbint4 weights), llama:: attention and KV cache between them
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        paths = {}
        for name, extra in (("plain", []),
                            ("xnn", ["--executorch-llm-ops", "--backend", "xnnpack"])):
            paths[name] = OUT / ("stories260K_8da4w_%s.pte" % name)
            cmd = [sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                   str(FIXTURES / "stories260K.bin"), "-o", str(paths[name]), "--quantize",
                   "8da4w", "--group-size", "32", "--pad-groups"] + extra
            if NO_BINDING:
                cmd.append("--no-check")
            p = subprocess.run(cmd, env=env, capture_output=True, timeout=900)
            self.assertEqual(p.returncode, 0, p.stderr.decode("utf-8", "replace"))
        ops, info = file_operators(paths["xnn"])
        bad = [n for n in ops if n.split("::", 1)[0] not in EXECUTORCH_NAMESPACES]
        self.assertEqual(bad, [], "operators outside ExecuTorch's namespaces")
        fwd = [m for m in info["methods"] if m["name"] == "forward"][0]
        self.assertGreaterEqual(len(fwd["delegates"]), 10)
        self.assertNotIn("quantized_decomposed::choose_qparams_per_token_asymmetric.out", ops)
        args = ["--prompt", "Tim had a red ball. He liked to", "--temperature", "0",
                "--max-new-tokens", "120"]
        rc, want, err = llm(paths["plain"], *args)
        self.assertEqual(rc, 0, err)
        for threads in ("1", "3"):
            rc, out, err = llm(paths["xnn"], *args, "--cpu-threads", threads)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, want, "%s threads" % threads)

    def test_stories_file(self):
        ops, info = file_operators(self.stories[True])
        bad = [n for n in ops if n.split("::", 1)[0] not in EXECUTORCH_NAMESPACES]
        self.assertEqual(bad, [], "operators outside ExecuTorch's namespaces")
        n_layers = 5
        self.assertEqual(ops.get("llama::update_cache.out"), 2 * n_layers)
        self.assertEqual(ops.get("llama::custom_sdpa.out"), n_layers)
        for op in ("aten::bmm.out", "aten::_softmax.out", "aten::masked_fill.Scalar_out",
                   "aten::index_put_"):
            self.assertNotIn(op, ops)
        plain, _ = file_operators(self.stories[False])
        self.assertIn("aten::bmm.out", plain)
        self.assertNotIn("llama::custom_sdpa.out", plain)
        names = [m["name"] for m in info["methods"]]
        for meta in ("get_max_seq_len", "get_vocab_size", "get_bos_id", "get_eos_ids",
                     "get_n_layers", "use_kv_cache", "use_sdpa_with_kv_cache",
                     "enable_dynamic_shape", "get_max_context_len"):
            self.assertIn(meta, names)
        fwd = [m for m in info["methods"] if m["name"] == "forward"][0]
        self.assertEqual([i["dtype"] for i in fwd["inputs"]], ["Long", "Long"])
        self.assertEqual([i["shape"] for i in fwd["inputs"]], [[1, 512], [1]])

    @unittest.skipIf(NO_BINDING, "sanitizer build: libetch cannot load into Python")
    def test_metadata_values(self):
        import etch
        mod = etch.runtime.load(str(self.stories[True]))
        self.assertEqual(mod.run_method("use_sdpa_with_kv_cache"), [True])
        self.assertEqual(mod.run_method("use_kv_cache"), [True])
        self.assertEqual(mod.run_method("get_max_seq_len"), [512])
        self.assertEqual(mod.run_method("get_n_layers"), [5])
        plain = etch.runtime.load(str(self.stories[False]))
        with self.assertRaises(Exception):
            plain.run_method("use_sdpa_with_kv_cache")   # a default export stays what it was

    def test_random_operators(self):
        for name, (m, exps, paths) in self.rand.items():
            p = exps[True].program
            self.assertEqual(p.etch_only_operators, [])
            ops, _ = file_operators(paths[True])
            self.assertEqual(ops["llama::update_cache.out"], 2 * m.args.n_layers, name)
            self.assertEqual(ops["llama::custom_sdpa.out"], m.args.n_layers, name)
            self.assertFalse(m.executorch_llm_ops)   # export_llama switched it back
            a = m.args
            self.assertEqual(tuple(m.layers[0].attention.k_cache.shape),
                             (a.n_kv_heads, a.head_dim, a.max_seq_len))

    def test_random_greedy_text(self):
        for name, (_, _, paths) in self.rand.items():
            texts = []
            for et, kernels in ((False, "optimized"), (True, "optimized"), (True, "portable")):
                rc, out, err = llm(paths[et], "--prompt", "Once upon a time", "--temperature",
                                   "0", "--max-new-tokens", "60", "--kernels", kernels)
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
            for threads in (1, 3):
                mod = etch.runtime.load(exps[True].buffer, num_threads=threads)
                for i, (t, p) in enumerate(steps):
                    got = _first(mod.forward(torch.tensor([t]), torch.tensor([p])))
                    torch.testing.assert_close(got, ref[i], rtol=1e-4, atol=1e-4,
                                               msg="%s threads %d step %d" % (name, threads, i))

    def test_eager_equals_plain(self):
        for name, (m, _, _) in self.rand.items():
            g0 = greedy(m, [1, 9, 30], 60)
            m.set_executorch_llm_ops(True)
            try:
                self.assertEqual(tuple(m.layers[0].attention.k_cache.shape),
                                 (1, m.args.max_seq_len, m.args.n_kv_heads, m.args.head_dim))
                g1 = greedy(m, [1, 9, 30], 60)
            finally:
                m.set_executorch_llm_ops(False)
            self.assertEqual(g0, g1, name)

    def test_quantized(self):
        m = self.rand["gqa4_hd32"][0]
        e = export_llama(m, check_ops=CHECK, executorch_llm_ops=True, quantize="8da4w",
                         group_size=32)
        path = OUT / "gqa4_hd32_etops_8da4w.pte"
        e.save(path)
        ops, _ = file_operators(path)
        self.assertEqual([n for n in ops if n.split("::", 1)[0] not in EXECUTORCH_NAMESPACES],
                         [])
        self.assertIn("llama::custom_sdpa.out", ops)
        self.assertTrue(any(n.startswith("quantized_decomposed::") for n in ops))
        rc, out, err = llm(path, "--prompt", "Once upon a time", "--temperature", "0",
                           "--max-new-tokens", "20")
        self.assertEqual(rc, 0, err)

    def test_executorch_shaped_file(self):
        """A file shaped as ExecuTorch's llama export writes it: the tokens input bounded at
        get_max_seq_len - 1 (its Dim("token_dim", max=max_seq_len - 1)), its metadata only
        (no get_max_context_len, as in older exports; get_eos_ids [2]): etch llm runs it,
        calls of at most 511 tokens, the same greedy text."""
        from etch.exporter import export
        from etch.llm import et_ops
        from etch.llm.checkpoint import build_model
        from etch.llm.export import LlamaExport
        m = build_model(str(FIXTURES / "stories260K.bin"), None).eval()
        S = m.args.max_seq_len
        m.set_executorch_llm_ops(True)
        prog = export(m, (torch.ones(1, S - 1, dtype=torch.long),
                          torch.zeros(1, dtype=torch.long)),
                      dynamic_shapes=[{1: S - 1}, None], check_ops=CHECK,
                      graph_passes=(et_ops.lower,))
        meta = {"get_bos_id": (1,), "get_eos_ids": (2,), "get_max_seq_len": (S,),
                "get_n_layers": (5,), "get_vocab_size": (512,), "use_kv_cache": (True,),
                "use_sdpa_with_kv_cache": (True,), "enable_dynamic_shape": (True,)}
        path = OUT / "stories260K_executorch_shaped.pte"
        LlamaExport(prog, meta).save(path)
        rc, out, err = llm(path, "--temperature", "0", "--max-new-tokens", str(GREEDY_TOKENS))
        self.assertEqual(rc, 0, err)
        self.assertIn("context 512, 511 tokens per call", err)
        self.assertEqual(out, (FIXTURES / "stories260K_greedy.txt").read_bytes())

    def test_torch_ops(self):
        """torch.ops.llama.* (etch.llm.et_ops) run eagerly on CPU and Meta tensors."""
        from etch.llm import et_ops  # noqa: F401  (defines the operators)
        L = torch.ops.llama
        torch.manual_seed(5)
        cache = torch.zeros(1, 8, 2, 4)
        v = torch.randn(1, 3, 2, 4)
        r = L.update_cache(v, cache, 2)
        self.assertEqual(tuple(r.shape), (1,))
        self.assertTrue(torch.equal(cache[:, 2:5], v))
        self.assertEqual(float(cache[:, :2].abs().sum() + cache[:, 5:].abs().sum()), 0.0)
        q, k, vc = torch.randn(1, 3, 4, 4), torch.randn(1, 8, 2, 4), torch.randn(1, 8, 2, 4)
        o = L.custom_sdpa(q, k, vc, 2, None, 0.0, True, None)
        # causal from start_pos 2, GQA 2: against torch's own attention with a boolean mask
        kk = k[:, :5].transpose(1, 2).repeat_interleave(2, 1)
        vv = vc[:, :5].transpose(1, 2).repeat_interleave(2, 1)
        keep = torch.arange(5).unsqueeze(0) <= (2 + torch.arange(3)).unsqueeze(1)
        w = torch.softmax((q.transpose(1, 2) @ kk.transpose(-1, -2)) / 2.0 +
                          torch.zeros(3, 5).masked_fill(~keep, float("-inf")), -1)
        torch.testing.assert_close(o, (w @ vv).transpose(1, 2))
        out = torch.empty(0)
        L.custom_sdpa.out(q, k, vc, 2, None, 0.0, True, None, out=out)
        torch.testing.assert_close(out, o)
        kc, vcc = torch.zeros(1, 8, 2, 4), torch.zeros(1, 8, 2, 4)
        nk, nv = torch.randn(1, 3, 2, 4), torch.randn(1, 3, 2, 4)
        o2 = L.sdpa_with_kv_cache(q, nk, nv, kc, vcc, 2, 3, None, 0.0, True, None)
        self.assertTrue(torch.equal(kc[:, 2:5], nk) and torch.equal(vcc[:, 2:5], nv))
        torch.testing.assert_close(o2, L.custom_sdpa(q, kc, vcc, 2, None, 0.0, True, None))
        meta = L.custom_sdpa(q.to("meta"), k.to("meta"), vc.to("meta"), 2, None, 0.0, True,
                             None)
        self.assertEqual((meta.device.type, tuple(meta.shape)), ("meta", (1, 3, 4, 4)))
        self.assertEqual(tuple(L.update_cache(v.to("meta"), cache.to("meta"), 2).shape), (1,))
        for bad in (lambda: L.update_cache(v, cache, 6), lambda: L.update_cache(v, cache, -1),
                    lambda: L.custom_sdpa(q, k, vc, 6, None, 0.0, True, None),
                    lambda: L.custom_sdpa(q, k, vc, 0, torch.zeros(3, 8), 0.0, True, None),
                    lambda: L.custom_sdpa(torch.randn(1, 3, 3, 4), k, vc, 0, None, 0.0, True,
                                          None)):
            with self.assertRaises(Exception):
                bad()

    def test_refused(self):
        m = self.rand["gqa1_hd48"][0]
        for kw in ({"fused_attention": True}, {"kv_cache": "int8"}):
            with self.assertRaises(ValueError):
                export_llama(m, check_ops=False, executorch_llm_ops=True, **kw)
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        p = subprocess.run([sys.executable, "-m", "etch.llm", "export", "--checkpoint",
                            str(FIXTURES / "stories260K.bin"), "-o", str(OUT / "refused.pte"),
                            "--executorch-llm-ops", "--fused-attention", "--no-check"],
                           env=env, capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"executorch_llm_ops", p.stderr)
        self.assertFalse((OUT / "refused.pte").exists())


if __name__ == "__main__":
    unittest.main()
