#!/usr/bin/env bash
# End-to-end tests of `etch bench` and of --cpu-threads / --kernels on run, bench and llm.
#
#   run_bench_tests.sh ETCH FIXTURES_DIR PYTHON [LLM.pte TOKENIZER]
#
# PYTHON (with numpy) parses the JSON output and writes/compares .npy files. With LLM.pte and
# TOKENIZER (stories260K as tests/llm_runner exports it), only the language-model checks run:
# etch llm gives the same greedy text with 1, 2 and 3 threads, and etch bench times the model.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/../harness/cli_lib.sh"
ETCH=$(abspath "${1:?usage: run_bench_tests.sh ETCH FIXTURES_DIR PYTHON}")
FIX=$(abspath "${2:?missing FIXTURES_DIR}")/pte
PY=${3:?missing PYTHON}
[ -x "$ETCH" ] || cli_abort "not an executable: $ETCH"
[ -f "$FIX/lenet_bundled.bpte" ] || cli_abort "no fixtures in $FIX"
cli_begin etch_bench

# py_check 'python statements over obj (the JSON of the last stdout)' DESCRIPTION
py_check() {
    if "$PY" -c "import json,sys
obj = json.loads(open(sys.argv[1]).read())
$1" "$OUT" 2>>"$ERR"; then pass; else fail "$2"; fi
}

cd "$WORK" || exit 1
LENET=$FIX/lenet_bundled.bpte

if [ $# -ge 5 ]; then
    LLM=$(abspath "$4")
    TOK=$(abspath "$5")
    for k in optimized portable; do
        for t in 1 2 3; do
            expect 0 "$ETCH" llm --model "$LLM" --tokenizer "$TOK" --prompt "Once upon a time" \
                --temperature 0 --max-new-tokens 48 --cpu-threads $t --kernels $k
            has_err "threads $t, kernels $k"
            has_err "; threads: $t\$"   # the runner's statistics: the threads it really runs with
            cp "$OUT" "llm_${k}_$t.txt"
        done
        [ -s "llm_${k}_1.txt" ] && pass || fail "$k kernels: no text"
        for t in 2 3; do
            if cmp -s "llm_${k}_1.txt" "llm_${k}_$t.txt"; then pass; else fail "llm, $k kernels: $t threads differ from 1"; fi
        done
    done
    expect 0 "$ETCH" bench "$LLM" --iterations 3 --warmup 1 --cpu-threads 2 --json
    py_check 'assert obj["threads"] == 2 and obj["ops"] and obj["median_ms"] > 0' "bench of the LLM"
    cli_end
    exit
fi

# ---- help -------------------------------------------------------------------------------------
expect 0 "$ETCH" --help;              has_out '^  bench '
expect 0 "$ETCH" help bench;          has_out '^usage: etch bench FILE'; has_out '--iterations'
has_out '--cpu-threads'; has_out '--kernels'; has_out '--json'
expect 0 "$ETCH" bench --help;        has_out '--warmup'
expect 0 "$ETCH" help run;            has_out '--cpu-threads'; has_out '--kernels SET'
expect 0 "$ETCH" help llm;            has_out '--cpu-threads'
if grep -q 'recorded' "$OUT"; then fail "llm help still says threads are only recorded"; else pass; fi

# ---- human output -------------------------------------------------------------------------------
# a time: three decimals of ms or µs, or whole ns, with a leading digit that is not 0 (a short
# time never reads 0.000 ms)
T='([1-9][0-9]*\.[0-9]{3} (ms|µs)|[1-9][0-9]* ns)'
expect 0 "$ETCH" bench "$LENET" --iterations 5 --warmup 1
has_out "^median $T  min $T  max $T\$"
has_out "^load $T\$"
has_out '^peak RSS [1-9][0-9]* KiB$'
# the default --cpu-threads: the CPUs this process may run on
NCPU=$("$PY" -c 'import os; print(min(len(os.sched_getaffinity(0)), 256))')
has_out "^threads $NCPU  kernels optimized  isa (scalar|avx2|avx512|neon)\$"
has_out '^operator +impl +calls/run +time/run +%$'
has_out "^aten::convolution\\.out +(optimized|portable)(\\+[a-z_]+)? +2 +$T +[0-9]+\\.[0-9]{2}\$"
has_out "^\\(total\\) +$T +100\\.00\$"
# the line order the issue asks for
if [ "$(sed -n 1p "$OUT" | cut -c1-6)$(sed -n 2p "$OUT" | cut -c1-4)$(sed -n 3p "$OUT" | cut -c1-8)" = "medianloadpeak RSS" ]; then
    pass
else
    fail "bench lines out of order"
fi
expect 0 "$ETCH" bench "$LENET" --iterations 4 --cpu-threads 3 --kernels portable
has_out '^threads 3  kernels portable  isa none$'
has_out '^aten::convolution\.out +portable +2 '
has_out '^aten::addmm\.out +portable +3 '
# the minimal call: defaults 3 warm-up + 20 timed runs on a one-op program; its sub-microsecond
# times keep their digits
expect 0 "$ETCH" bench "$FIX/add.pte"
has_out "^median $T  min $T  max $T\$"
has_out "^aten::add\\.out +optimized +1 +$T +100\\.00\$"
if grep -q '0\.000' "$OUT"; then fail "a time printed as 0.000"; else pass; fi

# ---- JSON ---------------------------------------------------------------------------------------
expect 0 "$ETCH" bench "$LENET" --iterations 6 --warmup 2 --cpu-threads 2 --json
py_check '
keys = {"file", "method", "threads", "kernels", "isa", "warmup", "iterations", "median_ms",
        "min_ms", "max_ms", "load_ms", "peak_rss_kb", "ops"}
assert keys <= set(obj), sorted(keys - set(obj))
assert obj["method"] == "forward" and obj["threads"] == 2 and obj["kernels"] == "optimized"
assert obj["isa"] in ("scalar", "avx2", "avx512", "neon"), obj["isa"]
assert obj["warmup"] == 2 and obj["iterations"] == 6
assert 0 < obj["min_ms"] <= obj["median_ms"] <= obj["max_ms"]
assert obj["load_ms"] > 0 and obj["peak_rss_kb"] > 0
assert obj["file"].endswith("lenet_bundled.bpte")
assert len(obj["times_ms"]) == 6 and min(obj["times_ms"]) == obj["min_ms"]
ops = obj["ops"]
assert ops and all({"op", "impl", "fused", "calls", "ms_per_run", "pct"} <= set(o) for o in ops)
assert all(o["fused"] is None or isinstance(o["fused"], str) for o in ops)
assert all(isinstance(o["blocked"], bool) for o in ops)
assert all(o["impl"] in ("portable", "optimized", "custom", "delegate", "runtime") for o in ops)
assert abs(sum(o["pct"] for o in ops) - 100) < 0.1, sum(o["pct"] for o in ops)
ms = [o["ms_per_run"] for o in ops]
assert ms == sorted(ms, reverse=True)
conv = [o for o in ops if o["op"] == "aten::convolution.out"]
assert sum(o["calls"] for o in conv) == 2, conv
# the ops add up to (about) the execute time: the observer sees every instruction
assert sum(ms) <= obj["max_ms"] * 1.05 + 0.05, (sum(ms), obj["max_ms"])
# each row is its median over the runs (not a sum or mean, which one slow run would move),
# the total is the sum of the rows, and in each run the rows fit in that execution
def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
for o in ops:
    assert len(o["times_ms"]) == 6, o
    assert abs(o["ms_per_run"] - median(o["times_ms"])) <= 2e-6, o
assert abs(obj["ops_total_ms"] - sum(ms)) <= 1e-5 * len(ms), (obj["ops_total_ms"], sum(ms))
for k, t in enumerate(obj["times_ms"]):
    assert sum(o["times_ms"][k] for o in ops) <= t + 1e-5 * len(ops), (k, t)
' "bench --json keys and values"
if [ "$(wc -l <"$OUT")" -eq 1 ]; then pass; else fail "--json printed more than one line"; fi
expect 0 "$ETCH" bench "$LENET" --iterations 3 --per-instruction --json
py_check '
ops = obj["ops"]
where = [(o["chain"], o["pc"]) for o in ops]
assert where == sorted(where) and len(set(where)) == len(where), where  # execution order, once each
conv = [o for o in ops if o["op"] == "aten::convolution.out"]
assert len(conv) == 2 and all(o["calls"] == 1 for o in conv), conv
assert abs(sum(o["pct"] for o in ops) - 100) < 0.1
' "bench --per-instruction --json: one row per instruction"
expect 0 "$ETCH" bench "$LENET" --iterations 2 --per-instruction
has_out '^chain:pc +operator'; has_out '^0:0 '
expect 0 "$ETCH" bench "$LENET" --iterations 3 --kernels portable --json
py_check 'assert obj["kernels"] == "portable" and obj["isa"] == "none"
assert all(o["impl"] in ("portable", "runtime") for o in obj["ops"]), obj["ops"]' \
    "bench --kernels portable --json"

# ---- --inputs -----------------------------------------------------------------------------------
"$PY" -c "import numpy as np; np.save('x.npy', (np.arange(1024, dtype=np.float32).reshape(1, 1, 32, 32) % 7) / 7)"
expect 0 "$ETCH" bench "$LENET" --inputs x.npy --iterations 2 --json
py_check 'assert obj["iterations"] == 2' "bench --inputs"
"$PY" -c "import numpy as np; np.save('bad.npy', np.zeros((2, 2), dtype=np.float32))"
expect 1 "$ETCH" bench "$LENET" --inputs bad.npy;         has_err 'error: '
expect 2 "$ETCH" bench "$LENET" --inputs x.npy,x.npy;     has_err 'takes 1 input'
expect 2 "$ETCH" bench "$LENET" --inputs x.npy,;          has_err 'empty file name'
expect 1 "$ETCH" bench "$LENET" --inputs missing.npy;     has_err 'missing.npy|AccessFailed'

# ---- bad flags ----------------------------------------------------------------------------------
expect 2 "$ETCH" bench;                                   has_err 'missing FILE'
expect 2 "$ETCH" bench "$LENET" "$LENET";                 has_err 'expected one FILE'
expect 2 "$ETCH" bench "$LENET" --cpu-threads 0;          has_err 'cpu-threads: 0 is out of range \[1, 256\]'
expect 2 "$ETCH" bench "$LENET" --cpu-threads 257;        has_err 'out of range'
expect 2 "$ETCH" bench "$LENET" --cpu-threads two;        has_err "cpu-threads: 'two' is not an integer"
expect 2 "$ETCH" bench "$LENET" --cpu-threads;            has_err 'needs a value'
expect 2 "$ETCH" bench "$LENET" --kernels fast;           has_err "kernels: 'fast' is neither 'optimized' nor 'portable'"
expect 2 "$ETCH" bench "$LENET" --warmup -1;              has_err 'warmup'
expect 2 "$ETCH" bench "$LENET" --iterations 0;           has_err 'iterations: 0 is out of range'
expect 2 "$ETCH" bench "$LENET" --iterations 1.5;         has_err 'not an integer'
expect 2 "$ETCH" bench "$LENET" --json=yes;               has_err 'does not take a value'
expect 2 "$ETCH" bench "$LENET" --json --json;            has_err 'more than once'
expect 2 "$ETCH" bench "$LENET" --threads 2;              has_err "unknown option '--threads'"
expect 1 "$ETCH" bench "$LENET" --method nope;            has_err 'nope'
expect 1 "$ETCH" bench "$WORK/none.pte";                  has_err 'error: '
expect 2 "$ETCH" run "$LENET" --cpu-threads 0;            has_err 'out of range'
expect 2 "$ETCH" run "$LENET" --kernels scalar;           has_err "neither 'optimized' nor 'portable'"
expect 2 "$ETCH" llm --model m.pte --tokenizer t.bin --cpu-threads 9999; has_err 'out of range'
expect 2 "$ETCH" llm --model m.pte --tokenizer t.bin --kernels none;     has_err 'kernels'
# an unusable instruction set is a clear failure, not a crash
ETCH_ISA=bogus "$ETCH" bench "$LENET" --iterations 1 >"$OUT" 2>"$ERR"
if [ $? -eq 1 ] && grep -q 'bogus' "$ERR"; then pass; else fail "ETCH_ISA=bogus"; fi

# ---- threads do not change results --------------------------------------------------------------
for k in optimized portable; do
    for t in 1 2 3; do
        expect 0 "$ETCH" run "$LENET" --inputs x.npy --cpu-threads $t --kernels $k --output-dir "out_${k}_$t"
        has_out "^loaded method 'forward' .* ms \\(threads $t, kernels $k\\)$"
    done
    for t in 2 3; do
        if cmp -s "out_${k}_1/output_0.npy" "out_${k}_$t/output_0.npy"; then pass; else fail "$k kernels: $t threads differ from 1"; fi
    done
done
# --no-fusion: same result, and no operator row reports a fused activation
expect 0 "$ETCH" run "$LENET" --inputs x.npy --no-fusion --output-dir out_nofusion
if cmp -s out_optimized_1/output_0.npy out_nofusion/output_0.npy; then pass; else fail "--no-fusion changed the output"; fi
expect 0 "$ETCH" bench "$LENET" --iterations 2 --no-fusion --json
py_check 'assert all(o["fused"] is None for o in obj["ops"]), obj["ops"]' "bench --no-fusion"
# --no-blocked-layout: the same result (lenet's 6/16-channel tensors are never blocked), and
# no operator row reports blocked tensors
expect 0 "$ETCH" run "$LENET" --inputs x.npy --no-blocked-layout --output-dir out_noblocked
if cmp -s out_optimized_1/output_0.npy out_noblocked/output_0.npy; then pass; else fail "--no-blocked-layout changed the output"; fi
expect 0 "$ETCH" bench "$LENET" --iterations 2 --no-blocked-layout --json
py_check 'assert all(o["blocked"] is False for o in obj["ops"]), obj["ops"]' "bench --no-blocked-layout"
# --no-prepack: the same result (prepacked and plain GEMM paths agree within rounding)
expect 0 "$ETCH" run "$LENET" --inputs x.npy --no-prepack --output-dir out_noprepack
if "$PY" -c "import numpy as np, sys
a, b = np.load('out_optimized_1/output_0.npy'), np.load('out_noprepack/output_0.npy')
sys.exit(0 if a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6) else 1)" 2>>"$ERR"; then
    pass
else
    fail "--no-prepack changed the output"
fi
# and the two kernel sets agree closely (they are different code)
if "$PY" -c "import numpy as np, sys
a, b = np.load('out_optimized_1/output_0.npy'), np.load('out_portable_1/output_0.npy')
sys.exit(0 if a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5) else 1)" 2>>"$ERR"; then
    pass
else
    fail "optimized and portable outputs differ"
fi

cli_end
