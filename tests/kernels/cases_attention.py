"""Golden cases for etch::sdpa_kv.out and etch::sdpa_kv_q8.out (etch-only fused attention of the LLM exporter; see
src/kernels/portable/op_sdpa_kv.c): the expected values are the masked-softmax formulation
of python/etch/llm/attention.py computed in float64 and rounded once. The full sweep (every
instruction set, thread splits, head dims, GQA ratios) is in tests/llm_attention."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from etch.llm.attention import sdpa_kv_q8_reference, sdpa_kv_reference  # noqa: E402

OP = "etch::sdpa_kv.out"
OP_Q8 = "etch::sdpa_kv_q8.out"


def q8_cache(g, KV, S, hd):
    """An int8 cache with its per-(kv head, position) float32 scales and int8 zero points."""
    c = torch.randint(-128, 128, (KV, S, hd), dtype=torch.int8)   # gen_golden's seeded torch
    s = torch.rand(KV, S, 1) * 0.05 + 0.001
    z = torch.randint(-128, 128, (KV, S, 1), dtype=torch.int8)
    return c, s, z


def generate(g):
    In, Out, Dbl, Ref = g.In, g.Out, g.Dbl, g.Ref
    for dt in (torch.float32, torch.float64):
        for T, H, KV, hd, S, sp in [(1, 4, 2, 8, 9, 0), (1, 2, 1, 5, 7, 6), (3, 4, 4, 6, 10, 2),
                                    (4, 6, 2, 8, 12, 8)]:
            q = g.rand([T, H, hd], dt)
            k = g.rand([KV, S, hd], dt)
            v = g.rand([KV, S, hd], dt)
            pos = torch.tensor([sp], dtype=torch.int64)
            scale = 1.0 / math.sqrt(hd)
            ref = sdpa_kv_reference(q.double(), k.double(), v.double(), pos, scale).to(dt)
            g.W.case(OP, "sdpa_kv %s T%d H%d KV%d hd%d S%d at %d" % (dt, T, H, KV, hd, S, sp),
                     [In(q), In(k), In(v), In(pos), Dbl(scale), Out(dt, ref), Ref(5)])
    q = g.rand([2, 4, 8], torch.float32)
    k = g.rand([2, 6, 8], torch.float32)
    for sp in (-1, 5):  # start_pos + T must stay within the cache
        g.W.case(OP, "sdpa_kv start_pos %d" % sp,
                 [In(q), In(k), In(k.clone()), In(torch.tensor([sp])), Dbl(0.5),
                  Out(torch.float32, None, shape=[2, 32]), Ref(5)], fail=True)
    g.W.case(OP, "sdpa_kv heads not a multiple",
             [In(g.rand([2, 3, 8], torch.float32)), In(k), In(k.clone()), In(torch.tensor([0])),
              Dbl(0.5), Out(torch.float32, None, shape=[2, 24]), Ref(5)], fail=True)
    g.W.case(OP, "sdpa_kv int q",
             [In(torch.ones(2, 4, 8, dtype=torch.int32)), In(k), In(k.clone()),
              In(torch.tensor([0])), Dbl(0.5), Out(torch.int32, None, shape=[2, 32]), Ref(5)],
             fail=True)
    for dt in (torch.float32, torch.float64):
        for T, H, KV, hd, S, sp in [(1, 4, 2, 8, 9, 0), (3, 4, 4, 6, 10, 2), (4, 6, 2, 8, 12, 8)]:
            q = g.rand([T, H, hd], dt)
            kc, ks, kz = q8_cache(g, KV, S, hd)
            vc, vs, vz = q8_cache(g, KV, S, hd)
            pos = torch.tensor([sp], dtype=torch.int64)
            scale = 1.0 / math.sqrt(hd)
            ref = sdpa_kv_q8_reference(q.double(), kc, ks, kz, vc, vs, vz, pos, scale).to(dt)
            g.W.case(OP_Q8, "sdpa_kv_q8 %s T%d H%d KV%d hd%d S%d at %d"
                     % (dt, T, H, KV, hd, S, sp),
                     [In(q), In(kc), In(ks), In(kz), In(vc), In(vs), In(vz), In(pos), Dbl(scale),
                      Out(dt, ref), Ref(5)])
    q = g.rand([2, 4, 8], torch.float32)
    kc, ks, kz = q8_cache(g, 2, 6, 8)
    for name, args in (("start_pos 5", (kc, ks, kz, torch.tensor([5]))),
                       ("float cache", (kc.float(), ks, kz, torch.tensor([0]))),
                       ("Long zero points", (kc, ks, kz.long(), torch.tensor([0]))),
                       ("scales [KV, S]", (kc, ks[..., 0], kz, torch.tensor([0]))),
                       ("negative scale", (kc, -ks, kz, torch.tensor([0])))):
        c, s_, z, pos = args
        g.W.case(OP_Q8, "sdpa_kv_q8 " + name,
                 [In(q), In(c), In(s_), In(z), In(kc), In(ks), In(kz), In(pos), Dbl(0.5),
                  Out(torch.float32, None, shape=[2, 32]), Ref(5)], fail=True)
