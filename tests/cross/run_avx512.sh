#!/usr/bin/env bash
# Run the kernel tests of a build tree on an emulated AVX-512 CPU: Bochs (Debian's, with its
# Skylake-X model) boots Debian's kernel with an initramfs holding the tests' own executables
# and data (avx512_initramfs.py) and a static /init (avx512_init.c) that checks AVX-512 is
# usable and runs them with ETCH_TEST_ISAS=avx512: each test then checks the optimized
# kernels' AVX-512 variants against the portable ones (the host runs the other variants).
#
# Usage: run_avx512.sh BUILD_DIR [ctest regex]
# Needs: bochs, bochsbios, vgabios, isolinux, syslinux-common, genisoimage (apt) and a kernel
# image (linux-image-amd64: /boot/vmlinuz-*, or ETCH_AVX512_KERNEL=path). Takes about 15 minutes
# of one core: Bochs interprets every instruction.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
regex=${2:-"^(opt_conv|optimized_eltwise|optimized_gemm|optimized_quant|optimized_nchwc|optimized_nchwc_pool|llm_attention.kernels|chain.blocks|layout.blocked_choice|prepack)$"}
timeout_s=${ETCH_AVX512_TIMEOUT:-3600}

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v bochs >/dev/null || fail "bochs not found: install Debian's bochs, bochsbios and vgabios"
command -v genisoimage >/dev/null || fail "genisoimage not found: install Debian's genisoimage"
isolinux=/usr/lib/ISOLINUX/isolinux.bin
ldlinux=/usr/lib/syslinux/modules/bios/ldlinux.c32
[ -f "$isolinux" ] || fail "$isolinux missing: install Debian's isolinux"
[ -f "$ldlinux" ] || fail "$ldlinux missing: install Debian's syslinux-common"
for f in /usr/share/bochs/BIOS-bochs-latest /usr/share/vgabios/vgabios.bin; do
  [ -f "$f" ] || fail "$f missing: install Debian's bochsbios and vgabios"
done
kernel=${ETCH_AVX512_KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)}
[ -n "$kernel" ] && [ -r "$kernel" ] ||
  fail "no kernel image: install Debian's linux-image-amd64, or set ETCH_AVX512_KERNEL"

work=$build/cross-avx512
rm -rf "$work"
mkdir -p "$work/iso/isolinux"
cc -O2 -static -Wall -Werror -o "$work/init" "$here/avx512_init.c"
ctest --test-dir "$build" --show-only=json-v1 > "$work/tests.json"
/usr/bin/python3 "$here/avx512_initramfs.py" "$work/tests.json" "$regex" "$work/init" \
  "$work/iso/initrd.img"
mv "$work/iso/initrd.img.commands" "$work/commands" # the tests in the image, to check the run
cp "$isolinux" "$ldlinux" "$work/iso/isolinux/"
cp "$kernel" "$work/iso/vmlinuz"
# clearcpuid=xsaves,xsavec: Bochs 2.7 reports the standard-format XSAVE size for the compacted
# format (CPUID 0xD.1 EBX); Linux 6.1 finds the mismatch and turns XSAVE, and so AVX, off.
cat > "$work/iso/isolinux/isolinux.cfg" <<'EOF'
serial 0 115200
default etch
prompt 0
timeout 0
label etch
  kernel /vmlinuz
  append initrd=/initrd.img console=ttyS0,115200 acpi=off nosmp nokaslr mitigations=off clearcpuid=xsaves,xsavec panic=-1 rdinit=/init
EOF
genisoimage -quiet -o "$work/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table -R "$work/iso"
cat > "$work/bochsrc" <<EOF
megs: 1024
cpu: model=corei7_skylake_x, count=1, ips=200000000
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path=$work/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$work/serial.log
display_library: rfb, options="timeout=0"
speaker: enabled=0
sound: waveoutdrv=dummy, waveindrv=dummy, midioutdrv=dummy
clock: sync=none
log: $work/bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
debug: action=ignore
EOF
printf 'c\nquit\n' > "$work/debugger.rc" # Debian's bochs has the debugger: continue at once
echo "booting Linux on Bochs' Skylake-X model (AVX-512); serial console: $work/serial.log"
start=$(date +%s)
set +e
timeout "$timeout_s" bochs -q -f "$work/bochsrc" -rc "$work/debugger.rc" \
  > "$work/bochs.out" 2>&1 < /dev/null
rc=$?
set -e
echo "bochs ended after $(( $(date +%s) - start )) s (status $rc)"
serial=$work/serial.log
[ -f "$serial" ] || fail "no serial output (see $work/bochs.out)"
# the tests' own output, without the kernel's messages
grep -v '^\[ *[0-9]*\.[0-9]*\]' "$serial" | sed -n '/ETCH-AVX512:/,$p'
grep -q '^ETCH-AVX512: avx512 usable' "$serial" ||
  fail "AVX-512 was not usable in the emulated machine (see $serial)"
grep -q '^ETCH-AVX512: done' "$serial" ||
  fail "the run did not finish (timeout ${timeout_s} s, or a crash; see $serial)"
status=0
while IFS=$'\t' read -r name _; do
  line=$(grep -a "^ETCH-AVX512: exit $name " "$serial" | tr -d '\r' || true)
  if [ -z "$line" ]; then
    echo "FAIL: $name did not run" >&2; status=1
  elif [ "${line##* }" != 0 ]; then
    echo "FAIL: $name exited with status ${line##* }" >&2; status=1
  else
    echo "ok: $name"
  fi
done < "$work/commands"
grep -aq 'avx512 (run)' "$serial" || { echo "FAIL: no test ran its AVX-512 variant" >&2; status=1; }
exit $status
