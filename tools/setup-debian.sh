#!/usr/bin/env bash
# Install, by name, every Debian 12 (bookworm) package that etch's build and test suite need:
#
#   tools/setup-debian.sh [--build] [--check | --update] [PACKAGE ...]
#
# Run as root (or as a user who has sudo). Packages already installed are left alone; when all
# are, it only asks dpkg (well under a second: no apt-get update). PACKAGE ...: more packages
# to install with the list. --check: install nothing, list what is missing, exit 1 if anything
# is. --build: only what building the library and CLI needs (README's `make run`), not the
# test suite's list. --update: run apt-get update and apt-get install on the whole list even
# when all is installed (.ci/run: a package that a newer list names, or a stale index, cannot
# hide behind what a machine already has). README.md's commands
# (`tools/setup-debian.sh --build && make run`, `tools/setup-debian.sh && make test`) and
# .ci/run (`--update`) use it.
set -euo pipefail

# One group per line; add a package to the group it is needed by.
packages=(
  # the library, CLI and tests: C compiler, CMake, readelf/nm, file(1), pkg-config (tests/install)
  build-essential cmake make gcc binutils file pkg-config
  # fuzzing (fuzz/run_fuzz.sh) with libFuzzer
  clang libclang-rt-14-dev
  # golden data and the exporter: Debian's PyTorch 1.13, numpy, sentencepiece; pip/venv for
  # installing python/ as a package; jinja2 (chat templates)
  python3 python3-numpy python3-torch python3-torchvision python3-pip python3-setuptools
  python3-venv python3-sentencepiece python3-jinja2
  # the story generator's word list (python/etch/llm)
  wamerican
  # arm64/NEON kernels: cross-compiled and tested under qemu-user (tests/cross/run_arm64.sh)
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  # microcontroller builds (Cortex-M4F/M7/M55 firmware) and the emulated boards they run on
  gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
  # audio front end tests: sox (the resampler's reference), flite (synthesized speech), real
  # recordings (pocketsphinx-testdata at 16 kHz, Asterisk's prompts at 8 kHz)
  sox flite pocketsphinx-testdata asterisk-core-sounds-en-wav
  # bench/gemm's side-by-side sgemm
  libopenblas-dev
  # AVX-512 kernels on Bochs' emulated CPU (tests/cross/run_avx512.sh)
  bochs bochsbios vgabios isolinux syslinux-common genisoimage linux-image-amd64 tiny-initramfs
)

check_only=0
build_only=0
update=0
extra=()
for a in "$@"; do
  case $a in
    --check) check_only=1 ;;
    --build) build_only=1 ;;
    --update) update=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "setup-debian.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
    *) extra+=("$a") ;;
  esac
done
# the library and CLI alone: a C compiler, make, CMake
[ $build_only = 1 ] && packages=(build-essential cmake make gcc binutils)
packages+=(${extra[@]+"${extra[@]}"})

command -v dpkg-query >/dev/null && command -v apt-get >/dev/null ||
  { echo "setup-debian.sh: this is not a Debian system (no dpkg-query / apt-get)" >&2; exit 1; }

# missing PACKAGE...: those of PACKAGE... that dpkg does not have installed
missing() {
  local installed
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null |
              awk '$NF == "installed" {print $1}') || true
  local p
  for p in "$@"; do
    grep -qxF -- "$p" <<<"$installed" || echo "$p"
  done
}

mapfile -t need < <(missing "${packages[@]}")
# Node.js with npm (the tokenizer and llama.cpp references come from committed npm lock
# files): an installed node + npm of any origin will do, else Debian's.
if [ $build_only = 0 ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  mapfile -t -O "${#need[@]}" need < <(missing nodejs npm)
fi

[ $update = 1 ] && [ $check_only = 1 ] &&
  { echo "setup-debian.sh: --check and --update contradict each other" >&2; exit 2; }
if [ $update = 1 ]; then
  need=("${packages[@]}")   # apt-get leaves those already installed alone
  if [ $build_only = 0 ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
    need+=(nodejs npm)
  fi
fi
if [ ${#need[@]} -eq 0 ]; then
  echo "setup-debian.sh: all ${#packages[@]} packages$([ $build_only = 1 ] || echo " and node + npm") are installed"
  exit 0
fi
if [ $check_only = 1 ]; then
  echo "setup-debian.sh: missing: ${need[*]}" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "setup-debian.sh: ${#need[@]} packages to install (${need[*]}): run this as root" \
         "(no sudo here)" >&2
    exit 1
  fi
fi

if [ $update = 1 ]; then
  echo "setup-debian.sh: apt-get update, then apt-get install of all ${#need[@]} packages"
else
  echo "setup-debian.sh: installing ${#need[@]} packages: ${need[*]}"
fi
start=$(date +%s)
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
mapfile -t still < <(missing "${need[@]}")
if [ ${#still[@]} -ne 0 ]; then
  echo "setup-debian.sh: still not installed after apt-get: ${still[*]}" >&2
  exit 1
fi
echo "setup-debian.sh: ${#need[@]} packages installed in $(( $(date +%s) - start )) s"
