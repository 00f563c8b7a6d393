import random
import unittest

from tests.export._common import etch
from tests.export._planfile import analyze
from etch import zoo
from etch.memory_plan import Storage, check_plan, lower_bound, plan_memory


class PlannerUnitTest(unittest.TestCase):
    def test_disjoint_lifetimes_share_memory(self):
        s = [Storage("a", 100, 0, 1), Storage("b", 100, 2, 3), Storage("c", 100, 4, 5)]
        p = plan_memory(s)
        self.assertEqual(p.arena_size, 112)
        self.assertEqual(p.lower_bound, 112)
        self.assertEqual({x.offset for x in s}, {0})

    def test_alignment(self):
        s = [Storage("a", 1, 0, 0), Storage("b", 17, 0, 0), Storage("c", 0, 0, 0)]
        p = plan_memory(s)
        for x in s:
            self.assertEqual(x.offset % 16, 0)
        self.assertEqual(p.arena_size, 16 + 32)
        self.assertIsNone(check_plan(s))

    def test_random_instances_are_valid_and_tight(self):
        rng = random.Random(7)
        worst = 1.0
        for trial in range(200):
            n = rng.randint(1, 40)
            s = []
            for i in range(n):
                a = rng.randint(0, 30)
                s.append(Storage(i, rng.choice([16, 64, 100, 1000, 4096, rng.randint(1, 5000)]),
                                 a, a + rng.randint(0, 8)))
            p = plan_memory(s)
            self.assertIsNone(check_plan(s))
            self.assertGreaterEqual(p.arena_size, p.lower_bound)
            self.assertEqual(p.lower_bound, lower_bound(s))
            worst = max(worst, p.ratio)
        # random interval graphs are harder than real models; still well bounded
        self.assertLess(worst, 1.5)


class PlanFromFileTest(unittest.TestCase):
    """The bound is recomputed from the written file, independently of the planner."""

    MODELS = ("mlp", "lenet", "lstm", "transformer_encoder", "llama_block", "audio_conv1d")

    def test_zoo_plans_within_10_percent_of_lower_bound(self):
        for name in self.MODELS:
            with self.subTest(model=name):
                model, inputs = zoo.build(name)
                program = etch.export(model, inputs, check_ops=False)
                facts = analyze(program.buffer)
                self.assertEqual(facts.overlaps, [])
                self.assertGreater(facts.lower_bound, 0)
                self.assertLessEqual(facts.arena, 1.10 * facts.lower_bound,
                                     "%s: arena %d, bound %d" % (name, facts.arena,
                                                                 facts.lower_bound))
                # the planner's own bound agrees with the file's
                self.assertEqual(program.method().memory.lower_bound, facts.lower_bound)

    def test_inputs_and_outputs_are_planned(self):
        model, inputs = zoo.build("mlp")
        program = etch.export(model, inputs, check_ops=False)
        plan = program.method().plan
        for i in list(plan.inputs) + list(plan.outputs):
            t = plan.values[i].val
            self.assertIsNotNone(t.allocation_info)
            self.assertEqual(t.allocation_info.memory_id, 1)
            self.assertEqual(t.allocation_info.memory_offset % 16, 0)
        self.assertEqual(plan.non_const_buffer_sizes[0], 0)
        self.assertEqual(len(plan.non_const_buffer_sizes), 2)


if __name__ == "__main__":
    unittest.main()
