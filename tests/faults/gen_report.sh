#!/usr/bin/env bash
# Regenerate tests/faults/REPORT.md from test_alloc_fail's output.
#   tests/faults/gen_report.sh [BUILD_DIR]   (default build-asan; run after building the tests
#                                            and running `ctest --test-dir BUILD_DIR -R faults`,
#                                            which exports stories260K and the chat model
#                                            into BUILD_DIR)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build-asan}
case $build in /*) ;; *) build=$root/$build ;; esac
bin=$build/tests/faults/test_alloc_fail
pte=$build/tests/faults/stories260K.pte
[ -x "$bin" ] || { echo "no $bin: build the tests first" >&2; exit 1; }
[ -f "$pte" ] && [ -f "$build/tests/faults/chat/chat.pte" ] ||
  { echo "no $pte or chat models: run ctest --test-dir $build -R faults first" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
chat=$build/tests/faults/chat
ASAN_OPTIONS=detect_leaks=1 "$bin" "$root/../shared/fixtures" "${TMPDIR:-/tmp}" \
  "$pte" "$root/../shared/fixtures/llm/tok512.bin" \
  "$root/models/default/model.pte" "$root/models/default/tokenizer.model" \
  "$chat/chat.pte" "$chat/tokenizer.json" >"$out"
if grep -q ' 0 failed$' "$out"; then status=passed; else status=FAILED; fi
{
  sed -n '1,/^<!-- table -->$/p' "$root/tests/faults/REPORT.md"
  echo
  echo "Build: \`$(basename "$build")\` ($(grep -q 'ETCH_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" && echo 'ASan + UBSan + LeakSanitizer' || echo 'no sanitizers')); test $status."
  echo
  sed -n '/^| operation/,/^| \*\*total/p' "$out"
  echo
  echo "<!-- end of table -->"
  sed -n '/^<!-- end of table -->$/,$p' "$root/tests/faults/REPORT.md" | tail -n +2
} >"$out.md"
mv "$out.md" "$root/tests/faults/REPORT.md"
echo "wrote $root/tests/faults/REPORT.md ($status)"
