#!/usr/bin/python3
"""mcu.host_reference: the firmware harness on the host (mcu_host_run) against PyTorch eager,
so that the boards, compared bit for bit with the host, are compared with an independent
reference too. Usage: check_host.py MCU_HOST_RUN PROGRAM.pte INPUT.bin TORCH_OUTPUT.bin"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_mcu import floats_of_output0  # noqa: E402


def main(host, pte, inp, ref_path):
    p = subprocess.run([host, pte, inp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    out = p.stdout.decode().splitlines()
    print("\n".join(out))
    if p.returncode != 0:
        print("FAIL: exit %d" % p.returncode)
        return 1
    with open(ref_path, "rb") as f:
        raw = f.read()
    ref = struct.unpack("<%df" % (len(raw) // 4), raw)
    got = floats_of_output0(out)
    if len(got) != len(ref) or not ref:
        print("FAIL: %d values printed, PyTorch has %d" % (len(got), len(ref)))
        return 1
    err = max(abs(a - b) for a, b in zip(got, ref))
    scale = max(abs(b) for b in ref)
    print("max abs error %.3g (outputs up to %.3g)" % (err, scale))
    if err > 1e-5 * max(1.0, scale) * 10:
        print("FAIL: the host harness differs from PyTorch")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
