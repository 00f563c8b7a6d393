"""etch.quantize: the schemes' graphs, their numbers against a fake-quant reference written
independently here, closeness to the float model (MLP, a small llama, stories260K), the 4-bit
file size, the report of layers kept float, and bad input refused before anything is written."""

import collections
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn

from tests.export._common import REPO, etch, python_env

STORIES = "/work/shared/fixtures/llm/stories260K.pt"
if not os.path.exists(STORIES):
    STORIES = str(REPO.parent / "shared" / "fixtures" / "llm" / "stories260K.pt")


class MLP(nn.Module):
    def __init__(self, d=64, h=128, o=32):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, o, bias=False)
        self.norm = nn.LayerNorm(o)

    def forward(self, x):
        return self.norm(self.fc2(torch.relu(self.fc1(x))))


def _mlp(seed=0):
    torch.manual_seed(seed)
    return MLP().eval(), torch.randn(6, 64)


def _cos(a, b) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


# ---- the reference: fake quantization written out here ---------------------------------------

def fq_weight(w, bits, group, symmetric=True, scale_dtype=torch.float32):
    """Dequantized weight of the scheme's rule, computed in float64 from numpy arrays."""
    w = w.detach().double().numpy()
    rows, cols = w.shape
    g = cols if group is None else group
    out = np.empty_like(w)
    qmax = 2 ** (bits - 1) - 1
    qmin = -qmax if (symmetric and bits == 8) else -qmax - 1
    for r in range(rows):
        for j in range(cols // g):
            blk = w[r, j * g:(j + 1) * g].astype(np.float32)
            if symmetric:
                s = np.float32(np.abs(blk).max() / np.float32((qmax - qmin) / 2.0))
                s = max(s, np.finfo(np.float32).eps)
                s = float(torch.tensor(s).to(scale_dtype).float())
                q = np.clip(np.rint(blk / np.float32(s)), qmin, qmax)
                out[r, j * g:(j + 1) * g] = q * s
            else:
                lo, hi = min(blk.min(), 0), max(blk.max(), 0)
                s = max(np.float32(np.float32(hi - lo) / np.float32(qmax - qmin)),
                        np.finfo(np.float32).eps)
                s = float(torch.tensor(s).to(scale_dtype).float())
                z = np.clip(np.rint(qmin - lo / np.float32(s)), qmin, qmax)
                q = np.clip(np.rint(blk / np.float32(s)) + z, qmin, qmax)
                out[r, j * g:(j + 1) * g] = (q - z) * s
    return torch.from_numpy(out).float()


def fq_tokens(x):
    """int8 per-token asymmetric quantize + dequantize, one row at a time."""
    rows = x.reshape(-1, x.shape[-1]).numpy().astype(np.float32)
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        lo, hi = min(row.min(), np.float32(0)), max(row.max(), np.float32(0))
        s = max(np.float32((hi - lo) / np.float32(255)), np.finfo(np.float32).eps)
        dmin, dmax = lo / s, hi / s
        z = (-128 - dmin) if (-128 + dmin) + (127 + dmax) > 0 else (127 - dmax)
        z = np.rint(np.clip(z, -128, 127))
        q = np.clip(np.rint(row.astype(np.float64) / float(s)) + z, -128, 127)
        out[i] = ((q - z) * float(s)).astype(np.float32)
    return torch.from_numpy(out).reshape(x.shape)


def mlp_reference(m, x, scheme, group=None, symmetric=True):
    bits = 4 if scheme in ("4w", "8da4w") else 8
    dyn = scheme in ("8da4w", "int8-dynamic")
    sdt = torch.float16 if bits == 4 else torch.float32
    w1 = fq_weight(m.fc1.weight, bits, group, symmetric, sdt)
    w2 = fq_weight(m.fc2.weight, bits, group, symmetric, sdt)
    h = fq_tokens(x) if dyn else x
    h = torch.relu(h @ w1.t() + m.fc1.bias.detach())
    h = fq_tokens(h) if dyn else h
    return m.norm(h @ w2.t()).detach()


class Schemes(unittest.TestCase):
    EXPECTED_NODES = {
        "8w": {"dequantize_per_channel.default": 2},
        "int8-dynamic": {"dequantize_per_channel.default": 2,
                         "choose_qparams_per_token_asymmetric.default": 2,
                         "quantize_per_token.default": 2, "dequantize_per_token.default": 2},
        "4w": {"embedding_4bit.dtype": 2},
        "8da4w": {"embedding_4bit.dtype": 2, "choose_qparams_per_token_asymmetric.default": 2,
                  "quantize_per_token.default": 2, "dequantize_per_token.default": 2},
    }

    def _export(self, m, x, scheme, **kw):
        q = etch.quantize(m, (x,), scheme, **kw)
        return q, etch.export(q, (x,), check_ops=False)

    def test_graph_nodes_and_reference(self):
        m, x = _mlp()
        for scheme, group, sym in (("8w", None, True), ("int8-dynamic", None, True),
                                   ("4w", 32, True), ("4w", 64, False), ("8da4w", 32, True),
                                   ("8da4w", 64, False)):
            with self.subTest(scheme=scheme, group=group, symmetric=sym):
                kw = {"group_size": group, "symmetric": sym} if group else {}
                q, p = self._export(m, x, scheme, **kw)
                g = p.graphs["forward"].graph
                got = collections.Counter(
                    str(n.target).split("quantized_decomposed.")[1] for n in g.nodes
                    if n.op == "call_function" and "quantized_decomposed" in str(n.target))
                self.assertEqual(dict(got), self.EXPECTED_NODES[scheme])
                if scheme in ("4w", "8da4w"):
                    emb = [n for n in g.nodes if "embedding_4bit" in str(n.target)]
                    for n in emb:    # the weight chain: embedding_4bit -> permute -> mm
                        (user,) = n.users
                        self.assertEqual(str(user.target), "aten.permute_copy.default")
                        self.assertEqual(n.args[3:5], (-8, 7))
                        self.assertEqual(n.kwargs["dtype"], torch.float32)
                        self.assertEqual(n.args[2] is None, sym)
                ref = mlp_reference(m, x, scheme, group, sym)
                out = p.graphs["forward"].run([x])[0]
                torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
                # the same float math in another order (torch may thread the matmuls)
                torch.testing.assert_close(q(x), out, rtol=0, atol=1e-5)
                self.assertGreater(_cos(out, m(x)), 0.99)

    def test_original_model_untouched(self):
        m, x = _mlp()
        before = {k: v.clone() for k, v in m.state_dict().items()}
        q = etch.quantize(m, (x,), "4w", group_size=32)
        self.assertIs(type(m.fc1), nn.Linear)
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]))
        self.assertIsNot(q, m)
        self.assertFalse(hasattr(m, "etch_quantization"))

    def test_report_names_float_layers(self):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 4, 3)
                self.emb = nn.Embedding(10, 64)
                self.fc = nn.Linear(64, 8)
                self.skipme = nn.Linear(8, 8)

            def forward(self, img, ids):
                return self.skipme(self.fc(self.emb(ids))) + self.conv(img).mean()

        net = Net().eval()
        img, ids = torch.randn(1, 1, 6, 6), torch.tensor([1, 2, 3])
        q = etch.quantize(net, (img, ids), "8w", skip=["skipme"])
        p = etch.export(q, (img, ids), check_ops=False)
        s = p.summary()
        self.assertIn("float      conv", s)
        self.assertIn("Conv2d: scheme 8w quantizes nn.Linear only", s)
        self.assertIn("float      emb", s)
        self.assertIn("float      skipme", s)
        self.assertIn("quantized  fc", s)
        q2 = etch.quantize(net, (img, ids), "8w", embedding="8")
        self.assertEqual([n for n, _ in q2.etch_quantization.quantized], ["emb", "fc", "skipme"])
        p2 = etch.export(q2, (img, ids), check_ops=False)
        self.assertIn("quantized_decomposed::embedding_byte.dtype_out", p2.operators)
        ref = net.emb.weight.detach()
        s_ = ref.abs().amax(1) / 127
        deq = torch.clamp(torch.round(ref / s_[:, None]), -127, 127) * s_[:, None]
        want = q2.skipme(q2.fc(deq[ids])) + net.conv(img).mean()
        torch.testing.assert_close(p2.graphs["forward"].run([img, ids])[0], want.detach(),
                                   rtol=1e-5, atol=1e-5)

    def test_four_bit_file_size(self):
        torch.manual_seed(1)
        m = nn.Sequential(nn.Linear(1024, 1024, bias=False)).eval()
        x = torch.randn(1, 1024)
        n = 1024 * 1024
        q4_0 = n // 32 * 18                    # llama.cpp Q4_0: 2-byte scale + 16 bytes / 32
        for group in (32, 128):
            q, p = self._export(m, x, "4w", group_size=group)
            packed = q[0].weight_packed
            self.assertEqual((packed.dtype, tuple(packed.shape)), (torch.uint8, (1024, 512)))
            # half a byte per weight + an fp16 scale per group + the row ids
            self.assertEqual(p.constant_bytes, n // 2 + n // group * 2 + 1024 * 8)
            self.assertLessEqual(len(p.buffer), 1.05 * q4_0)
        q, p = self._export(m, x, "8w")
        self.assertEqual(p.constant_bytes, n + 1024 * 4 + 1024 * 8)

    def test_padding(self):
        torch.manual_seed(2)
        lin = nn.Linear(40, 8).eval()
        x = torch.randn(3, 40)
        with self.assertRaisesRegex(ValueError, "does not divide 0's in_features 40"):
            etch.quantize(nn.Sequential(lin), (x,), "4w", group_size=32)
        q = etch.quantize(nn.Sequential(lin), (x,), "4w", group_size=32, pad=True)
        p = etch.export(q, (x,), check_ops=False)
        self.assertIn("padded to 64", p.summary())
        wp = torch.nn.functional.pad(lin.weight.detach(), (0, 24))
        w = fq_weight(wp, 4, 32, True, torch.float16)[:, :40]
        torch.testing.assert_close(p.graphs["forward"].run([x])[0],
                                   (x @ w.t() + lin.bias).detach(), rtol=1e-5, atol=1e-5)

    def test_bad_input(self):
        m, x = _mlp()
        cases = [
            (dict(scheme="int4"), ValueError, "unknown quantization scheme 'int4'"),
            (dict(scheme="4w", group_size=48), ValueError, "group size 48"),
            (dict(scheme="4w", group_size=256), ValueError, "does not divide fc1's"),
            (dict(scheme="8w", group_size=32), ValueError, "applies to 4w and 8da4w"),
            (dict(scheme="8w", embedding="3"), ValueError, "8 or 4"),
            (dict(scheme="4w", scale_dtype="int8"), ValueError, "scale_dtype"),
            (dict(scheme="8w", calibration=[(torch.randn(6, 65),)]), ValueError,
             r"has shape \(6, 65\)"),
            (dict(scheme="8w", calibration=[(torch.randn(6, 64).double(),)]), ValueError,
             "torch.float64"),
            (dict(scheme="8w", calibration=[(torch.randn(6, 64), torch.randn(1))]), ValueError,
             "has 2 inputs"),
            (dict(scheme="8w", calibration=[(torch.randn(2, 64),)]), ValueError,
             "takes no calibration data"),
        ]
        for kw, exc, msg in cases:
            with self.subTest(kw=kw):
                scheme = kw.pop("scheme")
                with self.assertRaisesRegex(exc, msg):
                    etch.quantize(m, (x,), scheme, **kw)
        with self.assertRaises(TypeError):
            etch.quantize("model", (x,), "8w")


class Llama(unittest.TestCase):
    def _small(self):
        from etch.llm.model import Llama as L, ModelArgs
        torch.manual_seed(0)
        a = ModelArgs(dim=64, hidden_dim=128, n_layers=2, n_heads=4, n_kv_heads=2,
                      vocab_size=96, max_seq_len=32, shared_classifier=False)
        return L(a).eval()

    def test_small_llama_all_schemes(self):
        from etch.llm.export import export_llama
        m = self._small()
        tokens = torch.randint(0, 96, (1, 9))
        start = torch.zeros(1, dtype=torch.long)
        ref = m(tokens, start).detach()
        m.reset_cache()
        for scheme in ("8w", "int8-dynamic", "4w", "8da4w"):
            with self.subTest(scheme=scheme):
                kw = {"group_size": 32} if "4" in scheme else {}
                exp = export_llama(m, check_ops=False, quantize=scheme, **kw)
                eg = exp.program.graphs["forward"]
                out = eg.run([tokens, start])[0]
                self.assertGreater(_cos(out, ref), 0.99)
                self.assertIn("quantization: scheme %s" % scheme, exp.summary())

    def test_classifier_scheme(self):
        """Under a 4-bit scheme the classifier is 8w unless --quantize-output says otherwise;
        etch.quantize's overrides pick a layer's scheme and refuse what is not a linear."""
        from etch.llm.export import export_llama
        m = self._small()
        tokens = torch.randint(0, 96, (1, 9))
        start = torch.zeros(1, dtype=torch.long)
        for scheme, out_q, want in (("4w", "auto", "int8 per channel"),
                                    ("8da4w", "auto", "int8 per channel"),
                                    ("4w", "same", "int4 g32"),
                                    ("8w", "auto", "int8 per channel"),
                                    ("4w", "8da4w", "int4 g32 , int8 dyn act")):
            with self.subTest(scheme=scheme, output=out_q):
                exp = export_llama(m, check_ops=False, quantize=scheme, group_size=32
                                   if "4" in scheme else None, output_quantize=out_q)
                line = [ln for ln in exp.summary().splitlines()
                        if ln.split()[:2] == ["quantized", "output"]]
                self.assertEqual(len(line), 1, exp.summary())
                for part in want.split(" , "):
                    self.assertIn(part, line[0])
        with self.assertRaisesRegex(ValueError, "output_quantize 'int4'"):
            export_llama(m, check_ops=False, quantize="4w", output_quantize="int4")
        x = (tokens, start)
        with self.assertRaisesRegex(ValueError, "'nope' is not an nn.Linear"):
            etch.quantize(m, x, "4w", group_size=32, overrides={"nope": "8w"})
        with self.assertRaisesRegex(ValueError, "scheme 'int4' for output"):
            etch.quantize(m, x, "4w", group_size=32, overrides={"output": "int4"})
        q = etch.quantize(m, x, "8w", overrides={"layers.0.feed_forward.w2": "4w"})  # g128
        self.assertEqual(type(q.layers[0].feed_forward.w2).__name__, "Int4Linear")
        self.assertEqual(type(q.layers[0].feed_forward.w1).__name__, "Int8Linear")

    def test_embedding_only(self):
        from etch.llm.export import export_llama
        m = self._small()
        tokens = torch.randint(0, 96, (1, 5))
        start = torch.zeros(1, dtype=torch.long)
        with torch.no_grad():
            ref = m(tokens, start)
        m.reset_cache()
        exp = export_llama(m, check_ops=False, embedding_quantize="8")
        ops = [o for o in exp.program.operators if o.startswith("quantized_decomposed")]
        self.assertEqual(ops, ["quantized_decomposed::embedding_byte.dtype_out"])
        s = exp.summary()
        self.assertIn("quantization: scheme embedding only", s)
        self.assertIn("Linear: no linear quantization asked for", s)
        out = exp.program.graphs["forward"].run([tokens, start])[0]
        self.assertGreater(_cos(out, ref), 0.999)
        with self.assertRaisesRegex(ValueError, "needs calibration data"):
            export_llama(m, check_ops=False, quantize="int8")

    def test_stories260k(self):
        from etch.llm.checkpoint import build_model
        from etch.llm.export import export_llama
        m = build_model(STORIES, None)
        tokens = torch.tensor([[1, 403, 407, 261, 378, 410, 347, 262, 434, 288, 283, 365]])
        start = torch.zeros(1, dtype=torch.long)
        ref = m(tokens, start).detach()
        m.reset_cache()
        float_buf = export_llama(m, check_ops=False).buffer
        self.assertEqual(export_llama(m, check_ops=False, quantize=None).buffer, float_buf)
        with self.assertRaisesRegex(ValueError, "w2's in_features 172"):
            export_llama(m, check_ops=False, quantize="4w", group_size=32)
        sizes = {}
        for scheme, emb in (("8w", "8"), ("4w", "4,32"), ("8da4w", None)):
            with self.subTest(scheme=scheme):
                kw = {"group_size": 32, "pad_groups": True} if "4" in scheme else {}
                exp = export_llama(m, check_ops=False, quantize=scheme,
                                   embedding_quantize=emb, **kw)
                out = exp.program.graphs["forward"].run([tokens, start])[0]
                self.assertGreater(_cos(out, ref), 0.99, scheme)
                sizes[scheme] = exp.program.constant_bytes
        # the shared classifier with 4w + a 4,32 embedding: one packed table in the file
        q = etch.quantize(m, (tokens, start), "4w", group_size=32, pad=True,
                          embedding="4,32")
        self.assertTrue(torch.equal(q.tok_embeddings.weight_q, q.output.weight_packed))
        table = q.output.weight_packed.numel()
        exp = export_llama(m, check_ops=False, quantize="4w", group_size=32, pad_groups=True,
                           embedding_quantize="4,32")
        blobs = exp.program.constants.blobs
        self.assertEqual(sum(1 for b in blobs if len(b) == table), 1)
        self.assertLess(sizes["4w"], sizes["8w"])


class CommandLine(unittest.TestCase):
    def _run(self, *args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              env=python_env(), cwd=str(REPO))

    def test_etch_export_quantize(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "m.pte")
            r = self._run("-m", "etch", "export", "etch.zoo:mlp", "--input", "4x32:float32",
                          "-o", out, "--quantize", "8da4w", "--group-size", "32",
                          "--no-check", "--summary", "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("quantized_decomposed::embedding_4bit.dtype_out", r.stdout)
            self.assertIn("quantization: scheme 8da4w", r.stdout)
            bad = os.path.join(d, "bad.pte")
            for extra, msg in ((["--quantize", "int3"], "unknown quantization scheme"),
                               (["--quantize", "4w", "--group-size", "33"], "group size 33"),
                               (["--group-size", "32"], "need --quantize")):
                r = self._run("-m", "etch", "export", "etch.zoo:mlp", "--input",
                              "4x32:float32", "-o", bad, "--no-check", "-q", *extra)
                self.assertEqual(r.returncode, 1)
                self.assertIn(msg, r.stderr)
                self.assertFalse(os.path.exists(bad))
            npz = os.path.join(d, "cal.npz")
            np.savez(npz, input_0=np.zeros((3, 4, 33), np.float32))
            r = self._run("-m", "etch", "export", "etch.zoo:mlp", "--input", "4x32:float32",
                          "-o", bad, "--no-check", "-q", "--quantize", "8w",
                          "--calibration", npz)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has shape (4, 33)", r.stderr)
            self.assertFalse(os.path.exists(bad))

    def test_etch_llm_export_quantize(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "s.pte")
            r = self._run("-m", "etch.llm", "export", "--checkpoint", STORIES, "-o", out,
                          "--quantize", "8w", "--embedding-quantize", "8", "--no-check",
                          "--summary")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("embedding_byte.dtype_out", r.stderr)
            self.assertTrue(os.path.getsize(out) > 0)
            bad = os.path.join(d, "bad.pte")
            r = self._run("-m", "etch.llm", "export", "--checkpoint", STORIES, "-o", bad,
                          "--quantize", "4w", "--group-size", "32", "--no-check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("--pad-groups", r.stderr)
            self.assertFalse(os.path.exists(bad))


if __name__ == "__main__":
    unittest.main()
