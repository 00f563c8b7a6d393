#!/usr/bin/python3
"""mcu.embed_cli: `etch embed` and tools/etch_select_kernels.py on the host.

Usage: test_embed.py ETCH CC FIXTURES CNN.pte WORKDIR
- the array in the written source holds exactly the file's bytes, 16-byte aligned (or --align),
  in the --section asked for, and the source compiles warning-free (-Wall -Wextra -Werror);
- the header's arena sizes and operators are those `etch info --json` reports;
- a file that is not a program, a bad name, a bad alignment, a missing -o are refused with
  the documented exit status and a message naming the problem;
- the selection table holds exactly the program's operators; one without a portable kernel
  (the KWS program's cortex_m::) fails naming it, unless --allow-missing.
Closing line: N passed, N failed."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SELECT = os.path.join(ROOT, "tools", "etch_select_kernels.py")
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)


def run(*cmd):
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def array_bytes(src):
    body = src[src.index("= {") + 3:src.index("};")]
    return bytes(int(h, 16) for h in re.findall(r"0x([0-9a-f]{2})", body))


def macros(hdr):
    return dict(re.findall(r"^#define (\w+) (.+)$", hdr, re.M))


def main(etch, cc, fixtures, cnn, work):
    os.makedirs(work, exist_ok=True)
    acs = os.path.join(fixtures, "pte", "add_constant_segment.pte")
    c, h = os.path.join(work, "acs.c"), os.path.join(work, "acs.h")
    rc, out, err = run(etch, "embed", acs, "-o", c, "--header", h, "--name", "acs",
                       "--section", ".rodata.etch_model")
    check(rc == 0, "embed acs: exit %d (%s)" % (rc, err))
    src, hdr = open(c).read(), open(h).read()
    data = open(acs, "rb").read()
    check(array_bytes(src) == data, "embed acs: the array is not the file's bytes")
    check("_Alignas(16) const uint8_t etch_acs_pte[%d]" % len(data) in src, "embed: alignment")
    check('__attribute__((section(".rodata.etch_model"), used))' in src, "embed: --section")
    m = macros(hdr)
    info = json.loads(run(etch, "info", "--json", acs)[1])["methods"][0]
    check(m.get("ETCH_ACS_PTE_SIZE") == str(len(data)), "header: PTE_SIZE")
    check(m.get("ETCH_ACS_NUM_ARENAS") == str(len(info["arenas"])), "header: NUM_ARENAS")
    want = "{" + ", ".join(str(a) for a in info["arenas"]) + "}"
    check(m.get("ETCH_ACS_ARENA_SIZES") == want, "header: ARENA_SIZES %s, info %s"
          % (m.get("ETCH_ACS_ARENA_SIZES"), want))
    total = sum((a + 15) // 16 * 16 for a in info["arenas"])
    check(m.get("ETCH_ACS_ARENA_TOTAL") == str(total), "header: ARENA_TOTAL")
    check(int(m.get("ETCH_ACS_POOL_SIZE", "0")) > 0, "header: POOL_SIZE")
    check(m.get("ETCH_ACS_NUM_OPERATORS") == str(len(info["operators"])), "header: operators")
    for op in info["operators"]:
        check(op["name"] in hdr, "header: operator %s listed" % op["name"])
    rc, _, err = run(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-c", c, "-o",
                     os.path.join(work, "acs.o"))
    check(rc == 0, "the embedded source does not compile cleanly: %s" % err)

    # raw files, other alignments
    raw = os.path.join(work, "blob.bin")
    with open(raw, "wb") as f:
        f.write(bytes(range(256)) * 3 + b"\x7f")
    rc, _, err = run(etch, "embed", "--raw", raw, "-o", os.path.join(work, "blob.c"),
                     "--header", os.path.join(work, "blob.h"), "--align", "64")
    src = open(os.path.join(work, "blob.c")).read()
    check(rc == 0 and array_bytes(src) == open(raw, "rb").read(), "embed --raw: bytes")
    check("_Alignas(64) const uint8_t etch_blob_pte[769]" in src, "embed --raw: default name")
    check("ETCH_BLOB_POOL_SIZE" not in open(os.path.join(work, "blob.h")).read(),
          "embed --raw: no program sizes")

    # refusals
    rc, _, err = run(etch, "embed", os.path.join(fixtures, "pte", "not_a_program.pte"), "-o",
                     os.path.join(work, "x.c"))
    check(rc == 1 and "NotAProgram" in err, "not a program: exit %d, %s" % (rc, err))
    rc, _, err = run(etch, "embed", acs, "-o", os.path.join(work, "x.c"), "--name", "9lives")
    check(rc == 2 and "not a C identifier" in err, "bad name: exit %d, %s" % (rc, err))
    rc, _, err = run(etch, "embed", acs, "-o", os.path.join(work, "x.c"), "--align", "24")
    check(rc == 2 and "power of two" in err, "bad align: exit %d, %s" % (rc, err))
    rc, _, err = run(etch, "embed", acs, "-o", os.path.join(work, "x.c"), "--align", "8")
    check(rc == 2 and "--align" in err, "align below 16: exit %d, %s" % (rc, err))
    rc, _, err = run(etch, "embed", acs)
    check(rc == 2 and "-o" in err, "no -o: exit %d, %s" % (rc, err))
    rc, _, err = run(etch, "embed", acs, "-o", os.path.join(work, "x.c"), "--method", "nope")
    check(rc == 1 and "nope" in err, "unknown method: exit %d, %s" % (rc, err))
    rc, out, _ = run(etch, "help")
    check(rc == 0 and re.search(r"^\s+embed\s", out, re.M) is not None, "etch help lists embed")

    # the selection table
    sel = os.path.join(work, "sel.c")
    rc, _, err = run(sys.executable, SELECT, "-o", sel, cnn)
    check(rc == 0, "select cnn: %s" % err)
    table = re.findall(r'\{"([^"]+)", "[^"]*", etch_portable_\w+\}', open(sel).read())
    ops = [o["name"] for o in json.loads(run(etch, "info", "--json", cnn)[1])["methods"][0]
           ["operators"]]
    check(sorted(table) == sorted(ops), "select cnn: %s, program %s" % (table, ops))
    kws = os.path.join(fixtures, "pte", "kws_dscnn_cortexm.pte")
    rc, _, err = run(sys.executable, SELECT, "-o", os.path.join(work, "kws.c"), kws)
    ktable = re.findall(r'\{"([^"]+)", "[^"]*", etch_portable_\w+\}',
                        open(os.path.join(work, "kws.c")).read()) if rc == 0 else []
    kops = [o["name"] for o in json.loads(run(etch, "info", "--json", kws)[1])["methods"][0]
            ["operators"]]
    check(rc == 0 and sorted(ktable) == sorted(kops), "select kws: %d %s %s" % (rc, err, ktable))
    rc, _, err = run(sys.executable, SELECT, "-o", os.path.join(work, "m.c"), "--op",
                     "test::nothing.out")
    check(rc == 1 and "test::nothing.out" in err, "select a missing op: %d %s" % (rc, err))
    rc, _, err = run(sys.executable, SELECT, "-o", os.path.join(work, "m.c"), "--op",
                     "test::nothing.out", "--allow-missing")
    text = open(os.path.join(work, "m.c")).read() if rc == 0 else ""
    check(rc == 0 and "Not here (no portable kernel: register it yourself): "
          "test::nothing.out" in text, "select --allow-missing: %s" % err)
    rc, _, err = run(sys.executable, SELECT, "-o", os.path.join(work, "y.c"),
                     os.path.join(fixtures, "pte", "not_a_program.pte"))
    check(rc == 1 and "not_a_program.pte" in err, "select: not a program: %d %s" % (rc, err))
    rc, _, err = run(sys.executable, SELECT, "-o", os.path.join(work, "q.c"), "--op",
                     "quantized_decomposed::quantize_per_tensor.out")
    qtext = open(os.path.join(work, "q.c")).read() if rc == 0 else ""
    check(rc == 0 and "etch_kernels_register_check(etch_portable_quantize_per_tensor_out"
          in qtext, "select --op quantize: its load-time check registered")
    for path in (sel, os.path.join(work, "q.c")):
        rc, _, err = run(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I",
                         os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "src"), "-c",
                         path, "-o", path + ".o")
        check(rc == 0, "%s does not compile cleanly: %s" % (path, err))

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
