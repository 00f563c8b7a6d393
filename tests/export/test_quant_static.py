"""etch.quantize(..., "int8") (static PTQ) and etch.prepare_qat / etch.convert_qat: the QDQ
graph, the numbers against torch.ao's own reference quantized model and against PyTorch's
int8 backend (fbgemm), closeness to float, QAT at least as good as PTQ after fine-tuning, and
errors."""

import collections
import copy
import os
import unittest

import torch
import torch.nn as nn

from tests.export._common import etch


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def _data(n, seed):
    """Noisy copies of 10 fixed random 16x16 patterns, labelled by pattern: a task the CNN
    learns, with held-out accuracy well above chance."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(99))
    y = torch.randint(0, 10, (n,), generator=g)
    x = patterns[y] * 0.6 + torch.randn(n, 1, 16, 16, generator=g)
    return x, y


def _trained_cnn():
    torch.manual_seed(0)
    m = CNN()
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    x, y = _data(256, 1)
    for _ in range(40):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    return m.eval()


def _cos(a, b):
    return float(nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(),
                                                 0))


class StaticInt8(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = _trained_cnn()
        cls.x = torch.randn(4, 1, 16, 16)
        cls.cal = [(_data(8, 10 + i)[0],) for i in range(6)]

    def test_graph_and_torch_reference(self):
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
        from etch.quant.static import _mapping, _qconfig
        for obs in ("minmax", "histogram"):
            with self.subTest(observer=obs):
                q = etch.quantize(self.model, (self.x,), "int8", self.cal, observer=obs)
                p = etch.export(q, (self.x,), check_ops=False)
                g = p.graphs["forward"].graph
                got = collections.Counter(
                    str(n.target).split("quantized_decomposed.")[1] for n in g.nodes
                    if n.op == "call_function" and "quantized_decomposed" in str(n.target))
                # QDQ on the input, after each conv+relu and the linear, around the flatten:
                # one quantize per dequantize; weights: one dequantize_per_channel per layer
                self.assertEqual(got["dequantize_per_channel.default"], 3)
                self.assertEqual(got["quantize_per_tensor.default"],
                                 got["dequantize_per_tensor.default"])
                self.assertGreaterEqual(got["quantize_per_tensor.default"], 4)
                self.assertNotIn("aten::native_batch_norm", " ".join(p.operators))
                self.assertEqual(sorted(n for n, _ in q.etch_quantization.quantized),
                                 ["conv1", "conv2", "fc"])     # bn1, bn2 folded into them
                self.assertEqual(q.etch_quantization.kept_float, [])
                # torch.ao's reference model of the same configuration: the same numbers
                prep = prepare_fx(copy.deepcopy(self.model), _mapping(_qconfig(obs, "uint8",
                                                                               False)),
                                  (self.x,))
                with torch.no_grad():
                    for (b,) in self.cal:
                        prep(b)
                ref_model = convert_to_reference_fx(prep)
                out = p.graphs["forward"].run([self.x])[0]
                with torch.no_grad():
                    torch.testing.assert_close(out, ref_model(self.x), rtol=1e-4, atol=1e-4)
                    self.assertGreater(_cos(out, self.model(self.x)), 0.99)

    def test_agrees_with_fbgemm_int8(self):
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        x, _ = _data(64, 5)
        q = etch.quantize(self.model, (x,), "int8", self.cal)
        p = etch.export(q, (x,), check_ops=False)
        ours = p.graphs["forward"].run([x])[0]
        prep = prepare_fx(copy.deepcopy(self.model), get_default_qconfig_mapping("fbgemm"),
                          (self.x,))
        with torch.no_grad():
            for (b,) in self.cal:
                prep(b)
            theirs = convert_fx(prep)(x)
            ref = self.model(x)
        agree_float = float((ours.argmax(1) == ref.argmax(1)).float().mean())
        agree_torch = float((ours.argmax(1) == theirs.argmax(1)).float().mean())
        self.assertGreaterEqual(agree_float, 0.95)
        self.assertGreaterEqual(agree_torch, 0.95)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "needs calibration data"):
            etch.quantize(self.model, (self.x,), "int8")
        with self.assertRaisesRegex(ValueError, r"has shape \(2, 3, 16, 16\)"):
            etch.quantize(self.model, (self.x,), "int8", [(torch.randn(2, 3, 16, 16),)])
        with self.assertRaisesRegex(ValueError, "is torch.float64"):
            etch.quantize(self.model, (self.x,), "int8", [(self.x.double(),)])
        with self.assertRaisesRegex(ValueError, "observer"):
            etch.quantize(self.model, (self.x,), "int8", self.cal, observer="mse")
        with self.assertRaisesRegex(ValueError, "applies to 4w"):
            etch.quantize(self.model, (self.x,), "int8", self.cal, group_size=32)

    def test_activation_dtype(self):
        q = etch.quantize(self.model, (self.x,), "int8", self.cal)
        p = etch.export(q, (self.x,), check_ops=False)
        qn = [n for n in p.graphs["forward"].graph.nodes
              if "quantize_per_tensor" in str(n.target)]
        self.assertTrue(qn)
        self.assertTrue(all(n.args[3:] == (0, 255, torch.uint8) for n in qn))
        with self.assertRaisesRegex(ValueError, "uint8"):
            etch.quantize(self.model, (self.x,), "int8", self.cal, activation_dtype="int8")


class Shuffle(nn.Module):
    """shufflenet_v2's unit: tuple unpacking of traced values (x.size(), x.chunk), cat and
    a channel shuffle through view / transpose."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(8 * 8 * 8, 5)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        x = torch.cat((a, torch.relu(self.bn(self.conv(b)))), 1)
        n, c, h, w = x.size()
        x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        return self.head(torch.flatten(x, 1))


class Gates(nn.Module):
    """The ops whose output range is fixed (sigmoid, hardsigmoid, tanh, softmax): a squeeze-
    excitation gate as in mobilenet_v3 / efficientnet."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Conv2d(8, 8, 1)
        self.head = nn.Linear(8, 6)

    def forward(self, x):
        y = self.conv(x)
        y = y * torch.sigmoid(self.fc(y.mean((2, 3), keepdim=True)))
        y = y * nn.functional.hardsigmoid(y) + torch.tanh(y)
        return torch.softmax(self.head(y.mean((2, 3))), -1)


class ShapeScale(nn.Module):
    """Attention's scale from the input's shape: a Python number computed while tracing."""

    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(8, 16)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, -1)
        a = torch.softmax(q @ k.transpose(-1, -2) * (x.shape[-1] // 2) ** -0.5, -1)
        return self.out(a).mean(1)


class Architectures(unittest.TestCase):
    """Model structures of common architectures that torch.ao alone refuses."""

    def _quantize(self, model, shape):
        """int8 of `model` (random weights): the exported graph computes what torch.ao's own
        reference model of the same configuration does, and stays close to float."""
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
        from etch.quant.static import (_drop_non_tensor_observers, _fx_unpacking, _mapping,
                                       _qconfig, _split_relu6)
        model.eval()
        g = torch.Generator().manual_seed(0)
        x = torch.randn(*shape, generator=g)
        cal = [(torch.randn(*shape, generator=g),) for _ in range(3)]
        q = etch.quantize(model, (x,), "int8", cal)
        p = etch.export(q, (x,), check_ops=False)
        with _fx_unpacking():
            prep = prepare_fx(_split_relu6(copy.deepcopy(model)),
                              _mapping(_qconfig("minmax", "uint8", False)), (x,))
        _drop_non_tensor_observers(prep, (x,))
        out = p.graphs["forward"].run([x])[0]
        with torch.no_grad():
            for (b,) in cal:
                prep(b)
            torch.testing.assert_close(out, convert_to_reference_fx(prep)(x), rtol=1e-4,
                                       atol=1e-4)
            self.assertGreater(_cos(out, model(x)), 0.98)
        return q, p

    def test_tuple_unpacking_of_traced_values(self):
        # torch 1.13's tracer failed here on Python 3.11 ("Proxy object cannot be iterated")
        torch.manual_seed(0)
        q, p = self._quantize(Shuffle(), (4, 8, 8, 8))
        self.assertEqual(sorted(n for n, _ in q.etch_quantization.quantized), ["conv", "head"])
        self.assertIn("aten::cat.out", p.operators)
        qat = etch.prepare_qat(Shuffle(), (torch.randn(2, 8, 8, 8),))
        self.assertTrue(any("FakeQuantize" in type(m).__name__ for m in qat.modules()))

    def test_arithmetic_on_shapes(self):
        # torch.ao observed the number (d // h) ** -0.5: "'float' object has no attribute
        # 'numel'" during calibration
        torch.manual_seed(0)
        q, p = self._quantize(ShapeScale(), (4, 6, 8))
        self.assertEqual(sorted(n for n, _ in q.etch_quantization.quantized), ["out", "qk"])
        self.assertIn("aten::mul.Scalar_out", p.operators)
        qat = etch.prepare_qat(ShapeScale(), (torch.randn(4, 6, 8),))
        qat(torch.randn(4, 6, 8)).sum().backward()
        self.assertTrue(torch.isfinite(etch.convert_qat(qat.eval())(torch.randn(4, 6, 8)))
                        .all())

    def test_torch_composite_modules_stay_float_and_are_named(self):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.TransformerEncoderLayer(16, 2, 32,
                                                                       batch_first=True))
        m.eval()
        x = torch.randn(2, 5, 8)
        q = etch.quantize(m, (x,), "int8", [(torch.randn(2, 5, 8),)])
        self.assertEqual([n for n, _ in q.etch_quantization.quantized], ["0"])
        kept = dict(q.etch_quantization.kept_float)
        self.assertIn("Linear inside 1 (TransformerEncoderLayer), which torch.fx runs as one "
                      "float module", kept["1.linear1"])
        p = etch.export(q, (x,), check_ops=False)
        self.assertIn("1.self_attn", p.summary())
        with torch.no_grad():
            self.assertGreater(_cos(p.graphs["forward"].run([x])[0], m(x)), 0.99)

    def test_relu6_quantized_after_the_activation(self):
        # ReLU6 (mobilenet_v2) used to share the conv's quantization, the range before the
        # activation: about half of the levels went to negative values it clamps away
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(),
                          nn.Conv2d(8, 4, 1), nn.ReLU6())
        with torch.no_grad():
            m[1].running_mean.uniform_(-0.5, 0.5)
        q, p = self._quantize(m, (4, 3, 8, 8))
        # the fused ConvReLU2d modules hold the convs
        self.assertEqual(sorted(n for n, _ in q.etch_quantization.quantized), ["0.0", "3.0"])
        g = p.graphs["forward"].graph
        quants = [n for n in g.nodes if str(n.target).endswith("quantize_per_tensor.default")
                  and "dequantize" not in str(n.target)]
        after = {str(n.args[0].target).split(".")[1]: n for n in quants
                 if len(str(n.args[0].target).split(".")) == 3}
        # conv (+BN folded) + ReLU fused: quantized after the ReLU with zero point 0; the
        # clamp to 6 shares those parameters; nothing quantizes a conv's output directly
        self.assertNotIn("convolution", after)
        self.assertEqual(after["relu"].args[2], 0)
        self.assertEqual((after["clamp"].args[1], after["clamp"].args[2]),
                         (after["relu"].args[1], 0))
        qat = etch.prepare_qat(m, (torch.randn(2, 3, 8, 8),))
        self.assertFalse(any(isinstance(x, nn.ReLU6) for x in qat.modules()))

    def test_fixed_range_ops(self):
        # prepare_fx refused sigmoid / hardsigmoid / tanh / softmax without fixed qparams
        torch.manual_seed(0)
        q, p = self._quantize(Gates(), (4, 3, 8, 8))
        g = p.graphs["forward"].graph
        fixed = {}
        for n in g.nodes:
            if "quantize_per_tensor" in str(n.target) and "dequantize" not in str(n.target):
                src = str(n.args[0].target).split(".")     # aten.sigmoid.default
                if len(src) == 3 and src[1] in ("sigmoid", "div", "tanh"):
                    fixed[src[1]] = (n.args[1], n.args[2])
        # torch.ao's fixed ranges: [0, 1) in steps of 1/256 (hardsigmoid decomposes into
        # add, clamp, div); tanh [-1, 1) with zero point 128
        self.assertEqual(fixed, {"sigmoid": (1 / 256, 0), "div": (1 / 256, 0),
                                 "tanh": (2 / 256, 128)})
        qat = etch.prepare_qat(Gates(), (torch.randn(2, 3, 8, 8),))
        qat(torch.randn(2, 3, 8, 8))
        out = etch.convert_qat(qat.eval())
        self.assertTrue(torch.isfinite(out(torch.randn(2, 3, 8, 8))).all())


class ScalarArith(nn.Module):
    """Inputs on a large scale brought down by constants (MFCCs times 0.02, as etch's keyword
    spotter does), a division and a negative factor."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        y = self.conv(x * 0.02)
        y = torch.relu(y) / 4.0
        return self.fc(torch.flatten(y * -0.5, 1))


class StaticScalarOps(unittest.TestCase):
    def test_mul_div_by_a_number_gets_its_own_scale(self):
        # torch.ao gives x * c the observer of x (its backend's mul_scalar rescales when
        # lowered); kept, x * 0.02 landed on two or three of 256 levels and the model's
        # outputs were noise
        torch.manual_seed(0)
        m = ScalarArith().eval()
        g = torch.Generator().manual_seed(1)
        x = torch.randn(16, 1, 6, 6, generator=g) * 200
        cal = [(torch.randn(8, 1, 6, 6, generator=g) * 200,) for _ in range(4)]
        q = etch.quantize(m, (x[:1],), "int8", cal)
        with torch.no_grad():
            self.assertGreater(_cos(q(x), m(x)), 0.995)
        p = etch.export(q, (x[:1],), check_ops=False)
        gr = p.graphs["forward"].graph
        qnodes = {n: n for n in gr.nodes if str(n.target).endswith("quantize_per_tensor.default")
                  and "dequantize" not in str(n.target)}
        seen = []
        for n in qnodes:
            src = n.args[0]
            if str(getattr(src, "target", "")).split(".")[1:2] not in (["mul"], ["div"]):
                continue
            dq, c = src.args
            if "dequantize_per_tensor" not in str(dq.target):
                continue        # relu -> div: one observer shared along the chain (covering)
            factor = 1.0 / c if "div" in str(src.target) else c
            seen.append(c)
            self.assertAlmostEqual(n.args[1], dq.args[1] * abs(factor), places=6)
            self.assertEqual(n.args[2], dq.args[2] if factor > 0 else 255 - dq.args[2])
        self.assertEqual(sorted(seen), [-0.5, 0.02])
        out = p.graphs["forward"].run([x[:1]])[0]
        with torch.no_grad():
            torch.testing.assert_close(out, q(x[:1]), rtol=1e-4, atol=1e-4)


class CommandLine(unittest.TestCase):
    def test_etch_export_int8_with_calibration(self):
        import os
        import subprocess
        import sys
        import tempfile
        import numpy as np
        from tests.export._common import REPO, python_env
        with tempfile.TemporaryDirectory() as d:
            cal = os.path.join(d, "cal")
            os.mkdir(cal)
            for i in range(2):
                np.savez(os.path.join(cal, "b%d.npz" % i),
                         input_0=np.random.RandomState(i).randn(3, 1, 1, 28, 28)
                         .astype(np.float32))
            out = os.path.join(d, "l.pte")
            args = [sys.executable, "-m", "etch", "export", "etch.zoo:lenet", "--input",
                    "1x1x28x28:float32", "-o", out, "--no-check", "-q", "--quantize", "int8"]
            r = subprocess.run(args + ["--calibration", cal, "--observer", "histogram",
                                       "--summary"],
                               capture_output=True, text=True, env=python_env(), cwd=str(REPO))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("quantization: scheme int8 (activations=uint8, observer=histogram)",
                          r.stdout)
            self.assertIn("quantized_decomposed::quantize_per_tensor.out", r.stdout)
            os.remove(out)
            r = subprocess.run(args, capture_output=True, text=True, env=python_env(),
                               cwd=str(REPO))
            self.assertEqual(r.returncode, 1)
            self.assertIn("needs calibration data", r.stderr)
            self.assertFalse(os.path.exists(out))


class CalibrationFiles(unittest.TestCase):
    """--calibration DIR_OR_NPZ that is missing, corrupt or of the wrong dtype / shape: an
    error naming the file (or the batch), before anything is written."""

    def _files(self, d):
        import numpy as np
        ok = os.path.join(d, "ok.npz")
        np.savez(ok, input_0=np.zeros((2, 1, 1, 28, 28), np.float32))
        with open(ok, "rb") as f:
            data = f.read()
        files = {"truncated.npz": data[:200], "text.npz": b"not numpy at all\n",
                 "cut_member.npz": data[:len(data) // 2] + data[-200:]}
        for name, b in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(b)
        np.save(os.path.join(d, "objects.npy"), np.array([{"a": 1}], dtype=object),
                allow_pickle=True)
        full = os.path.join(d, "cut.npy")
        np.save(full, np.zeros((2, 1, 1, 28, 28), np.float32))
        with open(full, "rb") as f:
            b = f.read()
        with open(full, "wb") as f:
            f.write(b[:-100])
        np.savez(os.path.join(d, "f64.npz"), input_0=np.zeros((2, 1, 1, 28, 28)))
        return ok

    def test_load_calibration_refuses_unreadable_files(self):
        import tempfile
        from etch.cli import load_calibration
        with tempfile.TemporaryDirectory() as d:
            ok = self._files(d)
            self.assertEqual(len(load_calibration(ok, 1)), 2)
            for name in ("truncated.npz", "text.npz", "cut_member.npz", "objects.npy",
                         "cut.npy"):
                with self.subTest(file=name):
                    with self.assertRaisesRegex(ValueError, "calibration file .*%s is not an? "
                                                "\\.np[yz] of plain numpy arrays" % name):
                        load_calibration(os.path.join(d, name), 1)
            with self.assertRaisesRegex(FileNotFoundError, "calibration data"):
                load_calibration(os.path.join(d, "missing.npz"), 1)

    def test_cli_writes_nothing(self):
        import subprocess
        import sys
        import tempfile
        from tests.export._common import REPO, python_env
        with tempfile.TemporaryDirectory() as d:
            self._files(d)
            out = os.path.join(d, "l.pte")
            for name, msg in (("truncated.npz", "truncated.npz is not an .npz"),
                              ("f64.npz", "is torch.float64, the example input is "
                                          "torch.float32"),
                              ("missing", "calibration data: No such file")):
                with self.subTest(file=name):
                    r = subprocess.run(
                        [sys.executable, "-m", "etch", "export", "etch.zoo:lenet", "--input",
                         "1x1x28x28:float32", "-o", out, "--no-check", "-q", "--quantize",
                         "int8", "--calibration", os.path.join(d, name)],
                        capture_output=True, text=True, env=python_env(), cwd=str(REPO))
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertIn(msg, r.stderr)
                    self.assertNotIn("Traceback", r.stderr)
                    self.assertFalse(os.path.exists(out))


class QAT(unittest.TestCase):
    def test_prepare_train_convert(self):
        model = _trained_cnn()
        x0 = torch.randn(4, 1, 16, 16)
        cal = [(_data(8, 10 + i)[0],) for i in range(6)]
        qat = etch.prepare_qat(model, (x0,))
        opt = torch.optim.SGD(qat.parameters(), 1e-3, momentum=0.9)
        xt, yt = _data(256, 1)
        for _ in range(15):
            opt.zero_grad()
            nn.functional.cross_entropy(qat(xt), yt).backward()
            opt.step()
        qat.eval()
        conv = etch.convert_qat(qat)
        self.assertEqual(conv.etch_quantization.scheme, "qat")
        xv, yv = _data(128, 7)
        p = etch.export(conv, (xv,), check_ops=False)
        self.assertIn("quantized_decomposed::quantize_per_tensor.out", p.operators)
        self.assertIn("quantized_decomposed::dequantize_per_channel.out", p.operators)
        out = p.graphs["forward"].run([xv])[0]
        with torch.no_grad():
            fake = qat(xv)        # the fake-quantized model the user trained
        self.assertGreater(_cos(out, fake), 0.999)
        ptq = etch.export(etch.quantize(model, (xv,), "int8", cal), (xv,), check_ops=False)
        acc_qat = float((out.argmax(1) == yv).float().mean())
        acc_ptq = float((ptq.graphs["forward"].run([xv])[0].argmax(1) == yv).float().mean())
        with torch.no_grad():
            acc_float = float((model(xv).argmax(1) == yv).float().mean())
        self.assertGreater(acc_float, 0.8)          # the comparison means something
        self.assertGreaterEqual(acc_qat, acc_ptq - 0.02)
        with self.assertRaises(TypeError):
            etch.convert_qat(model)


if __name__ == "__main__":
    unittest.main()
