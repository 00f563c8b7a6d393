"""The written file: deterministic bytes, eh00 exactly when there is segment data, constants in
an aligned segment, a file that reads back to the same Program, summary() contents."""

import os
import tempfile
import unittest

import torch
import torch.nn as nn

from tests.export._common import etch
from etch import zoo
from etch.serialize import read_pte, unpack_program
from etch.serialize import schema as S


class NoConstants(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


class ProgramFileTest(unittest.TestCase):
    def test_deterministic(self):
        model, inputs = zoo.build("lenet")
        a = etch.export(model, inputs, check_ops=False).buffer
        model2, inputs2 = zoo.build("lenet")
        b = etch.export(model2, inputs2, check_ops=False).buffer
        self.assertEqual(a, b)

    def test_deterministic_across_processes(self):
        import hashlib
        import subprocess
        import sys
        from tests.export._common import REPO, python_env
        code = ("import hashlib, etch; from etch import zoo; m, x = zoo.build('lenet'); "
                "print(hashlib.sha256(etch.export(m, x, check_ops=False).buffer).hexdigest())")
        model, inputs = zoo.build("lenet")
        here = hashlib.sha256(etch.export(model, inputs, check_ops=False).buffer).hexdigest()
        for seed in ("1", "2"):
            env = python_env()
            env["PYTHONHASHSEED"] = seed
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=env, cwd=REPO)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), here)

    def test_constants_in_aligned_segment_with_header(self):
        model, inputs = zoo.build("mlp")
        p = etch.export(model, inputs, check_ops=False)
        data = p.buffer
        self.assertEqual(data[4:8], b"ET12")
        self.assertEqual(data[8:12], b"eh00")
        pf = read_pte(data)
        self.assertEqual(pf.header.segment_base_offset % 128, 0)
        cs = pf.program.constant_segment
        self.assertEqual(cs.offsets[0], 0)
        self.assertEqual(len(cs.offsets), p.num_constants + 1)
        for off in cs.offsets:
            self.assertEqual(off % 16, 0)
        self.assertEqual(pf.program.constant_buffer, [])
        # every constant tensor's bytes are the parameter's bytes
        plan = pf.program.execution_plan[0]
        params = [t for t in model.state_dict().values() if t.dim() == 1]
        seg = pf.segments[cs.segment_index]
        found = 0
        for v in plan.values:
            t = v.val
            if isinstance(t, S.Tensor) and t.data_buffer_idx:
                off = cs.offsets[t.data_buffer_idx]
                raw = seg[off:off + t.nbytes]
                got = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(t.sizes)
                if len(t.sizes) == 1:
                    self.assertTrue(any(q.shape == got.shape and torch.equal(q, got)
                                        for q in params))
                    found += 1
        self.assertEqual(found, 3)      # the three biases

    def test_no_header_without_segment_data(self):
        p = etch.export(NoConstants(), (torch.randn(4), torch.randn(4)), check_ops=False)
        data = p.buffer
        self.assertEqual(data[4:8], b"ET12")
        self.assertNotEqual(data[8:12], b"eh00")
        pf = read_pte(data)
        self.assertIsNone(pf.header)

    def test_reads_back_to_the_same_program(self):
        model, inputs = zoo.build("lenet")
        p = etch.export(model, inputs, check_ops=False)
        parts = unpack_program(read_pte(p.buffer))
        self.assertEqual(parts.program.execution_plan, p.program.execution_plan)
        self.assertEqual([c.rstrip(b"\0") for c in parts.data.constants],
                         [c.rstrip(b"\0") for c in p.constants.blobs])

    def test_save_and_summary(self):
        model, inputs = zoo.build("lenet")
        p = etch.export(model, inputs, check_ops=False)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "lenet.pte")
            p.save(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), p.buffer)
        s = p.summary()
        for needle in ("aten::convolution.out", "aten::addmm.out", "planned memory",
                       "lower bound", "constants:"):
            self.assertIn(needle, s)
        self.assertEqual(p.etch_only_operators, [])
        self.assertEqual(p.memory_report()["forward"]["planned"], p.planned_bytes)


if __name__ == "__main__":
    unittest.main()
