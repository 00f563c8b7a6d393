#!/usr/bin/env bash
# Gather what bench/avx512/run.sh needs on an AVX-512 machine that has no build tools or
# exporter of its own: this build's etch CLI, the GEMM and paired benchmarks, the kernel tests
# that check every instruction set's variants (executables and their generated data, as ctest
# runs them), OpenBLAS (for bench_gemm's side-by-side), and bench/cpu's exported models.
#
# Usage: pack.sh BUILD_DIR OUT_DIR [MODEL ...]
#   MODEL: name[:pte] of a bench/cpu export (bench/cpu/.work/NAME.*); ':pte' takes the .pte
#   only (ONNX Runtime's side is then skipped for it). Default: mobilenet_v2.
# The payload's binaries are x86-64 builds of this machine: the target needs a glibc at least
# as new. Copy OUT_DIR to the AVX-512 machine and run `bench/avx512/run.sh OUT_DIR RESULT_DIR`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: pack.sh BUILD_DIR OUT_DIR [MODEL[:pte] ...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
out=$2
shift 2
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mobilenet_v2)
[ -x "$build/etch" ] || { echo "FAIL: $build/etch missing: build etch first" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/tests" "$out/models"
out=$(cd "$out" && pwd)

make -s -C "$root/bench/gemm" ETCH_BUILD="$build" bench_gemm >/dev/null
make -s -C "$root/bench/paired" ETCH_BUILD="$build" >/dev/null
cp "$build/etch" "$root/bench/gemm/bench_gemm" "$root/bench/paired/bench_paired" "$out/bin/"

# OpenBLAS and the libraries it pulls in (not libc's own), compressed: they are most of the size.
libs=$(ldd "$out/bin/bench_gemm" | awk '$3 ~ /^\// {print $3}' |
       grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true)
[ -n "$libs" ] || { echo "FAIL: bench_gemm links no OpenBLAS" >&2; exit 1; }
mkdir -p "$out/.lib"
for l in $libs; do cp -L "$l" "$out/.lib/"; done
XZ_OPT=-T0 tar -C "$out/.lib" -cJf "$out/lib.tar.xz" .
rm -rf "$out/.lib"

# The kernel tests with their data, at paths relative to the build tree.
ctest --test-dir "$build" --show-only=json-v1 > "$out/tests.json"
/usr/bin/python3 - "$out/tests.json" "$build" "$out/tests" <<'PY'
import json, os, re, shutil, sys
spec, build, dest = sys.argv[1], sys.argv[2], sys.argv[3]
want = re.compile(r"^(opt_conv|optimized_eltwise|optimized_gemm|optimized_quant|optimized_nchwc|"
                  r"optimized_nchwc_pool|llm_attention\.kernels|chain\.blocks|"
                  r"layout\.blocked_choice|prepack)$")
lines = []
for t in json.load(open(spec))["tests"]:
    if not want.match(t["name"]):
        continue
    wd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"),
              os.path.dirname(t["command"][0]))
    args = []
    for a in t["command"]:
        if os.path.isabs(a) and a.startswith(build + "/"):
            rel = os.path.relpath(a, build)
            src, dst = a, os.path.join(dest, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)
            a = "@/" + rel
        elif os.path.isabs(a):
            sys.exit("test %s names %s outside the build tree" % (t["name"], a))
        args.append(a)
    lines.append("\t".join([t["name"], "@/" + os.path.relpath(wd, build)] + args))
if len(lines) != 9:
    sys.exit("expected the 9 kernel tests in the build tree, found %d" % len(lines))
open(os.path.join(dest, "commands"), "w").write("\n".join(lines) + "\n")
PY
rm -f "$out/tests.json"
XZ_OPT=-T0 tar -C "$out" -cJf "$out/tests.tar.xz" tests
rm -rf "$out/tests"

for spec in "${models[@]}"; do
  name=${spec%%:*}
  src=$root/bench/cpu/.work/$name
  [ -f "$src.pte" ] || {
    echo "FAIL: $src.pte missing: /usr/bin/python3 bench/cpu/models.py --models $name" >&2; exit 1; }
  cp "$src.pte" "$src.input.npy" "$src.ref.npy" "$out/models/"
  [ "$spec" = "$name:pte" ] || cp "$src.onnx" "$out/models/"
done
git -C "$root" rev-parse --short HEAD > "$out/commit"
du -sh "$out"
