"""llama.cpp's Q8_0 and Q4_0 as bench/llm/gguf_writer.py writes them.

1. Packing, against a reader and a dequantization written here from the block layouts (ggml's
   block_q8_0 = {fp16 d; int8 qs[32]}, block_q4_0 = {fp16 d; uint8 qs[16]}, element j in the
   low nibble and j + 16 in the high nibble of byte j, value (nibble - 8) * d), element by
   element in plain Python (no numpy vector code of the writer's):
   * the file parses (header, metadata, tensor infos, aligned offsets, sizes), the types are
     the ones asked for;
   * Q8_0: d == fp16(max|x| / 127), every q == x / d rounded to nearest (half away from zero),
     the dequantized value within d / 2 (+ the fp16 rounding of d) of x;
   * Q4_0: d == fp16(m / -8), m the first element of largest magnitude with its sign, every q
     == clamp(round(x / d) + 8, 0, 15) (half up), so m itself is nibble 0; error within d / 2
     except where the clamp at 15 acts (the side opposite to m: at most |d|);
   * edge blocks: all zeros (d = 0, q = 0 / 8), a tie between +a and -a (the first wins), a
     single non-zero, values on the rounding boundaries, a wide dynamic range;
   * a row length that is not a multiple of 32 is refused by name; non-finite values too.
   Where x / d is within 1e-5 of a rounding boundary the float32 computation llama.cpp's
   reference performs may go either way: those (few) elements may differ by one.
2. stories260K (../shared/fixtures/llm) through write_llama_gguf(quant=...): the tensor types
   are llama.cpp's quantizer's (norms F32, matrices Q8_0 / Q4_0, output.weight Q8_0 under Q4_0,
   ffn_down with rows of 172 F16) and the file sizes follow from the block sizes; llama.cpp
   (node-llama-cpp, llamacpp_bench.mjs) loads the F32, Q8_0 and Q4_0 files and greedy-decodes
   128 tokens from BOS: the F32 file gives etch.llm's eager reference ids; the Q8_0 file agrees
   with F32 on at least the first 64 ids (measured: 114); the Q4_0 file gives 128 valid
   ids whose first 8 agree with F32 (measured: 27 agree).

    test_gguf_quant.py --node-modules DIR --fixtures DIR --work DIR
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "bench", "llm")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "python"))

failures = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)


# -- a GGUF reader from the format description --------------------------------------------------

def read_gguf(path):
    """(metadata dict, {name: (dims innermost first, type, absolute offset)}, file bytes)."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert buf[:4] == b"GGUF", "magic"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version == 3
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    align = meta.get("general.alignment", 32)
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        infos.append((name, dims, take("I"), take("Q")))
    data_start = pos + (-pos) % align
    tensors = {}
    for name, dims, t, off in infos:
        assert off % align == 0, "%s: offset %d not aligned" % (name, off)
        tensors[name] = (dims, t, data_start + off)
    return meta, tensors, buf


def half(b, off):
    return struct.unpack_from("<e", b, off)[0]


def fp16(v):
    return struct.unpack("<e", struct.pack("<e", v))[0]


def round_half_away(v):
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


def dequant_rows(buf, off, dims, t):
    """Spec dequantization of a 2-d tensor, row by row, in plain Python; also the raw (d, q)."""
    cols, rows = dims
    vals, blocks = [], []
    for r in range(rows):
        for b in range(cols // 32):
            if t == 8:
                d = half(buf, off)
                q = list(struct.unpack_from("<32b", buf, off + 2))
                vals.extend(qq * d for qq in q)
                off += 34
            else:
                d = half(buf, off)
                by = buf[off + 2:off + 18]
                q = [by[j] & 15 for j in range(16)] + [by[j] >> 4 for j in range(16)]
                vals.extend((qq - 8) * d for qq in q)
                off += 18
            blocks.append((d, q))
    return np.array(vals, dtype=np.float64).reshape(rows, cols), blocks


def check_block(t, x, d, q, what, stats):
    """x: 32 float32 values as Python floats; (d, q) as read from the file."""
    amax = max(abs(v) for v in x)
    if t == 8:
        want_d = fp16(float(np.float32(amax) / np.float32(127)))
        if d != want_d:
            stats["bad"].append("%s: d %r != fp16(max|x|/127) %r" % (what, d, want_d))
            return
        d32 = float(np.float32(amax) / np.float32(127))
        for j, v in enumerate(x):
            want = round_half_away(v / d32) if d32 else 0
            if q[j] != want:
                frac = abs(v / d32) % 1.0
                if abs(frac - 0.5) < 1e-5 and abs(q[j] - want) == 1:
                    stats["boundary"] += 1
                else:
                    stats["bad"].append("%s[%d]: q %d != %d (x %r, d %r)" % (what, j, q[j], want,
                                                                          v, d32))
            if abs(q[j] * d - v) > abs(d32) / 2 * (1 + 1e-5) + 127 * abs(d - d32) + 1e-30:
                stats["bad"].append("%s[%d]: |q*d - x| too large" % (what, j))
    else:
        m = next(v for v in x if abs(v) == amax)          # the first of largest magnitude
        d32 = float(np.float32(m) / np.float32(-8))
        want_d = fp16(d32)
        if d != want_d:
            stats["bad"].append("%s: d %r != fp16(m/-8) %r" % (what, d, want_d))
            return
        for j, v in enumerate(x):
            want = min(15, max(0, int(math.floor(v / d32 + 8.5)))) if d32 else 8
            if q[j] != want:
                frac = (v / d32 + 8.5) % 1.0
                if min(frac, 1 - frac) < 1e-5 and abs(q[j] - want) == 1:
                    stats["boundary"] += 1
                else:
                    stats["bad"].append("%s[%d]: q %d != %d (x %r, d %r)" % (what, j, q[j], want,
                                                                          v, d32))
            err = abs((q[j] - 8) * d - v)
            lim = abs(d32) * (1.0 if q[j] == 15 else 0.5) * (1 + 1e-5) + 8 * abs(d - d32) + 1e-30
            if err > lim:
                stats["bad"].append("%s[%d]: |(q-8)*d - x| = %g > %g" % (what, j, err, lim))
        if d32 and q[x.index(m)] != 0:
            stats["bad"].append("%s: the largest element is not nibble 0" % what)


def packing_tests(work):
    import gguf_writer as gw
    rng = np.random.RandomState(17)
    cases = {}
    a = rng.randn(8, 96).astype(np.float32)
    a[0, :32] = 0.0                                    # an all-zero block
    a[1, :32] = rng.randn(32) * 1e-3
    a[1, 5], a[1, 20] = 0.75, -0.75                    # a tie: +a first
    a[2, :64] = 0.0
    a[2, 40] = -3.0                                    # a single non-zero, negative
    a[3, :32] = np.arange(32, dtype=np.float32) - 16   # on rounding boundaries of Q8_0 / Q4_0
    a[3, 32:64] = np.arange(-127, 128, 8)[:32]         # Q8_0: d = 1, q = x
    a[4, :32] = np.float32(2.0) ** np.arange(-20, 12, dtype=np.float32)   # a wide range
    a[5, 32:64] = -np.abs(a[5, 32:64])                 # all negative
    a[6, :] *= 100.0
    cases["m"] = a
    cases["wide"] = (rng.standard_cauchy((4, 64)) * 0.1).astype(np.float32)
    cases["big"] = rng.randn(64, 256).astype(np.float32)
    norm = rng.randn(96).astype(np.float32)
    for t, tname in ((gw.GGML_TYPE_Q8_0, "Q8_0"), (gw.GGML_TYPE_Q4_0, "Q4_0")):
        w = gw.GGUFWriter()
        w.add("general.architecture", gw.T_STRING, "llama")
        for k, v in cases.items():
            w.add_tensor(k, v, t)
        w.add_tensor("norm", norm)
        path = os.path.join(work, "pack_%s.gguf" % tname)
        size = w.write(path)
        meta, tensors, buf = read_gguf(path)
        check(size == len(buf) and meta["general.architecture"] == "llama",
              "%s: the file parses (%d bytes)" % (tname, size))
        check(tensors["norm"][1] == 0 and
              np.array_equal(np.frombuffer(buf, "<f4", 96, tensors["norm"][2]), norm),
              "%s: an F32 tensor beside the quantized ones is intact" % tname)
        stats = {"bad": [], "boundary": 0}
        for k, x in cases.items():
            dims, tt, off = tensors[k]
            check(tt == t and dims == [x.shape[1], x.shape[0]],
                  "%s: tensor %s has type %d and dims %s" % (tname, k, tt, dims))
            deq, blocks = dequant_rows(buf, off, dims, t)
            flat = x.reshape(-1, 32)
            for bi, (d, q) in enumerate(blocks):
                check_block(8 if t == gw.GGML_TYPE_Q8_0 else 2,
                            [float(v) for v in flat[bi]], d, q, "%s/%s block %d" % (tname, k, bi),
                            stats)
            # the dequantized matrix, rows and columns where they belong
            err = np.abs(deq - x).max()
            scale = np.abs(x).max(axis=1, keepdims=True)
            check(np.all(np.abs(deq - x) <= scale * (1.0 / 127 if t == gw.GGML_TYPE_Q8_0
                                                     else 1.0 / 8) * 1.01 + 1e-30),
                  "%s/%s: dequantized within one step of x (max error %.3g)" % (tname, k, err))
        check(not stats["bad"], "%s: every block's d and q are the spec's (%d boundary cases "
              "within one; problems: %s)" % (tname, stats["boundary"], stats["bad"][:5]))
        # the edge blocks, spelled out
        m_dims, _, m_off = tensors["m"]
        _, blocks = dequant_rows(buf, m_off, m_dims, t)
        if t == gw.GGML_TYPE_Q8_0:
            check(blocks[0] == (0.0, [0] * 32), "Q8_0: an all-zero block is d 0, q 0")
            check(blocks[3 * 3 + 1] == (1.0, list(range(-127, 128, 8))[:32]),
                  "Q8_0: -127, -119, ..., 121 quantizes to d 1, q = x")
        else:
            check(blocks[0] == (0.0, [8] * 32), "Q4_0: an all-zero block is d 0, q 8")
            check(blocks[3 * 3][0] == 2.0 and blocks[3 * 3][1] ==
                  [min(15, int(math.floor(v / 2.0 + 8.5))) for v in range(-16, 16)],
                  "Q4_0: -16..15: m = -16 gives d = 2, q = clamp(floor(x/2 + 8.5), 0, 15)")
            d1, q1 = blocks[3]
            check(d1 == fp16(-0.75 / 8) and q1[5] == 0 and q1[20] == 15,
                  "Q4_0: a tie between +0.75 (first) and -0.75: d = -0.75/8, +0.75 -> 0, "
                  "-0.75 -> 15 (clamped)")
            d2, q2 = blocks[3 * 2 + 1]
            check(d2 == 3.0 / 8 and q2[8] == 0 and q2.count(8) == 31,
                  "Q4_0: a single -3: d = 3/8, it is nibble 0, the zeros 8")
    # refusals
    w = gw.GGUFWriter()
    for bad, want in ((np.zeros((2, 40), np.float32), "blocks of 32"),
                      (np.full((1, 32), np.inf, np.float32), "non-finite")):
        try:
            w.add_tensor("bad", bad, gw.GGML_TYPE_Q4_0)
            check(False, "a %s tensor is refused" % want)
        except ValueError as e:
            check(want in str(e) and "bad" in str(e), "refused by name: %s" % e)


# -- stories260K through llama.cpp --------------------------------------------------------------

def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print("command failed (exit %d): %s\n%s\n%s" % (r.returncode, " ".join(cmd)[:400],
                                                       r.stdout[-3000:], r.stderr[-3000:]))
        sys.exit(1)
    return r


def llamacpp_ids(node_modules, gguf, n_new, context):
    r = run(["node", os.path.join(BENCH, "llamacpp_bench.mjs"), "--model", gguf,
             "--prompt-ids", "1", "--new-tokens", str(n_new), "--context", str(context),
             "--threads", "1", "--node-modules", node_modules])
    return json.loads(r.stdout.strip().splitlines()[-1])["runs"][0]["tokens"]


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def stories_tests(node_modules, fixtures, work):
    import gguf_writer as gw
    from etch.llm.checkpoint import load_checkpoint
    ckpt = os.path.join(fixtures, "stories260K.bin")
    tok = os.path.join(fixtures, "tok512.model")
    args, state = load_checkpoint(ckpt)
    n_new = 128
    ids = {}
    for quant in ("f32", "q8_0", "q4_0"):
        path = os.path.join(work, "stories260K_%s.gguf" % quant)
        types = {}
        size = gw.write_llama_gguf(path, args, state, tok, quant=quant, tensor_types=types)
        meta, tensors, buf = read_gguf(path)
        qt = {"f32": 0, "q8_0": 8, "q4_0": 2}[quant]
        want = {}
        for name, (dims, t, off) in tensors.items():
            if len(dims) == 1 or quant == "f32":
                want[name] = 0
            elif name == "output.weight":
                want[name] = 8 if quant != "f32" else 0
            elif dims[0] % 32:
                want[name] = 1
            else:
                want[name] = qt
        got = {n: v[1] for n, v in tensors.items()}
        check(got == want and types == got,
              "stories260K %s: tensor types as llama.cpp's quantizer (%s)"
              % (quant, sorted(set("%s=%s" % (n.split(".")[-2] if n.startswith("blk") else n,
                                                gw.GGML_TYPE_NAMES[t]) for n, t in got.items()))))
        nbytes = 0
        for name, (dims, t, off) in tensors.items():
            per, bsz = gw.GGML_BLOCK[t]
            nbytes += int(np.prod(dims)) // per * bsz
        check(len(buf) >= nbytes and len(buf) - nbytes < 4096 + 32 * len(tensors) +
              len(json.dumps(meta)) * 2,
              "stories260K %s: %d bytes, tensor data %d bytes from the block sizes"
              % (quant, size, nbytes))
        check(meta["general.file_type"] == {"f32": 0, "q8_0": 7, "q4_0": 2}[quant],
              "stories260K %s: general.file_type %d" % (quant, meta["general.file_type"]))
        ids[quant] = llamacpp_ids(node_modules, path, n_new, args.max_seq_len)
    r = run([sys.executable, "-m", "etch.llm", "generate", "--checkpoint", ckpt,
             "--prompt-ids", "1", "--max-new-tokens", str(n_new)])
    ref = [int(x) for x in r.stdout.strip().split(",") if x]
    check(ids["f32"] == ref, "stories260K F32: llama.cpp's %d greedy ids == etch.llm's eager "
          "reference" % n_new)
    p8 = common_prefix(ids["q8_0"], ids["f32"])
    check(len(ids["q8_0"]) == n_new and p8 >= 64,
          "stories260K Q8_0: llama.cpp loads it and its greedy ids agree with F32's on the "
          "first %d of %d (>= 64 required)" % (p8, n_new))
    p4 = common_prefix(ids["q4_0"], ids["f32"])
    check(len(ids["q4_0"]) == n_new and all(0 <= t < args.vocab_size for t in ids["q4_0"])
          and p4 >= 8,
          "stories260K Q4_0: llama.cpp loads it, %d valid ids, the first %d agree with F32's "
          "(>= 8 required)" % (len(ids["q4_0"]), p4))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--node-modules", required=True)
    p.add_argument("--fixtures", required=True, help="../shared/fixtures/llm")
    p.add_argument("--work", required=True)
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.node_modules, "node-llama-cpp", "package.json")):
        print("node-llama-cpp is not installed in %s (the llm_bench.npm test installs it)"
              % a.node_modules)
        return 1
    for f in ("stories260K.bin", "tok512.model"):
        if not os.path.exists(os.path.join(a.fixtures, f)):
            print("missing fixture %s in %s" % (f, a.fixtures))
            return 1
    os.makedirs(a.work, exist_ok=True)
    packing_tests(a.work)
    stories_tests(a.node_modules, a.fixtures, a.work)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
