#!/usr/bin/python3
"""`etch run` on the Cortex-M keyword spotter: the scores it writes (--output-dir) must equal
the numpy reference's bit for bit, --print-output must show them, and the winning class must
be the expected one.

Usage: /usr/bin/python3 check_cli.py ETCH PROGRAM.pte GEN_DIR WORK_DIR NAME=CLASS ...
"""
import os
import subprocess
import sys

import numpy as np


def main():
    etch, pte, gen, work = sys.argv[1:5]
    failed = 0
    # `etch info` lists every operator, none of them MISSING
    r = subprocess.run([etch, "info", pte], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    ops = [l.split()[0] for l in r.stdout.splitlines() if l.startswith("    cortex_m::")]
    if r.returncode != 0 or "MISSING" in r.stdout or len(ops) != 7:
        print(r.stdout)
        print("FAIL info: exit %d, %d cortex_m operators listed, MISSING %s" %
              (r.returncode, len(ops), "MISSING" in r.stdout))
        failed += 1
    else:
        print("ok info: %s, none MISSING" % ", ".join(ops))
    for spec in sys.argv[5:]:
        name, want = spec.split("=")
        out_dir = os.path.join(work, name)
        r = subprocess.run([etch, "run", pte, "--inputs", os.path.join(gen, name + ".npy"),
                            "--output-dir", out_dir, "--print-output"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print("FAIL %s: etch run exited %d" % (name, r.returncode))
            failed += 1
            continue
        got = np.load(os.path.join(out_dir, "output_0.npy"))
        exp = np.fromfile(os.path.join(gen, name + ".expected.f32"), dtype="<f4")
        ok = (got.dtype == np.float32 and got.shape == (1, 12) and
              got.reshape(-1).view(np.uint32).tolist() == exp.view(np.uint32).tolist())
        cls = int(np.argmax(got))
        line = [l for l in r.stdout.splitlines() if l.startswith("output 0: Tensor Float [1, 12]")]
        if not ok or cls != int(want) or not line:
            print("FAIL %s: class %d (want %s), scores %s, expected %s, printed %s" %
                  (name, cls, want, got.reshape(-1).tolist(), exp.tolist(), bool(line)))
            failed += 1
        else:
            print("ok %s: class %d, 12 scores bit-identical to numpy" % (name, cls))
    total = len(sys.argv) - 5 + 1
    print("%d passed, %d failed" % (total - failed, failed))
    return 1 if failed or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
