"""Constant weights in a .ptd beside the program (issue 16): etch.export(...,
external_data="w.ptd") / `python -m etch export --external-data`, loaded by `etch run --data`
and etch.runtime.load(pte, data=...), and shared by several programs."""

import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

from tests.export._common import REPO, cli_path, etch, needs_cli, needs_lib, python_env, \
    rel_err, run_cli
from etch import zoo
from etch.serialize import ptd as P
from etch.serialize import pte as E
from etch.serialize import schema as S

TOL = 1e-4


class Two(torch.nn.Module):
    """Two layers, an int64 buffer (an index table) and a float64 one, so that the .ptd holds
    more than Float weights."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.register_buffer("perm", torch.tensor([3, 1, 0, 2]))
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4, dtype=torch.float64))

    def forward(self, x):
        y = self.fc2(torch.relu(self.fc1(x)))
        return (y[:, self.perm].double() * self.scale).float()


class TwoHead(Two):
    """Another program from the same weights: only fc2, another computation, and a buffer of
    its own."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.tensor([0.25, -0.5, 1.0, 2.0]))

    def forward(self, h):
        return torch.sigmoid(self.fc2(h)) + self.fc2.bias + self.offset


def model_pair(seed=0):
    torch.manual_seed(seed)
    a = Two().eval()
    b = TwoHead().eval()
    b.load_state_dict(a.state_dict(), strict=False)
    return a, b


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def raw(t):
    return t.detach().contiguous().numpy().tobytes()


class ExternalData(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def test_pte_holds_no_constant_bytes(self):
        model, inputs = zoo.build("lenet")
        inside = etch.export(model, inputs, check_ops=False)
        outside = etch.export(model, inputs, external_data="w.ptd", check_ops=False)
        outside.save(self.path("m.pte"))
        data = _read(self.path("m.pte"))
        parts = E.unpack_program(E.read_pte(data))
        self.assertEqual([c for c in parts.data.constants if c], [])
        self.assertEqual(outside.num_constants, 0)
        tensors = [v.val for v in parts.program.execution_plan[0].values
                   if isinstance(v.val, S.Tensor)]
        ext = [t for t in tensors if t.extra_tensor_info is not None and
               t.extra_tensor_info.location == S.TensorDataLocation.EXTERNAL]
        self.assertEqual(len(ext), inside.num_constants)
        for t in ext:       # §4.1 rule 1: no planned memory, no buffer in the file
            self.assertIsNone(t.allocation_info)
            self.assertEqual(t.data_buffer_idx, 0)
        for t in tensors:
            if t not in ext:
                self.assertEqual(t.data_buffer_idx, 0)
        self.assertLess(len(data), len(inside.buffer) - inside.constant_bytes + 512)
        self.assertNotIn(raw(model.fc1.bias), data)
        # every constant of the in-file export is in the .ptd, bit for bit
        ptd = P.read_ptd(_read(self.path("w.ptd")))
        blobs = {e.key: e.data for e in P.unpack_ptd(ptd)}
        self.assertEqual(sorted(set(blobs.values())), sorted(set(c for c in inside.constants.blobs if c)))
        self.assertEqual(blobs["fc1.bias"], raw(model.fc1.bias))

    def test_ptd_is_current_flat_tensor_layout(self):
        a, _ = model_pair()
        p = etch.export(a, (torch.randn(2, 8),), external_data="w.ptd", check_ops=False)
        p.save(self.path("m.pte"))
        data = _read(self.path("w.ptd"))
        self.assertEqual(data, p.data_buffer)
        self.assertEqual(data[4:8], b"FT01")
        self.assertEqual(data[8:12], b"FH01")
        length, fb_off, fb_size, base, size = struct.unpack_from("<IQQQQ", data, 12)
        self.assertEqual((length, fb_off), (40, 48))
        self.assertEqual(base % 128, 0)
        self.assertGreaterEqual(base, fb_off + fb_size)
        self.assertEqual(len(data), base + size)
        f = P.read_ptd(data)
        self.assertEqual(f.flat_tensor.version, 0)
        for s in f.flat_tensor.segments:
            self.assertEqual(s.offset % 16, 0)
        entries = {e.key: e for e in P.unpack_ptd(f)}
        state = a.state_dict()
        for key in ("fc1.bias", "fc2.bias", "perm", "scale"):
            e = entries[key]
            self.assertEqual(e.data, raw(state[key]), key)
            self.assertEqual(list(e.layout.sizes), list(state[key].shape))
            self.assertEqual(list(e.layout.dim_order), list(range(state[key].dim())))
        self.assertEqual(entries["perm"].layout.scalar_type, S.ScalarType.LONG)
        self.assertEqual(entries["scale"].layout.scalar_type, S.ScalarType.DOUBLE)
        # the transposed linear weights are constants the exporter made: content-hash keys
        made = [k for k in entries if k.startswith("_etch_constant.")]
        self.assertEqual(len(made), 2)
        if cli_path():
            r = run_cli("info", self.path("w.ptd"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("entries: %d" % len(entries), r.stdout)
            self.assertIn("perm: 32 bytes, Long [4]", r.stdout)

    @needs_lib
    def test_python_runtime_with_data(self):
        model, inputs = zoo.build("lenet")
        p = etch.export(model, inputs, external_data="lenet_w.ptd", check_ops=True)
        p.save(self.path("lenet.pte"))
        m = etch.runtime.load(self.path("lenet.pte"), data=self.path("lenet_w.ptd"))
        for seed in range(2):
            x = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(seed))
            with torch.no_grad():
                self.assertLessEqual(rel_err(m.forward(x), model(x)), TOL)
        # the program's bytes, with the file it saved
        m2 = etch.runtime.load(p, data=self.path("lenet_w.ptd"), kernels="registered")
        self.assertTrue(torch.equal(m2.forward(inputs[0]), m.forward(inputs[0])))

    @needs_lib
    def test_missing_or_wrong_data_is_a_clear_error(self):
        model, inputs = zoo.build("mlp")
        etch.export(model, inputs, external_data="w.ptd").save(self.path("m.pte"))
        with self.assertRaises(etch.runtime.RuntimeError_) as cm:
            etch.runtime.load(self.path("m.pte")).forward(*inputs)
        self.assertIn("data='FILE.ptd'", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            etch.runtime.load(self.path("m.pte"), data=self.path("nope.ptd"))
        with self.assertRaises(TypeError):
            etch.runtime.load(self.path("m.pte"), data=b"bytes are not a path")
        # another model's weights file
        a, _ = model_pair()
        etch.export(a, (torch.randn(2, 8),), external_data="other.ptd").save(self.path("a.pte"))
        with self.assertRaises(etch.runtime.RuntimeError_) as cm:
            etch.runtime.load(self.path("m.pte"), data=self.path("other.ptd")).forward(*inputs)
        self.assertRegex(str(cm.exception),
                         r"external (data has no entry|entry '.*' does not match)")

    @needs_lib
    @needs_cli
    def test_cli_export_and_run_with_data(self):
        pte, ptd = self.path("lenet.pte"), self.path("weights.ptd")
        r = subprocess.run([sys.executable, "-m", "etch", "export", "etch.zoo:lenet",
                            "--input", "1x1x28x28:float32", "-o", pte,
                            "--external-data", "weights.ptd"],
                           capture_output=True, text=True, env=python_env(), cwd=str(REPO))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(ptd))
        self.assertIn("--data", r.stderr)
        model, inputs = zoo.build("lenet")
        x = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(3))
        np.save(self.path("x.npy"), x.numpy())
        out = self.path("out")
        r = run_cli("run", pte, "--data", ptd, "--inputs", self.path("x.npy"), "--output-dir", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = torch.from_numpy(np.load(os.path.join(out, "output_0.npy")))
        with torch.no_grad():
            self.assertLessEqual(rel_err(got, model(x)), TOL)
        r = run_cli("info", pte)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("needs external data: yes", r.stdout)
        r = run_cli("run", pte, "--inputs", self.path("x.npy"))
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, r"\.ptd|--data")
        r = run_cli("run", pte, "--data", self.path("missing.ptd"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.ptd", r.stderr)
        r = subprocess.run([sys.executable, "-m", "etch", "export", "etch.zoo:lenet",
                            "--input", "1x1x28x28:float32", "-o", pte, "-q",
                            "--external-data", "w2.ptd", "--bundle", self.path("b.bpte")],
                           capture_output=True, text=True, env=python_env(), cwd=str(REPO))
        self.assertEqual(r.returncode, 1)
        self.assertIn("--bundle and --external-data", r.stderr)
        self.assertFalse(os.path.exists(self.path("w2.ptd")))

    @needs_lib
    def test_two_programs_share_one_ptd(self):
        a, b = model_pair()
        x, h = torch.randn(3, 8), torch.randn(5, 16)
        pa = etch.export(a, (x,), external_data="shared.ptd", check_ops=True)
        pb = etch.export(b, (h,), external_data="shared.ptd", check_ops=True)
        pa.save(self.path("a.pte"))
        after_a = _read(self.path("shared.ptd"))
        pb.save(self.path("b.pte"))                 # merges: b's keys agree with a's
        shared = self.path("shared.ptd")
        keys = [e.key for e in P.unpack_ptd(P.read_ptd(_read(shared)))]
        self.assertEqual(len(keys), len(set(keys)))
        self.assertTrue({c.key for c in pa.external_constants} <= set(keys))
        self.assertTrue({c.key for c in pb.external_constants} <= set(keys))
        # fc2's bias and (transposed) weight appear once, used by both
        self.assertEqual(len(set(keys)), len({c.key for c in pa.external_constants} |
                                             {c.key for c in pb.external_constants}))
        self.assertLess(len(set(keys)), len(pa.external_constants) + len(pb.external_constants))
        # saving a again changes nothing
        pa.save(self.path("a.pte"))
        for pte, model, inp in (("a.pte", a, x), ("b.pte", b, h)):
            m = etch.runtime.load(self.path(pte), data=shared)
            with torch.no_grad():
                self.assertLessEqual(rel_err(m.forward(inp), model(inp)), TOL, pte)
        # the same file from one call; the programs loaded with it
        etch.save_external_data(self.path("one.ptd"), [pa, pb])
        one = P.unpack_ptd(P.read_ptd(_read(self.path("one.ptd"))))
        self.assertEqual(sorted(e.key for e in one), sorted(keys))
        with torch.no_grad():
            self.assertLessEqual(rel_err(etch.runtime.load(pb, data=self.path("one.ptd")).forward(h),
                                         b(h)), TOL)
        if cli_path():
            for pte, model, inp in (("a.pte", a, x), ("b.pte", b, h)):
                np.save(self.path("in.npy"), inp.numpy())
                r = run_cli("run", self.path(pte), "--data", shared, "--inputs",
                            self.path("in.npy"), "--output-dir", self.path("o_" + pte))
                self.assertEqual(r.returncode, 0, r.stderr)
                got = torch.from_numpy(np.load(os.path.join(self.path("o_" + pte), "output_0.npy")))
                with torch.no_grad():
                    self.assertLessEqual(rel_err(got, model(inp)), TOL)
        self.assertTrue(after_a != _read(shared))
        self.assertIn("offset", keys)

    def test_conflicting_weights_are_refused(self):
        a, _ = model_pair(0)
        c, _ = model_pair(1)                        # same names, other values
        x = torch.randn(2, 8)
        pa = etch.export(a, (x,), external_data="w.ptd", check_ops=False)
        pc = etch.export(c, (x,), external_data="w.ptd", check_ops=False)
        pa.save(self.path("a.pte"))
        before = _read(self.path("w.ptd"))
        with self.assertRaises(ValueError) as cm:
            pc.save(self.path("c.pte"))
        self.assertIn("fc1.bias", str(cm.exception))
        self.assertIn("overwrite_data=True", str(cm.exception))
        self.assertEqual(_read(self.path("w.ptd")), before)
        self.assertFalse(os.path.exists(self.path("c.pte")))
        pc.save(self.path("c.pte"), overwrite_data=True)
        self.assertEqual(_read(self.path("w.ptd")), pc.data_buffer)
        with self.assertRaises(ValueError) as cm:
            etch.save_external_data(self.path("x.ptd"), [pa, pc])
        self.assertIn("differs between the programs", str(cm.exception))
        with open(self.path("junk.ptd"), "wb") as f:
            f.write(b"not a ptd file at all" * 4)
        with self.assertRaises(ValueError) as cm:
            pa.save(self.path("a.pte"), self.path("junk.ptd"))
        self.assertIn("junk.ptd", str(cm.exception))

    @needs_lib
    def test_state_stays_in_the_pte_and_empty_ptd(self):
        class Acc(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("acc", torch.zeros(4))
                self.w = torch.nn.Parameter(torch.linspace(-1, 1, 4))

            def forward(self, x):
                self.acc.add_(x * self.w)
                return self.acc.clone()

        p = etch.export(Acc(), (torch.ones(4),), external_data="s.ptd", check_ops=True)
        self.assertEqual([c.key for c in p.external_constants], ["w"])
        p.save(self.path("a.pte"))
        m = etch.runtime.load(self.path("a.pte"), data=self.path("s.ptd"))
        ref = Acc()
        for _ in range(3):
            x = torch.randn(4)
            with torch.no_grad():
                self.assertLessEqual(rel_err(m.forward(x), ref(x)), TOL)

        class NoWeights(torch.nn.Module):
            def forward(self, x):
                return x * 2

        p = etch.export(NoWeights(), (torch.ones(3),), external_data="e.ptd", check_ops=True)
        p.save(self.path("n.pte"))
        self.assertEqual(P.unpack_ptd(P.read_ptd(_read(self.path("e.ptd")))), [])
        y = etch.runtime.load(self.path("n.pte"), data=self.path("e.ptd")).forward(torch.ones(3))
        self.assertTrue(torch.equal(y, torch.full((3,), 2.0)))

    def test_bad_arguments(self):
        model, inputs = zoo.build("mlp")
        with self.assertRaises(TypeError):
            etch.export(model, inputs, external_data=3, check_ops=False)
        with self.assertRaises(TypeError):
            etch.export(model, inputs, external_data="", check_ops=False)
        with self.assertRaises(ValueError):
            etch.export(model, inputs, check_ops=False).save(self.path("m.pte"), self.path("w.ptd"))
        self.assertIsNone(etch.export(model, inputs, check_ops=False).data_buffer)
        from etch.bundling import BundleError
        with self.assertRaises(BundleError) as cm:
            etch.bundle(etch.export(model, inputs, external_data="w.ptd", check_ops=False),
                        [inputs])
        self.assertIn("w.ptd", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
