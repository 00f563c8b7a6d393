#!/usr/bin/python3
"""Golden cases for etch::sdpa_kv_q8.out (tests/llm_attention/test_sdpa_kv.c, second file):
the attention over an int8 KV cache, computed by PyTorch as etch.llm.attention's reference
does (each cache row dequantized as (c - zero_point) * scale in float32, the formula of
quantized_decomposed::dequantize_per_token, then the masked-softmax attention of
sdpa_kv_reference in float64, rounded once to float32).

The caches are what the exporter stores: float rows quantized per (kv head, position) with
ExecuTorch's choose_qparams_per_token_asymmetric + quantize_per_token (etch.quant.decomposed),
scales as float32 and zero points as int8.  Some caches are shifted to all-positive or
all-negative rows (zero points at the ends of the int8 range, -128 / 127), some rows constant
(the smallest scale).

Usage: /usr/bin/python3 gen_cases_q8.py OUT_FILE

Sweep: G = 1, 2, 4 (KV = 2), head dims 8, 7, 20, 33, 64, 100 (tails of every vector width),
S = 150 (three 64-key blocks), T = 1 at 0, 74 (75 keys: an odd count) and S - 1; T = 5 at 0;
T = 19 at 60; then 24 query heads on one kv head.

File (little endian): "SDQ8" u32:ncases, then per case i64 T, H, KV, hd, S, start_pos,
f64 scale, float32 q[T*H*hd], int8 k[KV*S*hd], float32 k_scales[KV*S], int8 k_zp[KV*S],
the same three for v, float32 expected[T*H*hd].
"""
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from etch.llm.attention import sdpa_kv_q8_reference  # noqa: E402
from etch.quant.decomposed import ops as qd  # noqa: E402


def quantize_cache(x):
    """x float32 [KV, S, hd] -> (int8 cache, float32 scales [KV, S, 1], int8 zero points)."""
    s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
    q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
    return q, s.float(), z.to(torch.int8)


def cache(KV, S, hd, kind):
    x = torch.randn(KV, S, hd)
    if kind == 1:
        x = x.abs() + 0.5          # all positive: zero point -128
    elif kind == 2:
        x = -x.abs() - 0.5         # all negative: zero point 127
    elif kind == 3:
        x[:, ::7] = 0.25           # constant rows
    return quantize_cache(x)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.manual_seed(4321)
    S, KV = 150, 2
    cases = []
    n = 0
    for G in (1, 2, 4):
        for hd in (8, 7, 20, 33, 64, 100):
            for T, sp in ((1, 0), (1, 74), (1, S - 1), (5, 0), (19, 60)):
                cases.append((T, KV * G, KV, hd, S, sp, n % 4))
                n += 1
    for T, sp in ((1, 69), (9, 30)):
        cases.append((T, 24, 1, 16, 70, sp, 0))
    with open(sys.argv[1], "wb") as f:
        f.write(b"SDQ8" + struct.pack("<I", len(cases)))
        for T, H, KV_, hd, S_, sp, kind in cases:
            q = torch.randn(T, H, hd) * (3.0 if kind == 2 else 1.0)
            kc, ks, kz = cache(KV_, S_, hd, kind)
            vc, vs, vz = cache(KV_, S_, hd, (kind + 1) % 4)
            scale = 1.0 / math.sqrt(hd)
            ref = sdpa_kv_q8_reference(q.double(), kc, ks, kz, vc, vs, vz,
                                       torch.tensor([sp]), scale).float()
            f.write(struct.pack("<6qd", T, H, KV_, hd, S_, sp, scale))
            for t in (q, kc, ks, kz, vc, vs, vz, ref):
                f.write(t.contiguous().numpy().tobytes())


if __name__ == "__main__":
    main()
