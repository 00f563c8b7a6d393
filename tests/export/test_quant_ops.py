"""etch.quant.decomposed: ExecuTorch's quantized_decomposed operators on torch 1.13.

Each reference implementation against formulas written independently here (numpy, element by
element where it matters) and against torch's own quantizers (torch.quantize_per_tensor /
quantize_per_channel) where the semantics match; the schemas against ExecuTorch's; every
operator captured as one node and lowered to its out-variant."""

import unittest

import numpy as np
import torch

from tests.export._common import etch  # noqa: F401  (puts python/ on the path)
from etch import ops as _ops
from etch.quant import decomposed as D

qd = torch.ops.quantized_decomposed


def _rand(*shape, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def _np_quant(x, inv_scale, zp, lo, hi):
    """clamp(round_half_even(x * inv_scale) + zp) in float32, as numpy does it."""
    v = np.rint(x.astype(np.float32) * np.float32(inv_scale)) + zp
    return np.clip(v, lo, hi)


class Schemas(unittest.TestCase):
    # ExecuTorch's kernels/quantized/quantized.yaml and exir's embedding ops, argument lists
    # written out here independently of decomposed.py.
    EXPECTED = {
        "quantize_per_tensor.out": "Tensor input, float scale, int zero_point, int quant_min, "
                                   "int quant_max, ScalarType dtype, *, Tensor(a!) out",
        "dequantize_per_tensor.out": "Tensor input, float scale, int zero_point, "
                                     "int quant_min, int quant_max, ScalarType dtype, *, "
                                     "ScalarType? out_dtype=None, Tensor(a!) out",
        "dequantize_per_channel.out": "Tensor input, Tensor scales, Tensor? zero_points, "
                                      "int axis, int quant_min, int quant_max, "
                                      "ScalarType dtype, *, ScalarType? out_dtype=None, "
                                      "Tensor(a!) out",
        "choose_qparams_per_token_asymmetric.out": "Tensor input, ScalarType dtype, *, "
                                                   "Tensor(a!) scale_out, "
                                                   "Tensor(b!) zero_point_out",
        "dequantize_per_token.out": "Tensor input, Tensor scales, Tensor zero_points, "
                                    "int quant_min, int quant_max, ScalarType dtype, "
                                    "ScalarType output_dtype, *, Tensor(a!) out",
        "embedding_4bit.dtype_out": "Tensor weight, Tensor weight_scales, "
                                    "Tensor? weight_zero_points, int weight_quant_min, "
                                    "int weight_quant_max, Tensor indices, *, "
                                    "ScalarType? dtype=None, Tensor(a!) out",
    }

    def test_out_schemas(self):
        for name, args in self.EXPECTED.items():
            base, ov = name.split(".")
            s = getattr(getattr(qd, base), ov)._schema
            want = torch._C.parse_schema("quantized_decomposed::%s(%s) -> Tensor" % (name, args))
            self.assertEqual([(a.name, str(a.type), a.kwarg_only) for a in s.arguments],
                             [(a.name, str(a.type), a.kwarg_only) for a in want.arguments],
                             name)

    def test_functional_ops_lower_to_executorch_names(self):
        pairs = {
            qd.quantize_per_tensor.default: "quantize_per_tensor.out",
            qd.quantize_per_tensor.tensor: "quantize_per_tensor.Tensor_out",
            qd.dequantize_per_tensor.default: "dequantize_per_tensor.out",
            qd.dequantize_per_tensor.tensor: "dequantize_per_tensor.Tensor_out",
            qd.quantize_per_channel.default: "quantize_per_channel.out",
            qd.dequantize_per_channel.default: "dequantize_per_channel.out",
            qd.choose_qparams.tensor: "choose_qparams.Tensor_out",
            qd.choose_qparams_per_token_asymmetric.default:
                "choose_qparams_per_token_asymmetric.out",
            qd.quantize_per_token.default: "quantize_per_token.out",
            qd.dequantize_per_token.default: "dequantize_per_token.out",
            qd.dequantize_per_channel_group.default: "dequantize_per_channel_group.out",
            qd.embedding_byte.default: "embedding_byte.out",
            qd.embedding_byte.dtype: "embedding_byte.dtype_out",
            qd.embedding_4bit.default: "embedding_4bit.out",
            qd.embedding_4bit.dtype: "embedding_4bit.dtype_out",
        }
        for op, out in pairs.items():
            ov = _ops.out_variant(op)
            self.assertIsNotNone(ov, op)
            self.assertEqual(ov.name, "quantized_decomposed::" + out)
            if out != "dequantize_per_channel_group.out":   # no ExecuTorch kernel
                self.assertIn(ov.name, _ops.QUANTIZED_OPS)
                self.assertTrue(_ops.is_known_op(op))
        self.assertEqual(set(D.OP_NAMES), {"quantized_decomposed::" + o for o in pairs.values()})


class PerTensor(unittest.TestCase):
    def test_quantize_against_formula_and_torch(self):
        x = _rand(7, 33)
        for dtype, qdtype, (lo, hi), zp in ((torch.int8, torch.qint8, (-128, 127), 3),
                                             (torch.uint8, torch.quint8, (0, 255), 128)):
            scale = 0.0371
            q = qd.quantize_per_tensor(x, scale, zp, lo, hi, dtype)
            self.assertEqual(q.dtype, dtype)
            ref = _np_quant(x.numpy(), 1.0 / scale, zp, lo, hi)
            np.testing.assert_array_equal(q.numpy().astype(np.float64), ref)
            tq = torch.quantize_per_tensor(x, scale, zp, qdtype).int_repr()
            self.assertTrue(torch.equal(q, tq))
            qt = qd.quantize_per_tensor.tensor(x, torch.tensor([scale], dtype=torch.float64),
                                               torch.tensor([zp]), lo, hi, dtype)
            self.assertTrue(torch.equal(q, qt))

    def test_round_half_to_even_and_saturation(self):
        x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000.0, -1000.0])
        q = qd.quantize_per_tensor(x, 1.0, 0, -128, 127, torch.int8)
        self.assertEqual(q.tolist(), [0, 2, 2, 0, -2, -2, 127, -128])
        q = qd.quantize_per_tensor(x, 1.0, 10, -20, 20, torch.int8)
        self.assertEqual(q.tolist(), [10, 12, 12, 10, 8, 8, 20, -20])

    def test_dequantize(self):
        q = torch.randint(-128, 128, (5, 9), dtype=torch.int8)
        y = qd.dequantize_per_tensor(q, 0.25, -7, -128, 127, torch.int8)
        ref = (q.numpy().astype(np.float32) - np.float32(-7)) * np.float32(0.25)
        np.testing.assert_array_equal(y.numpy(), ref)
        tq = torch._make_per_tensor_quantized_tensor(q, 0.25, -7)
        self.assertTrue(torch.equal(y, tq.dequantize()))
        yt = qd.dequantize_per_tensor.tensor(q, torch.tensor([0.25]), torch.tensor([-7]),
                                             -128, 127, torch.int8)
        self.assertTrue(torch.equal(y, yt))
        self.assertEqual(qd.dequantize_per_tensor(q, 0.25, -7, -128, 127, torch.int8,
                                                  out_dtype=torch.float64).dtype,
                         torch.float64)

    def test_choose_qparams_tensor(self):
        x = _rand(40, seed=3) + 1.0
        s, z = qd.choose_qparams.tensor(x, -128, 127, torch.finfo(torch.float32).eps,
                                        torch.int8)
        self.assertEqual((s.dtype, z.dtype, tuple(s.shape)), (torch.float64, torch.int64, (1,)))
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        scale = np.float32(np.float32(hi) - np.float32(lo)) / np.float32(255)
        self.assertAlmostEqual(float(s), float(scale), places=7)
        self.assertEqual(int(z), int(np.clip(-128 - np.rint(np.float32(lo) / scale), -128, 127)))
        # torch's own observer picks the same parameters
        obs = torch.ao.quantization.MinMaxObserver(dtype=torch.qint8)
        obs(x)
        os_, oz = obs.calculate_qparams()
        self.assertAlmostEqual(float(s), float(os_), places=6)
        self.assertEqual(int(z), int(oz))

    def test_bad_arguments(self):
        x = _rand(4)
        with self.assertRaisesRegex(ValueError, "quant range"):
            qd.quantize_per_tensor(x, 0.1, 0, -200, 127, torch.int8)
        with self.assertRaisesRegex(ValueError, "float32"):
            qd.quantize_per_tensor(x.double(), 0.1, 0, -128, 127, torch.int8)
        with self.assertRaisesRegex(ValueError, "dtype says"):
            qd.dequantize_per_tensor(x.to(torch.int8), 0.1, 0, 0, 255, torch.uint8)


class PerChannel(unittest.TestCase):
    def test_quantize_against_torch(self):
        for axis in (0, 1):
            x = _rand(6, 10, seed=axis)
            n = x.shape[axis]
            scales = torch.linspace(0.01, 0.2, n)
            zps = torch.arange(n) - n // 2
            q = qd.quantize_per_channel(x, scales, zps, axis, -128, 127, torch.int8)
            tq = torch.quantize_per_channel(x, scales.double(), zps, axis, torch.qint8)
            self.assertTrue(torch.equal(q, tq.int_repr()), axis)
            y = qd.dequantize_per_channel(q, scales, zps, axis, -128, 127, torch.int8)
            torch.testing.assert_close(y, tq.dequantize(), rtol=0, atol=1e-6)

    def test_dequantize_formula_and_no_zero_points(self):
        q = torch.randint(-127, 128, (4, 3, 5), dtype=torch.int8)
        s = torch.tensor([0.5, 0.125, 2.0])
        y = qd.dequantize_per_channel(q, s, None, 1, -127, 127, torch.int8)
        ref = np.empty(q.shape, np.float32)
        for c in range(3):
            ref[:, c] = q.numpy()[:, c].astype(np.float32) * np.float32(s[c])
        np.testing.assert_array_equal(y.numpy(), ref)
        with self.assertRaisesRegex(ValueError, "scales must be"):
            qd.dequantize_per_channel(q, s[:2], None, 1, -127, 127, torch.int8)


def _np_token_qparams(row):
    """XNNPACK's per-token asymmetric rule, one row, float32."""
    f = np.float32
    lo, hi = min(f(row.min()), f(0)), max(f(row.max()), f(0))
    scale = max(f(hi - lo) / f(255), np.finfo(np.float32).eps)
    dmin, dmax = f(lo / scale), f(hi / scale)
    if (f(-128) + dmin) + (f(127) + dmax) > 0:
        zp = f(-128) - dmin
    else:
        zp = f(127) - dmax
    return float(scale), int(np.rint(np.clip(zp, -128, 127)))


class PerToken(unittest.TestCase):
    def test_choose_quantize_dequantize(self):
        x = _rand(2, 5, 24, seed=7)
        x[0, 0] = torch.abs(x[0, 0])        # all positive: the zero point at the end
        x[0, 1] = -torch.abs(x[0, 1])
        x[1, 2] = 0.0                       # all zero: the eps scale
        s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        self.assertEqual((s.dtype, z.dtype, tuple(s.shape)), (torch.float64, torch.int64,
                                                                (2, 5, 1)))
        rows = x.reshape(-1, 24).numpy()
        for i, row in enumerate(rows):
            es, ez = _np_token_qparams(row)
            self.assertAlmostEqual(float(s.reshape(-1)[i]), es, delta=es * 1e-6)
            self.assertEqual(int(z.reshape(-1)[i]), ez, i)
        self.assertEqual(int(z.reshape(-1)[0]), -128)
        self.assertEqual(int(z.reshape(-1)[1]), 127)
        q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
        for i, row in enumerate(rows):
            sc, zp = float(s.reshape(-1)[i]), int(z.reshape(-1)[i])
            ref = np.clip(np.rint(row.astype(np.float64) * (1.0 / sc)) + zp, -128, 127)
            np.testing.assert_array_equal(q.reshape(-1, 24)[i].numpy(), ref)
        y = qd.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float32)
        ref = ((q.double() - z.double()) * s).float()
        self.assertTrue(torch.equal(y, ref))
        # the round trip is within half a step of every row
        err = (y - x).abs().reshape(-1, 24).amax(dim=1)
        self.assertTrue(bool((err <= s.reshape(-1).float() * 0.5 + 1e-6).all()))

    def test_token_count_checked(self):
        x = _rand(3, 8)
        s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        with self.assertRaisesRegex(ValueError, "3 tokens"):
            qd.quantize_per_token(x, s[:2], z[:2], -128, 127, torch.int8)


class GroupAndEmbedding(unittest.TestCase):
    def test_pack_layout(self):
        q = torch.tensor([[-8, 7, 0, -1]], dtype=torch.int8)
        p = D.pack_int4(q)
        # even column in the high nibble, stored + 8
        self.assertEqual(p.tolist(), [[(0 << 4) | 15, (8 << 4) | 7]])
        self.assertEqual(p.dtype, torch.uint8)
        self.assertTrue(torch.equal(D.unpack_int4(p), q))
        r = torch.randint(-8, 8, (5, 12), dtype=torch.int8)
        self.assertTrue(torch.equal(D.unpack_int4(D.pack_int4(r)), r))

    def test_dequantize_per_channel_group(self):
        q = torch.randint(-8, 8, (3, 8), dtype=torch.int8)
        s = torch.rand(3, 2) + 0.1
        z = torch.randint(-2, 3, (3, 2)).float()
        y = qd.dequantize_per_channel_group(q, s, z, -8, 7, torch.int8, 4, torch.float32)
        for r in range(3):
            for c in range(8):
                g = c // 4
                self.assertAlmostEqual(float(y[r, c]), (int(q[r, c]) - float(z[r, g]))
                                       * float(s[r, g]), places=5)

    def test_embedding_4bit(self):
        q = torch.randint(-8, 8, (6, 16), dtype=torch.int8)
        s = (torch.rand(6, 4) + 0.05).half()
        idx = torch.tensor([[5, 0], [2, 2]])
        for zp in (None, torch.randint(-3, 4, (6, 4)).half()):
            y = qd.embedding_4bit.dtype(D.pack_int4(q), s, zp, -8, 7, idx, dtype=torch.float32)
            self.assertEqual((tuple(y.shape), y.dtype), ((2, 2, 16), torch.float32))
            for (a, b), row in np.ndenumerate(idx.numpy()):
                for c in range(16):
                    z = 0.0 if zp is None else float(zp[row, c // 4])
                    want = (int(q[row, c]) - z) * float(s[row, c // 4])
                    self.assertEqual(float(y[a, b, c]), np.float32(want))
            # without .dtype the result has the scales' dtype
            self.assertEqual(qd.embedding_4bit(D.pack_int4(q), s, zp, -8, 7, idx).dtype,
                             torch.float16)
        with self.assertRaisesRegex(ValueError, r"\[-8, 7\]"):
            qd.embedding_4bit(D.pack_int4(q), s, None, -7, 7, idx)
        with self.assertRaisesRegex(ValueError, "outside"):
            qd.embedding_4bit(D.pack_int4(q), s, None, -8, 7, torch.tensor([6]))

    def test_embedding_byte(self):
        w = torch.randint(-128, 128, (5, 6), dtype=torch.int8)
        s = torch.rand(5) + 0.1
        idx = torch.tensor([4, 1, 1])
        y = qd.embedding_byte.dtype(w, s, None, -128, 127, idx, dtype=torch.float32)
        ref = w.float()[idx] * s[idx].unsqueeze(1)
        self.assertTrue(torch.equal(y, ref))
        self.assertTrue(torch.equal(qd.embedding_byte(w, s, None, -128, 127, idx), ref))
        # torch's own per-channel dequantization of the same rows
        tq = torch._make_per_channel_quantized_tensor(w, s.double(),
                                                      torch.zeros(5, dtype=torch.long), 0)
        torch.testing.assert_close(y, tq.dequantize()[idx], rtol=0, atol=1e-6)


class Capture(unittest.TestCase):
    def test_each_call_is_one_node_and_lowered(self):
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("w", D.pack_int4(torch.randint(-8, 8, (4, 8),
                                                                    dtype=torch.int8)))
                self.register_buffer("s", torch.rand(4, 2) + 0.1)
                self.register_buffer("ids", torch.arange(4))

            def forward(self, x):
                s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
                q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
                x = qd.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float32)
                w = qd.embedding_4bit.dtype(self.w, self.s, None, -8, 7, self.ids,
                                            dtype=torch.float32)
                return x @ w.t()

        m = M()
        x = _rand(3, 8)
        p = etch.export(m, (x,), check_ops=False)
        names = [n for n in p.operators if n.startswith("quantized_decomposed")]
        self.assertEqual(names, ["quantized_decomposed::choose_qparams_per_token_asymmetric.out",
                                 "quantized_decomposed::quantize_per_token.out",
                                 "quantized_decomposed::dequantize_per_token.out",
                                 "quantized_decomposed::embedding_4bit.dtype_out"])
        plan = p.method().plan
        ops = [o.name + "." + o.overload for o in plan.operators]
        seen = set()
        for ins in plan.chains[0].instructions:
            a = ins.instr_args
            name = ops[a.op_index]
            seen.add(name)
            if name == "quantized_decomposed::embedding_4bit.dtype_out":
                # weight, scales, zero_points, min, max, indices, dtype, out, return
                self.assertEqual(len(a.args), 9)
                self.assertEqual(plan.values[a.args[3]].val.int_val, -8)
                self.assertEqual(plan.values[a.args[6]].val.int_val, 6)   # Float
            if name == "quantized_decomposed::choose_qparams_per_token_asymmetric.out":
                self.assertEqual(len(a.args), 5)    # input, dtype, scale_out, zp_out, ret
        self.assertTrue({"quantized_decomposed::embedding_4bit.dtype_out",
                         "quantized_decomposed::choose_qparams_per_token_asymmetric.out"} <= seen)
        torch.testing.assert_close(p.graphs["forward"].run([x])[0], m(x), rtol=0, atol=0)


if __name__ == "__main__":
    unittest.main()
