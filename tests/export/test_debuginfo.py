"""Debug information of exported programs (etch.debuginfo, Chain.stacktrace): every
instruction of a zoo model names a module of the nn.Module (the module that computes it, by
the model's own structure) and a source line of the model's code; the C runtime reads back
what the exporter wrote (etch info --json); debug_info=False leaves it out."""

import inspect as pyinspect
import json
import linecache
import os
import subprocess
import tempfile
import unittest

import torch

from tests.export._common import cli_path, needs_cli

import etch  # noqa: E402
from etch import debuginfo, zoo  # noqa: E402
from etch.serialize import pte  # noqa: E402

aten = torch.ops.aten


def _debug_of(program):
    plan = pte.read_pte(program.buffer).program.execution_plan[0]
    chain = plan.chains[0]
    return plan, [debuginfo.from_frame_list(fl) for fl in chain.stacktrace]


class ModulePaths(unittest.TestCase):
    def test_mobilenet_v2_paths_are_its_modules(self):
        model, inputs = zoo.build("mobilenet_v2")
        program = etch.export(model, inputs, check_ops=False)
        plan, debug = _debug_of(program)
        self.assertEqual(len(debug), len(plan.chains[0].instructions))
        modules = dict(model.named_modules())
        seen = set()
        for pc, (ins, d) in enumerate(zip(plan.chains[0].instructions, debug)):
            self.assertIsNotNone(d, "instruction %d has no debug information" % pc)
            self.assertIn(d.module, modules, "pc %d: %r is no module of the model" % (pc, d.module))
            op = plan.operators[ins.instr_args.op_index].name
            mod = modules[d.module]
            # a convolution is its Conv2d's, or (batch norm folded into it) the BatchNorm2d's
            if op == "aten::convolution":
                self.assertIsInstance(mod, (torch.nn.Conv2d, torch.nn.BatchNorm2d), d.module)
            if op == "aten::hardtanh":
                self.assertIsInstance(mod, torch.nn.ReLU6, d.module)
            if op == "aten::addmm":
                self.assertIsInstance(mod, torch.nn.Linear, d.module)
            seen.add(d.module)
        # the deep paths of the torchvision model are there (features.3.conv.1.1: the batch
        # norm of block 3's depthwise convolution, whose output the folded call computes)
        self.assertIn("features.3.conv.1.1", seen)
        self.assertIn("features.3.conv.1.2", seen)
        self.assertIn("classifier.1", seen)
        # one module per convolution of the model (every one either named or its BN's)
        convs = [n for n, m in modules.items() if isinstance(m, torch.nn.Conv2d)]
        self.assertEqual(sum(op == "aten::convolution" for op in
                             (plan.operators[i.instr_args.op_index].name
                              for i in plan.chains[0].instructions)), len(convs))

    def test_lenet_source_lines_point_into_the_model(self):
        model, inputs = zoo.build("lenet")
        program = etch.export(model, inputs, check_ops=False)
        plan, debug = _debug_of(program)
        lines, first = pyinspect.getsourcelines(type(model).forward)
        src_file = pyinspect.getsourcefile(type(model))
        # each module's call, as the model's source writes it
        expect = {"bn1": "self.bn1(self.conv1(x))", "bn2": "self.bn2(self.conv2(x))",
                  "fc1": "self.fc1(x)", "fc2": "self.fc2(x)", "fc3": "self.fc3(x)"}
        for pc, d in enumerate(debug):
            s = d.source
            self.assertIsNotNone(s, "pc %d" % pc)
            self.assertEqual(os.path.realpath(s.filename), os.path.realpath(src_file))
            self.assertEqual(s.function, "forward")
            self.assertTrue(first <= s.lineno < first + len(lines), (pc, s.lineno))
            self.assertEqual(s.context, linecache.getline(src_file, s.lineno).strip())
            if d.module in expect:
                self.assertIn(expect[d.module], s.context, (pc, d.module))
        self.assertEqual([d.module for d in debug if d.module],
                         ["bn1", "bn2", "fc1", "fc2", "fc3"])

    def test_nested_frames_outermost_first(self):
        class Inner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                return torch.sigmoid(self.lin(x))

        class Outer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                return self.inner(x) * 2

        program = etch.export(Outer().eval(), (torch.randn(2, 4),), check_ops=False)
        _, debug = _debug_of(program)
        by_node = {d.node: d for d in debug}
        sig = next(d for d in debug if d.node.startswith("sigmoid"))
        self.assertEqual(sig.module, "inner")
        self.assertEqual([f.function for f in sig.frames], ["forward", "forward"])
        self.assertIn("self.inner(x)", sig.frames[0].context)
        self.assertIn("torch.sigmoid(self.lin(x))", sig.frames[1].context)
        self.assertEqual(next(d for d in debug if d.node.startswith("addmm")).module,
                         "inner.lin")
        mul = next(d for n, d in by_node.items() if n.startswith("mul"))
        self.assertEqual(mul.module, "")

    def test_xnnpack_delegate_names_its_outputs(self):
        model, inputs = zoo.build("lenet")
        program = etch.export(model, inputs, check_ops=False, backend="xnnpack")
        plan, debug = _debug_of(program)
        from etch.capture import capture
        names = {n.name for n in capture(model, inputs).graph.nodes}
        kinds = [type(i.instr_args).__name__ for i in plan.chains[0].instructions]
        self.assertIn("DelegateCall", kinds)
        for kind, d in zip(kinds, debug):
            if kind == "DelegateCall":
                for n in d.node.split(","):
                    self.assertIn(n, names)

    def test_debug_info_false(self):
        model, inputs = zoo.build("mlp")
        program = etch.export(model, inputs, check_ops=False, debug_info=False)
        chain = pte.read_pte(program.buffer).program.execution_plan[0].chains[0]
        self.assertFalse(chain.stacktrace)

    @needs_cli
    def test_runtime_reads_what_was_written(self):
        model, inputs = zoo.build("mobilenet_v2")
        program = etch.export(model, inputs, check_ops=False)
        _, debug = _debug_of(program)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.pte")
            program.save(path)
            r = subprocess.run([cli_path(), "info", path, "--json"], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout)["methods"][0]["instruction_debug"]
            t = subprocess.run([cli_path(), "info", path, "--instructions"],
                               capture_output=True, text=True)
            self.assertEqual(t.returncode, 0, t.stderr)
        self.assertEqual(len(got), len(debug))
        for g, d in zip(got, debug):
            self.assertEqual(g["node"], d.node)
            self.assertEqual(g["module"], d.module)
            self.assertEqual(g["line"], d.source.lineno)
            self.assertEqual(g["file"], d.source.filename)
            self.assertEqual(g["source"], d.source.context)
            self.assertEqual(g["frames"], len(d.frames))
        self.assertIn("features.3.conv.1.1 (getitem_", t.stdout)
        self.assertIn("debug information: %d of %d instructions" % (len(debug), len(debug)),
                      t.stdout)

    @needs_cli
    def test_bench_by_module(self):
        model, inputs = zoo.build("lenet")
        program = etch.export(model, inputs, check_ops=False)
        _, debug = _debug_of(program)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.pte")
            program.save(path)
            r = subprocess.run([cli_path(), "bench", path, "--by-module", "--iterations", "2",
                                "--warmup", "0", "--json"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            rows = json.loads(r.stdout)["ops"]
            p = subprocess.run([cli_path(), "bench", path, "--per-instruction", "--iterations",
                                "2", "--warmup", "0", "--json"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            per = json.loads(p.stdout)["ops"]
        want = {d.module or "<root>" for d in debug}
        self.assertEqual({row["op"] for row in rows}, want)
        self.assertTrue(all(row["impl"] == "module" for row in rows))
        self.assertEqual(sum(row["calls"] for row in rows), len(debug))
        self.assertEqual([(row["module"], row["node"]) for row in per],
                         [(d.module, d.node) for d in debug])


if __name__ == "__main__":
    unittest.main()
