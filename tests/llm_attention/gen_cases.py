#!/usr/bin/python3
"""Golden cases for etch::sdpa_kv.out (tests/llm_attention/test_sdpa_kv.c), computed by
PyTorch with the masked-softmax formulation the unfused llama export uses
(etch.llm.attention.sdpa_kv_reference: scores over the whole cache, keys after each query's
position at -inf, softmax, weighted sum of values), in float64 from the float32 inputs,
rounded once to float32.

Usage: /usr/bin/python3 gen_cases.py OUT_FILE

Sweep: GQA ratios G = H / KV of 1, 2 and 4 (KV = 2); head dims 8, 32, 48 (and 20: not a
multiple of any vector width); a cache of S = 150 positions (more than two of the optimized
kernel's 64-key blocks); T = 1 at start_pos 0, the middle and the last position; T = 5 at 0;
T = 20 (more than one query block of 8) in the middle; T = 7 ending at the last position.
Every third case multiplies q by 4 (sharp softmax: the running max moves between blocks).
Then a few cases with 24 and 3 query heads on one kv head (hd 8 and 200) and hd 520.

File (little endian): "SDPA" u32:ncases, then per case i64 T, H, KV, hd, S, start_pos,
f64 scale, float32 q[T*H*hd], k_cache[KV*S*hd], v_cache[KV*S*hd], expected[T*H*hd].
"""
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from etch.llm.attention import sdpa_kv_reference  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.manual_seed(1234)
    S, KV = 150, 2
    cases = []
    n = 0
    for G in (1, 2, 4):
        for hd in (8, 32, 48, 20):
            for T, sp in ((1, 0), (1, 75), (1, S - 1), (5, 0), (20, 60), (7, S - 7)):
                H = KV * G
                q = torch.randn(T, H, hd)
                if n % 3 == 2:
                    q = q * 4
                n += 1
                k = torch.randn(KV, S, hd)
                v = torch.randn(KV, S, hd)
                # positions after the last new one hold junk the kernels must not read (the C
                # test overwrites them with NaN; the reference masks them)
                scale = 1.0 / math.sqrt(hd)
                ref = sdpa_kv_reference(q.double(), k.double(), v.double(),
                                        torch.tensor([sp]), scale).float()
                cases.append((T, H, KV, hd, S, sp, scale, q, k, v, ref))
    # wide groups: 24 query heads on one kv head (the optimized kernel takes 16 at a time),
    # 3 on one with hd 200 (accumulators for 20 at most); hd 520 (over the optimized kernel's
    # 512: the portable path)
    for H, KV_, hd in ((24, 1, 8), (3, 1, 200), (2, 1, 520)):
        for T, sp in ((1, 69), (9, 30)):
            S_ = 70
            q = torch.randn(T, H, hd)
            k = torch.randn(KV_, S_, hd)
            v = torch.randn(KV_, S_, hd)
            scale = 1.0 / math.sqrt(hd)
            ref = sdpa_kv_reference(q.double(), k.double(), v.double(), torch.tensor([sp]),
                                    scale).float()
            cases.append((T, H, KV_, hd, S_, sp, scale, q, k, v, ref))
    with open(sys.argv[1], "wb") as f:
        f.write(b"SDPA" + struct.pack("<I", len(cases)))
        for T, H, KV_, hd, S_, sp, scale, q, k, v, ref in cases:
            f.write(struct.pack("<6qd", T, H, KV_, hd, S_, sp, scale))
            for t in (q, k, v, ref):
                f.write(t.contiguous().numpy().astype("<f4").tobytes())


if __name__ == "__main__":
    main()
