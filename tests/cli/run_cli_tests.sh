#!/usr/bin/env bash
# End-to-end tests of the etch CLI against the shared fixtures.
#
#   run_cli_tests.sh ETCH NPY_TOOL FIXTURES_DIR GENERATED_DIR PYTHON
#
# GENERATED_DIR holds what the build generated: gen_ptd_layouts.py's copies of the fixture's
# external data in the current (current.ptd) and the legacy FlatTensor layout (legacy.ptd,
# legacy_lying.ptd), and gen_value_outputs.py's value_outputs.pte. PYTHON (with numpy) reads
# back the non-tensor outputs.
#
# Each check runs one command and compares its exit status (and, where given, a pattern in
# its stdout/stderr). Inputs are written and outputs checked with npy_tool (no numpy).
set -u

. "$(dirname "${BASH_SOURCE[0]}")/../harness/cli_lib.sh"
ETCH=$(abspath "${1:?usage: run_cli_tests.sh ETCH NPY_TOOL FIXTURES_DIR}")
NPY=$(abspath "${2:?missing NPY_TOOL}")
FIX=$(abspath "${3:?missing FIXTURES_DIR}")/pte
LAYOUTS=$(abspath "${4:?missing GENERATED_DIR}")
PY=${5:?missing PYTHON}
[ -f "$LAYOUTS/legacy.ptd" ] && [ -f "$LAYOUTS/value_outputs.pte" ] ||
    cli_abort "no generated files in $LAYOUTS"
for f in "$ETCH" "$NPY"; do
    [ -x "$f" ] || cli_abort "not an executable: $f"
done
[ -f "$FIX/add.pte" ] || cli_abort "no fixtures in $FIX"
cli_begin etch_cli

# npy_check FILE DTYPE SHAPE VALUES
npy_check() {
    if "$NPY" check "$@" 2>"$ERR"; then pass; else fail "npy_tool check $*"; fi
}

cd "$WORK" || exit 1

# ---- help and usage -------------------------------------------------------------------------
expect 0 "$ETCH" --help;               has_out '^usage: etch <command>'
expect 0 "$ETCH" -h;                   has_out 'verify'
expect 0 "$ETCH" help;                 has_out 'commands:'
expect 0 "$ETCH" help run;             has_out '--num-executions'
expect 0 "$ETCH" help info;            has_out '^usage: etch info FILE'
expect 0 "$ETCH" help verify;          has_out '--rtol'
expect 0 "$ETCH" run --help;           has_out '--load-mode'
expect 0 "$ETCH" info -h;              has_out 'usage: etch info'
expect 0 "$ETCH" verify x.bpte --help; has_out 'usage: etch verify'
expect 0 "$ETCH" --version;            has_out '^etch [0-9]+\.[0-9]+\.[0-9]+'
expect 0 "$ETCH" -V;                   has_out '^etch [0-9]+\.[0-9]+\.[0-9]+$'
expect 0 "$ETCH" help help;            has_out '^usage: etch <command>'; has_out 'etch help <command>'
expect 2 "$ETCH";                      has_err 'usage'
expect 2 "$ETCH" frobnicate;           has_err "unknown command 'frobnicate'"
expect 2 "$ETCH" --frobnicate;         has_err "unknown option '--frobnicate'"
expect 2 "$ETCH" help frobnicate;      has_err "unknown command"
expect 2 "$ETCH" help run info

# ---- bad flags --------------------------------------------------------------------------------
ADD=$FIX/add.pte
expect 2 "$ETCH" run;                                      has_err 'missing FILE'
expect 2 "$ETCH" run "$ADD" "$ADD";                        has_err 'expected one FILE'
expect 2 "$ETCH" run "$ADD" --bogus;                       has_err "unknown option '--bogus'"
expect 2 "$ETCH" run "$ADD" -x;                            has_err "unknown option '-x'"
expect 2 "$ETCH" run "$ADD" --method;                      has_err '--method needs a value'
expect 2 "$ETCH" run "$ADD" --method --print-output;       has_err '--method needs a value'
expect 2 "$ETCH" run "$ADD" --method=;                     has_err 'non-empty value'
expect 2 "$ETCH" run "$ADD" --method a --method b;         has_err 'more than once'
expect 2 "$ETCH" run "$ADD" --print-output --print-output; has_err 'more than once'
expect 2 "$ETCH" run "$ADD" --print-output=yes;            has_err 'does not take a value'
expect 2 "$ETCH" run "$ADD" --num-executions 0;            has_err 'out of range'
expect 2 "$ETCH" run "$ADD" --num-executions -3;           has_err 'out of range'
expect 2 "$ETCH" run "$ADD" --num-executions abc;          has_err 'not an integer'
expect 2 "$ETCH" run "$ADD" --num-executions 5x;           has_err 'not an integer'
expect 2 "$ETCH" run "$ADD" --num-executions 2.5;          has_err 'not an integer'
expect 2 "$ETCH" run "$ADD" --num-executions 99999999999999999999; has_err 'not an integer'
expect 2 "$ETCH" run "$ADD" --num-executions;              has_err 'needs a value'
expect 2 "$ETCH" run "$ADD" --load-mode fast;              has_err "neither 'mmap' nor 'read'"
expect 2 "$ETCH" run "$ADD" --inputs a.npy,,b.npy;         has_err 'empty file name'
expect 2 "$ETCH" run "$ADD" --inputs a.npy,;               has_err 'empty file name'
expect 2 "$ETCH" verify;                                   has_err 'missing FILE'
expect 2 "$ETCH" verify x.bpte --rtol -1;                  has_err 'out of range'
expect 2 "$ETCH" verify x.bpte --rtol abc;                 has_err 'not a number'
expect 2 "$ETCH" verify x.bpte --atol nan;                 has_err 'not a number'
expect 2 "$ETCH" verify x.bpte --atol 1e999;               has_err 'not a number'
expect 2 "$ETCH" verify x.bpte --atol 0.1x;                has_err 'not a number'
expect 2 "$ETCH" verify x.bpte --atol;                     has_err 'needs a value'
expect 2 "$ETCH" verify x.bpte --frob;                     has_err "unknown option"
expect 2 "$ETCH" info;                                     has_err 'missing FILE'
expect 2 "$ETCH" info a.pte b.pte;                         has_err 'expected one FILE'
expect 2 "$ETCH" info --verbose a.pte;                     has_err "unknown option '--verbose'"

# ---- info on every fixture ----------------------------------------------------------------------
for f in add.pte add_constant_segment.pte linear_constant_buffer.pte addmul_external.pte \
         bundled_add_mul.bpte lenet_bundled.bpte; do
    expect 0 "$ETCH" info "$FIX/$f"; has_out "^method 'forward'"
done
expect 0 "$ETCH" info "$ADD"
has_out '^identifier: ET12'
has_out '^extended header: no'
has_out 'input 0: Tensor Float \[1\] static, planned'
has_out 'aten::add\.out +1 call$'
has_out 'arena 1: [0-9]+ bytes'
has_out 'method pool: [0-9]+ bytes'
expect 0 "$ETCH" info "$FIX/add_constant_segment.pte"
has_out '^extended header: yes'
has_out '^header length: 32 bytes'
has_out '^segment base offset: [0-9]+'
has_out '^segments: 1'
expect 0 "$ETCH" info "$FIX/linear_constant_buffer.pte"; has_out 'legacy inline constant_buffer'
expect 0 "$ETCH" info "$FIX/addmul_external.pte";        has_out 'needs external data: yes'
expect 0 "$ETCH" info "$FIX/addmul_external.ptd";        has_out '^entries: 2'
expect 0 "$ETCH" info "$FIX/bundled_add_mul.bpte";       has_out '^bundled test cases: 10$'
expect 0 "$ETCH" info "$FIX/lenet_bundled.bpte";         has_out '^bundled test cases: 2$'
has_out 'aten::convolution\.out'
expect 1 "$ETCH" info "$FIX/legacy_et02.pte";            has_err '^error: IncompatibleVersion: '
expect 1 "$ETCH" info "$FIX/not_a_program.pte";          has_err '^error: NotAProgram: '
expect 1 "$ETCH" info "$WORK/missing.pte";               has_err '^error: AccessFailed: '

# ---- run ----------------------------------------------------------------------------------------
"$NPY" write one.npy float32 1 1
"$NPY" write two.npy float32 1 2
"$NPY" write x3.npy float32 3 1,2,3
"$NPY" write m22.npy float32 2x2 1,2,3,4
"$NPY" write d1.npy float64 1 1
"$NPY" write one_2d.npy float32 1x1 1

expect 0 "$ETCH" run "$ADD" --inputs one.npy,two.npy --output-dir out --print-output
has_out '^loaded method .forward.* in [0-9.]+ ms'
has_out '^execution 1: [0-9.]+ ms'
has_out '^output 0: Tensor Float \[1\] = \[3\]'
npy_check out/output_0.npy float32 1 3

expect 0 "$ETCH" run "$FIX/add_constant_segment.pte" --inputs x3.npy --output-dir out/a/b
npy_check out/a/b/output_0.npy float32 3 2,3,4

expect 0 "$ETCH" run "$FIX/linear_constant_buffer.pte" --inputs m22.npy --output-dir out/lin \
    --load-mode read
npy_check out/lin/output_0.npy float32 2x2 5,8,11,14

expect 0 "$ETCH" run "$FIX/addmul_external.pte" --data "$FIX/addmul_external.ptd" \
    --inputs m22.npy --output-dir out/ext --print-output
has_out '= \[5, 8, 11, 14\]'
npy_check out/ext/output_0.npy float32 2x2 5,8,11,14
expect 1 "$ETCH" run "$FIX/addmul_external.pte" --inputs m22.npy; has_err '^error: NotFound: .*\.ptd'
# the CLI names its flag, not the library's struct field
has_err "^error: NotFound: method 'forward' needs external tensor data: give its \.ptd file with --data FILE\.ptd$"
if grep -q 'etch_module_options' "$ERR"; then fail "run without --data names a C field"; else pass; fi
expect 1 "$ETCH" bench "$FIX/addmul_external.pte" --iterations 1; has_err 'with --data FILE\.ptd$'
if grep -q 'etch_module_options' "$ERR"; then fail "bench without --data names a C field"; else pass; fi

# Both FlatTensor layouts load and give the same result; a legacy file that lies is refused by
# the tensor's name
for f in current legacy; do
    expect 0 "$ETCH" info "$LAYOUTS/$f.ptd";                 has_out '^entries: 2'
    expect 0 "$ETCH" run "$FIX/addmul_external.pte" --data "$LAYOUTS/$f.ptd" \
        --inputs m22.npy --output-dir "out/ext_$f"
    npy_check "out/ext_$f/output_0.npy" float32 2x2 5,8,11,14
done
expect 1 "$ETCH" run "$FIX/addmul_external.pte" --data "$LAYOUTS/legacy_lying.ptd" --inputs m22.npy
has_err "^error: InvalidExternalData: .*legacy_lying\.ptd: \.ptd \(legacy layout\): tensor 'b' \[28, \+16\) lies outside its segment 0 of 32 bytes$"

# Non-tensor outputs are written as 0-d arrays: Strings as NumPy strings (np.load gives back
# the str), Int / Double / Bool as int64 / float64 / bool
expect 0 "$ETCH" run "$LAYOUTS/value_outputs.pte" --inputs x3.npy --output-dir out/values --print-output
has_out '^output 1: String "linear\.weight"$'
has_out '^wrote 7 outputs to out/values$'
if "$PY" -c '
import numpy as np
want = [np.array([2, 4, 6], np.float32), np.array("linear.weight"), np.array("na\u00efve \u2713"),
        np.array(""), np.array(7), np.array(2.5), np.array(True)]
for i, w in enumerate(want):
    a = np.load("out/values/output_%d.npy" % i)
    assert a.dtype == w.dtype and a.shape == w.shape and (a == w).all(), (i, a, a.dtype, w.dtype)
' 2>"$ERR"; then pass; else fail "non-tensor outputs read back differently"; fi

# Default inputs are ones: 1 + 1 = 2, [1,1,1] + 1 = [2,2,2].
expect 0 "$ETCH" run "$ADD" --output-dir out/def --num-executions 3
has_out '^execution 3: '
has_out '^3 executions: mean'
npy_check out/def/output_0.npy float32 1 2
expect 0 "$ETCH" run "$FIX/add_constant_segment.pte" --method forward --print-output
has_out '= \[2, 2, 2\]'
expect 0 "$ETCH" run "$FIX/bundled_add_mul.bpte" --print-output;   has_out 'Tensor Int \[2, 2\]'

expect 2 "$ETCH" run "$ADD" --inputs one.npy;              has_err 'takes 2 inputs, --inputs names 1 file'
expect 2 "$ETCH" run "$ADD" --inputs one.npy,two.npy,one.npy; has_err 'names 3 files'
expect 1 "$ETCH" run "$ADD" --inputs one.npy,d1.npy;       has_err "^error: InvalidArgument: 'd1.npy': input 1: dtype Double"
expect 1 "$ETCH" run "$ADD" --inputs one.npy,one_2d.npy;   has_err "^error: [A-Za-z]+: 'one_2d.npy': input 1"
# a mismatch names the shape the method takes (its kind) and the one given, and the dtypes
has_err "input 1: rank 2, expected 1: the method takes Float \[1\] \(static shape\), given Float \[1, 1\]$"
expect 1 "$ETCH" run "$ADD" --inputs one.npy,x3.npy
has_err "^error: NotSupported: 'x3.npy': input 1: .*: the method takes Float \[1\] \(static shape\), given Float \[3\]$"
expect 1 "$ETCH" run "$ADD" --inputs one.npy,d1.npy
has_err "input 1: dtype Double, expected Float: the method takes Float \[1\] \(static shape\), given Double \[1\]$"
# a bad ETCH_ISA reads clearly (the message was once formatted over itself)
expect 1 env ETCH_ISA=bogus "$ETCH" run "$ADD"
has_err "^error: NotSupported: ETCH_ISA=bogus: unknown instruction set 'bogus' \(expected scalar, avx2, avx512 or neon\)$"
expect 1 "$ETCH" run "$ADD" --inputs one.npy,nope.npy;     has_err '^error: AccessFailed: input 1.*nope\.npy'
printf 'garbage' >bad.npy
expect 1 "$ETCH" run "$ADD" --inputs one.npy,bad.npy;      has_err '^error: InvalidArgument: input 1.*bad magic'
expect 1 "$ETCH" run "$ADD" --method backward;             has_err '^error: NotFound: '
expect 1 "$ETCH" run "$FIX/legacy_et02.pte";               has_err '^error: IncompatibleVersion: '
expect 1 "$ETCH" run "$FIX/not_a_program.pte";             has_err '^error: NotAProgram: '
expect 1 "$ETCH" run "$WORK/missing.pte";                  has_err '^error: AccessFailed: '
touch afile
expect 1 "$ETCH" run "$ADD" --output-dir afile/sub;        has_err '^error: AccessFailed: '
# a directory name too long for its files is refused, never cut short
expect 2 "$ETCH" run "$ADD" --output-dir "$(printf 'd%.0s' $(seq 4100))"; has_err 'too long'
# outputs are replaced atomically: a symbolic link where an output goes is replaced, the file
# it points to is untouched, and no temporary is left
mkdir -p out/sym && printf 'keep me' >victim && ln -sf "$WORK/victim" out/sym/output_0.npy
expect 0 "$ETCH" run "$ADD" --output-dir out/sym
if [ "$(cat victim)" = "keep me" ] && [ ! -L out/sym/output_0.npy ] &&
    [ -z "$(ls out/sym | grep -v '^output_0.npy$')" ]; then pass; else fail "output written through a link"; fi
npy_check out/sym/output_0.npy float32 1 2
# names from the file reach the terminal escaped: a method named "ESC[2Jfor" (the fixture's
# "forward" with an escape sequence) is shown as \x1b[2Jfor, with no raw control byte
LC_ALL=C sed 's/forward/\x1b[2Jfor/' "$ADD" >escaped.pte
expect 0 "$ETCH" info escaped.pte;                         has_out '\\x1b\[2Jfor'
if LC_ALL=C grep -q $'\x1b' "$OUT"; then fail "a raw escape byte reached stdout"; else pass; fi
expect 1 "$ETCH" run escaped.pte --method nothing;         has_err '\\x1b\[2Jfor'
if LC_ALL=C grep -q $'\x1b' "$ERR"; then fail "a raw escape byte reached stderr"; else pass; fi

# ---- verify -------------------------------------------------------------------------------------
expect 0 "$ETCH" verify "$FIX/bundled_add_mul.bpte"
has_out '^forward\[0\]: PASS'
has_out '^10 passed, 0 failed'
expect 0 "$ETCH" verify "$FIX/lenet_bundled.bpte"
has_out '^forward\[1\]: PASS  max abs error'
has_out '^2 passed, 0 failed'
expect 0 "$ETCH" verify "$FIX/lenet_bundled.bpte" --method forward --rtol 1e-3 --atol=1e-5
has_out '^2 passed, 0 failed \(rtol 0.001, atol 1e-05\)'
expect 1 "$ETCH" verify "$FIX/bundled_add_mul.bpte" --method backward; has_err '^error: NotFound: '
expect 1 "$ETCH" verify "$ADD";                            has_err '^error: InvalidProgram: .*BP08'
expect 1 "$ETCH" verify "$WORK/missing.bpte";              has_err '^error: AccessFailed: '

cli_end
