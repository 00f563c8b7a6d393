"""Fusion-aware memory planning: where the runtime fuses a producer (convolution, mm, addmm,
bmm, linear) with the activation right after it, the fused kernel writes the activation's
output while it still reads the producer's inputs, so the planner must not give that output
the inputs' memory.  Checked on the written file (offsets of the values the instructions
name) and by running the programs through the C runtime with the optimized kernels, which
report what they fused."""

import json
import os
import tempfile
import unittest

import torch

from tests.export._common import etch, needs_cli, needs_lib, rel_err, run_cli
from tests.export._planfile import ACTIVATIONS, PRODUCERS, analyze
from etch.serialize import read_pte, schema as S


def _pairs(buffer):
    """[(producer op, activation op, [(offset, size) of the producer's planned tensor
    inputs], (offset, size) of the activation's output)] for every producer directly followed
    by an activation that reads the producer's result (and nothing else reads it)."""
    plan = read_pte(buffer).program.method("forward")
    values = plan.values
    names = [o.name + ("." + o.overload if o.overload else "") for o in plan.operators]

    def tensors(i):
        v = values[i].val
        if isinstance(v, S.Tensor):
            return [i]
        if isinstance(v, (S.TensorList, S.OptionalTensorList)):
            return [j for j in v.items if j >= 0 and isinstance(values[j].val, S.Tensor)]
        return []

    def place(i):
        t = values[i].val
        if t.allocation_info is None:
            return None
        return t.allocation_info.memory_offset, t.nbytes

    calls = [ins.instr_args for ins in plan.chains[0].instructions]
    readers = {}
    for k, c in enumerate(calls):
        for a in c.args[:-2]:
            for j in tensors(a):
                readers.setdefault(j, set()).add(k)
    out = []
    for k in range(len(calls) - 1):
        p, a = calls[k], calls[k + 1]
        if names[p.op_index] not in PRODUCERS or names[a.op_index] not in ACTIVATIONS:
            continue
        v = p.args[-1]
        if a.args[0] != v or readers.get(v) != {k + 1} or v in plan.outputs:
            continue
        ins = [place(j) for x in p.args[:-2] for j in tensors(x) if place(j) is not None]
        out.append((names[p.op_index], names[a.op_index], ins, place(a.args[-1])))
    return out


def _overlap(a, b):
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def _bench(path):
    r = run_cli("bench", path, "--json", "--warmup", "0", "--iterations", "1")
    if r.returncode != 0:
        raise AssertionError("etch bench failed: %s" % r.stderr)
    return json.loads(r.stdout)


def _fused_calls(report, act):
    return sum(o["calls"] for o in report["ops"] if o.get("fused") == act)


class _Stack(torch.nn.Module):
    """pre -> producer -> act -> producer -> act: the second producer's input dies at it,
    which is exactly the memory an unaware planner hands to the second activation."""

    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x * 0.5)


def _models():
    torch.manual_seed(0)
    conv = lambda: torch.nn.Conv2d(8, 8, 3, padding=1)   # noqa: E731
    lin = lambda: torch.nn.Linear(32, 32)                 # noqa: E731
    x4 = torch.randn(1, 8, 12, 12)
    x2 = torch.randn(4, 32)
    return [
        ("conv_relu", _Stack([conv(), torch.nn.ReLU(), conv(), torch.nn.ReLU()]), x4,
         "aten::relu.out"),
        ("conv_relu6", _Stack([conv(), torch.nn.ReLU6(), conv(), torch.nn.ReLU6()]), x4,
         "aten::hardtanh.out"),
        ("linear_gelu", _Stack([lin(), torch.nn.GELU(), lin(), torch.nn.GELU()]), x2,
         "aten::gelu.out"),
        ("linear_relu", _Stack([lin(), torch.nn.ReLU(), lin(), torch.nn.ReLU()]), x2,
         "aten::relu.out"),
    ]


class PlanFusionTest(unittest.TestCase):
    def test_activation_output_never_overlaps_producer_inputs(self):
        for name, model, x, act in _models():
            with self.subTest(model=name):
                p = etch.export(model.eval(), (x,), check_ops=False)
                pairs = _pairs(p.buffer)
                self.assertEqual(len(pairs), 2, pairs)
                for prod, a, ins, out in pairs:
                    self.assertEqual(a, act)
                    self.assertTrue(ins, "producer %s reads planned tensors" % prod)
                    for i in ins:
                        self.assertFalse(_overlap(i, out), "%s: %s input %r, %s output %r"
                                         % (name, prod, i, a, out))
                facts = analyze(p.buffer)
                self.assertEqual(facts.overlaps, [])
                self.assertEqual(p.method().memory.lower_bound, facts.lower_bound)
                self.assertEqual(facts.arena, facts.lower_bound)

    @needs_lib
    @needs_cli
    def test_runtime_fuses_every_pair_and_matches_eager(self):
        with tempfile.TemporaryDirectory() as d:
            for name, model, x, act in _models():
                with self.subTest(model=name):
                    model = model.eval()
                    p = etch.export(model, (x,))
                    path = os.path.join(d, name + ".pte")
                    p.save(path)
                    self.assertEqual(_fused_calls(_bench(path), act), 2)
                    y = etch.runtime.load(p, kernels="optimized").forward(x)
                    with torch.no_grad():
                        ref = model(x)
                    self.assertGreater(float(ref.abs().max()), 0.1)
                    self.assertLessEqual(float((y - ref).abs().max()), 1e-4)


class MobileNetV2FusionTest(unittest.TestCase):
    @needs_lib
    @needs_cli
    def test_every_conv_hardtanh_pair_fused(self):
        import torchvision
        torch.manual_seed(0)
        model = torchvision.models.mobilenet_v2()
        x = torch.randn(1, 3, 224, 224)
        # Random init leaves outputs near 1e-9 and no ReLU6 reaching 6: batch-norm scales of
        # 3 give outputs of about 3 (float32 vs float64 eager: 4e-6 relative) with 14% of the
        # ReLU6 outputs clipped at 6.
        with torch.no_grad():
            for b in model.modules():
                if isinstance(b, torch.nn.BatchNorm2d):
                    b.weight.fill_(3.0)
        model.eval()
        p = etch.export(model, (x,))
        hardtanh = p.method().op_calls["aten::hardtanh.out"]
        self.assertEqual(hardtanh, 35)
        pairs = _pairs(p.buffer)
        self.assertEqual(len(pairs), hardtanh)
        for prod, a, ins, out in pairs:
            for i in ins:
                self.assertFalse(_overlap(i, out))
        facts = analyze(p.buffer)
        self.assertEqual(facts.overlaps, [])
        self.assertLessEqual(facts.arena, 1.01 * facts.lower_bound)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mobilenet_v2.pte")
            p.save(path)
            report = _bench(path)
        self.assertEqual(report["kernels"], "optimized")
        self.assertEqual(_fused_calls(report, "aten::hardtanh.out"), hardtanh)
        # chained calls (etch/kernel.h): the planner keeps each 1x1 (or stem) -> depthwise ->
        # 1x1 block's input alive to the block's end (python/etch/emit.py chain_blocks), so
        # every block the optimized convolution takes runs as one call: the six whose expanded
        # tensor outweighs their 1x1 weights at least twice (112 to 28 pixels; conv_chain.c
        # CHAIN_MIN_RATIO), and the stem (the 3x3 stride-2 convolution of the image) with the
        # first block's depthwise -> 1x1 pair. A residual add after a block joins its run:
        # three of those seven blocks have one (4 calls), and so do five of the 14x14 blocks
        # whose depthwise -> 1x1 pair chains (3 calls: its result, the add's, is clear of the
        # block's input); one more pair, without a residual, chains alone
        runs = [o.get("chained_calls", 1) for o in report["ops"]
                for _ in range(int(o["calls"])) if o.get("chained_calls", 1) > 1]
        self.assertEqual(runs.count(4), 3, report["ops"])
        self.assertEqual(runs.count(3), 4 + 5, report["ops"])
        self.assertGreaterEqual(runs.count(2), 1, report["ops"])
        y = etch.runtime.load(p).forward(x)
        with torch.no_grad():
            ref = model(x)
        self.assertGreater(float(ref.abs().max()), 0.1)
        err = float((y - ref).abs().max())
        self.assertLessEqual(err, 1e-4, "max |etch - eager| = %g" % err)
        self.assertLessEqual(rel_err(y, ref), 1e-4)


if __name__ == "__main__":
    unittest.main()
