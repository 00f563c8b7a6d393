#!/usr/bin/python3
"""Golden data of the firmware tests (tests/mcu): writes into OUTDIR
  cnn.pte            a small float CNN (conv, batch norm, ReLU, max pool, linear), exported
                     by etch.export from a seeded model
  cnn_input.bin      its input (seeded normal), float32 little-endian
  cnn_torch.bin      PyTorch eager's output for it, float32 (the host's output is checked
                     against it; the boards' against the host's, bit for bit)
  add_input.bin      the two [1] float inputs of fixtures/pte/add.pte, each at a 16-byte offset
  acs_input.bin      the [3] float input of fixtures/pte/add_constant_segment.pte
Usage: gen_mcu_cases.py OUTDIR (writes OUTDIR/stamp last)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import etch  # noqa: E402


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(6)
        self.conv2 = torch.nn.Conv2d(6, 8, 3, stride=2)
        self.fc = torch.nn.Linear(8 * 3 * 3, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def padded(*arrays):
    out = b""
    for k, a in enumerate(arrays):
        b = a.astype("<f4").tobytes()
        out += b
        if k + 1 < len(arrays):
            out += b"\0" * (-len(b) % 16)
    return out


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(7)
    model = SmallCnn().eval()
    with torch.no_grad():  # batch-norm statistics that are not the identity
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 2.0)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 1, 14, 14)).astype(np.float32)
    program = etch.export(model, (torch.from_numpy(x),), check_ops=False)
    write(os.path.join(outdir, "cnn.pte"), program.buffer)
    write(os.path.join(outdir, "cnn_input.bin"), padded(x))
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy()
    write(os.path.join(outdir, "cnn_torch.bin"), y.astype("<f4").tobytes())
    a = rng.standard_normal((1,)).astype(np.float32)
    b = rng.standard_normal((1,)).astype(np.float32)
    write(os.path.join(outdir, "add_input.bin"), padded(a, b))
    write(os.path.join(outdir, "acs_input.bin"),
          padded(rng.standard_normal((3,)).astype(np.float32)))
    write(os.path.join(outdir, "stamp"), b"ok\n")


if __name__ == "__main__":
    main(sys.argv[1])
