"""Golden cases for ExecuTorch's LLM custom operators llama::update_cache.out,
llama::custom_sdpa.out and llama::sdpa_with_kv_cache.out (src/kernels/portable/op_update_cache.c,
op_custom_sdpa.c): the expected values are the torch definitions of python/etch/llm/et_ops.py
(ExecuTorch's semantics: sequence at dim 1, grouped-query heads, causal from start_pos, additive
float masks) computed in float64 and rounded once. Tensors come from a generator of their own,
so the other modules' cases stay what they were."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from etch.llm.et_ops import custom_sdpa_reference, update_cache_reference  # noqa: E402

UC = "llama::update_cache.out"
SDPA = "llama::custom_sdpa.out"
KVC = "llama::sdpa_with_kv_cache.out"


def generate(g):
    In, Out, InOut, Int, Dbl, Bool, Ref = g.In, g.Out, g.InOut, g.Int, g.Dbl, g.Bool, g.Ref
    gen = torch.Generator().manual_seed(2718)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen)

    # ---- update_cache ----
    for dt, (B, S, H, D, Smax, sp) in [(torch.float32, (1, 3, 2, 4, 8, 2)),
                                       (torch.float32, (2, 1, 3, 5, 6, 5)),
                                       (torch.float32, (1, 6, 2, 4, 6, 0)),
                                       (torch.int8, (1, 2, 2, 3, 5, 1)),
                                       (torch.float64, (1, 1, 1, 1, 4, 3))]:
        v = (rnd(B, S, H, D) * 50).to(dt)
        c = (rnd(B, Smax, H, D) * 50).to(dt)
        after = c.clone()
        update_cache_reference(v, after, sp)
        g.W.case(UC, "update_cache %s B%d S%d H%d D%d Smax%d at %d" % (dt, B, S, H, D, Smax, sp),
                 [In(v), InOut(c, after), Int(sp), Out(dt, None, shape=[1]), Ref(3)])
    v, c = rnd(1, 3, 2, 4), rnd(1, 8, 2, 4)
    for label, args in (("start_pos -1", (v, c, -1)), ("past the end", (v, c, 6)),
                        ("start_pos S_max", (v[:, :0], c, 8)),
                        ("heads differ", (rnd(1, 3, 3, 4), c, 0)),
                        ("dtype differs", (v.double(), c, 0)),
                        ("3-d value", (v[0], c, 0))):
        vv, cc, sp = args
        g.W.case(UC, "update_cache " + label,
                 [In(vv), InOut(cc.clone(), None), Int(sp), Out(torch.float32, None, shape=[1]),
                  Ref(3)], fail=True)

    # ---- custom_sdpa ----
    def sdpa_case(label, B, S, H, KV, D, Smax, sp, causal, mask=None, scale=None):
        q, k, v = rnd(B, S, H, D), rnd(B, Smax, KV, D), rnd(B, Smax, KV, D)
        ref = custom_sdpa_reference(q.double(), k.double(), v.double(), sp,
                                    None if mask is None else mask.double(), 0.0, causal,
                                    scale).float()
        g.W.case(SDPA, "custom_sdpa %s B%d S%d H%d KV%d D%d Smax%d at %d"
                 % (label, B, S, H, KV, D, Smax, sp),
                 [In(q), In(k), In(v), Int(sp), None if mask is None else In(mask), Dbl(0.0),
                  Bool(causal), None if scale is None else Dbl(scale),
                  Out(torch.float32, ref), Ref(8)])

    sdpa_case("decode", 1, 1, 4, 2, 8, 9, 0, True)
    sdpa_case("decode last", 1, 1, 2, 1, 5, 7, 6, True)
    sdpa_case("prefill", 1, 3, 4, 4, 6, 10, 2, True)
    sdpa_case("gqa batch", 2, 4, 6, 2, 8, 12, 8, True)
    sdpa_case("wide head", 1, 2, 2, 1, 70, 5, 1, True)
    sdpa_case("not causal", 1, 3, 4, 2, 8, 10, 2, False)
    sdpa_case("scale", 1, 2, 4, 2, 8, 6, 3, True, scale=0.3)
    m = rnd(3, 10) * 0.5
    m[0, 5:] = float("-inf")
    m[2, 1] = float("-inf")
    sdpa_case("mask S_max", 1, 3, 4, 2, 8, 10, 2, False, mask=m)
    sdpa_case("mask start_pos+S", 1, 3, 4, 2, 8, 10, 2, False, mask=rnd(3, 5))
    q, k = rnd(1, 2, 4, 8), rnd(1, 6, 2, 8)
    bad = [("start_pos past the end", q, k, 5, None, 0.0, True),
           ("start_pos -1", q, k, -1, None, 0.0, True),
           ("heads not a multiple", rnd(1, 2, 3, 8), k, 0, None, 0.0, True),
           ("double query", q.double(), k.double(), 0, None, 0.0, True),
           ("mask and causal", q, k, 0, torch.zeros(2, 6), 0.0, True),
           ("bool mask", q, k, 0, torch.ones(2, 6, dtype=torch.bool), 0.0, False),
           ("mask shape", q, k, 0, torch.zeros(2, 4), 0.0, False),
           ("dropout", q, k, 0, None, 0.1, True),
           ("head size differs", rnd(1, 2, 4, 7), k, 0, None, 0.0, True)]
    for label, qq, kk, sp, mask, drop, causal in bad:
        g.W.case(SDPA, "custom_sdpa " + label,
                 [In(qq), In(kk), In(kk.clone()), Int(sp), None if mask is None else In(mask),
                  Dbl(drop), Bool(causal), None,
                  Out(qq.dtype, None, shape=list(qq.shape)), Ref(8)], fail=True)

    # ---- sdpa_with_kv_cache ----
    for B, S, H, KV, D, Smax, sp in [(1, 3, 4, 2, 8, 10, 2), (1, 1, 2, 2, 6, 5, 4)]:
        q, k, v = rnd(B, S, H, D), rnd(B, S, KV, D), rnd(B, S, KV, D)
        kc, vc = rnd(B, Smax, KV, D), rnd(B, Smax, KV, D)
        kd, vd = kc.double(), vc.double()
        update_cache_reference(k.double(), kd, sp)
        update_cache_reference(v.double(), vd, sp)
        ref = custom_sdpa_reference(q.double(), kd, vd, sp, None, 0.0, True, None).float()
        g.W.case(KVC, "sdpa_with_kv_cache B%d S%d H%d KV%d D%d Smax%d at %d"
                 % (B, S, H, KV, D, Smax, sp),
                 [In(q), In(k), In(v), InOut(kc, kd.float()), InOut(vc, vd.float()), Int(sp),
                  Int(S), None, Dbl(0.0), Bool(True), None, Out(torch.float32, ref), Ref(11)])
    q, k = rnd(1, 2, 4, 8), rnd(1, 2, 2, 8)
    kc = rnd(1, 6, 2, 8)
    for label, sp, seq in (("seq_len differs", 0, 3), ("past the end", 5, 2)):
        g.W.case(KVC, "sdpa_with_kv_cache " + label,
                 [In(q), In(k), In(k.clone()), InOut(kc.clone(), None), InOut(kc.clone(), None),
                  Int(sp), Int(seq), None, Dbl(0.0), Bool(True), None,
                  Out(torch.float32, None, shape=[1, 2, 4, 8]), Ref(11)], fail=True)
