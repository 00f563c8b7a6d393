#!/usr/bin/python3
"""Writes the programs tests/chain/test_chain.c loads, with PyTorch's outputs and the chained
calls (etch/kernel.h) the runtime is expected to form with the optimized kernels.

Usage: gen_chain.py OUTPUT_DIR/chain_cases.h   (CMake runs it at build time; nothing
generated is committed). Beside the header: NAME.pte, NAME.in.bin (the input, float32) and
NAME.out.bin (PyTorch's outputs, float32, one after the other).

`chains` lists, in instruction order, the length of each run of calls the optimized
convolution's chain function takes (src/kernels/optimized/conv_chain.c): 3 for a 1x1 (or a
"stem", a convolution of an NCHW image) -> depthwise 3x3 -> 1x1 block, 2 for depthwise -> 1x1,
one more when a residual add follows.

Two kinds of programs:
  - networks of inverted-residual blocks and of stems exported with python/etch: what the
    exporter emits;
  - hand-built programs (python/etch/serialize ProgramBuilder) for what the runtime must
    refuse: a block whose result lies on its input's bytes, an intermediate with a second
    reader, a jump target inside a block, a weight that is no constant;
  - hand-built programs of aten::add.out calls ("rules_*") that the test runs with a kernel and
    chain function of its own: the runtime's rules for which runs it offers.
"""

import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import etch  # noqa: E402
from etch.serialize import ProgramBuilder, ScalarType  # noqa: E402

nn = torch.nn
F32 = ScalarType.FLOAT
I64 = ScalarType.LONG


class Blocks(nn.Module):
    """A stem, then mobilenet_v2-like blocks on a 2 x 3 x 31 x 27 input (odd sizes, two
    images):
      a  the stem (3x3 3->16 relu) -> depthwise (relu6) -> 1x1 16->8   chain of 3
      b  1x1 8->48 relu6 -> depthwise s2 relu6 -> 1x1 48->16    chain of 3 (no bias on the last)
      c  1x1 16->48 relu -> depthwise relu -> 1x1 48->16, + input, relu
                                                                chain of 4 (the residual add,
                                                                its relu fused into it)
      e  1x1 16->32 relu6 -> depthwise relu6 -> 1x1 32->16, + input (the add's first operand)
                                                                chain of 4
      g  1x1 16->48 gelu -> depthwise relu6 -> 1x1 48->24       gelu is no register
         activation: no chain of 3; the depthwise -> 1x1 pair   chain of 2
      d  1x1 24->40 hardtanh(-1, 3) -> depthwise s2 -> 1x1 40->24 relu
                                                                chain of 3 (40 channels: a
                                                                last tile of 8)
    then a 1x1 head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.a = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),
                               nn.Conv2d(16, 8, 1))
        self.b = nn.Sequential(nn.Conv2d(8, 48, 1), nn.ReLU6(),
                               nn.Conv2d(48, 48, 3, stride=2, padding=1, groups=48), nn.ReLU6(),
                               nn.Conv2d(48, 16, 1, bias=False))
        self.c = nn.Sequential(nn.Conv2d(16, 48, 1), nn.ReLU(),
                               nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.ReLU(),
                               nn.Conv2d(48, 16, 1))
        self.e = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU6(),
                               nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU6(),
                               nn.Conv2d(32, 16, 1))
        self.g = nn.Sequential(nn.Conv2d(16, 48, 1), nn.GELU(),
                               nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.ReLU6(),
                               nn.Conv2d(48, 24, 1))
        self.d = nn.Sequential(nn.Conv2d(24, 40, 1), nn.Hardtanh(-1.0, 3.0),
                               nn.Conv2d(40, 40, 3, stride=2, padding=1, groups=40),
                               nn.Conv2d(40, 24, 1), nn.ReLU())
        self.head = nn.Conv2d(24, 8, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = self.b(self.a(x))
        x = torch.relu(self.c(x) + x)
        x = x + self.e(x)
        return self.head(self.d(self.g(x)))


class Wide(nn.Module):
    """Rows wide enough (50 pixels) that each step of a chained block is one output row, on a
    1 x 3 x 7 x 50 input: 7 rows in one band per thread leave some bands a row short of their
    steps at 3 and 4 threads (an empty step):
      w  the stem (3x3 3->16 relu) -> depthwise (relu6) -> 1x1 16->16      chain of 3
      v  1x1 16->32 relu6 -> depthwise relu6 -> 1x1 32->16, + the input   chain of 4
    then a 1x1 head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.w = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),
                               nn.Conv2d(16, 16, 1))
        self.v = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU6(),
                               nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU6(),
                               nn.Conv2d(32, 16, 1))
        self.head = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        x = self.w(torch.relu(self.stem(x)))
        return self.head(x + self.v(x))


class Stems(nn.Module):
    """Convolutions of the program's inputs ("stems": NCHW images, blocked outputs) ahead of a
    depthwise -> 1x1 pair, on 2 x 3 x 29 x 33 and 2 x 4 x 30 x 25 inputs:
      s  3x3 s2 p1 3->16 relu6 -> depthwise relu6 -> 1x1 16->8      chain of 3 (mobilenet_v2's)
      t  5x5 s2 p2 4->24 hardtanh(-1, 3) -> depthwise s2 -> 1x1 24->16 relu
                                                                 chain of 3
      u  3x3 dilation 2 3->8 relu -> depthwise -> 1x1 8->8, + the stem's result
                                                                 a dilated stem is not the
                                                                 interleaved path: the pair and
                                                                 the residual add, chain of 3
    each then a 1x1 head (a block's result may not be the program's output: the caller may
    place an output anywhere)."""

    def __init__(self):
        super().__init__()
        self.s = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU6(),
                               nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),
                               nn.Conv2d(16, 8, 1))
        self.t = nn.Sequential(nn.Conv2d(4, 24, 5, stride=2, padding=2), nn.Hardtanh(-1.0, 3.0),
                               nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24),
                               nn.Conv2d(24, 16, 1), nn.ReLU())
        self.u = nn.Sequential(nn.Conv2d(3, 8, 3, padding=2, dilation=2), nn.ReLU(),
                               nn.Conv2d(8, 8, 3, padding=1, groups=8),
                               nn.Conv2d(8, 8, 1))
        self.heads = nn.ModuleList([nn.Conv2d(8, 8, 1), nn.Conv2d(16, 8, 1),
                                    nn.Conv2d(8, 8, 1)])

    def forward(self, x, z):
        u0 = self.u[1](self.u[0](x))  # the dilated stem and its relu
        u = self.u[3](self.u[2](u0)) + u0
        return (self.heads[0](self.s(x)), self.heads[1](self.t(z)), self.heads[2](u))


# ---- hand-built programs ------------------------------------------------------------------

def f32_bytes(t):
    return struct.pack("<%df" % t.numel(), *t.reshape(-1).tolist())


class Builder:
    """Convolutions (aten::convolution.out) in a hand-built program, with PyTorch's result
    alongside."""

    def __init__(self):
        self.pb = ProgramBuilder()
        self.m = self.pb.method("forward")

    def const(self, t):
        return self.m.tensor(F32, list(t.shape), constant=f32_bytes(t))

    def conv(self, x, w, b, out, *, stride=1, pad=0, groups=1, w_value=None):
        m = self.m
        return m.kernel("aten::convolution.out", [
            x, self.const(w) if w_value is None else w_value,
            self.const(b) if b is not None else m.null(),
            m.int_list_of([stride, stride]), m.int_list_of([pad, pad]), m.int_list_of([1, 1]),
            m.bool(False), m.int_list_of([0, 0]), m.int(groups), out, out])


def hand_case(kind):
    """stem 3->16 (3x3) -> x; block: 1x1 16->48 (relu6) -> t, depthwise 3x3 (relu6) -> u,
    1x1 48->16 -> y; head 1x1 16->8 on y. Variants:
      clash        y lies on x's bytes (x is dead after the expand, so a planner may do
                   that): the block cannot write y while it reads x; the depthwise -> 1x1
                   pair (which does not read x) still chains
      t_shared     a second depthwise reads t (then its own 1x1 and head): no chain of 3;
                   each depthwise -> 1x1 pair chains
      jump         the depthwise call is a jump target: a method with jumps gets no
                   channel-blocked tensors (src/optimize/layout.c), so nothing chains (the
                   jump-target rule itself is checked on the rules_* programs)
      weight_input the last 1x1's weight is a method input (not a constant, so never packed
                   at load): nothing chains
    Returns (program bytes, inputs, outputs, chains)."""
    torch.manual_seed(7)
    B = Builder()
    m = B.m
    N, H, W = 1, 14, 12
    ws = torch.randn(16, 3, 3, 3) * 0.3
    bs = torch.randn(16) * 0.1
    we, be = torch.randn(48, 16, 1, 1) * 0.3, torch.randn(48) * 0.1
    wd, bd = torch.randn(48, 1, 3, 3) * 0.3, torch.randn(48) * 0.1
    wp, bp = torch.randn(16, 48, 1, 1) * 0.2, torch.randn(16) * 0.1
    wh, bh = torch.randn(8, 16, 1, 1) * 0.3, torch.randn(8) * 0.1
    img = torch.randn(N, 3, H, W)

    def ref_block(x, dw_w=wd, dw_b=bd):
        t = F.hardtanh(F.conv2d(x, we, be), 0.0, 6.0)
        u = F.hardtanh(F.conv2d(t, dw_w, dw_b, padding=1, groups=48), 0.0, 6.0)
        return t, F.conv2d(u, wp, bp)

    vin = m.tensor(F32, [N, 3, H, W])
    x = m.tensor(F32, [N, 16, H, W])
    t = m.tensor(F32, [N, 48, H, W])
    u = m.tensor(F32, [N, 48, H, W])
    x_off = m.values[x].val.allocation_info.memory_offset
    y = m.tensor(F32, [N, 16, H, W], offset=x_off if kind == "clash" else None)
    out = m.tensor(F32, [N, 8, H, W])
    inputs, wp_value = [vin], None
    if kind == "weight_input":
        wp_value = m.tensor(F32, [16, 48, 1, 1])
        inputs.append(wp_value)

    def relu6(v, o):
        return m.kernel("aten::hardtanh.out", [v, m.double(0.0), m.double(6.0), o, o])

    xs = m.tensor(F32, [N, 16, H, W])
    B.conv(vin, ws, bs, xs, pad=1)
    m.kernel("aten::relu.out", [xs, x, x])
    te = m.tensor(F32, [N, 48, H, W])
    B.conv(x, we, be, te)
    relu6(te, t)
    ud = m.tensor(F32, [N, 48, H, W])
    d_pc = B.conv(t, wd, bd, ud, pad=1, groups=48)
    if kind == "jump":
        m.jump_false(m.bool(True), d_pc)  # never taken; makes the depthwise call a target
        # the jump sits before its target: move the target's instruction after it
        instrs = m.instructions
        instrs[d_pc], instrs[d_pc + 1] = instrs[d_pc + 1], instrs[d_pc]
        instrs[d_pc].instr_args.destination_instruction = d_pc + 1
    relu6(ud, u)
    B.conv(u, wp, bp, y, w_value=wp_value)
    B.conv(y, wh, bh, out)
    outputs = [out]
    xr = torch.relu(F.conv2d(img, ws, bs, padding=1))
    tr, yr = ref_block(xr)
    refs = [F.conv2d(yr, wh, bh)]
    chains = {"clash": [2], "jump": [], "weight_input": []}.get(kind)
    extra_in = []
    if kind == "weight_input":
        extra_in = [wp]
    if kind == "t_shared":
        wd2, bd2 = torch.randn(48, 1, 3, 3) * 0.3, torch.randn(48) * 0.1
        u2d = m.tensor(F32, [N, 48, H, W])
        u2 = m.tensor(F32, [N, 48, H, W])
        y2 = m.tensor(F32, [N, 16, H, W])
        out2 = m.tensor(F32, [N, 8, H, W])
        B.conv(t, wd2, bd2, u2d, pad=1, groups=48)
        relu6(u2d, u2)
        B.conv(u2, wp, bp, y2)
        B.conv(y2, wh, bh, out2)
        outputs.append(out2)
        _, y2r = ref_block(xr, wd2, bd2)
        refs.append(F.conv2d(y2r, wh, bh))
        chains = [2, 2]
    m.inputs, m.outputs = inputs, outputs
    return B.pb.serialize(), [img] + extra_in, refs, chains


def rules_case(kind):
    """The runtime's rules for offering runs, on aten::add.out calls (the test registers a
    kernel for it that runs chains call by call, with a chain function that takes every call of
    its own kernel it is offered) on [2, 3] floats x (an input), k (a constant):
      basic    a = x + x; b = a + a; c = b + x; d = c + c (the output)        run of 4
      dag      a = x + x; b = a + a; c = b + a; d = c + c: a has two readers, both in the
               run (the run need not be a line)                               run of 4
      reader   a = x + x; b = a + a; c = b + b; d = c * a (a mul: no chain function):
               a has a reader after the run                                   run b, c
      multi    a = x + x; (v, i) = max.dim_max(a, 1, keepdim) (two results and a returned
               list; the test's chain function takes max calls too); b = a + v; c = b + b:
               i is read by nothing                                           run of 4
      multi_out  the same with v an output too: max cannot be inside a run     run b, c
      output   a = x + x; b = a + a (also an output); c = b + b               run a, b
      jump     a jump (never taken) lands on b: a = x + x; b = a + a; c = b + b
                                                                              run b, c
      listed   a = x + x; b = a + a; c = b + b; out = cat([a, c]): a is in a list
                                                                              run b, c
      clash    m = x * k (a mul: no chain function); a = m + m; b = a + a placed on m's
               bytes (m is dead after a): b cannot be written while a's call reads m
                                                                              none
      apart    the same with b on fresh bytes                                 run a, b
      view_apart   m = x * k; v = et_view(m) (a view: rebound at run time, on m's bytes);
               a = v + v; b = a + a on fresh bytes: the run reads a view whose base can be
               checked against b                                          run a, b
      view_clash   the same with b placed on m's bytes (m and v are dead after a): b would
               overwrite the view's bytes while a's call reads them            none
    Returns (program bytes, inputs, outputs, chains)."""
    torch.manual_seed(11)
    pb = ProgramBuilder()
    m = pb.method("forward")
    x_t, k_t = torch.randn(2, 3), torch.randn(2, 3)
    x = m.tensor(F32, [2, 3])
    k = m.tensor(F32, [2, 3], constant=f32_bytes(k_t))

    def t():
        return m.tensor(F32, [2, 3])

    def add(p, q, o):
        return m.kernel("aten::add.out", [p, q, m.int(1), o, o])

    outs, refs = [], []
    if kind in ("basic", "dag"):
        a, b, c, d = t(), t(), t(), t()
        add(x, x, a)
        add(a, a, b)
        add(b, x if kind == "basic" else a, c)
        add(c, c, d)
        ar = x_t + x_t
        br = ar + ar
        cr = br + (x_t if kind == "basic" else ar)
        outs, refs, chains = [d], [cr + cr], [4]
    elif kind == "reader":
        a, b, c, d = t(), t(), t(), t()
        add(x, x, a)
        add(a, a, b)
        add(b, b, c)
        m.kernel("aten::mul.out", [c, a, d, d])
        ar = x_t + x_t
        cr = (ar + ar) * 2
        outs, refs, chains = [d], [cr * ar], [2]
    elif kind in ("multi", "multi_out"):
        a, b, c = t(), t(), t()
        v, i = m.tensor(F32, [2, 1]), m.tensor(I64, [2, 1])
        add(x, x, a)
        m.kernel("aten::max.dim_max", [a, m.int(1), m.bool(True), v, i, m.tensor_list([v, i])])
        add(a, v, b)
        add(b, b, c)
        ar = x_t + x_t
        vr = ar.max(1, keepdim=True)[0]
        cr = (ar + vr) * 2
        if kind == "multi":
            outs, refs, chains = [c], [cr], [4]
        else:
            outs, refs, chains = [c, v], [cr, vr], [2]
    elif kind in ("output", "jump", "listed"):
        if kind == "jump":
            m.jump_false(m.bool(True), 2)  # never taken; instruction 2 is b's add
        a, b, c = t(), t(), t()
        add(x, x, a)
        add(a, a, b)
        add(b, b, c)
        ar = x_t + x_t
        br = ar + ar
        cr = br + br
        if kind == "output":
            outs, refs, chains = [b, c], [br, cr], [2]
        elif kind == "jump":
            outs, refs, chains = [c], [cr], [2]
        else:
            o = m.tensor(F32, [4, 3])
            m.kernel("aten::cat.out", [m.tensor_list([a, c]), m.int(0), o, o])
            outs, refs, chains = [o], [torch.cat([ar, cr], 0)], [2]
    elif kind in ("view_apart", "view_clash"):
        mm, a = t(), t()
        m_off = m.values[mm].val.allocation_info.memory_offset
        v = m.tensor(F32, [2, 3], offset=m_off)  # a view's out gets its source's allocation
        b = m.tensor(F32, [2, 3], offset=m_off if kind == "view_clash" else None)
        m.kernel("aten::mul.out", [x, k, mm, mm])
        m.kernel("executorch_prim::et_view.default", [mm, m.int_list_of([2, 3]), v])
        add(v, v, a)
        add(a, a, b)
        mr = x_t * k_t
        ar = mr + mr
        outs, refs = [b], [ar + ar]
        chains = [] if kind == "view_clash" else [2]
    else:  # clash / apart
        mm, a = t(), t()
        m_off = m.values[mm].val.allocation_info.memory_offset
        b = m.tensor(F32, [2, 3], offset=m_off if kind == "clash" else None)
        m.kernel("aten::mul.out", [x, k, mm, mm])
        add(mm, mm, a)
        add(a, a, b)
        mr = x_t * k_t
        ar = mr + mr
        outs, refs = [b], [ar + ar]
        chains = [] if kind == "clash" else [2]
    m.inputs, m.outputs = [x], outs
    return pb.serialize(), [x_t], refs, chains


def c_floats(path, tensors):
    with open(path, "wb") as f:
        for t in tensors:
            f.write(t.detach().contiguous().float().numpy().tobytes())


def main():
    out_h = sys.argv[1]
    outdir = os.path.dirname(os.path.abspath(out_h))
    os.makedirs(outdir, exist_ok=True)
    cases = []
    torch.manual_seed(0)
    model = Blocks().eval()
    x = torch.randn(2, 3, 31, 27)
    with torch.no_grad():
        y = model(x)
    program = etch.export(model, (x,), check_ops=False)
    cases.append(("blocks", program.buffer, [x], [y], [3, 3, 4, 4, 2, 3]))
    wide = Wide().eval()
    xw = torch.randn(1, 3, 7, 50)
    with torch.no_grad():
        yw = wide(xw)
    program = etch.export(wide, (xw,), check_ops=False)
    cases.append(("wide", program.buffer, [xw], [yw], [3, 4]))
    stems = Stems().eval()
    xs = (torch.randn(2, 3, 29, 33), torch.randn(2, 4, 30, 25))
    with torch.no_grad():
        ys = list(stems(*xs))
    program = etch.export(stems, xs, check_ops=False)
    cases.append(("stems", program.buffer, list(xs), ys, [3, 3, 3]))
    for kind in ("clash", "t_shared", "jump", "weight_input"):
        buf, ins, outs, chains = hand_case(kind)
        cases.append((kind, buf, ins, outs, chains))
    for kind in ("basic", "dag", "reader", "multi", "multi_out", "output", "jump", "listed",
                 "clash", "apart", "view_apart", "view_clash"):
        buf, ins, outs, chains = rules_case(kind)
        cases.append(("rules_" + kind, buf, ins, outs, chains))

    lines = ["/* Generated by tests/chain/gen_chain.py: do not edit. */",
             "#ifndef ETCH_TEST_CHAIN_CASES_H", "#define ETCH_TEST_CHAIN_CASES_H", "",
             "#include <stdint.h>", "",
             "#define CHAIN_MAX_RUNS 8", "#define CHAIN_MAX_INPUTS 2", "",
             "typedef struct chain_case {",
             "    const char *name;",
             "    int ninputs;",
             "    int64_t in_numel[CHAIN_MAX_INPUTS];",
             "    int64_t out_numel; /* all outputs together */",
             "    int nchains;",
             "    int chains[CHAIN_MAX_RUNS]; /* the length of each run, in order */",
             "} chain_case;", "",
             "static const chain_case CASES[] = {"]
    for name, buf, ins, outs, chains in cases:
        with open(os.path.join(outdir, name + ".pte"), "wb") as f:
            f.write(buf)
        c_floats(os.path.join(outdir, name + ".in.bin"), ins)
        c_floats(os.path.join(outdir, name + ".out.bin"), outs)
        lines.append('    {"%s", %d, {%s}, %d, %d, {%s}},' % (
            name, len(ins), ", ".join(str(t.numel()) for t in ins),
            sum(t.numel() for t in outs), len(chains), ", ".join(str(c) for c in chains) or "0"))
    lines += ["};", "", "#endif", ""]
    with open(out_h, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
