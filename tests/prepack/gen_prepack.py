#!/usr/bin/python3
"""Writes the programs tests/prepack/test_prepack.c runs (CMake calls it at build time;
nothing generated is committed): small torch models exported with python/etch whose
convolution / linear / mm / addmm weights are constants, so the optimized kernels prepack
them at method load. For each NAME: NAME.pte, NAME.in.bin (float32 input, raw), NAME.out.bin
(PyTorch's float32 output, raw), and a line in cases.txt:
    NAME RANK SIZES... OUTPUT_NUMEL
Usage: gen_prepack.py OUTPUT_DIR
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import etch  # noqa: E402


class Cnn(torch.nn.Module):
    """resnet/mobilenet-like: 3x3, strided 3x3, grouped, depthwise, 1x1, 1x1 strided, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 40, 3, stride=2, padding=1)
        self.c3 = torch.nn.Conv2d(40, 40, 3, padding=1, groups=2, bias=False)
        self.dw = torch.nn.Conv2d(40, 40, 3, padding=1, groups=40)
        self.pw = torch.nn.Conv2d(40, 72, 1)
        self.ps = torch.nn.Conv2d(72, 24, 1, stride=2)
        self.fc = torch.nn.Linear(24, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.nn.functional.relu6(self.c2(x))
        x = self.c3(x)
        x = torch.relu(self.dw(x))
        x = self.pw(x)
        x = self.ps(x)
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class Conv1d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv1d(8, 30, 5, padding=2)

    def forward(self, x):
        return torch.relu(self.c(x))


class Mlp(torch.nn.Module):
    """transformer-block-like: linear + gelu, mm and addmm with constant right operands."""

    def __init__(self, d=48, h=100):
        super().__init__()
        self.up = torch.nn.Linear(d, h)
        self.down = torch.nn.Linear(h, d, bias=False)
        self.w = torch.nn.Parameter(torch.randn(d, 37) * 0.2)
        self.w2 = torch.nn.Parameter(torch.randn(37, 29) * 0.2)
        self.b2 = torch.nn.Parameter(torch.randn(29))

    def forward(self, x):
        y = self.down(torch.nn.functional.gelu(self.up(x))) + x
        z = torch.mm(y.reshape(-1, y.shape[-1]), self.w)
        return torch.addmm(self.b2, torch.relu(z), self.w2)


class Shared(torch.nn.Module):
    """one Linear applied three times: its call sites share one prepacked weight"""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(40, 40)

    def forward(self, x):
        return self.l(torch.relu(self.l(torch.relu(self.l(x)))))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(5)
    models = [
        ("cnn", Cnn(), torch.randn(2, 3, 20, 20)),
        ("conv1d", Conv1d(), torch.randn(1, 8, 70)),
        ("mlp64", Mlp(), torch.randn(64, 48)),    # M = 64 (packed path either way)
        ("mlp3d", Mlp(), torch.randn(2, 33, 48)),  # linear over 3-d input, M = 66
        ("mlp5", Mlp(), torch.randn(5, 48)),      # few rows: packed only with a packed B
        # one row in every call (a CNN's classifier): prepared where the ISA has gemv_p
        ("mlp1", Mlp(), torch.randn(1, 48)),
        ("shared", Shared(), torch.randn(30, 40)),
        # one 8 MiB weight: the mapped pages of a packed weight are given back at load
        ("big", torch.nn.Linear(1024, 2048), torch.randn(4, 1024)),
    ]
    lines = []
    for name, model, x in models:
        model = model.eval()
        with torch.no_grad():
            y = model(x)
        program = etch.export(model, (x,), check_ops=False)
        with open(os.path.join(out, name + ".pte"), "wb") as f:
            f.write(program.buffer)
        x.contiguous().numpy().astype("float32").tofile(os.path.join(out, name + ".in.bin"))
        y.contiguous().numpy().astype("float32").tofile(os.path.join(out, name + ".out.bin"))
        lines.append("%s %d %s %d" % (name, x.dim(), " ".join(str(s) for s in x.shape),
                                      y.numel()))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
