#!/usr/bin/python3
"""One firmware test (ctest mcu.*): run a firmware image under qemu-system-arm and compare the
outputs it prints with the host's for the same program and input, bit for bit.

    run_mcu.py --qemu QEMU --machine mps2-an386 --elf fw_cnn.elf
               (--host mcu_host_run --pte cnn.pte --input cnn_input.bin | --expect FILE)
               [--expect-error REGEX] [--torch cnn_torch.bin] [--timeout S]

The firmware (firmware/common/fw_run.c) prints "out ..." lines (every output element's bits
as hex), "check ... refused" lines (a misaligned image, a short arena and a short pool must
each be refused at load with the right status) and "time execute_ns N": SysTick around the
inference, in the emulator's virtual time. Under -icount shift=0 qemu advances virtual time
by exactly 1 ns per guest instruction, so N is the inference's emulated instruction count
(to the SysTick resolution: 40 ns at the MPS2's 25 MHz, 31.25 ns at the AN547's 32 MHz). It
is not a cycle count of real silicon.

--expect FILE compares with stored "out" lines instead of running the host (for a program
whose kernels the host build lacks). --expect-error REGEX: the load must fail and the error
line match (a program needing an operator the firmware was built without). --torch checks
the host's float32 output 0 against PyTorch's (the independent reference).
Exit status 0 when everything holds, 1 otherwise.
"""
import argparse
import re
import struct
import subprocess
import sys


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        print(out)
        print("FAIL: %s did not finish in %d s" % (cmd[0], timeout))
        sys.exit(1)
    return p.returncode, p.stdout.decode("utf-8", "replace").splitlines()


def out_lines(lines):
    return [ln for ln in lines if ln.startswith("out ")]


def floats_of_output0(lines):
    vals = []
    for ln in lines:
        m = re.match(r"out 0 \+\d+:((?: [0-9a-f]{8})+)$", ln)
        if m:
            vals += [struct.unpack("<f", struct.pack("<I", int(h, 16)))[0]
                     for h in m.group(1).split()]
    return vals


def calibrate(rc, lines, machine):
    """cal_icount.elf times loops of N instructions. Between two loop lengths the difference
    in SysTick time must be the difference in instructions, in ns (within 0.1 % and two
    ticks); the time of a loop less its instructions is the clock reads around it, which must
    stay under 400 ns (their own few dozen instructions and one tick)."""
    rows = [re.match(r"calibrate (\d+) instructions: (\d+) ns$", ln) for ln in lines]
    rows = [(int(m.group(1)), int(m.group(2))) for m in rows if m]
    if rc != 0 or len(rows) < 3:
        print("FAIL: the calibration image exited with %d after %d loops" % (rc, len(rows)))
        return 1
    for (n0, t0), (n1, t1) in zip(rows, rows[1:]):
        dn, dt = n1 - n0, t1 - t0
        if abs(dt - dn) > dn / 1000 + 80:
            print("FAIL: %d more instructions took %d more virtual ns on %s" % (dn, dt, machine))
            return 1
    for n, t in rows:
        if not 0 <= t - n < 400:
            print("FAIL: %d instructions took %d virtual ns on %s" % (n, t, machine))
            return 1
    print("ok: SysTick on %s counts 1 ns per instruction under -icount shift=0 (%s)"
          % (machine, ", ".join("%d insns: %d ns" % r for r in rows)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qemu", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--elf", required=True)
    ap.add_argument("--host")
    ap.add_argument("--pte")
    ap.add_argument("--input")
    ap.add_argument("--expect")
    ap.add_argument("--expect-error")
    ap.add_argument("--torch")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--calibrate", action="store_true")
    a = ap.parse_args()

    qemu = [a.qemu, "-machine", a.machine, "-nographic", "-monitor", "none", "-serial", "none",
            "-semihosting-config", "enable=on,target=native",
            "-icount", "shift=0,align=off,sleep=off", "-kernel", a.elf]
    rc, fw = run(qemu, a.timeout)
    print("firmware (%s, %s):" % (a.machine, a.elf))
    for ln in fw:
        print("  | " + ln)
    if a.calibrate:
        return calibrate(rc, fw, a.machine)
    ok = True
    checks = [ln for ln in fw if ln.startswith("check ")]
    bad = [ln for ln in checks if " refused: " not in ln]
    if len(checks) < 2 or bad:
        print("FAIL: the self checks (misaligned image, short arena, short pool) did not all "
              "refuse with the right status")
        ok = False

    if a.expect_error:
        errs = [ln for ln in fw if ln.startswith("error load: ")]
        if rc != 1 or not errs or not re.search(a.expect_error, errs[0]):
            print("FAIL: expected the load to fail with /%s/ (exit 1), got exit %d and %s"
                  % (a.expect_error, rc, errs or "no load error"))
            return 1
        print("ok: the load was refused: %s" % errs[0][len("error load: "):])
        return 0 if ok else 1

    if rc != 0:
        print("FAIL: the firmware exited with %d" % rc)
        return 1
    if a.expect:
        with open(a.expect, encoding="utf-8") as f:
            host = f.read().splitlines()
        source = a.expect
    else:
        hrc, host = run([a.host, a.pte, a.input], a.timeout)
        if hrc != 0:
            print("\n".join(host))
            print("FAIL: the host run exited with %d" % hrc)
            return 1
        source = "the host build (%s)" % a.host
    want, got = out_lines(host), out_lines(fw)
    if not want:
        print("FAIL: no output lines from %s" % source)
        return 1
    if want != got:
        print("FAIL: the outputs differ from %s:" % source)
        for k in range(max(len(want), len(got))):
            w = want[k] if k < len(want) else "(none)"
            g = got[k] if k < len(got) else "(none)"
            if w != g:
                print("  host:     %s\n  firmware: %s" % (w, g))
        return 1
    print("ok: %d output lines equal, bit for bit, to %s" % (len(want), source))

    if a.torch:
        with open(a.torch, "rb") as f:
            raw = f.read()
        ref = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        vals = floats_of_output0(want)
        err = max(abs(x - y) for x, y in zip(vals, ref)) if len(vals) == len(ref) else None
        if err is None or err > 1e-4:
            print("FAIL: host output 0 (%d values) vs PyTorch (%d values): max error %s"
                  % (len(vals), len(ref), err))
            return 1
        print("ok: output 0 matches PyTorch eager (max abs error %.3g)" % err)

    t = [ln for ln in fw if ln.startswith("time execute_ns ")]
    if t:
        n = int(t[0].split()[-1])
        print("emulated: %d instructions per inference on %s (qemu -icount shift=0: 1 virtual "
              "ns per instruction, counted by SysTick; not a cycle count)" % (n, a.machine))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
