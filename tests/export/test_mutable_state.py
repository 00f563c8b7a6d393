"""Buffers the model updates in forward (running sums, KV caches) become mutable state: a
planned tensor alive for the whole method, its initial value in the mutable-data segment, and
a write-back (clone.out into the state's memory) after the new value is computed.  The state
carries over from one execution to the next."""

import unittest

import torch
import torch.nn as nn

from tests.export._common import etch, lib_path, needs_lib
from tests.export._planfile import analyze
from etch import opcheck
from etch.serialize import read_pte
from etch.serialize import schema as S


class Accumulator(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("n", torch.ones(1))

    def forward(self, x):
        self.total.add_(x)
        self.n.add_(1)
        return self.total / self.n


class KVCache(nn.Module):
    """Writes k at position pos of a cache and attends over the cache."""

    def __init__(self, T=8, D=4):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, T, D))
        self.proj = nn.Linear(D, D)

    def forward(self, x, pos):                 # x: [1, 1, D], pos: int64 [1]
        self.cache.index_copy_(1, pos, self.proj(x))
        att = torch.softmax(x @ self.cache.transpose(1, 2), -1)
        return att @ self.cache


class MutableStateTest(unittest.TestCase):
    def test_state_in_file(self):
        m = Accumulator()
        p = etch.export(m, (torch.randn(4),), check_ops=False)
        self.assertEqual(float(m.n), 1.0, "export must not run the model's updates for real")
        pf = read_pte(p.buffer)
        self.assertEqual(len(pf.program.mutable_data_segments), 1)
        plan = pf.program.execution_plan[0]
        state = [v.val for v in plan.values if isinstance(v.val, S.Tensor)
                 and v.val.allocation_info is not None and v.val.data_buffer_idx > 0]
        self.assertEqual(sorted(t.sizes for t in state), [[1], [4]])
        seg = pf.program.mutable_data_segments[0]
        blob = pf.segments[seg.segment_index]
        for t in state:
            off = seg.offsets[t.data_buffer_idx]
            init = torch.frombuffer(bytearray(blob[off:off + t.nbytes]), dtype=torch.float32)
            self.assertEqual(init.tolist(), [1.0] if t.sizes == [1] else [0.0] * 4)
        facts = analyze(p.buffer)
        self.assertEqual(facts.overlaps, [])
        self.assertIn("aten::clone.out", p.operators)

    def test_graph_matches_eager_over_steps(self):
        m, ref = KVCache(), KVCache()
        ref.load_state_dict(m.state_dict())
        x = torch.randn(1, 1, 4)
        p = etch.export(m, (x, torch.tensor([0])), check_ops=False)
        eg = p.graphs["forward"]
        state = {k: v.clone() for k, v in eg.mutable.items()}
        for i in range(5):
            xi = torch.randn(1, 1, 4)
            pos = torch.tensor([i])
            with torch.no_grad():
                torch.testing.assert_close(eg.run([xi, pos], state)[0], ref(xi, pos))

    @needs_lib
    def test_runtime_state_carries_over(self):
        m, ref = Accumulator(), Accumulator()
        p = etch.export(m, (torch.randn(4),))
        rt = etch.runtime.load(p)
        for i in range(4):
            x = torch.randn(4)
            torch.testing.assert_close(rt.forward(x), ref(x))

    @needs_lib
    def test_runtime_kv_cache(self):
        m, ref = KVCache(), KVCache()
        ref.load_state_dict(m.state_dict())
        p = etch.export(m, (torch.randn(1, 1, 4), torch.tensor([0])), check_ops=False)
        missing = [o for o in p.operators if o not in opcheck.registry(lib_path())]
        if missing:
            self.fail("kernels missing from this build: " + ", ".join(missing))
        rt = etch.runtime.load(p)
        for i in range(5):
            xi, pos = torch.randn(1, 1, 4), torch.tensor([i])
            with torch.no_grad():
                torch.testing.assert_close(rt.forward(xi, pos), ref(xi, pos))


if __name__ == "__main__":
    unittest.main()
