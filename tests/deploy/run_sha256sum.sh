#!/usr/bin/env bash
# etch's SHA-256 against coreutils' sha256sum on every fixture file (and a few made here:
# empty, one byte, block-edge lengths). usage: run_sha256sum.sh TEST_SHA256 FIXTURES
set -euo pipefail
bin=$1 fixtures=$2
command -v sha256sum >/dev/null || { echo "sha256sum not found: skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/empty"
printf 'x' > "$tmp/one"
head -c 55 /dev/zero > "$tmp/z55"; head -c 56 /dev/zero > "$tmp/z56"
head -c 64 /dev/zero > "$tmp/z64"; head -c 100003 /dev/urandom > "$tmp/rand"
files=("$tmp"/* "$fixtures"/pte/* "$fixtures"/llm/*)
"$bin" --files "${files[@]}" > "$tmp/etch.out"
sha256sum "${files[@]}" > "$tmp/coreutils.out"
if ! diff "$tmp/coreutils.out" "$tmp/etch.out"; then
    echo "FAIL: etch's SHA-256 differs from sha256sum"; exit 1
fi
echo "${#files[@]} files agree with sha256sum"
echo "${#files[@]} passed, 0 failed"
