#!/usr/bin/env bash
# Fuzz the loader and interpreter with libFuzzer (ASan + UBSan):
#
#   fuzz/run_fuzz.sh [SECONDS]      (default 120)
#
# Builds fuzz_program with clang in its own build directory (build-fuzz, or $ETCH_FUZZ_BUILD),
# makes a seed corpus there from ../shared/fixtures (every .pte/.bpte, the program inside each
# .bpte), tests/robustness/regressions (raw inputs, and *.mut recipes applied to their
# fixture), the quantized-operator programs of tests/quant/gen_quant_programs.py (written
# into the build directory; the ones whose parameters lie included) and the XNNPACK-delegated
# single-node programs of tests/xnnpack/gen_nodes.py and the program with debug information of
# tests/debuginfo/gen_debuginfo.py, then runs until 100000 executions or SECONDS seconds, whichever comes first.
# Exits non-zero on a crash, leak, timeout or violation; the input is saved in
# build-fuzz/fuzz-artifacts/ (minimize it with `-minimize_crash=1 -runs=10000 FILE` and add it
# to tests/robustness/regressions/).
set -euo pipefail

secs=${1:-120}
runs=${ETCH_FUZZ_RUNS:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ETCH_FUZZ_BUILD:-$root/build-fuzz}
fixtures=${ETCH_FIXTURES:-$root/../shared/fixtures}
python=${ETCH_PYTHON:-/usr/bin/python3}
jobs=${JOBS:-2}
# Inputs up to this size. LeNet (~256 KiB, two convolutions per run) would cut the rate from
# thousands of executions per second to tens, so by default the large fixtures are left to the
# robustness corpus; raise it (ETCH_FUZZ_MAX_LEN=300000) to fuzz them too.
max_len=${ETCH_FUZZ_MAX_LEN:-16384}

cmake -S "$root" -B "$build" -DETCH_FUZZ=ON -DETCH_BUILD_TESTS=OFF \
      -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_program

seeds=$build/fuzz-seeds
corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"

# Seeds are made here, from the read-only fixtures: nothing is copied into the repository.
"$python" - "$fixtures/pte" "$root/tests/robustness/regressions" "$seeds" "$max_len" <<'PY'
import os, struct, sys
fixtures, regressions, seeds, max_len = sys.argv[1:5]
max_len = int(max_len)

def write_seed(name, data):
    global n, skipped
    if len(data) > max_len:
        skipped += 1
        return
    open(os.path.join(seeds, name), "wb").write(data)
    n += 1

def embedded_program(data):
    """The `program` vector (slot 2) of a BP08 BundledProgram, or None."""
    try:
        root = struct.unpack_from("<I", data, 0)[0]
        vt = root - struct.unpack_from("<i", data, root)[0]
        vts = struct.unpack_from("<H", data, vt)[0]
        if 4 + 2 * 2 + 2 > vts:
            return None
        off = struct.unpack_from("<H", data, vt + 8)[0]
        if not off:
            return None
        at = root + off
        vec = at + struct.unpack_from("<I", data, at)[0]
        n = struct.unpack_from("<I", data, vec)[0]
        return data[vec + 4:vec + 4 + n]
    except struct.error:
        return None

def target_bytes(spec):
    name, _, part = spec.partition("@")
    path = os.path.join(fixtures, name)
    if part == "ptd":
        return None  # the fuzzer mutates programs only
    data = open(path, "rb").read()
    return embedded_program(data) if part == "embedded" else data

n = skipped = 0
for name in sorted(os.listdir(fixtures)):
    path = os.path.join(fixtures, name)
    if not name.endswith((".pte", ".bpte")):
        continue
    data = open(path, "rb").read()
    write_seed(name, data)
    if data[4:8] == b"BP08":
        prog = embedded_program(data)
        if prog:
            write_seed(name + ".program.pte", prog)
for name in sorted(os.listdir(regressions)) if os.path.isdir(regressions) else []:
    path = os.path.join(regressions, name)
    if name.endswith((".md", ".txt", ".ptd")):
        continue
    if not name.endswith(".mut"):
        write_seed("regression-" + name, open(path, "rb").read())
        continue
    data = None
    for line in open(path):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "target":
            data = target_bytes(words[1])
            if data is None:
                break
            data = bytearray(data)
        elif words[0] == "write":
            off, width, value = (int(w, 0) for w in words[1:4])
            data[off:off + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        elif words[0] == "xor":
            data[int(words[1], 0)] ^= int(words[2], 0)
        elif words[0] == "truncate":
            del data[int(words[1], 0):]
    if data is not None:
        write_seed("regression-" + name + ".bin", bytes(data))
print(f"fuzz seeds: {n} files in {seeds} ({skipped} larger than {max_len} bytes left out)")
PY

# Quantized programs (scales, zero points, group sizes and packed weights for the mutator to
# lie about): generated, never committed.
quant=$build/quant-programs
"$python" -W ignore "$root/tests/quant/gen_quant_programs.py" "$quant/manifest.json"
for f in "$quant"/*.pte; do
  cp "$f" "$seeds/quant-$(basename "$f")"
done

# XNNPACK-delegated single-node programs (payload headers, graphs, quantization parameters and
# constant ranges for the mutator to lie about): generated, never committed.
nodes=$build/xnnpack-nodes
PYTHONPATH="$root/python" "$python" "$root/tests/xnnpack/gen_nodes.py" "$nodes"
for f in "$nodes"/*.pte; do
  cp "$f" "$seeds/xnnpack-$(basename "$f")"
done

# A program exported with its debug information (Chain.stacktrace: frame lists, strings for
# the mutator to lie about): generated, never committed.
debug=$build/debuginfo-programs
mkdir -p "$debug"
"$python" -W ignore "$root/tests/debuginfo/gen_debuginfo.py" "$debug/debug_mlp.pte"
cp "$debug/debug_mlp.pte" "$seeds/debuginfo-debug_mlp.pte"

export ETCH_FUZZ_PTD=$fixtures/pte/addmul_external.ptd
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
echo "fuzzing for up to $runs executions or $secs s"
"$build/fuzz_program" -runs="$runs" -max_total_time="$secs" -max_len="$max_len" \
    -timeout=10 -rss_limit_mb=2048 \
    -dict="$root/fuzz/etch.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$corpus" "$seeds"
