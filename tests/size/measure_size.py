#!/usr/bin/python3
"""Text + data bytes of etch's own code inside a linked binary, read from the linker map.

usage: measure_size.py MAP OBJECT_DIR_MARKER [--limit BYTES]

Counts every input section kept in the output (.text*, .rodata* — `size` counts read-only
data as text — and .data*) that comes from an object file whose path contains the marker
(the -Os core objects). Sections the linker discarded (--gc-sections) are listed in their
own part of the map and are not counted; neither is the test program's code, libc or .bss.
"""
import re
import sys


def main():
    args = sys.argv[1:]
    limit = None
    if "--limit" in args:
        i = args.index("--limit")
        limit = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    path, marker = args
    with open(path) as f:
        text = f.read()
    start = text.find("Linker script and memory map")
    if start < 0:
        sys.exit("%s: not a GNU ld map file" % path)
    text = text[start:]
    # " .text.name  0xADDR  0xSIZE  file.o", the name possibly alone on the line before
    pat = re.compile(r"^ (\.[^\s]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", re.M)
    joined = re.sub(r"^ (\.[^\s]+)\n\s+(0x)", r" \1 \2", text, flags=re.M)
    per_file, total, other = {}, 0, {}
    for name, size, obj in pat.findall(joined):
        if marker not in obj:
            continue
        if not name.startswith((".text", ".rodata", ".data")):
            kind = "." + name.split(".")[1]
            other[kind] = other.get(kind, 0) + int(size, 16)
            continue
        n = int(size, 16)
        key = obj.rsplit("/", 1)[-1]
        per_file[key] = per_file.get(key, 0) + n
        total += n
    for key in sorted(per_file, key=per_file.get, reverse=True):
        print("  %-24s %7d" % (key, per_file[key]))
    print("etch core (format + runtime), text + data: %d bytes (%.1f KB)" % (total, total / 1024))
    if other:
        print("  not counted, from the same objects: " +
              ", ".join("%s %d" % (k, other[k]) for k in sorted(other)))
    if total == 0:
        print("0 passed, 1 failed")
        sys.exit("no etch objects found in %s" % path)
    if limit is not None:
        ok = total < limit
        print("budget %d bytes: %s" % (limit, "OK" if ok else "EXCEEDED"))
        print("%d passed, %d failed" % (1 if ok else 0, 0 if ok else 1))
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
