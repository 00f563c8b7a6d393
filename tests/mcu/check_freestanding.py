#!/usr/bin/python3
"""mcu.<cpu>.freestanding, mcu.freestanding_host_cc: what a freestanding libetch.a (core +
portable kernels) needs from outside itself. Allowed: etch_platform_* (the board's,
etch/platform.h), memory and string functions, qsort, snprintf/vsnprintf, <math.h>, and the
compiler's runtime helpers (__aeabi_*, soft-float; the GOT symbol of a PIE-default host gcc). Anything else (a file, stdio stream,
thread, mmap, heap, clock, environment or exit function) fails the test, named.
Usage: check_freestanding.py NM libetch.a"""
import re
import subprocess
import sys

ALLOWED_C = {"memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strcmp", "strncmp",
             "strchr", "strrchr", "strcpy", "strncpy", "strcspn", "strspn", "strstr", "qsort",
             "snprintf", "vsnprintf"}
MATH = re.compile(r"^(acos|acosh|asin|asinh|atan|atan2|atanh|cbrt|ceil|copysign|cos|cosh|erf|"
                  r"erfc|exp|exp2|expm1|fabs|floor|fma|fmax|fmin|fmod|frexp|hypot|ldexp|lgamma|"
                  r"llrint|llround|log|log10|log1p|log2|lrint|lround|modf|nearbyint|nextafter|"
                  r"pow|remainder|rint|round|scalbn|sin|sinh|sqrt|tan|tanh|tgamma|trunc)[fl]?$")
RUNTIME = re.compile(r"^(__aeabi_\w+|__(add|sub|mul|div|neg|cmp|eq|ne|lt|le|gt|ge|unord|fix|"
                     r"fixuns|float|floatun|extend|trunc|pop|clz|ctz|bswap|udiv|umod|div|mod|"
                     r"ashl|ashr|lshr)\w*|__stack_chk_\w+|_GLOBAL_OFFSET_TABLE_)$")


def main(nm, lib):
    out = subprocess.run([nm, "-g", lib], stdout=subprocess.PIPE, check=True).stdout.decode()
    defined, undefined = set(), set()
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    external = sorted(undefined - defined)
    bad = [s for s in external if not (s in ALLOWED_C or MATH.match(s) or RUNTIME.match(s)
                                       or s.startswith("etch_platform_"))]
    print("%s needs from outside: %s" % (lib, " ".join(external)))
    if bad:
        print("FAIL: a freestanding libetch must not need: %s" % " ".join(bad))
        return 1
    for hook in ("etch_platform_alloc", "etch_platform_free"):
        if hook not in external:
            print("FAIL: %s is not what the default allocator calls" % hook)
            return 1
    print("ok: only libc's memory/string/math functions, snprintf and the platform layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
