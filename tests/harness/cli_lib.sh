# Shared helpers of the bash end-to-end tests (tests/cli, tests/bench_cli). Source it, then
# call cli_begin once; each check adds one to $passed or $failed, cli_end prints the count line.
#
#   abspath PATH          PATH made absolute (against $PWD)
#   cli_abort MESSAGE     print MESSAGE and "0 passed, 1 failed" and exit 1 (bad setup)
#   cli_begin PREFIX      a temporary working folder $WORK (removed at exit), $OUT / $ERR for
#                         the last command's stdout / stderr, the counters set to zero
#   expect RC CMD...      run CMD, require exit status RC
#   has_out / has_err PATTERN   the last command's stdout / stderr matches (grep -E)
#   pass / fail MESSAGE   count a check of your own (fail prints the last stdout/stderr)
#   cli_end               print "N passed, M failed"; its status is 0 when none failed

abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

cli_abort() {
    echo "$*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

cli_begin() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || cli_abort "cannot make a temporary folder"
    trap 'rm -rf "$WORK"' EXIT
    passed=0
    failed=0
    OUT=$WORK/stdout
    ERR=$WORK/stderr
}

pass() { passed=$((passed + 1)); }
fail() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
    echo "  stdout: $(head -c 2000 "$OUT")" >&2
    echo "  stderr: $(head -c 2000 "$ERR")" >&2
}

expect() {
    local want=$1
    shift
    "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then pass; else fail "exit $rc, want $want: $*"; fi
}

has_out() { if grep -Eq -- "$1" "$OUT"; then pass; else fail "stdout lacks /$1/"; fi; }
has_err() { if grep -Eq -- "$1" "$ERR"; then pass; else fail "stderr lacks /$1/"; fi; }

cli_end() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
