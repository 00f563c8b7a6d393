#!/bin/sh
# Cross-compile dot_check.c with src/kernels/portable/cortex_m_dot.c for three cores and run
# each under qemu-system-arm: Cortex-M4 (DSP: SMLAD), Cortex-M7 (DSP), Cortex-M55 (Helium:
# VMLADAVA); the SIMD dot must equal the portable loop bit for bit.
# Usage: run_dot_check.sh SRC_DIR WORK_DIR
set -eu
src=$1 work=$2
here=$src/tests/cortex_m/mcu
cc=arm-none-eabi-gcc
for tool in $cc qemu-system-arm; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not found (tools/setup-debian.sh installs it)"; exit 1; }
done
mkdir -p "$work"
status=0
for target in "cortex-m4 mps2-an386 dsp -mfloat-abi=soft" "cortex-m7 mps2-an500 dsp -mfloat-abi=soft" \
              "cortex-m55 mps3-an547 mve -mfloat-abi=hard"; do
  set -- $target
  cpu=$1 board=$2 kind=$3 fabi=$4
  elf=$work/dot_$cpu.elf
  $cc -std=c11 -O2 -Wall -Wextra -Werror -mcpu=$cpu -mthumb $fabi -ffreestanding -nostdlib \
      -DETCH_CM_DOT_KIND="\"$cpu\"" -I"$src/src" -I"$src/include" -T "$here/mcu.ld" \
      "$here/dot_check.c" "$src/src/kernels/portable/cortex_m_dot.c" -lgcc -o "$elf"
  # the SIMD instructions must be in the binary (else the check compares the loop to itself)
  case $kind in
    dsp) want=smlad arch=armv7e-m ;;
    mve) want='vmla[d]*va' arch=armv8.1-m.main ;;  # objdump prints VMLADAVA as its alias vmlava
  esac
  arm-none-eabi-objdump -d -m $arch "$elf" | grep -q "$want" || { echo "FAIL $cpu: no $want in the binary"; status=1; continue; }
  if timeout 120 qemu-system-arm -M $board -cpu $cpu -nographic -semihosting -monitor none \
       -serial none -kernel "$elf"; then
    echo "ok $cpu ($board, $want)"
  else
    echo "FAIL $cpu ($board)"; status=1
  fi
done
exit $status
