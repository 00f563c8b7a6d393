#!/usr/bin/python3
"""Variants of the Cortex-M keyword spotter whose constants lie, for cortex_m.kws_refused:
each must be refused when the method loads, naming the operator and the argument.

Usage: /usr/bin/python3 make_bad_kws.py PROGRAM.pte OUT_DIR
Writes OUT_DIR/bad_shift.pte (a pointwise convolution's requantize_shifts[5] = 31) and
OUT_DIR/bad_multiplier.pte (the linear layer's multiplier = -2^31), through the repository's
.pte reader and writer (python/etch/serialize).
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

from etch.serialize import pte as P  # noqa: E402
from etch.serialize import schema as S  # noqa: E402


def calls(plan, name):
    for ins in plan.chains[0].instructions:
        op = plan.operators[ins.instr_args.op_index]
        if op.name + "." + op.overload == name:
            yield list(ins.instr_args.args)


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    raw = open(src, "rb").read()

    parts = P.unpack_program(P.read_pte(raw))
    plan = parts.program.execution_plan[0]
    args = next(calls(plan, "cortex_m::quantized_conv2d.out"))
    t = plan.values[args[9]].val  # requantize_shifts, Int [64]
    buf = bytearray(parts.data.constants[t.data_buffer_idx])
    struct.pack_into("<i", buf, 5 * 4, 31)
    parts.data.constants[t.data_buffer_idx] = bytes(buf)
    with open(os.path.join(out, "bad_shift.pte"), "wb") as f:
        f.write(P.serialize_program(parts.program, parts.data, parts.config))

    parts = P.unpack_program(P.read_pte(raw))
    plan = parts.program.execution_plan[0]
    args = next(calls(plan, "cortex_m::quantized_linear.out"))
    first = plan.values[args[7]].val.items[0]  # requantize_multipliers[0]
    plan.values[first].val = S.Int(-2 ** 31)
    with open(os.path.join(out, "bad_multiplier.pte"), "wb") as f:
        f.write(P.serialize_program(parts.program, parts.data, parts.config))


if __name__ == "__main__":
    main()
