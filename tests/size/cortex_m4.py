#!/usr/bin/python3
"""Build the minimal core for a Cortex-M4 and measure it (size.core_budget_cortex_m4).

usage: cortex_m4.py SOURCE_DIR OUT_DIR [--cc arm-none-eabi-gcc] [--limit BYTES]
                    [--cflags "WARNING FLAGS"] [--terse]

Compiles src/format/*.c and src/runtime/*.c (the core: nothing of src/optimize) with
arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os
-ffunction-sections -fdata-sections, links tests/size/minimal.c against them with newlib-nano
and --gc-sections, and counts the core's text + data + bss in the map as measure_size.py does
(OUT_DIR/etch_minimal_cm4.map). The error message buffer is a plain static there
(ETCH_NO_THREAD_LOCAL: a bare-metal program has one thread). --terse builds with
ETCH_TERSE_ERRORS (src/runtime/error.h: the core's messages become "file:line"). Exit status
77 (ctest: skipped) when the compiler is not on the PATH.
"""
import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_size  # noqa: E402

ARCH = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
OPT = ["-Os", "-ffunction-sections", "-fdata-sections", "-std=c11"]
# uint32_t is unsigned long on arm-none-eabi, so "%u" of one draws -Wformat although both are
# 32 bits wide there; every other warning stays an error.
TARGET = ["-DETCH_NO_THREAD_LOCAL", "-Wno-format"]
MARKER = "etch_core_cm4/"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout)
        print("0 passed, 1 failed")
        sys.exit(1)


def build(src, out, cc, warnings, terse=False):
    """Compile and link; returns the map file's path."""
    objdir = os.path.join(out, MARKER.rstrip("/"))
    os.makedirs(objdir, exist_ok=True)
    inc = ["-I" + os.path.join(src, "include"), "-I" + os.path.join(src, "src")]
    flags = ARCH + OPT + warnings + TARGET + (["-DETCH_TERSE_ERRORS"] if terse else [])
    objs = []
    core = sorted(glob.glob(os.path.join(src, "src", "format", "*.c")) +
                  glob.glob(os.path.join(src, "src", "runtime", "*.c")))
    for c in core:
        o = os.path.join(objdir, os.path.basename(c)[:-2] + ".o")
        run([cc] + flags + inc + ["-c", c, "-o", o])
        objs.append(o)
    here = os.path.dirname(os.path.abspath(__file__))
    for c in ("minimal.c", "cm4_support.c"):
        o = os.path.join(out, c[:-2] + ".o")
        run([cc] + flags + ["-I" + os.path.join(src, "include"), "-c",
                            os.path.join(here, c), "-o", o])
        objs.append(o)
    elf = os.path.join(out, "etch_minimal_cm4.elf")
    mapf = os.path.join(out, "etch_minimal_cm4.map")
    run([cc] + ARCH + ["--specs=nano.specs", "--specs=nosys.specs", "-Wl,--gc-sections",
                       "-Wl,-Map=" + mapf, "-o", elf] + objs + ["-lm"])
    return mapf


def main():
    args = sys.argv[1:]
    terse = "--terse" in args
    if terse:
        args.remove("--terse")
    opts = {"--cc": "arm-none-eabi-gcc", "--limit": None, "--cflags": ""}
    for key in list(opts):
        if key in args:
            i = args.index(key)
            opts[key] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    if not shutil.which(opts["--cc"]):
        print("SKIPPED: %s is not on the PATH (tools/setup-debian.sh installs "
              "gcc-arm-none-eabi and libnewlib-arm-none-eabi)" % opts["--cc"])
        sys.exit(77)
    mapf = build(args[0], args[1], opts["--cc"], opts["--cflags"].split(), terse)
    limit = int(opts["--limit"]) if opts["--limit"] else None
    label = "on Cortex-M4 (-Os%s)" % (", ETCH_TERSE_ERRORS" if terse else "")
    sys.exit(measure_size.report(mapf, MARKER, limit, label))


if __name__ == "__main__":
    main()
