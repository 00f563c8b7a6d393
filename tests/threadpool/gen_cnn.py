#!/usr/bin/python3
"""Writes the program tests/threadpool/test_threadpool.c runs with 1..4 threads: a small CNN
(convolutions, batch norm, pooling, linear layers, layer norm, softmax) large enough that the
kernels split their work, exported with etch's exporter (no operator check: the library may
not be built yet). Its reference is the serial run of the same program; nothing is committed.

Usage: gen_cnn.py OUTPUT.pte
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import torch  # noqa: E402

import etch  # noqa: E402


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.c3 = torch.nn.Conv2d(32, 32, 3, padding=1, groups=4)
        self.pool = torch.nn.AdaptiveAvgPool2d((4, 4))
        self.fc1 = torch.nn.Linear(32 * 16, 96)
        self.ln = torch.nn.LayerNorm(96)
        self.fc2 = torch.nn.Linear(96, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.c1(x)))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        x = torch.nn.functional.gelu(self.c3(x))
        x = self.pool(x).flatten(1)
        x = self.ln(torch.relu(self.fc1(x)))
        return torch.softmax(self.fc2(x), dim=-1), x.mean(dim=0)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_cnn.py OUTPUT.pte")
    torch.manual_seed(5)
    model = Cnn().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.bn1.running_mean.uniform_(-0.2, 0.2)
        model.bn1.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 64, 64)
    program = etch.export(model, (x,), check_ops=False)
    program.save(sys.argv[1])


if __name__ == "__main__":
    main()
