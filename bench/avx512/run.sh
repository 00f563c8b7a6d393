#!/usr/bin/env bash
# etch on a real AVX-512 CPU, from a payload made by pack.sh (no build tools or exporter needed
# there; python3 with numpy, and onnxruntime for ONNX Runtime's side). Each stage writes its
# own file in RESULT_DIR and has its own time limit, so one that fails leaves the others:
#   cpu.txt     the processor: model, flags, clock, cores
#   tests.txt   the 9 kernel tests (every optimized kernel against the portable one on
#               generated shapes), first under ETCH_TEST_ISAS=avx512 alone (a test exits 2
#               unless the CPU and OS support it), then under every instruction set the CPU has
#   gemm.txt    bench_gemm against OpenBLAS: B prepacked under AVX-512 and under AVX2 (1 and
#               2 threads), then B row-major under AVX-512 (1 thread)
#   models.md   compare.py: etch AVX-512 vs etch AVX2 vs ONNX Runtime per model and thread count
#   paired.txt  bench_paired: AVX-512 vs AVX2 in one process (1 and 2 threads), 1 vs 2 and
#               1 vs 4 threads (AVX-512, back-to-back)
# Usage: run.sh PAYLOAD RESULT_DIR [STAGES]   (STAGES: default "cpu tests gemm models paired")
# Environment: PYTHON (default python3), ROUNDS (default 5), THREADS (default 1,2,4),
#              PAIRS (default 300), ISAS (the two sets compared, default avx512,avx2).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: run.sh PAYLOAD RESULT_DIR [STAGES]" >&2; exit 2; }
pl=$(cd "$1" && pwd)
mkdir -p "$2"
res=$(cd "$2" && pwd)
stages=${3:-cpu tests gemm models paired}
py=${PYTHON:-python3}
isas=${ISAS:-avx512,avx2}
isa_a=${isas%%,*} isa_b=${isas#*,}
untar() { # tar may lack xz on the target: Python's tarfile reads it
  mkdir -p "$2"
  tar -C "$2" -xJf "$1" 2>/dev/null ||
    "$py" -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}
[ -d "$pl/.lib" ] || [ ! -f "$pl/lib.tar.xz" ] || untar "$pl/lib.tar.xz" "$pl/.lib"
[ -d "$pl/tests" ] || [ ! -f "$pl/tests.tar.xz" ] || untar "$pl/tests.tar.xz" "$pl"
export LD_LIBRARY_PATH=$pl/.lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
stage() { echo "== $1 ($(date -u +%H:%M:%S))"; }

for s in $stages; do case $s in
cpu)
  stage cpu
  { echo "payload commit $(cat "$pl/commit" 2>/dev/null)"
    grep -m1 'model name' /proc/cpuinfo
    grep -m1 'cpu MHz' /proc/cpuinfo
    echo "logical CPUs: $(nproc)"
    echo "avx512 flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^avx512' | tr '\n' ' ')"
    echo "amx flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^amx' | tr '\n' ' ')"
    command -v lscpu >/dev/null && lscpu | grep -i -E 'model name|socket|core|thread|mhz|cache|numa'
    uname -a
    "$pl/bin/etch" --version
  } > "$res/cpu.txt" 2>&1
  cat "$res/cpu.txt" ;;
tests)
  stage tests
  : > "$res/tests.txt"
  for only in "$isa_a" ""; do
    echo "# ETCH_TEST_ISAS=${only:-(unset: every instruction set this CPU has)}" >> "$res/tests.txt"
    while IFS=$'\t' read -r name wd cmd args; do
      wd=${wd/#@/$pl/tests}; cmd=${cmd/#@/$pl/tests}; args=${args//@/$pl/tests}
      t0=$(date +%s.%N)
      (cd "$wd" && if [ -n "$only" ]; then export ETCH_TEST_ISAS=$only; else unset ETCH_TEST_ISAS; fi
       timeout 300 $cmd $args) > "$res/.t.log" 2>&1
      rc=$?
      t1=$(date +%s.%N)
      [ $rc -eq 0 ] || status=1
      printf '%-24s rc %d  %6.2f s  %s\n' "$name" $rc "$(awk "BEGIN {print $t1 - $t0}")" \
        "$(grep -v '^$' "$res/.t.log" | tail -n 1)" >> "$res/tests.txt"
      [ $rc -eq 0 ] || tail -n 20 "$res/.t.log" >> "$res/tests.txt"
    done < "$pl/tests/commands"
  done
  rm -f "$res/.t.log"
  cat "$res/tests.txt" ;;
gemm)
  stage gemm
  { for isa in "$isa_a" "$isa_b"; do timeout 120 "$pl/bin/bench_gemm" --isa $isa --prepacked-b; echo; done
    timeout 60 "$pl/bin/bench_gemm" --isa "$isa_a" --threads 1; } > "$res/gemm.txt" 2>&1 || status=1
  cat "$res/gemm.txt" ;;
models)
  stage models
  timeout 400 "$py" "$here/compare.py" "$pl" "$res/models" --threads "${THREADS:-1,2,4}" \
    --isas "$isas" --rounds "${ROUNDS:-5}" --python "$py" > "$res/models.log" 2>&1 || status=1
  rm -rf "$res/models.tmp"
  cat "$res/models.log" ;;
paired)
  stage paired
  { for m in "$pl"/models/*.pte; do
      for t in 1 2; do
        timeout 60 "$pl/bin/bench_paired" "$m" --compare isa --isa "$isa_a" --isa-b "$isa_b" \
          --threads $t --pairs "${PAIRS:-300}" --back-to-back
      done
      for t in 2 4; do
        timeout 60 "$pl/bin/bench_paired" "$m" --compare threads --threads 1 --threads-b $t \
          --pairs "${PAIRS:-300}" --back-to-back
      done
    done; } 2>&1 | sed "s|$pl/||" > "$res/paired.txt" || status=1
  cat "$res/paired.txt" ;;
*) echo "unknown stage '$s'" >&2; exit 2 ;;
esac; done
exit $status
