#!/usr/bin/python3
"""The expected scores of ExecuTorch's Cortex-M keyword spotter, computed in numpy.

Usage: /usr/bin/python3 kws_reference.py PROGRAM.pte OUT_DIR NAME=MFCC.f32.bin ...

Reads the program with the repository's .pte reader (python/etch/serialize), then runs its
instruction list: planned tensors live in simulated memory arenas at the planner's offsets
(so tensors that share memory, like the linear layer's [1, 64] view of the pool's
[1, 64, 1, 1] output, see the same bytes), constants come from the constant segment, and every
cortex_m:: operator is the numpy model of CMSIS-NN in tests/kernels/cases_cortex_m.py; etch's
C kernels are not involved. For each NAME it writes OUT_DIR/NAME.npy (the input, [1, 1, 49, 10]
float32, for `etch run --inputs`) and OUT_DIR/NAME.expected.f32 (the 12 float32 scores, little
endian), and prints the scores and the winning class.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "kernels"))

import cases_cortex_m as R  # noqa: E402
from etch.serialize import pte as P  # noqa: E402
from etch.serialize import schema as S  # noqa: E402

LABELS = ["silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off",
          "stop", "go"]
NP_DTYPE = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 6: np.float32,
            7: np.float64, 11: np.bool_}


class Machine:
    def __init__(self, path):
        self.pte = P.read_pte(open(path, "rb").read())
        self.consts = P.unpack_program(self.pte).data.constants
        self.plan = self.pte.program.execution_plan[0]
        self.arenas = {}
        for v in self.plan.values:
            t = v.val
            if isinstance(t, S.Tensor) and t.allocation_info is not None:
                a = t.allocation_info
                end = (a.memory_offset_high << 32 | a.memory_offset_low) + self.nbytes(t)
                self.arenas[a.memory_id] = max(self.arenas.get(a.memory_id, 0), end)
        self.arenas = {k: bytearray(n) for k, n in self.arenas.items()}

    @staticmethod
    def nbytes(t):
        return int(np.prod(t.sizes, dtype=np.int64)) * np.dtype(NP_DTYPE[int(t.scalar_type)]).itemsize

    def tensor(self, i):
        """Value i as a logical numpy array (a copy)."""
        t = self.plan.values[i].val
        dt = NP_DTYPE[int(t.scalar_type)]
        order = list(t.dim_order)
        mem_shape = [t.sizes[d] for d in order]
        if t.allocation_info is not None:
            a = t.allocation_info
            off = a.memory_offset_high << 32 | a.memory_offset_low
            raw = bytes(self.arenas[a.memory_id][off:off + self.nbytes(t)])
        else:
            raw = self.consts[t.data_buffer_idx][:self.nbytes(t)]
        arr = np.frombuffer(raw, dtype=dt).reshape(mem_shape)
        return arr.transpose(np.argsort(order)).copy()

    def store(self, i, arr):
        t = self.plan.values[i].val
        dt = NP_DTYPE[int(t.scalar_type)]
        assert list(arr.shape) == list(t.sizes), (i, arr.shape, t.sizes)
        a = t.allocation_info
        off = a.memory_offset_high << 32 | a.memory_offset_low
        data = np.ascontiguousarray(np.asarray(arr).astype(dt).transpose(list(t.dim_order)))
        self.arenas[a.memory_id][off:off + data.nbytes] = data.tobytes()

    def order(self, i):
        return list(self.plan.values[i].val.dim_order)

    def scalar(self, i):
        v = self.plan.values[i].val
        if isinstance(v, S.Null):
            return None
        if isinstance(v, S.IntList):
            return [self.plan.values[k].val.int_val for k in v.items]
        for f in ("int_val", "double_val", "bool_val"):
            if hasattr(v, f):
                return getattr(v, f)
        return v

    def opt_tensor(self, i):
        return None if isinstance(self.plan.values[i].val, S.Null) else self.tensor(i)

    def run(self, x):
        self.store(self.plan.inputs[0], x)
        for ins in self.plan.chains[0].instructions:
            a = ins.instr_args
            op = self.plan.operators[a.op_index]
            name = op.name + "." + op.overload
            v = list(a.args)
            T, N = self.tensor, self.scalar
            if name == "cortex_m::quantize_per_tensor.out":
                y = R.ref_quantize(T(v[0]), N(v[1]), N(v[2]), N(v[3]), N(v[4]))
                self.store(v[6], y)
            elif name == "cortex_m::dequantize_per_tensor.out":
                self.store(v[6], R.ref_dequantize(T(v[0]), N(v[1]), N(v[2])))
            elif name == "cortex_m::quantized_depthwise_conv2d.out":
                y = R.ref_dwconv(T(v[0]), T(v[1]), self.opt_tensor(v[2]), N(v[3]), N(v[4]), N(v[5]),
                                 N(v[6]), N(v[7]), N(v[8]), T(v[9]), T(v[10]), N(v[11]), N(v[12]))
                self.store(v[14], y)
            elif name == "cortex_m::quantized_conv2d.out":
                y = R.ref_conv(T(v[0]), T(v[1]), self.opt_tensor(v[2]), N(v[3]), N(v[4]), N(v[5]),
                               N(v[6]), N(v[7]), T(v[8]), T(v[9]), N(v[10]), N(v[11]))
                self.store(v[13], y)
            elif name == "dim_order_ops::_clone_dim_order.out":
                self.store(v[3], T(v[0]))  # a copy; the layouts are the planner's business
            elif name == "cortex_m::pad.out":
                self.store(v[4], R.ref_pad(T(v[0]), self.order(v[0]), N(v[1]), N(v[2]), N(v[3])))
            elif name == "cortex_m::quantized_avg_pool2d.out":
                self.store(v[9], R.ref_avgpool(T(v[0]), N(v[1]), N(v[2]), N(v[3]), N(v[4])))
            elif name == "cortex_m::quantized_linear.out":
                y = R.ref_linear(T(v[0]), T(v[1]), self.opt_tensor(v[2]), self.opt_tensor(v[3]),
                                 N(v[4]), N(v[5]), N(v[6]), N(v[7]), N(v[8]), N(v[9]), N(v[10]))
                self.store(v[11], y)
            else:
                sys.exit("kws_reference.py: no numpy model of %s" % name)
        return self.tensor(self.plan.outputs[0])


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    pte, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for spec in sys.argv[3:]:
        name, path = spec.split("=", 1)
        x = np.fromfile(path, dtype="<f4")
        if x.size != 490:
            sys.exit("%s: %d floats, expected 490" % (path, x.size))
        x = x.reshape(1, 1, 49, 10)
        scores = Machine(pte).run(x).astype("<f4")
        np.save(os.path.join(out_dir, name + ".npy"), x)
        scores.reshape(-1).tofile(os.path.join(out_dir, name + ".expected.f32"))
        k = int(np.argmax(scores))
        print("%s: class %d (%s), scores %s" % (name, k, LABELS[k],
                                                 " ".join("%.6g" % s for s in scores.reshape(-1))))


if __name__ == "__main__":
    main()
