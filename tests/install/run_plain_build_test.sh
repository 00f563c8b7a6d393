#!/usr/bin/env bash
# The default build needs no Python (issue 16): a fresh configure + build of SOURCE with the
# tests off (the default) builds libetch.a, libetch.so and the CLI, and runs no interpreter.
# ETCH_PYTHON points at a stand-in that records any call and fails. Also: `make run` builds
# the shared library as well as the CLI (the exporter loads libetch.so right after it).
#
#   run_plain_build_test.sh SOURCE WORK CC
set -euo pipefail
src=$1 work=$2 cc=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
marker=$work/python-was-called
cat >"$work/no-python" <<EOS
#!/bin/sh
echo "\$@" >>"$marker"
exit 1
EOS
chmod +x "$work/no-python"

cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" \
      -DETCH_PYTHON="$work/no-python" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configure failed"; }
grep -q 'ETCH_BUILD_TESTS:BOOL=OFF' "$work/build/CMakeCache.txt" ||
  fail "ETCH_BUILD_TESTS is not off by default"
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "the default build failed"; }
for f in libetch.a libetch.so etch; do
  [ -e "$work/build/$f" ] || fail "the default build made no $f"
done
[ ! -e "$marker" ] || fail "the default build ran Python: $(cat "$marker")"
echo "ok: default build without Python: libetch.a libetch.so etch"

# make run: the CLI and the shared library (dry run: the commands only)
run_cmds=$(make -n -C "$src" run BUILD="$work/run-build") || fail "make -n run failed"
grep -Eq -- '--target etch etch_shared' <<<"$run_cmds" ||
  fail "make run does not build etch_shared: $run_cmds"
echo "ok: make run builds the CLI and libetch.so"
