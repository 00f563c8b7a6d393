#!/usr/bin/env bash
# The installed tree, as a project that embeds etch sees it (tests/install/README.md).
#
#   run_install_test.sh tree|consumers|readme BUILD SOURCE FIXTURES WORK CC SANITIZE LIBDIR \
#                       INCLUDEDIR VERSION
#
# tree:      `cmake --install BUILD --prefix WORK/prefix`, then the layout: headers, libetch.a,
#            libetch.so.0 (its SONAME), the CLI, etch.pc's variables, the CMake package.
# consumers: consumer/ built from WORK/prefix alone four ways (find_package with etch::etch and
#            with etch::etch_static; cc with `pkg-config --cflags --libs etch` and with
#            `pkg-config --static ...`), each run on add.pte: 1 + 2 must print 3.
# readme:    README.md's C example ("The C API in one page"), extracted as written, compiled
#            with -Wall -Wextra -Werror against WORK/prefix and run on a good program and on
#            one whose operators this build lacks.
# SANITIZE=ON (the ASan + UBSan build): the consumers are built with the same flags, since the
# installed libraries need the sanitizer runtimes.
set -euo pipefail
# (no `producer | grep -q` below: grep -q exits at the first match, the producer may then die
# of SIGPIPE, and pipefail makes a match a failure)
mode=$1 build=$2 src=$3 fixtures=$4 work=$5 cc=$6 sanitize=$7 libdir_rel=$8 incdir_rel=$9
version=${10}
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config not found: install Debian's pkg-config"
san=()
if [ "$sanitize" = ON ]; then
  san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # a sanitizer report must not pass for a program's own exit status 1
  export ASAN_OPTIONS=detect_leaks=1:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1:exitcode=87
fi
add_pte=$fixtures/pte/add.pte
[ -f "$add_pte" ] || fail "fixture $add_pte not found"
# Only the installed tree's etch.pc (a system-wide one would otherwise be found too).
export PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$prefix/$libdir_rel/pkgconfig

# expect_output NAME EXPECTED COMMAND...: COMMAND exits 0 and prints exactly EXPECTED
expect_output() {
  local name=$1 expected=$2 out
  shift 2
  out=$("$@") || fail "$name: exit status $? (expected 0)"
  [ "$out" = "$expected" ] || fail "$name printed '$out', expected '$expected'"
  echo "ok: $name printed $(echo "$out" | tr '\n' ' ')"
}
# needed LIB BINARY: the NEEDED entries of BINARY's dynamic section
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

case $mode in
tree)
  rm -rf "$work"
  mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
    { cat "$work/install.log" >&2; fail "cmake --install $build --prefix $prefix"; }
  lib=$prefix/$libdir_rel
  for f in "$prefix/$incdir_rel/etch/etch.h" "$prefix/$incdir_rel/etch/module.h" \
           "$lib/libetch.a" "$lib/libetch.so.$version" "$prefix/bin/etch" \
           "$lib/pkgconfig/etch.pc" "$lib/cmake/etch/etchConfig.cmake" \
           "$lib/cmake/etch/etchConfigVersion.cmake" "$lib/cmake/etch/etchTargets.cmake"; do
    [ -f "$f" ] || fail "not installed: $f"
  done
  # every public header is installed
  for h in "$src"/include/etch/*.h; do
    cmp -s "$h" "$prefix/$incdir_rel/etch/$(basename "$h")" || fail "header $(basename "$h") not installed as is"
  done
  major=${version%%.*}
  [ "$(readlink "$lib/libetch.so")" = "libetch.so.$major" ] || fail "libetch.so -> $(readlink "$lib/libetch.so")"
  [ "$(readlink "$lib/libetch.so.$major")" = "libetch.so.$version" ] || fail "libetch.so.$major -> $(readlink "$lib/libetch.so.$major")"
  soname=$(readelf -d "$lib/libetch.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libetch.so.$major" ] || fail "SONAME of libetch.so.$version is '$soname'"
  echo "ok: libetch.so.$version, SONAME $soname"
  # no path of the build tree left in the installed library or CLI
  for b in "$lib/libetch.so.$version" "$prefix/bin/etch"; do
    if readelf -d "$b" | grep -E '\((RPATH|RUNPATH)\)' | grep -F "$build" >/dev/null; then
      fail "$b keeps a run path into the build tree"
    fi
  done
  # pkg-config variables: where the library and headers are
  [ "$(pkg-config --variable=prefix etch)" = "$prefix" ] || fail "etch.pc prefix=$(pkg-config --variable=prefix etch)"
  [ "$(pkg-config --variable=libdir etch)" = "$lib" ] || fail "etch.pc libdir=$(pkg-config --variable=libdir etch), expected $lib"
  [ "$(pkg-config --variable=includedir etch)" = "$prefix/$incdir_rel" ] || fail "etch.pc includedir=$(pkg-config --variable=includedir etch)"
  [ "$(pkg-config --modversion etch)" = "$version" ] || fail "etch.pc version $(pkg-config --modversion etch), project $version"
  for w in -lm -pthread; do
    pkg-config --static --libs etch | tr ' ' '\n' | grep -x -- "$w" >/dev/null || fail "pkg-config --static --libs etch lacks $w: $(pkg-config --static --libs etch)"
  done
  echo "ok: etch.pc: $(pkg-config --cflags --libs etch) | --static: $(pkg-config --static --libs etch)"
  expect_output "installed etch CLI" "$version" sh -c "'$prefix/bin/etch' --version | sed -n 's/^etch //p'"
  ;;

consumers)
  [ -f "$prefix/$libdir_rel/pkgconfig/etch.pc" ] || fail "no installed tree in $prefix (the install.tree test makes it)"
  lib=$(pkg-config --variable=libdir etch)
  major=${version%%.*}
  # CMake: find_package(etch VERSION CONFIG) from the prefix
  for target in etch::etch etch::etch_static; do
    b=$work/cmake-${target#etch::}
    rm -rf "$b"
    cmake -S "$src/tests/install/consumer" -B "$b" -DCMAKE_C_COMPILER="$cc" \
          -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
          -DETCH_TARGET="$target" -DETCH_REQUIRE_VERSION="$version" \
          -DCMAKE_C_FLAGS="${san[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" >"$b.log" 2>&1 ||
      { cat "$b.log" >&2; fail "configuring the consumer with $target"; }
    found=$(sed -n 's/^etch_DIR:PATH=//p' "$b/CMakeCache.txt")
    [ "$found" = "$lib/cmake/etch" ] || fail "find_package found etch in '$found', not $lib/cmake/etch"
    cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log" >&2; fail "building the consumer with $target"; }
    expect_output "cmake $target consumer" "etch $version
3" "$b/consumer" "$add_pte"
    if [ "$target" = etch::etch ]; then
      needed "$b/consumer" | grep -x "libetch.so.$major" >/dev/null || fail "$target consumer does not link libetch.so.$major: $(needed "$b/consumer" | tr '\n' ' ')"
    else
      ! needed "$b/consumer" | grep '^libetch' >/dev/null || fail "$target consumer links a shared libetch"
    fi
  done
  # the package's version check: another major version is refused
  b=$work/cmake-version
  rm -rf "$b"
  if cmake -S "$src/tests/install/consumer" -B "$b" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DETCH_REQUIRE_VERSION=$((major + 1)).0 >"$b.log" 2>&1; then
    fail "find_package(etch $((major + 1)).0) accepted version $version"
  fi
  grep -q "requested version" "$b.log" && grep -qF "etchConfig.cmake, version: $version" "$b.log" || { cat "$b.log" >&2; fail "find_package(etch $((major + 1)).0): not refused for its version"; }
  echo "ok: find_package(etch $((major + 1)).0) refuses $version"

  # pkg-config, shared: the installed libetch.so.0 found through the run path
  exe=$work/pc-shared
  "$cc" -std=c11 -Wall -Wextra -Werror "${san[@]}" "$src/tests/install/consumer/consumer.c" \
        $(pkg-config --cflags --libs etch) -Wl,-rpath,"$lib" -o "$exe"
  expect_output "pkg-config shared consumer" "etch $version
3" "$exe" "$add_pte"
  needed "$exe" | grep -x "libetch.so.$major" >/dev/null || fail "pkg-config shared consumer does not link libetch.so.$major"
  ldd "$exe" | grep -F "libetch.so.$major => $lib/libetch.so.$major" >/dev/null || fail "pkg-config shared consumer resolves libetch elsewhere: $(ldd "$exe" | grep libetch)"
  echo "ok: pkg-config shared consumer: $(ldd "$exe" | grep libetch | tr -s ' \t' ' ')"

  # pkg-config --static: a self-contained binary (-static). The sanitizer runtimes cannot be
  # linked statically, so the sanitized build links libetch.a alone statically (libc and libm
  # shared: the libraries --static names after -letch are then needed as shared ones).
  exe=$work/pc-static
  if [ "$sanitize" = ON ]; then
    "$cc" -std=c11 -Wall -Wextra -Werror "${san[@]}" "$src/tests/install/consumer/consumer.c" \
          $(pkg-config --static --cflags --libs etch |
            sed 's/\(^\| \)-letch\( \|$\)/ -Wl,-Bstatic -letch -Wl,-Bdynamic /') -o "$exe"
    ! needed "$exe" | grep '^libetch' >/dev/null || fail "pkg-config static consumer links a shared libetch"
  else
    "$cc" -std=c11 -Wall -Wextra -Werror -static "$src/tests/install/consumer/consumer.c" \
          $(pkg-config --static --cflags --libs etch) -o "$exe"
    readelf -d "$exe" | grep 'There is no dynamic section' >/dev/null || fail "pkg-config -static consumer is not static: $(needed "$exe" | tr '\n' ' ')"
  fi
  expect_output "pkg-config static consumer" "etch $version
3" "$exe" "$add_pte"
  ;;

readme)
  [ -f "$prefix/$libdir_rel/pkgconfig/etch.pc" ] || fail "no installed tree in $prefix (the install.tree test makes it)"
  lib=$(pkg-config --variable=libdir etch)
  ex=$work/readme_example.c
  # the first ```c block after the heading, as written
  awk '/^## The C API in one page/ {s = 1} s && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' \
      "$src/README.md" >"$ex"
  [ -s "$ex" ] || fail "no C example under 'The C API in one page' in README.md"
  grep -q 'int main' "$ex" || fail "README.md's C example has no main()"
  "$cc" -std=c11 -Wall -Wextra -Werror "${san[@]}" "$ex" $(pkg-config --cflags --libs etch) \
        -o "$work/readme_example"
  export LD_LIBRARY_PATH=$lib
  expect_output "README example on add.pte (1 + 1)" "2" "$work/readme_example" "$add_pte"
  # refused programs: exit status 1 (not a crash or a sanitizer's), etch's message on stderr
  check_refused() {
    local pte=$1 rc=0
    shift
    "$work/readme_example" "$pte" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
    [ "$rc" = 1 ] || { cat "$work/err.txt" >&2; fail "README example on $pte: exit status $rc, expected 1"; }
    [ ! -s "$work/out.txt" ] || fail "README example on $pte printed output: $(cat "$work/out.txt")"
    for want in "$@"; do
      grep -qF -- "$want" "$work/err.txt" || fail "README example on $pte: '$want' not in: $(cat "$work/err.txt")"
    done
    ! grep -q Sanitizer "$work/err.txt" || { cat "$work/err.txt" >&2; fail "README example on $pte: sanitizer report"; }
    echo "ok: README example refuses $(basename "$pte"): $(head -c 160 "$work/err.txt")"
  }
  # ExecuTorch's Cortex-M keyword spotter (cortex_m:: operators, an input whose dim order
  # differs from the contiguous one only in a size-1 dim): runs, 12 scores
  "$work/readme_example" "$fixtures/pte/kws_dscnn_cortexm.pte" >"$work/out.txt" 2>"$work/err.txt" ||
      { cat "$work/err.txt" >&2; fail "README example on kws_dscnn_cortexm.pte failed"; }
  [ "$(wc -l <"$work/out.txt")" = 12 ] || fail "README example on kws_dscnn_cortexm.pte printed: $(cat "$work/out.txt")"
  echo "ok: README example runs kws_dscnn_cortexm.pte"
  check_refused "$fixtures/pte/not_a_program.pte" "error: NotAProgram"
  check_refused "$work/no_such_file.pte" "error: AccessFailed" "no_such_file.pte"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
