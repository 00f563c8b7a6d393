"""Out-variant lowering: names, argument order (schema order incl. kwarg-only and out args,
defaults filled in, one return slot) and value encodings (§5.4, §5.8)."""

import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.export._common import etch
from etch import ops
from etch.serialize import schema as S

aten = torch.ops.aten


def calls(program):
    plan = program.method().plan
    names = [o.name + ("." + o.overload if o.overload else "") for o in plan.operators]
    out = []
    for ins in plan.chains[0].instructions:
        c = ins.instr_args
        out.append((names[c.op_index], [plan.values[a].val for a in c.args], c.args))
    return plan, out


class OutVariantNames(unittest.TestCase):
    def test_names_follow_executorch(self):
        cases = {
            aten.add.Tensor: "aten::add.out", aten.add.Scalar: "aten::add.Scalar_out",
            aten.convolution.default: "aten::convolution.out",
            aten.view_copy.default: "aten::view_copy.out",
            aten.permute_copy.default: "aten::permute_copy.out",
            aten._softmax.default: "aten::_softmax.out",
            aten.mean.dim: "aten::mean.out", aten.sum.dim_IntList: "aten::sum.IntList_out",
            aten.max_pool2d_with_indices.default: "aten::max_pool2d_with_indices.out",
            aten.select_copy.int: "aten::select_copy.int_out",
            aten.slice_copy.Tensor: "aten::slice_copy.Tensor_out",
            aten.where.self: "aten::where.self_out", aten.topk.default: "aten::topk.values",
            aten.arange.start: "aten::arange.start_out", aten.full.default: "aten::full.out",
            aten._to_copy.default: "aten::_to_copy.out",
            ops.native_batch_norm_no_training: "aten::_native_batch_norm_legit_no_training.out",
            ops.alias: "executorch_prim::et_view.default",
        }
        for op, name in cases.items():
            self.assertEqual(ops.out_variant(op).name, name)
            self.assertIn(name, ops.PORTABLE_OPS | ops.PRIM_OPS)


class Encodings(unittest.TestCase):
    def test_add_alpha_and_return_slot(self):
        class M(nn.Module):
            def forward(self, x, y):
                return torch.add(x, y, alpha=2)

        p = etch.export(M(), (torch.randn(3), torch.randn(3)), check_ops=False)
        plan, cs = calls(p)
        (name, vals, idx), = cs
        self.assertEqual(name, "aten::add.out")
        self.assertEqual(len(idx), 5)                        # self, other, alpha, out, ret
        self.assertEqual(idx[:2], list(plan.inputs))
        self.assertEqual(vals[2], S.Int(2))
        self.assertEqual(idx[3], idx[4])                     # return slot repeats out
        self.assertEqual(idx[3], plan.outputs[0])

    def test_conv_and_pool_arguments(self):
        m = nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.MaxPool2d(2))
        p = etch.export(m, (torch.randn(1, 2, 8, 8),), check_ops=False)
        plan, cs = calls(p)
        conv, pool = cs
        self.assertEqual(conv[0], "aten::convolution.out")
        self.assertEqual(len(conv[2]), 11)
        stride = conv[1][3]
        self.assertIsInstance(stride, S.IntList)
        # IntList items are value indices of Int values
        self.assertEqual([plan.values[i].val for i in stride.items], [S.Int(2), S.Int(2)])
        self.assertEqual(conv[1][6], S.Bool(False))          # transposed
        self.assertEqual(conv[1][8], S.Int(1))               # groups
        self.assertEqual(pool[0], "aten::max_pool2d_with_indices.out")
        self.assertEqual(len(pool[2]), 9)                    # 6 args, out, indices, ret
        pad = pool[1][3]
        self.assertEqual([plan.values[i].val.int_val for i in pad.items], [0, 0])
        ret = pool[1][8]
        self.assertIsInstance(ret, S.TensorList)             # several outs: a TensorList
        self.assertEqual(ret.items, pool[2][6:8])
        self.assertEqual(plan.values[pool[2][7]].val.scalar_type, S.ScalarType.LONG)

    def test_dtype_none_and_float_encodings(self):
        class M(nn.Module):
            def forward(self, x):
                return x.to(torch.float64), F.softmax(x, -1), x.mean(dim=(0,), keepdim=True)

        p = etch.export(M(), (torch.randn(2, 3),), check_ops=False)
        plan, cs = calls(p)
        byname = {c[0]: c for c in cs}
        to = byname["aten::_to_copy.out"]
        self.assertEqual(to[1][1], S.Bool(False))            # non_blocking
        self.assertEqual(to[1][2], S.Null())                 # memory_format=None
        self.assertEqual(to[1][3].scalar_type, S.ScalarType.DOUBLE)
        sm = byname["aten::_softmax.out"]
        self.assertEqual(sm[1][1:3], [S.Int(-1), S.Bool(False)])
        mean = byname["aten::mean.out"]
        self.assertEqual(mean[1][2:4], [S.Bool(True), S.Null()])   # keepdim, dtype=None

    def test_batch_norm_no_training(self):
        m = nn.BatchNorm2d(3).eval()        # nothing to fold into
        m.running_var.fill_(2.0)
        p = etch.export(m, (torch.randn(1, 3, 4, 4),), check_ops=False)
        plan, cs = calls(p)
        (name, vals, idx), = cs
        self.assertEqual(name, "aten::_native_batch_norm_legit_no_training.out")
        self.assertEqual(len(idx), 11)
        self.assertIsInstance(vals[5], S.Double)                 # momentum
        self.assertAlmostEqual(vals[6].double_val, 1e-5)         # eps
        self.assertIsInstance(vals[10], S.TensorList)
        self.assertEqual(vals[10].items, idx[7:10])


if __name__ == "__main__":
    unittest.main()
