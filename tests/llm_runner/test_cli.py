"""`etch llm` end to end on stories260K exported from the .bin and the .pt checkpoints: stdout
is exactly the text (the greedy continuation from BOS reproduces stories260K_greedy.txt), the
statistics line on stderr has ExecuTorch's keys with monotonic timestamps and the token
counts, --chat keeps the cache across turns, usage errors exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import unittest

from tests.llm_runner._common import (CLI, FIXTURES, GREEDY_TOKENS, greedy_text,
                                      model_path)

ET_KEYS = ["prompt_tokens", "generated_tokens", "model_load_start_ms", "model_load_end_ms",
           "inference_start_ms", "inference_end_ms", "prompt_eval_end_ms", "first_token_ms",
           "aggregate_sampling_time_ms", "SCALING_FACTOR_UNITS_PER_SECOND"]


def run(*args, stdin=None):
    p = subprocess.run([CLI, "llm", *args], input=stdin, capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def stats_lines(stderr: str):
    out = []
    for line in stderr.splitlines():
        if line.startswith("PyTorchObserver "):
            out.append(json.loads(line[len("PyTorchObserver "):]))
    return out


def tok():
    return str(FIXTURES / "tok512.bin")


class GreedyTest(unittest.TestCase):
    def check_greedy(self, kind):
        rc, out, err = run("--model", str(model_path(kind)), "--tokenizer", tok(),
                           "--temperature", "0", "--max-new-tokens", str(GREEDY_TOKENS))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, greedy_text())
        st = stats_lines(err)
        self.assertEqual(len(st), 1)
        s = st[0]
        self.assertEqual(list(s)[:len(ET_KEYS)], ET_KEYS)
        self.assertEqual(s["prompt_tokens"], 1)
        self.assertEqual(s["generated_tokens"], GREEDY_TOKENS)
        self.assertEqual(s["SCALING_FACTOR_UNITS_PER_SECOND"], 1000)
        order = ["model_load_start_ms", "model_load_end_ms", "inference_start_ms",
                 "prompt_eval_end_ms", "first_token_ms", "inference_end_ms"]
        vals = [s[k] for k in order]
        self.assertEqual(vals, sorted(vals), s)
        self.assertGreater(s["peak_rss_bytes"], 0)
        self.assertTrue(err.rstrip("\n").splitlines()[-1].startswith("PyTorchObserver {"))

    def test_greedy_bin(self):
        self.check_greedy("bin")

    def test_greedy_pt(self):
        self.check_greedy("pt")

    def test_prompt_echo_and_count(self):
        prompt = "Once upon a time, Tom"
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer", tok(),
                           "--prompt", prompt, "--max-new-tokens", "20", "--temperature", "0")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith(prompt.encode()), out)
        self.assertGreater(len(out), len(prompt))
        s = stats_lines(err)[0]
        self.assertEqual(s["generated_tokens"], 20)
        self.assertGreater(s["prompt_tokens"], 2)

    def test_sampling_is_seeded(self):
        args = ["--model", str(model_path("bin")), "--tokenizer", tok(), "--max-new-tokens",
                "40", "--temperature", "1.0", "--top-p", "0.95", "--top-k", "50"]
        a = run(*args, "--seed", "3")
        b = run(*args, "--seed", "3")
        c = run(*args, "--seed", "4")
        self.assertEqual(a[0], 0, a[2])
        self.assertEqual(a[1], b[1])
        self.assertNotEqual(a[1], c[1])

    def test_no_prepack_same_text_less_memory(self):
        """--no-prepack: the greedy text of a prompted run is unchanged (mapped or read); with
        --load-mode read (a buffer whose pages the runtime cannot give back) the packed copy is
        a second copy of the weights, so without it the peak RSS is not larger. (Mapped, the
        packed weights' pages are given back: tests/prepack measures that.) The RSS part is
        checked in the plain build only: under the sanitizers (ETCH_SANITIZED, set by CMake)
        the peak RSS is mostly shadow memory and freed blocks held in quarantine, which moved
        it by as much as this model's packed copy (about 1 MB) between runs."""
        args = ["--model", str(model_path("bin")), "--tokenizer", tok(), "--prompt",
                "Once upon a time, Tom", "--max-new-tokens", "30", "--temperature", "0"]
        a = run(*args)
        b = run(*args, "--no-prepack")
        c = run(*args, "--load-mode", "read")
        d = run(*args, "--load-mode", "read", "--no-prepack")
        for r in (a, b, c, d):
            self.assertEqual(r[0], 0, r[2])
            self.assertEqual(r[1], a[1])
        if not os.environ.get("ETCH_SANITIZED"):
            self.assertLessEqual(stats_lines(d[2])[0]["peak_rss_bytes"],
                                 stats_lines(c[2])[0]["peak_rss_bytes"])

    def test_prefill_only(self):
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer", tok(),
                           "--max-new-tokens", "0", "--cpu-threads", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, b"")
        s = stats_lines(err)[0]
        self.assertEqual((s["prompt_tokens"], s["generated_tokens"]), (1, 0))
        self.assertIn("threads 2", err)


class ChatTest(unittest.TestCase):
    def test_two_turns_keep_the_cache(self):
        turns = "Once upon a time\nThe cat was happy.\n"
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer", tok(), "--chat",
                           "--temperature", "0", "--max-new-tokens", "16", "--ignore-eos",
                           "--stats", stdin=turns.encode())
        self.assertEqual(rc, 0, err)
        st = stats_lines(err)
        self.assertEqual(len(st), 2)
        self.assertEqual(out.count(b"\n") >= 2, True)
        # turn 2 prefills the pending reply token and its own tokens only: as many as a fresh
        # run of the same text prefills with its BOS
        rc, _, err2 = run("--model", str(model_path("bin")), "--tokenizer", tok(),
                          "--prompt", "The cat was happy.", "--max-new-tokens", "0")
        self.assertEqual(rc, 0, err2)
        fresh = stats_lines(err2)[0]["prompt_tokens"]
        self.assertEqual(st[1]["prompt_tokens"], fresh)
        self.assertEqual(st[0]["generated_tokens"], 16)
        self.assertEqual(st[1]["generated_tokens"], 16)
        self.assertIn("context %d tokens" % (st[0]["prompt_tokens"] + 15), err)
        self.assertIn("context %d tokens" % (st[0]["prompt_tokens"] + 16 + fresh - 1 + 15),
                      err)


    def test_nul_byte_in_a_line_is_refused(self):
        # a NUL would end the turn early (C strings): the line is skipped with a message
        # naming it, the next line is a turn as usual
        turns = b"Once upon\0 a time\nThe cat was happy.\n"
        rc, _, err = run("--model", str(model_path("bin")), "--tokenizer", tok(), "--chat",
                         "--temperature", "0", "--max-new-tokens", "4", "--stats", stdin=turns)
        self.assertEqual(rc, 0, err)
        self.assertIn("line 1 holds a NUL byte (byte 10 of 17): not text; skipped", err)
        self.assertEqual(len(stats_lines(err)), 1, err)


class ErrorTest(unittest.TestCase):
    def test_usage(self):
        # without --model, etch llm serves the store's default model (tests/deploy covers
        # it); usage errors stay usage errors
        self.assertEqual(run("--tokenizer", tok(), "--chat", "--prompt", "x")[0], 2)
        self.assertEqual(run("--model", str(model_path("bin")))[0], 2)
        self.assertEqual(run("--model", "m", "--tokenizer", "t", "--top-p", "0")[0], 2)
        self.assertEqual(run("--model", "m", "--tokenizer", "t", "--chat", "--prompt", "x")[0],
                         2)
        self.assertEqual(run("--model", "m", "--tokenizer", "t", "--bogus")[0], 2)

    def test_failures(self):
        rc, out, err = run("--model", "/nonexistent.pte", "--tokenizer", tok())
        self.assertEqual(rc, 1)
        self.assertIn("error", err)
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer", "/nonexistent")
        self.assertEqual(rc, 1)
        long_prompt = "the dog ran " * 400
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer", tok(),
                           "--prompt", long_prompt)
        self.assertEqual(rc, 1)
        self.assertIn("context", err)
        self.assertEqual(out, b"")


if __name__ == "__main__":
    unittest.main()
