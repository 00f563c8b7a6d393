#!/usr/bin/env bash
# Build etch for arm64 with the cross compiler and run the kernel tests (portable golden cases
# and the optimized kernels under every ISA the emulated CPU has: scalar and NEON; chained
# convolution blocks) under
# qemu-user. Usage: run_arm64.sh SOURCE_DIR BUILD_DIR [ctest regex]
# Only the test programs the kernel tests need are built (TARGETS): Debian's gcc 12 cross
# compiler has an internal error vectorizing one unrelated test (tests/llm/test_sampler.c).
set -euo pipefail
src=$1
build=$2
regex=${3:-"^(kernels_unit|kernels_golden|opt_conv|optimized_eltwise|optimized_gemm|optimized_quant|optimized_qconv.core|optimized_sparse|optimized_nchwc|optimized_nchwc_pool|llm_attention.kernels|chain.blocks)$"}
TARGETS=${TARGETS:-"etch test_kernels kernels_golden test_optimized_conv test_optimized_eltwise test_optimized_gemm test_optimized_quant test_qconv_core test_optimized_sparse test_optimized_nchwc test_optimized_nchwc_pool test_sdpa_kv llm_attention_cases test_chain"}
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "FAIL: $tool not found: install Debian's gcc-aarch64-linux-gnu and qemu-user" >&2
    exit 1
  fi
done
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DETCH_BUILD_TESTS=ON \
  -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-aarch64-linux-gnu.cmake" >/dev/null
# only the test programs the regex selects (and what they need)
targets=$(ctest --test-dir "$build" -N -R "$regex" 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p')
if [ -z "$targets" ]; then
  echo "FAIL: no tests match '$regex' in the arm64 build" >&2
  exit 1
fi
cmake --build "$build" -j"${JOBS:-2}" --target $TARGETS
file "$build/etch" | grep aarch64 >/dev/null || { echo "FAIL: $build/etch is not an arm64 binary" >&2; exit 1; }
echo "arm64 build ok; running under qemu-aarch64: $(echo $targets | tr '\n' ' ')"
ctest --test-dir "$build" --output-on-failure -R "$regex"
