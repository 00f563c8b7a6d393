#!/usr/bin/python3
"""Selective build: a kernel registration table holding only the operators some programs use.

    tools/etch_select_kernels.py -o selected_kernels.c model.pte [other.pte ...]

writes a C file defining ``etch_kernels_register_selected()`` (declared in etch/kernels.h):
it registers, from the portable kernels, exactly the operators the programs' methods call
(every method of every file), so a firmware that calls it instead of
``etch_kernels_register_portable()`` links only those kernels (with --gc-sections the rest
never reach flash). A program that needs an operator the table lacks is refused by
``etch_method_load`` with ETCH_ERR_OPERATOR_MISSING naming it.

The portable table is read from src/kernels/portable/register.c and its table_*.inc files
(the K("name", "signature", fn) lines), so the generated file stays in step with them; the
load-time checks of quantized constants (etch_q_register_checks in quant_util.c) are
registered for the selected quantized kernels only.

Options:
  -o FILE           the C file to write
  --op NAME         also select operator NAME ("aten::add.out"); repeatable
  --allow-missing   an operator with no portable kernel (one a firmware registers itself,
                    e.g. cortex_m::) is listed in a comment instead of failing
Exit status: 0 written, 1 a program could not be read or an operator has no kernel, 2 usage.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PORTABLE = os.path.join(ROOT, "src", "kernels", "portable")

# The serializer is read without the etch package (whose import brings torch): it is plain
# Python over the bytes.
import importlib.util  # noqa: E402


def _load_serialize():
    spec = importlib.util.spec_from_file_location(
        "etch_serialize", os.path.join(ROOT, "python", "etch", "serialize", "__init__.py"),
        submodule_search_locations=[os.path.join(ROOT, "python", "etch", "serialize")])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["etch_serialize"] = mod
    spec.loader.exec_module(mod)
    return mod


K_LINE = re.compile(r'^\s*K\("([^"]+)",\s*"([^"]*)",\s*(\w+)\)', re.M)


def portable_table():
    """{operator name: (signature, function suffix)} in the registry's order."""
    files = [os.path.join(PORTABLE, "register.c")]
    files += sorted(os.path.join(PORTABLE, f) for f in os.listdir(PORTABLE)
                    if f.startswith("table_") and f.endswith(".inc"))
    table = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            for name, sig, fn in K_LINE.findall(f.read()):
                table[name] = (sig, fn)
    if not table:
        raise SystemExit("error: no K(...) entries found under %s" % PORTABLE)
    return table


def quant_checked():
    """Function suffixes etch_q_register_checks registers a load-time check for."""
    with open(os.path.join(PORTABLE, "quant_util.c"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"etch_status etch_q_register_checks\(void\)\s*\{(.*?)\};", text, re.S)
    if not m:
        raise SystemExit("error: etch_q_register_checks not found in quant_util.c")
    return set(re.findall(r"etch_portable_(\w+)", m.group(1)))


def program_operators(path, ser):
    with open(path, "rb") as f:
        data = f.read()
    try:
        pte = ser.pte.read_pte(data)
    except ValueError as e:
        raise SystemExit("error: %s: %s" % (path, e))
    ops = []
    for plan in pte.program.execution_plan:
        for op in plan.operators:
            ops.append(op.name + ("." + op.overload if op.overload else ""))
    return ops


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("programs", nargs="*", metavar="PTE")
    ap.add_argument("-o", dest="out", required=True)
    ap.add_argument("--op", action="append", default=[])
    ap.add_argument("--allow-missing", action="store_true")
    args = ap.parse_args(argv)
    if not args.programs and not args.op:
        ap.error("no program and no --op given")
    ser = _load_serialize()
    table = portable_table()
    wanted = []  # (operator, where it came from), first use first
    for path in args.programs:
        for op in program_operators(path, ser):
            if op not in (w for w, _ in wanted):
                wanted.append((op, os.path.basename(path)))
    for op in args.op:
        if op not in (w for w, _ in wanted):
            wanted.append((op, "--op"))
    selected = [(op, src) for op, src in wanted if op in table]
    missing = [(op, src) for op, src in wanted if op not in table]
    if missing and not args.allow_missing:
        for op, src in missing:
            print("error: operator %s (%s) has no portable kernel; --allow-missing leaves it "
                  "to a kernel the firmware registers itself" % (op, src), file=sys.stderr)
        return 1
    checked = quant_checked()
    srcs = " ".join(os.path.basename(p) for p in args.programs) or "--op"
    lines = [
        "/* Generated by tools/etch_select_kernels.py from %s: do not edit." % srcs,
        " * The portable kernels these programs call (%d of %d operators)." % (len(selected),
                                                                            len(table)),
    ]
    for op, src in missing:
        lines.append(" * Not here (no portable kernel: register it yourself): %s (%s)" % (op, src))
    lines += [
        " */",
        "#include \"etch/kernels.h\"",
    ]
    # every header the tables' functions may be declared in (as register.c includes them)
    lines += ["#include \"kernels/portable/%s\"" % h for h in sorted(os.listdir(PORTABLE))
              if h.startswith("portable") and h.endswith(".h")]
    lines.append("")
    if selected:
        lines.append("static const etch_kernel selected_kernels[] = {")
        for op, _ in selected:
            sig, fn = table[op]
            lines.append("    {\"%s\", \"%s\", etch_portable_%s}," % (op, sig, fn))
        lines.append("};")
        lines.append("")
    lines.append("etch_status etch_kernels_register_selected(void) {")
    if selected:
        lines.append("    static bool registered;")
        lines.append("    for (size_t i = etch_kernels_count(); registered && i-- > 0;)")
        lines.append("        if (etch_kernels_at(i) == &selected_kernels[0])")
        lines.append("            return ETCH_OK; /* idempotent, as the full tables */")
        lines.append("    const size_t n = sizeof selected_kernels / sizeof selected_kernels[0];")
        lines.append("    etch_status st = etch_kernels_register_ex(selected_kernels, n, "
                     "\"portable\", 0);")
        for op, _ in selected:
            fn = table[op][1]
            if fn in checked:
                lines.append("    if (st == ETCH_OK)")
                lines.append("        st = etch_kernels_register_check(etch_portable_%s, "
                             "etch_portable_%s);" % (fn, fn))
        lines.append("    registered = st == ETCH_OK;")
        lines.append("    return st;")
    else:
        lines.append("    return ETCH_OK;")
    lines.append("}")
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
