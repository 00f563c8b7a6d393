"""etch.prune: the patterns, the masks a fine-tune re-applies, the errors (raised before the
model changes), and pruned models exported and run by libetch against PyTorch.

The runtime compresses a constant 2:4 weight at load and runs mm / addmm / linear from it
(src/kernels/optimized/sparse.c); the results are compared with PyTorch and with libetch's
portable kernels under every instruction set this CPU has (ETCH_ISA, one process each: the ISA
is chosen when the kernels register) and 1..3 threads. The sparse sums take another order
than the dense ones: |got - ref| <= (K/2 + 2) * FLT_EPSILON * sum_k |x_k w_kj| (+ the bias's
rounding), checked here as a relative error against the largest output."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch
from torch import nn

from tests.export._common import REPO, etch, lib_path, needs_lib
from etch.quant.prune import is_2_4


class MLP(nn.Module):
    def __init__(self, k=68, h=44, n=13):
        super().__init__()
        self.a = nn.Linear(k, h)
        self.b = nn.Linear(h, n, bias=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _isas():
    """The instruction sets this CPU runs (the kernels' own test: etch_isa_supported)."""
    flags = open("/proc/cpuinfo").read().split()
    isas = ["scalar"]
    if "avx2" in flags and "fma" in flags:
        isas.append("avx2")
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        isas.append("avx512")
    return isas


_RUN = r"""
import json, sys, torch, etch
cases, kernels, threads = json.load(open(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
out = []
for pte, xs in cases:
    for t in threads:
        m = etch.runtime.load(pte, num_threads=t, kernels=kernels)
        out.append([m.forward(torch.tensor(x)).tolist() for x in xs])
print(json.dumps(out))
"""


def _run(cases_path, isa, kernels="optimized", threads=(1,)):
    """Outputs [case][thread][input] of one process with ETCH_ISA=isa."""
    env = dict(os.environ, ETCH_ISA=isa,
               PYTHONPATH=str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _RUN, cases_path, kernels, json.dumps(threads)],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode:
        raise AssertionError("runtime run failed (ETCH_ISA=%s): %s" % (isa, r.stderr[-2000:]))
    flat = [[torch.tensor(o) for o in outs] for outs in json.loads(r.stdout)]
    n = len(threads)
    return [flat[i:i + n] for i in range(0, len(flat), n)]


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


class Patterns(unittest.TestCase):
    def test_2_4(self):
        torch.manual_seed(0)
        m = MLP()
        p = etch.prune(m, 0.5, "2:4")
        for name in ("a", "b"):
            w, w0 = getattr(p, name).weight, getattr(m, name).weight
            self.assertTrue(is_2_4(w))
            self.assertFalse(is_2_4(w0))
            self.assertEqual(int((w == 0).sum()), w.numel() // 2)
            # the 2 kept of every 4 are the largest in magnitude, unchanged
            g0 = w0.detach().abs().reshape(w0.shape[0], -1, 4)
            kept = (w != 0).reshape(g0.shape)
            self.assertTrue(bool((g0[kept].reshape(*g0.shape[:2], 2).min(2).values >=
                                  g0[~kept].reshape(*g0.shape[:2], 2).max(2).values).all()))
            self.assertTrue(torch.equal(w[w != 0], w0[w != 0]))
        self.assertFalse(any(bool((getattr(m, n).weight == 0).any()) for n in ("a", "b")),
                         "the model given was changed")
        self.assertIn("a", p.etch_pruning.summary())

    def test_block_and_unstructured(self):
        torch.manual_seed(1)
        m = nn.Sequential(nn.Linear(32, 16), nn.Conv2d(4, 8, 2))
        p = etch.prune(m, 0.75, "block", block=(4, 8))
        w = p[0].weight.detach()
        tiles = (w != 0).reshape(4, 4, 4, 8).permute(0, 2, 1, 3).reshape(4, 4, 32)
        self.assertTrue(bool(((tiles.all(2)) | (~tiles.any(2))).all()), "tiles all or none")
        self.assertEqual(int((~tiles.any(2)).sum()), 12)
        self.assertEqual(p.etch_pruning.pruned["1"], 0.75)   # 3 of its 4 tiles
        u = etch.prune(m, 0.3, "unstructured")
        for layer in (u[0], u[1]):
            w = layer.weight.detach()
            self.assertEqual(int((w == 0).sum()), round(0.3 * w.numel()))
        w, w0 = u[0].weight.detach(), m[0].weight.detach()
        self.assertGreaterEqual(float(w0[w != 0].abs().min()), float(w0[w == 0].abs().max()))

    def test_fine_tune_keeps_the_pattern(self):
        torch.manual_seed(2)
        p = etch.prune(MLP(), 0.5, "2:4")
        opt = torch.optim.SGD(p.parameters(), lr=0.1)
        x, y = torch.randn(16, 68), torch.randn(16, 13)
        for _ in range(3):
            nn.functional.mse_loss(p(x), y).backward()
            opt.step()
            opt.zero_grad()
            self.assertFalse(is_2_4(p.a.weight))     # the step filled the zeros
            etch.apply_prune_masks(p)
            self.assertTrue(is_2_4(p.a.weight) and is_2_4(p.b.weight))
        with self.assertRaisesRegex(ValueError, "no pruning masks"):
            etch.apply_prune_masks(MLP())

    def test_layers_that_do_not_fit(self):
        m = nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 4), nn.Conv2d(4, 4, 3, groups=2))
        p = etch.prune(m, 0.5, "2:4")
        self.assertEqual(set(p.etch_pruning.pruned), {"1"})
        self.assertIn("not a multiple of 4", p.etch_pruning.skipped["0"])
        self.assertIn("grouped", p.etch_pruning.skipped["2"])
        with self.assertRaisesRegex(ValueError, "'0'.*not a multiple of 4"):
            etch.prune(m, 0.5, "2:4", modules=["0"])

    def test_errors_before_anything_changes(self):
        m = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 6))
        before = [p.detach().clone() for p in m.parameters()]
        cases = [
            (dict(sparsity=1.0, pattern="unstructured"), "sparsity must be a number in"),
            (dict(sparsity=0.0, pattern="unstructured"), "sparsity must be a number in"),
            (dict(sparsity=-0.5, pattern="block"), "sparsity must be a number in"),
            (dict(sparsity="half", pattern="block"), "sparsity must be a number in"),
            (dict(sparsity=0.6, pattern="2:4"), "sparsity must be 0.5"),
            (dict(sparsity=0.5, pattern="4:8"), "unknown pruning pattern"),
            (dict(sparsity=0.5, pattern="block", block=(4, 4), modules=["1"]),
             "block 4x4 does not divide the 6x8"),
            (dict(sparsity=0.5, pattern="block", block=(0, 4)), "positive ints"),
            (dict(sparsity=0.5, pattern="2:4", block=(1, 4)), "pattern 'block' only"),
            (dict(sparsity=0.5, pattern="2:4", modules=["nope"]), "no module named"),
        ]
        for kw, msg in cases:
            with self.subTest(**{k: str(v) for k, v in kw.items()}):
                with self.assertRaisesRegex(ValueError, msg):
                    etch.prune(m, inplace=True, **kw)
                for a, b in zip(before, m.parameters()):
                    self.assertTrue(torch.equal(a, b))
        with self.assertRaises(TypeError):
            etch.prune(torch.zeros(3), 0.5)


class PrunedThroughLibetch(unittest.TestCase):
    def _check(self, cases):
        """cases: (model, input shape); each exported, run by the portable kernels and by the
        optimized ones under every ISA and 1..3 threads, against PyTorch."""
        threads = [1, 2, 3]
        with tempfile.TemporaryDirectory() as d:
            spec, want = [], []
            for i, (model, shape) in enumerate(cases):
                model = model.eval()
                xs = [torch.randn(*shape, generator=torch.Generator().manual_seed(s))
                      for s in range(2)]
                pte = os.path.join(d, "m%d.pte" % i)
                etch.export(model, (xs[0],)).save(pte)
                spec.append((pte, [x.tolist() for x in xs]))
                with torch.no_grad():
                    want.append([model(x) for x in xs])
            path = os.path.join(d, "cases.json")
            json.dump(spec, open(path, "w"))
            ref = _run(path, "scalar", kernels="portable")
            for c in range(len(cases)):
                for r, w in zip(ref[c][0], want[c]):
                    self.assertLessEqual(_rel(r, w), 1e-5)
            for isa in _isas():
                got = _run(path, isa, threads=threads)
                for c in range(len(cases)):
                    for t, outs in zip(threads, got[c]):
                        for g, r, w in zip(outs, ref[c][0], want[c]):
                            with self.subTest(case=c, isa=isa, threads=t):
                                self.assertLessEqual(_rel(g, w), 1e-5)
                                self.assertLessEqual(_rel(g, r), 1e-5)

    @needs_lib
    def test_pruned_models(self):
        torch.manual_seed(3)
        cases = [(etch.prune(MLP(), 0.5, "2:4"), s)
                 for s in ((1, 68), (3, 68), (4, 68), (2, 2, 68), (16, 68))]
        # rows entirely zero, a first group all zeros, and a weight that is not 2:4 (3
        # nonzeros in one group: it stays dense)
        m = etch.prune(MLP(k=36, h=21, n=9), 0.5, "2:4")
        with torch.no_grad():
            m.a.weight[3].zero_()
            m.a.weight[:, :4] = 0
            m.b.weight[0, 0:3] = 1.0
        self.assertTrue(is_2_4(m.a.weight))
        self.assertFalse(is_2_4(m.b.weight))
        cases.append((m, (3, 36)))
        self._check(cases)


if __name__ == "__main__":
    unittest.main()
