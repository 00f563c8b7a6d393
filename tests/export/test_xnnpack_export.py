"""etch.export(..., backend="xnnpack"): every zoo model lowered to XnnpackBackend payloads runs
through the C backend within the zoo's tolerance of eager PyTorch, bitwise equal on 1 and 2
threads; fully delegated programs give the same result in the independent reference
interpreter of the payload (tests/xnnpack/xnn_ref.py); a fallback=True file run with the
backends unregistered (etch run --no-backends) computes its CPU twin, bit for bit the
plain export's result.  Single-operator modules cover each lowering rule (layouts, constant
operands, fused clamps) against eager."""

import os
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as Fn

from tests.export._common import REPO, cli_path, etch, lib_path, rel_err, run_cli
from etch import zoo

sys.path.insert(0, str(REPO / "tests" / "xnnpack"))
import xnn_ref  # noqa: E402

TOL = 1e-4
# models the lowering takes whole (no kernel call left)
WHOLE = ("mlp", "lenet", "mobilenet_v2", "resnet18")


def delegates(program, method="forward"):
    return program.method(method).delegate_calls


def kernel_calls(program, method="forward"):
    return sum(program.method(method).op_calls.values())


@unittest.skipUnless(lib_path(), "libetch not built (set ETCH_LIB)")
class ZooThroughBackend(unittest.TestCase):

    def check_model(self, name):
        model, inputs = zoo.build(name)
        program = etch.export(model, inputs, backend="xnnpack", fallback=True)
        with torch.no_grad():
            ref = model(*inputs)
        self.assertTrue(delegates(program), "nothing was delegated")
        if name in WHOLE:
            self.assertEqual(kernel_calls(program), 0, program.method("forward").op_calls)
        self.assertEqual(program.etch_only_operators, [])
        graph_out = program.graphs["forward"].run(list(inputs))[0]
        self.assertLessEqual(rel_err(graph_out, ref), TOL, "exported graph vs eager")
        outs = []
        for threads in (1, 2):
            rt = etch.runtime.load(program, num_threads=threads)
            outs.append(rt.forward(*inputs))
            self.assertLessEqual(rel_err(outs[-1], ref), TOL,
                                 "backend vs eager (%d threads)" % threads)
        self.assertTrue(torch.equal(outs[0], outs[1]), "1 and 2 threads differ")
        with tempfile.TemporaryDirectory() as d:
            pte = os.path.join(d, "m.pte")
            program.save(pte)
            if name in WHOLE:
                got = xnn_ref.run_program(pte, [x.numpy() for x in inputs])[0]
                self.assertLessEqual(rel_err(torch.from_numpy(got), ref), TOL,
                                     "reference interpreter of the payload vs eager")
            if cli_path() is None:
                return
            ins = []
            for i, x in enumerate(inputs):
                ins.append(os.path.join(d, "in%d.npy" % i))
                np.save(ins[-1], x.numpy())
            r = run_cli("run", pte, "--inputs", ",".join(ins), "--output-dir", d,
                        "--cpu-threads", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            cli = torch.from_numpy(np.load(os.path.join(d, "output_0.npy")))
            self.assertTrue(torch.equal(cli, outs[0]), "CLI and binding differ")
            # the CPU twin, with the backend unregistered: the plain export's result
            r = run_cli("run", pte, "--inputs", ",".join(ins), "--output-dir", d,
                        "--cpu-threads", "1", "--no-backends")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("forward__cpu", r.stderr)
            twin = torch.from_numpy(np.load(os.path.join(d, "output_0.npy")))
            plain = etch.runtime.load(etch.export(model, inputs)).forward(*inputs)
            self.assertTrue(torch.equal(twin, plain), "CPU twin vs plain export")


def _make(name):
    def test(self):
        self.check_model(name)
    test.__name__ = "test_" + name
    return test


for _name in zoo.names():
    setattr(ZooThroughBackend, "test_" + _name, _make(_name))


class Lambda(nn.Module):
    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


class Indexed(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.register_buffer("index", index)

    def forward(self, x):
        return torch.index_select(x, 1, self.index) * 2.0


g = torch.Generator().manual_seed(3)


def rnd(*shape, positive=False):
    x = torch.randn(*shape, generator=g)
    return x.abs() + 0.1 if positive else x


CASES = {
    # layouts: conv chains stay NHWC; element-wise nodes follow; constants are permuted
    "conv_relu": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()),
                                 (rnd(1, 3, 9, 7),)),
    "depthwise_mult2_stride": (nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4),
                               (rnd(2, 4, 11, 10),)),
    "grouped_dilated": (nn.Conv2d(6, 4, 3, padding=2, dilation=2, groups=2), (rnd(1, 6, 8, 8),)),
    "conv_transpose": (nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1),
                       (rnd(1, 3, 5, 6),)),
    "conv1d_pool": (nn.Sequential(nn.Conv1d(2, 6, 5, stride=2), nn.ReLU(), nn.MaxPool1d(3),
                                  nn.Conv1d(6, 4, 3)), (rnd(2, 2, 200),)),
    "maxpool_dilated_pad": (nn.MaxPool2d(3, stride=2, padding=1, dilation=2), (rnd(1, 3, 13, 12),)),
    "avgpool_nopad_count": (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
                            (rnd(1, 4, 9, 9),)),
    "avgpool": (nn.AvgPool2d(2), (rnd(1, 4, 8, 6),)),
    "global_mean_keepdim": (Lambda(lambda s, x: x.mean((2, 3), keepdim=True) * 2.0),
                            (rnd(2, 5, 6, 7),)),
    "global_mean_flat": (Lambda(lambda s, x: x.mean((-1, -2))), (rnd(2, 5, 6, 7),)),
    "conv_channel_scale": (Lambda(lambda s, x: s.c(x) * s.w + s.b, c=nn.Conv2d(3, 4, 1),
                                  w=nn.Parameter(torch.randn(4, 1, 1)),
                                  b=nn.Parameter(torch.randn(1, 4, 1, 1))), (rnd(1, 3, 5, 5),)),
    "conv_cat_slice_permute": (Lambda(lambda s, x: torch.cat(
        [s.a(x), s.b(x)[:, 1:3], x], 1).permute(0, 2, 3, 1), a=nn.Conv2d(3, 2, 1),
        b=nn.Conv2d(3, 4, 3, padding=1)), (rnd(1, 3, 6, 5),)),
    "cat_six": (Lambda(lambda s, *xs: torch.cat(xs, 1) + 1.0),
                tuple(rnd(2, k + 1, 3) for k in range(6))),
    "upsample_bilinear": (Lambda(lambda s, x: Fn.interpolate(s.c(x), size=(9, 11),
                                                             mode="bilinear"),
                                 c=nn.Conv2d(2, 3, 1)), (rnd(1, 2, 4, 5),)),
    "upsample_align": (Lambda(lambda s, x: Fn.interpolate(x, scale_factor=2, mode="bilinear",
                                                          align_corners=True)),
                       (rnd(1, 2, 4, 5),)),
    "pad_conv": (Lambda(lambda s, x: s.c(Fn.pad(x, (1, 2, 0, 3), value=0.5)),
                        c=nn.Conv2d(2, 2, 3)), (rnd(1, 2, 5, 5),)),
    "linear_chain": (nn.Sequential(nn.Linear(12, 20), nn.Hardtanh(-0.5, 0.5), nn.Linear(20, 7),
                                   nn.Sigmoid()), (rnd(3, 12),)),
    "linear_3d": (nn.Linear(8, 5), (rnd(2, 3, 8),)),
    "activations": (Lambda(lambda s, x: Fn.gelu(x) + Fn.elu(x, 0.7) + Fn.leaky_relu(x, 0.2)
                           + Fn.hardswish(x) + x.abs().neg() + torch.clamp(x, -0.3, 0.4)
                           + x.floor() + x.ceil() + x ** 2 + torch.maximum(x, x * 0.5)
                           + torch.tanh(x) + x.exp() * 0.1 + x.sin()),
                    (rnd(2, 3, 4, 5),)),
    "math": (Lambda(lambda s, x: x.sqrt() + x.rsqrt() + x.log() + x / 3.0 - 1.0
                    + torch.minimum(x, x * 2)), (rnd(4, 6, positive=True),)),
    "softmax_bmm": (Lambda(lambda s, a, b: torch.softmax(torch.bmm(a, b), -1)),
                    (rnd(2, 3, 4), rnd(2, 4, 5))),
    # the transposed operand goes to the bmm as XNN_FLAG_TRANSPOSE_B
    "bmm_transposed": (Lambda(lambda s, a, b: torch.bmm(a, b.transpose(1, 2)) * 0.5),
                       (rnd(3, 5, 4), rnd(3, 6, 4))),
    # a mean over the last dim: global average pooling of a [rows, 1, D, 1] view
    "mean_last_dim": (Lambda(lambda s, x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
                             + x.mean(-1).unsqueeze(-1)), (rnd(2, 5, 24),)),
    # index_select by a constant index: repeat_interleave as copies along a new axis, any
    # other index as slices of its runs, concatenated
    "repeat_interleave": (Lambda(lambda s, x: x.repeat_interleave(3, dim=1) + 1.0),
                          (rnd(2, 4, 5, 6),)),
    "index_select_runs": (Indexed(torch.tensor([4, 5, 0, 0, 1, 2, 6])), (rnd(3, 7, 5),)),
    "reshape_between": (Lambda(lambda s, x: s.l(s.c(x).flatten(1)), c=nn.Conv2d(2, 3, 3),
                               l=nn.Linear(3 * 4 * 4, 5)), (rnd(2, 2, 6, 6),)),
}


@unittest.skipUnless(lib_path(), "libetch not built (set ETCH_LIB)")
class Lowerings(unittest.TestCase):

    def check(self, name):
        model, inputs = CASES[name]
        model = model.eval()
        program = etch.export(model, inputs, backend="xnnpack")
        self.assertTrue(delegates(program), "nothing was delegated")
        self.assertEqual(kernel_calls(program), 0, program.method("forward").op_calls)
        with torch.no_grad():
            ref = model(*inputs)
        got = etch.runtime.load(program).forward(*inputs)
        self.assertEqual(tuple(got.shape), tuple(ref.shape))
        self.assertLessEqual(rel_err(got, ref), TOL)
        with tempfile.TemporaryDirectory() as d:
            pte = os.path.join(d, "m.pte")
            program.save(pte)
            ind = xnn_ref.run_program(pte, [x.numpy() for x in inputs])[0]
        self.assertLessEqual(rel_err(torch.from_numpy(ind), ref), TOL, "reference interpreter")

    def test_mixed_dtypes_stay_on_cpu(self):
        # int64 arithmetic has no XNNPACK node: it stays a kernel call beside the delegate
        m = Lambda(lambda s, x, i: torch.relu(x) * (i + 1).float())
        x, i = rnd(3, 4), torch.arange(4)
        program = etch.export(m, (x, i), backend="xnnpack")
        self.assertTrue(delegates(program))
        self.assertGreater(kernel_calls(program), 0)
        got = etch.runtime.load(program).forward(x, i)
        self.assertLessEqual(rel_err(got, m(x, i)), TOL)

    def test_dynamic_rows(self):
        # a dynamic dim: the payload holds the bounds, the backend re-infers the rest
        m = Lambda(lambda s, x: torch.softmax(s.b(torch.relu(s.a(x)) * 0.5 + 1.0), -1),
                   a=nn.Linear(12, 20), b=nn.Linear(20, 7)).eval()
        x = rnd(1, 9, 12)
        program = etch.export(m, (x,), dynamic_shapes=[{1: 9}], backend="xnnpack")
        self.assertTrue(delegates(program), "nothing was delegated")
        # what stays outside: the dynamic dim's size and a view by it, no arithmetic
        left = set(program.method("forward").op_calls)
        self.assertLessEqual(left, {"aten::sym_size.int", "executorch_prim::et_view.default"})
        rt = etch.runtime.load(program)
        for rows in (9, 4, 1):
            with torch.no_grad():
                ref = m(x[:, :rows])
            got = rt.forward(x[:, :rows].contiguous())
            self.assertEqual(tuple(got.shape), tuple(ref.shape))
            self.assertLessEqual(rel_err(got, ref), TOL, "%d rows" % rows)

    def test_quantized_linears(self):
        # etch.quantize's linears lower to XNNPACK's quantized nodes (qfuse.py): the payload
        # holds the packed weights (no float copy), the backend runs etch's integer kernels
        torch.manual_seed(11)
        m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16, bias=False)).eval()
        x = rnd(1, 6, 64)
        float_bytes = 4 * sum(p.numel() for p in m.parameters())
        for scheme, kw in (("8da4w", {"group_size": 32}), ("4w", {"group_size": 64}),
                           ("8w", {}), ("int8-dynamic", {})):
            with self.subTest(scheme=scheme):
                q = etch.quantize(m, (x,), scheme, **kw)
                plain = etch.export(q, (x,))
                program = etch.export(q, (x,), backend="xnnpack", fallback=True)
                self.assertEqual(dict(program.method("forward").op_calls), {})
                self.assertTrue(delegates(program))
                payload = sum(size for _, size, _ in delegates(program))
                self.assertLess(payload, float_bytes / 2, "weights stored as floats?")
                with torch.no_grad():
                    ref = q(x)
                want = etch.runtime.load(plain).forward(x)
                outs = [etch.runtime.load(program, num_threads=t).forward(x) for t in (1, 2)]
                self.assertTrue(torch.equal(outs[0], outs[1]), "1 and 2 threads differ")
                self.assertLessEqual(float((outs[0] - want).abs().max()), 1e-5,
                                     "backend vs the CPU path's kernels")
                self.assertLessEqual(rel_err(outs[0], ref), 1e-4, "backend vs eager")
                with tempfile.TemporaryDirectory() as d:
                    pte = os.path.join(d, "m.pte")
                    program.save(pte)
                    ind = xnn_ref.run_program(pte, [x.numpy()])[0]
                self.assertLessEqual(rel_err(torch.from_numpy(ind), ref), 2e-2,
                                     "reference interpreter")

    def test_bmm_transpose_flag(self):
        # bmm(a, b.transpose(1, 2)): one BatchMatrixMultiply with XNN_FLAG_TRANSPOSE_B, no copy
        model, inputs = CASES["bmm_transposed"]
        program = etch.export(model.eval(), inputs, backend="xnnpack")
        with tempfile.TemporaryDirectory() as d:
            pte = os.path.join(d, "m.pte")
            program.save(pte)
            f = xnn_ref.read_pte(open(pte, "rb").read())
        plan = f.program.execution_plan[0]
        kinds = [k for k, *_ in xnn_ref.Graph(f.segments[plan.delegates[0].processed.index],
                                                {}).nodes]
        self.assertEqual(kinds, ["BatchMatrixMultiply", "Multiply"])

    def test_bad_arguments(self):
        m, x = nn.ReLU(), rnd(2, 2)
        with self.assertRaisesRegex(ValueError, "backend 'npu'"):
            etch.export(m, (x,), backend="npu")
        with self.assertRaisesRegex(ValueError, "fallback=True needs a backend"):
            etch.export(m, (x,), fallback=True)

    def test_no_twin_without_backend_fails_by_name(self):
        if cli_path() is None:
            self.skipTest("etch CLI not built")
        program = etch.export(nn.ReLU(), (rnd(2, 3),), backend="xnnpack")
        with tempfile.TemporaryDirectory() as d:
            pte = os.path.join(d, "m.pte")
            program.save(pte)
            r = run_cli("run", pte, "--no-backends", "--output-dir", d)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("XnnpackBackend", r.stderr)


def _make_case(name):
    def test(self):
        self.check(name)
    test.__name__ = "test_" + name
    return test


for _name in CASES:
    setattr(Lowerings, "test_" + _name, _make_case(_name))


if __name__ == "__main__":
    unittest.main()
