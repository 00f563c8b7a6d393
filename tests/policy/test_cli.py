"""`etch llm --models`: models/default and the fixture llama (stories260K, exported by
llm_runner.export.bin) as two variants with their own tokenizers; thermal traces force the
switches. Checks the printed choices and reasons, never timings (the latency budget is far
above anything measured)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI = os.environ.get("ETCH_CLI", str(REPO / "build" / "etch"))
FIXTURES = Path(os.environ.get("LLMR_FIXTURES", REPO.parent / "shared" / "fixtures" / "llm"))
MODELS = Path(os.environ.get("LLMR_MODELS", REPO / "build" / "tests" / "llm_runner"))

DEFAULT = "%s:%s" % (REPO / "models/default/model.pte", REPO / "models/default/tokenizer.model")
STORIES = "%s:%s" % (MODELS / "stories260K_bin.pte", FIXTURES / "tok512.bin")
BIG, SMALL = "model", "stories260K_bin"
POLICY_LINE = re.compile(r"^policy: request (\d+) -> '([^']+)' \[(\w+)\] (.*)$")


def run(*args, stdin=None):
    p = subprocess.run([CLI, "llm", *args], input=stdin, capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8",
                                                                             "replace")


def choices(err):
    out = []
    for line in err.splitlines():
        m = POLICY_LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
    return out


class PolicyCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def trace(self, text):
        path = Path(self.tmp.name) / "trace.txt"
        path.write_text(text)
        return str(path)

    def chat(self, trace, turns, *extra):
        stdin = "".join(t + "\n" for t in turns).encode()
        return run("--models", DEFAULT + "," + STORIES, "--chat", "--temperature", "0",
                   "--max-new-tokens", "8", "--latency-budget-ms", "1000000",
                   "--thermal-trace", trace, *extra, stdin=stdin)

    def test_thermal_trace_switches_and_returns(self):
        tr = self.trace("# t in ms; a phone heating up, then cooling\n"
                        "thermal=0 battery=0.9 t=0\n"
                        "thermal=3.5 t=5000   # hot: down at once\n"
                        "thermal=2 t=10000    # between the levels: hold\n"
                        "thermal=0.5 t=15000  # comfortable: the cool-down starts\n"
                        "thermal=0.5 t=30000  # not yet 30 s since the move\n"
                        "thermal=0 t=45000    # 30 s comfortable: back up\n"
                        "\n")
        turns = ["Once upon a time", "Tom went out", "The dog ran", "The cat sat",
                 "The sun was up", "They played"]
        rc, out, err = self.chat(tr, turns)
        self.assertEqual(rc, 0, err)
        got = choices(err)
        self.assertEqual([c[0] for c in got], [1, 2, 3, 4, 5, 6], err)
        self.assertEqual([c[1] for c in got], [BIG, SMALL, SMALL, SMALL, SMALL, BIG], err)
        self.assertEqual([c[2] for c in got],
                         ["start", "thermal", "steady", "cooldown", "cooldown", "step_up"], err)
        self.assertEqual(got[1][3], "thermal 3.5 >= 3: stepped down to '%s'" % SMALL)
        self.assertEqual(got[2][3], "holding '%s': thermal 2 > 1" % SMALL)
        self.assertIn("stepped up to '%s'" % BIG, got[5][3])
        self.assertEqual(len(out.splitlines()), len(turns), out)  # one reply per turn
        self.assertIn("policy: variants, best first: '%s' (%d bytes), '%s' (%d bytes)" % (
            BIG, (REPO / "models/default/model.pte").stat().st_size, SMALL,
            (MODELS / "stories260K_bin.pte").stat().st_size), err)
        # the choice comes before the request's output on stderr
        lines = err.splitlines()
        first = next(i for i, l in enumerate(lines) if l.startswith("policy: request 1 "))
        self.assertTrue(lines[first + 1].startswith("["), lines[first + 1])

    def test_short_trace_keeps_its_last_line(self):
        rc, out, err = self.chat(self.trace("0\n4 0.5\n"), ["a", "b", "c", "d"])
        self.assertEqual(rc, 0, err)
        self.assertEqual([c[1] for c in choices(err)], [BIG, SMALL, SMALL, SMALL], err)
        self.assertEqual([c[2] for c in choices(err)][1:], ["thermal"] * 3, err)
        self.assertIn("'%s' is already the lowest" % SMALL, err)

    def test_battery_and_memory(self):
        size_big = (REPO / "models/default/model.pte").stat().st_size
        tr = self.trace("0 0.1\n"                         # low battery at the start
                        "0 0.9 memory=%d\n"               # big does not fit
                        "0 0.9 memory=1000\n" % (size_big - 1))  # nothing fits
        rc, out, err = self.chat(tr, ["a", "b", "c"], "--cooldown-ms", "0")
        self.assertEqual(rc, 0, err)
        got = choices(err)
        self.assertEqual([c[1] for c in got], [SMALL, SMALL, SMALL], err)
        self.assertEqual([c[2] for c in got], ["battery", "steady", "nothing_fits"], err)
        self.assertIn("no variant fits the memory ceiling of 1000 bytes", got[2][3])

    def test_prompt_is_one_request(self):
        rc, out, err = run("--models", DEFAULT + "," + STORIES, "--prompt", "Once upon a time",
                           "--max-new-tokens", "5", "--temperature", "0", "--thermal-trace",
                           self.trace("thermal=4\n"))
        self.assertEqual(rc, 0, err)
        got = choices(err)
        self.assertEqual(len(got), 1, err)
        self.assertEqual(got[0][1:3], (SMALL, "thermal"))
        self.assertTrue(out.startswith("Once upon a time"), out)
        self.assertIn("PyTorchObserver {", err)

    def test_default_tokenizer_and_no_trace(self):
        # the first variant takes --tokenizer; no trace: nominal signals, the best variant
        rc, out, err = run("--models", "%s,%s" % (REPO / "models/default/model.pte", STORIES),
                           "--tokenizer", str(REPO / "models/default/tokenizer.model"),
                           "--max-new-tokens", "3", "--temperature", "0")
        self.assertEqual(rc, 0, err)
        self.assertEqual([c[1:3] for c in choices(err)], [(BIG, "start")], err)

    def test_quiet(self):
        rc, out, err = self.chat(self.trace("0\n4\n"), ["a", "b"], "--quiet")
        self.assertEqual(rc, 0, err)
        self.assertEqual(choices(err), [])
        self.assertNotIn("policy:", err)

    def test_usage_errors(self):
        big = str(REPO / "models/default/model.pte")
        cases = [
            (["--models", DEFAULT, "--model", big], "--models replaces --model"),
            (["--model", big, "--tokenizer", "t", "--latency-budget-ms", "5"],
             "--latency-budget-ms needs --models"),
            (["--model", big, "--tokenizer", "t", "--thermal-trace", "x"],
             "--thermal-trace needs --models"),
            (["--models", big + "," + STORIES], "variant 1 ('%s') has no tokenizer" % big),
            (["--models", DEFAULT + ",," + STORIES], "variant 2 has no model path"),
            (["--models", DEFAULT + "," + big + ":"], "has an empty tokenizer"),
            (["--models", DEFAULT, "--latency-budget-ms", "-1"], "--latency-budget-ms"),
            (["--models", DEFAULT, "--cooldown-ms", "soon"], "--cooldown-ms"),
            (["--models", ",".join([DEFAULT] * 17)], "at most 16 variants"),
        ]
        for args, msg in cases:
            rc, out, err = run(*args)
            self.assertEqual(rc, 2, (args, err))
            self.assertIn(msg, err, args)
            self.assertEqual(out, "")

    def test_bad_traces(self):
        cases = [
            ("0\n5\n", ":2: thermal is not in [0, 4]: '5'"),
            ("0 1.5\n", ":1: battery is not in [0, 1]: '1.5'"),
            ("nan\n", ":1: not a number: 'nan'"),
            ("0 1 2\n", ":1: a third plain field"),
            ("heat=1\n", ":1: unknown key (thermal, battery, t, memory): 'heat'"),
            ("t=100\nt=50\n", ":2: t goes back in time: '50'"),
            ("t=0\n1\n", "1 of 2 lines give t=: give it on every line or on none"),
            ("# only a comment\n\n", "no requests"),
            ("memory=-1\n", ":1: memory is not a whole number of bytes"),
        ]
        for text, msg in cases:
            rc, out, err = self.chat(self.trace(text), ["a"])
            self.assertEqual(rc, 1, (text, err))
            self.assertIn(msg, err, text)
            self.assertNotIn("policy: request", err)
        rc, out, err = self.chat(str(Path(self.tmp.name) / "missing.txt"), ["a"])
        self.assertEqual(rc, 1, err)
        self.assertIn("missing.txt: No such file or directory", err)
        rc, out, err = run("--models", DEFAULT + ",/nonexistent/x.pte:t")
        self.assertEqual(rc, 1, err)
        self.assertIn("/nonexistent/x.pte: No such file or directory", err)


if __name__ == "__main__":
    unittest.main()
