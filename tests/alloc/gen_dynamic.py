#!/usr/bin/python3
"""Writes dynamic.pte for test_alloc: a bounded-dynamic input x (at most [8, 4] floats)
resized by set_input, out = relu(x + x) resized by the kernels, and n = x.size(0). The sum
goes through alloc_test::copy_via_temp.out (registered by test_alloc.c), which copies via
kernel scratch (etch_kernel_temp_alloc) so that path runs inside the window too.

usage: gen_dynamic.py OUT.pte
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

from etch.serialize import ProgramBuilder, ScalarType, TensorShapeDynamism  # noqa: E402
from etch.serialize import serialize_program  # noqa: E402

F32 = ScalarType.FLOAT
DYN = TensorShapeDynamism.DYNAMIC_BOUND


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    pb = ProgramBuilder()
    m = pb.method("forward")
    x = m.tensor(F32, [8, 4], dynamism=DYN)
    s = m.tensor(F32, [8, 4], dynamism=DYN)
    s2 = m.tensor(F32, [8, 4], dynamism=DYN)
    out = m.tensor(F32, [8, 4], dynamism=DYN)
    one, zero, n = m.int(1), m.int(0), m.int(-1)
    m.kernel("aten::add.out", [x, x, one, s, s])
    m.kernel("alloc_test::copy_via_temp.out", [s, s2, s2])
    m.kernel("aten::relu.out", [s2, out, out])
    m.kernel("aten::sym_size.int", [x, zero, n])
    m.inputs, m.outputs = [x], [out, n]
    program, data = pb.build()
    with open(sys.argv[1], "wb") as f:
        f.write(serialize_program(program, data))


if __name__ == "__main__":
    main()
