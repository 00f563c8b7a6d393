#!/usr/bin/python3
"""Writes the zoo's LeNet (etch.zoo.lenet, seeded) as a .pte for test_soak.c; nothing is
committed. Usage: gen_lenet.py OUTPUT.pte"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import torch  # noqa: E402

import etch  # noqa: E402
from etch import zoo  # noqa: E402

torch.manual_seed(0)
model = zoo.lenet().eval()
program = etch.export(model, (torch.randn(1, 1, 28, 28),), check_ops=False)
tmp = sys.argv[1] + ".tmp"
with open(tmp, "wb") as f:
    f.write(program.buffer)
os.replace(tmp, sys.argv[1])
