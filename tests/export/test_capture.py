"""Capture: make_fx + functionalization + decompositions under enable_grad, eval mode,
parameters as constants; fused inference fast paths avoided; the captured graph computes what
eager computes."""

import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.export._common import etch, rel_err
from etch import decomp
from etch.capture import CaptureError, capture


class Misc(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.ln = nn.LayerNorm(16)
        self.gn = nn.GroupNorm(4, 16)
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.ct = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.drop = nn.Dropout(0.5)

    def forward(self, idx):
        e = self.drop(self.ln(self.emb(idx)))
        a, _ = self.mha(e, e, e)
        g = self.gn(a.transpose(1, 2).unsqueeze(-1))
        c = self.ct(self.up(g))
        return F.hardswish(c).mean((2, 3)), torch.argmax(a, -1), (a > 0).float().sum()


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a

    def forward(self, x):
        return self.b(self.a(x))


def check(testcase, model, inputs):
    model.eval()
    eg = capture(model, inputs)
    eg.propagate()
    with torch.no_grad():
        ref = model(*inputs)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    got = eg.run(list(inputs))
    testcase.assertEqual(len(got), len(ref))
    for g, r in zip(got, ref):
        testcase.assertEqual(g.dtype, r.dtype)
        testcase.assertLessEqual(rel_err(g, r), 1e-5)
    return eg


class CaptureTest(unittest.TestCase):
    def test_parameters_become_constants(self):
        m = nn.Sequential(nn.Linear(3, 5), nn.ReLU())
        eg = check(self, m, (torch.randn(2, 3),))
        self.assertEqual(len(eg.input_nodes), 1)
        self.assertEqual(set(eg.constants), {"0.weight", "0.bias"})
        self.assertEqual(eg.mutable, {})
        for n in eg.call_nodes():                    # functional: no in-place ops
            self.assertFalse(str(n.target).split(".")[-2].endswith("_"), n.target)

    def test_transformer_layers_are_not_fused(self):
        for m, x in ((nn.TransformerEncoderLayer(16, 4, 32, batch_first=True),
                      torch.randn(2, 5, 16)),
                     (nn.MultiheadAttention(16, 4, batch_first=True), None)):
            if x is None:
                x = torch.randn(2, 5, 16)

                class Wrap(nn.Module):
                    def __init__(self, mha):
                        super().__init__()
                        self.mha = mha

                    def forward(self, q):
                        return self.mha(q, q, q)[0]
                m = Wrap(m)
            eg = check(self, m, (x,))
            names = " ".join(eg.op_counts())
            self.assertNotIn("_transformer_encoder_layer_fwd", names)
            self.assertNotIn("_native_multi_head_attention", names)

    def test_many_layer_kinds(self):
        torch.manual_seed(0)
        eg = check(self, Misc(), (torch.randint(0, 50, (2, 7)),))
        from etch import passes
        passes.optimize(eg)
        self.assertEqual(decomp.unsupported_ops(eg.graph), [])
        ops = eg.op_counts()
        self.assertTrue(any(k.startswith("aten::native_group_norm") for k in ops), ops)
        self.assertFalse(any("hardswish" in k for k in ops), ops)      # decomposed

    def test_tied_weights(self):
        check(self, Tied(), (torch.randn(2, 4),))

    def test_export_leaves_the_model_alone(self):
        m = nn.Sequential(nn.BatchNorm1d(3))
        m.train()
        before = {k: v.clone() for k, v in m.state_dict().items()}
        etch.export(m, (torch.randn(4, 3),), check_ops=False)
        self.assertTrue(m.training)
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)

    def test_non_tensor_inputs_and_outputs_are_refused(self):
        class IntOut(nn.Module):
            def forward(self, x):
                return x.shape[0]

        with self.assertRaises(CaptureError):
            capture(IntOut(), (torch.randn(2),))
        with self.assertRaises(TypeError):    # a bad argument, not a capture failure
            capture(nn.ReLU(), (torch.randn(2), 3))
        with self.assertRaises(TypeError):
            capture(lambda x: x, (torch.randn(2),))


if __name__ == "__main__":
    unittest.main()
