#!/usr/bin/python3
"""The KWS program with a lying constant (make_bad_kws.py) is refused when it loads, by the
kernel's load-time check, with a message naming the instruction, the operator and the
argument; nothing runs.

Usage: /usr/bin/python3 check_refused.py ETCH PROGRAM.pte WORK_DIR
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [("bad_shift.pte", ["refused at load", "instruction 4", "cortex_m::quantized_conv2d.out",
                            "requantize_shifts[5] is 31, outside [-31, 30]"]),
         ("bad_multiplier.pte", ["refused at load", "instruction 14",
                                 "cortex_m::quantized_linear.out",
                                 "requantize_multipliers[0] is -2147483648"])]


def main():
    etch, pte, work = sys.argv[1:4]
    subprocess.run([sys.executable, os.path.join(HERE, "make_bad_kws.py"), pte, work], check=True)
    failed = 0
    for name, want in CASES:
        r = subprocess.run([etch, "run", os.path.join(work, name)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        missing = [w for w in want if w not in r.stdout]
        if r.returncode != 1 or missing or "execution" in r.stdout:
            print("FAIL %s: exit %d, missing %s in:\n%s" % (name, r.returncode, missing, r.stdout))
            failed += 1
        else:
            print("ok %s: %s" % (name, r.stdout.strip().splitlines()[-1]))
    print("%d passed, %d failed" % (len(CASES) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
