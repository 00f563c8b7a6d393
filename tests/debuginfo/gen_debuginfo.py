"""Writes OUTDIR/debug_mlp.pte (a small model exported with its debug information),
OUTDIR/debug_mlp.expected (per instruction, what the .pte's Chain.stacktrace says, read back
with etch.serialize: the C reader must give the same) and OUTDIR/debug_mlp_short.pte (the same
program with one FrameList dropped: a stack trace of the wrong length, which the runtime
ignores).  Usage: gen_debuginfo.py OUTDIR/debug_mlp.pte"""

import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import etch  # noqa: E402
from etch import debuginfo  # noqa: E402
from etch.serialize import pte  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return torch.tanh(self.proj(x)) + x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(self.blocks(torch.relu(self.inp(x))))


def main(out):
    torch.manual_seed(0)
    program = etch.export(Net().eval(), (torch.randn(2, 8),), check_ops=False)
    blob = program.buffer
    plan = pte.read_pte(blob).program.execution_plan[0]
    lines = []
    for pc, fl in enumerate(plan.chains[0].stacktrace):
        d = debuginfo.from_frame_list(fl)
        s = d.source if d is not None else None
        lines.append("\t".join([str(pc), d.node if d else "-",
                                (d.module if d.module else "<root>") if d else "-",
                                str(len(d.frames)) if d else "0",
                                os.path.basename(s.filename) if s else "-",
                                str(s.lineno) if s else "0", s.function if s else "-",
                                s.context if s else "-"]))
    with open(out, "wb") as f:
        f.write(blob)
    with open(out[:-4] + ".expected", "w") as f:
        f.write("\n".join(lines) + "\n")
    parts = pte.read_pte(blob)
    parts.program.execution_plan[0].chains[0].stacktrace.pop()
    data = pte.write_pte(parts, keep_offsets=True)
    with open(out[:-4] + "_short.pte", "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
