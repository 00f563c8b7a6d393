#!/usr/bin/python3
"""Bytes of etch's own code and state inside a linked binary, read from the linker map.

usage: measure_size.py MAP OBJECT_DIR_MARKER [--limit BYTES]

Counts every input section kept in the output that comes from an object file whose path
contains the marker (the -Os core objects): code and read-only data (.text*, .rodata*: `size`
counts read-only data as text), initialised data (.data*) and state (.bss*, and the
thread-local .tdata* / .tbss*, counted once). Sections the linker discarded (--gc-sections)
are listed in their own part of the map and are not counted; neither is the test program's
code, libc or libgcc, nor what takes no memory on the target (.comment, unwind tables of
the host, ARM attributes). With --limit, the budget holds for the total text + data + bss.
"""
import re
import sys

# section name prefix -> the kind it is counted as
KINDS = ((".text", "text"), (".rodata", "text"), (".data", "data"), (".tdata", "data"),
         (".bss", "bss"), (".tbss", "bss"))


def kind_of(name):
    for prefix, kind in KINDS:
        if name == prefix or name.startswith(prefix + "."):
            return kind
    return None


def sections(path, marker):
    """[(section name, bytes, object file)] of the kept input sections from marked objects,
    and {other section kind: bytes} of the ones not counted."""
    with open(path) as f:
        text = f.read()
    start = text.find("Linker script and memory map")
    if start < 0:
        sys.exit("%s: not a GNU ld map file" % path)
    text = text[start:]
    # " .text.name  0xADDR  0xSIZE  file.o", the name possibly alone on the line before
    pat = re.compile(r"^ (\.[^\s]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", re.M)
    joined = re.sub(r"^ (\.[^\s]+)\n\s+(0x)", r" \1 \2", text, flags=re.M)
    rows, other = [], {}
    for name, size, obj in pat.findall(joined):
        if marker not in obj:
            continue
        n = int(size, 16)
        if kind_of(name) is None:
            key = "." + name.split(".")[1]
            other[key] = other.get(key, 0) + n
            continue
        rows.append((name, n, obj))
    return rows, other


def summarize(rows):
    """{kind: bytes} and {object file name: {kind: bytes}}."""
    per_kind = {"text": 0, "data": 0, "bss": 0}
    per_file = {}
    for name, n, obj in rows:
        kind = kind_of(name)
        key = re.sub(r"\.c\.o$", ".o", obj.rsplit("/", 1)[-1])
        per_kind[kind] += n
        per_file.setdefault(key, {"text": 0, "data": 0, "bss": 0})[kind] += n
    return per_kind, per_file


def report(path, marker, limit, label):
    rows, other = sections(path, marker)
    per_kind, per_file = summarize(rows)
    total = sum(per_kind.values())
    print("  %-24s %7s %7s %7s %7s" % ("object", "text", "data", "bss", "total"))
    for key in sorted(per_file, key=lambda k: sum(per_file[k].values()), reverse=True):
        k = per_file[key]
        print("  %-24s %7d %7d %7d %7d" % (key, k["text"], k["data"], k["bss"],
                                            sum(k.values())))
    print("etch core (format + runtime) %s: text %d + data %d + bss %d = %d bytes (%.1f KB)"
          % (label, per_kind["text"], per_kind["data"], per_kind["bss"], total, total / 1024))
    if other:
        print("  not counted, from the same objects: " +
              ", ".join("%s %d" % (k, other[k]) for k in sorted(other)))
    if total == 0:
        print("0 passed, 1 failed")
        sys.exit("no etch objects found in %s" % path)
    if limit is not None:
        ok = total <= limit
        print("budget %d bytes (text + data + bss): %s" % (limit, "OK" if ok else "EXCEEDED"))
        print("%d passed, %d failed" % (1 if ok else 0, 0 if ok else 1))
        return 0 if ok else 1
    return 0


def main():
    args = sys.argv[1:]
    limit = None
    if "--limit" in args:
        i = args.index("--limit")
        limit = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    sys.exit(report(args[0], args[1], limit, "in %s" % args[0].rsplit("/", 1)[-1]))


if __name__ == "__main__":
    main()
