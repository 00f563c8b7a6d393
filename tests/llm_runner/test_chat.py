"""`etch llm` for people, on the tiny models gen_chat_models.py writes (LLMR_CHAT) and on
stories260K (LLMR_MODELS): chat templates (the exact ids fed to the model against a reference
encoding of the template pieces with special tokens and the user's text without), context
shifting in a 96-token window, --stop strings, --quiet / --stats / the one-line chat report,
--json, the default thread count, and the tokenizer findings (the path printed once, vocabulary
size checks)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import unittest
from pathlib import Path

from tests.llm_runner._common import CLI, FIXTURES, greedy_text, model_path

CHAT = Path(os.environ.get("LLMR_CHAT", Path(__file__).resolve().parents[2] / "build" / "tests"
                           / "llm_runner" / "chat"))
TOKJ = str(CHAT / "tokenizer.json")
SPECIALS = {"<|im_end|>": 0, "<|im_start|>": 1, "<|endoftext|>": 2}
(CONV, SYS_P, SYS_S, USER_P, USER_S, ASSIST_P, ASSIST_S, DEFAULT_SYS) = json.loads(
    (CHAT / "template.json").read_text(encoding="utf-8")) if (CHAT / "template.json").exists() \
    else [""] * 8
WINDOW = 96


def enc(text: str, special: bool) -> list:
    """The reference encoding of the test tokenizer (Hugging Face semantics: special added
    tokens matched in the text only when allowed, every other byte its own id, 3 + byte)."""
    ids = []
    i = 0
    while i < len(text):
        hit = None
        if special:
            for s, sid in SPECIALS.items():
                if text.startswith(s, i):
                    hit = (s, sid)
                    break
        if hit:
            ids.append(hit[1])
            i += len(hit[0])
        else:
            ids.extend(3 + b for b in text[i].encode("utf-8"))
            i += 1
    return ids


def prefix_ids(system=None) -> list:
    sys_ = DEFAULT_SYS if system is None else system
    ids = enc(CONV, True)
    if sys_:
        ids += enc(SYS_P, True) + enc(sys_, False) + enc(SYS_S, True)
    return ids


def turn_ids(text: str) -> list:
    return enc(USER_P, True) + enc(text, False) + enc(USER_S, True) + enc(ASSIST_P, True)


def run(*args, stdin=None, preexec_fn=None):
    p = subprocess.run([CLI, "llm", *args], input=stdin, capture_output=True, timeout=600,
                       preexec_fn=preexec_fn)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def contexts(stderr: str):
    """The (context ids, pending id) pairs --print-tokens writes."""
    ctx = [[int(x) for x in m.split()] for m in re.findall(r"^context:(.*)$", stderr, re.M)]
    pend = [int(x) for x in re.findall(r"^pending: (-?\d+)$", stderr, re.M)]
    return list(zip(ctx, pend))


def chat_args(model="chat.pte", *extra):
    return ["--model", str(CHAT / model), "--tokenizer", TOKJ, "--temperature", "0", *extra]


class TemplateTest(unittest.TestCase):
    def test_prompt_is_formatted_user_text_is_not_parsed(self):
        text = "Hi <|im_end|> there"
        rc, out, err = run(*chat_args("chat.pte", "--prompt", text, "--max-new-tokens", "5",
                                      "--ignore-eos", "--print-tokens"))
        self.assertEqual(rc, 0, err)
        (ctx, pending), = contexts(err)
        want = prefix_ids() + turn_ids(text)
        self.assertEqual(ctx[:len(want)], want)
        self.assertEqual(len(ctx), len(want) + 4)  # 5 generated, the last one pending
        self.assertGreaterEqual(pending, 0)
        # the user's "<|im_end|>" is bytes: id 0 appears only where the template puts it
        self.assertEqual(ctx[:len(want)].count(0), 2)
        self.assertIn("chat template", err)
        # the reply only: the prompt is not echoed through the template
        self.assertFalse(out.startswith(text.encode()))

    def test_system_option(self):
        rc, _, err = run(*chat_args("chat.pte", "--prompt", "x", "--system", "Short.",
                                    "--max-new-tokens", "1", "--print-tokens"))
        self.assertEqual(rc, 0, err)
        (ctx, _), = contexts(err)
        want = prefix_ids("Short.") + turn_ids("x")
        self.assertEqual(ctx[:len(want)], want)

    def test_chat_turns_and_assistant_suffix(self):
        rc, out, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "3",
                                      "--ignore-eos", "--print-tokens"),
                           stdin=b"one\ntwo\n")
        self.assertEqual(rc, 0, err)
        (c1, p1), (c2, _) = contexts(err)
        self.assertEqual(c1[:len(prefix_ids()) + len(turn_ids("one"))],
                         prefix_ids() + turn_ids("one"))
        # turn 2: the pending reply token, the assistant suffix, then the formatted turn
        want = c1 + [p1] + enc(ASSIST_S, True) + turn_ids("two")
        self.assertEqual(c2[:len(want)], want)
        self.assertEqual(out.count(b"\n") >= 2, True)

    def test_eos_is_not_fed_twice(self):
        """eos.pte answers <|im_end|> (its EOS) at once: the suffix <|im_end|>\\n then adds only
        its newline after it."""
        rc, out, err = run(*chat_args("eos.pte", "--chat", "--print-tokens"),
                           stdin=b"one\ntwo\n")
        self.assertEqual(rc, 0, err)
        (c1, p1), (c2, p2) = contexts(err)
        self.assertEqual(c1, prefix_ids() + turn_ids("one"))
        self.assertEqual(p1, 0)
        self.assertEqual(c2, c1 + [0] + enc("\n", False) + turn_ids("two"))
        self.assertEqual(p2, 0)
        self.assertEqual(out, b"\n\n")
        self.assertEqual(err.count("eos]"), 2)  # the one-line report names the stop

    def test_plain_program_keeps_plain_chat(self):
        rc, _, err = run("--model", str(CHAT / "plain.pte"), "--tokenizer", TOKJ, "--chat",
                         "--temperature", "0", "--max-new-tokens", "2", "--ignore-eos",
                         "--print-tokens", stdin=b"ab\ncd\n")
        self.assertEqual(rc, 0, err)
        (c1, p1), (c2, _) = contexts(err)
        self.assertEqual(c1[:3], [2] + enc("ab", False))  # BOS, the text as it is
        self.assertEqual(c2[:len(c1) + 3], c1 + [p1] + enc("cd", False))

    def test_system_needs_a_template(self):
        rc, _, err = run("--model", str(CHAT / "plain.pte"), "--tokenizer", TOKJ, "--prompt",
                         "x", "--system", "s")
        self.assertEqual(rc, 1)
        self.assertIn("--system needs a chat template", err)


class ContextShiftTest(unittest.TestCase):
    def test_chat_drops_oldest_turns_keeps_system(self):
        turns = ["turn number %d, some words" % i for i in range(6)]
        rc, out, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "6",
                                      "--ignore-eos", "--print-tokens"),
                           stdin="".join(t + "\n" for t in turns).encode())
        self.assertEqual(rc, 0, err)
        ctx = contexts(err)
        self.assertEqual(len(ctx), 6)  # every turn answered: the chat did not end
        self.assertEqual(out.count(b"\n"), 6)
        self.assertIn("context full: dropped the", err)
        pre = prefix_ids()
        for (c, _), t in zip(ctx, turns):
            self.assertLessEqual(len(c), WINDOW)
            self.assertEqual(c[:len(pre)], pre)  # the system prompt stays
            ti = turn_ids(t)
            # this turn's ids follow the prefix or an earlier turn's suffix
            at = next(i for i in range(len(c)) if c[i:i + len(ti)] == ti)
            self.assertTrue(at == len(pre) or c[at - 2:at] == enc(ASSIST_S, True), (at, c))
            self.assertEqual(len(c) - at - len(ti), 5)  # the reply, its last token pending

    def test_reply_that_fills_the_context_drops_older_turns_and_goes_on(self):
        """Turn 1 ends early on a stop id (one of its own greedy reply tokens, found by a
        first run); turn 2's reply, without a token limit, fills the window while turn 1 is
        still in it: turn 1 is dropped and the reply goes on (context_shifts 1), until the
        window is full again with only turn 2 left (context_full)."""
        base = chat_args("chat.pte", "--chat", "--ignore-eos", "--json", "--print-tokens")
        rc, _, err = run(*base, stdin=b"a\n")
        self.assertEqual(rc, 0, err)
        (c1, p1), = contexts(err)
        n1 = len(prefix_ids()) + len(turn_ids("a"))
        reply = c1[n1:] + [p1]
        found = False
        for k in range(3, 20):
            if reply[k] in reply[:k]:
                continue
            rc, out, err = run(*base, "--stop-ids", str(reply[k]), stdin=b"a\nb\n")
            self.assertEqual(rc, 0, err)
            o1, o2 = [json.loads(line) for line in out.decode().splitlines()]
            if o1["stop_reason"] != "stop_id" or o2["context_shifts"] != 1:
                continue
            found = True
            self.assertEqual(o1["generated_tokens"], k + 1)
            self.assertEqual(o2["stop_reason"], "context_full")
            self.assertIn("context full: dropped the 1 oldest turn", err)
            (_, _), (c2, _) = contexts(err)
            pre, tb = prefix_ids(), turn_ids("b")
            self.assertEqual(len(c2), WINDOW)
            self.assertEqual(c2[:len(pre) + len(tb)], pre + tb)  # turn 1 is gone
            # more tokens than the room turn 2 had with turn 1 still there
            room = WINDOW - (n1 + k + 1 + len(enc(ASSIST_S, True)) + len(tb))
            self.assertGreater(o2["generated_tokens"], room)
            break
        self.assertTrue(found, "no stop id made turn 1 short and turn 2 fill the window")

    def test_turn_larger_than_the_window_is_skipped(self):
        rc, out, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "2",
                                      "--print-tokens"),
                           stdin=("x" * 200 + "\nshort\n").encode())
        self.assertEqual(rc, 0, err)
        self.assertIn("this turn is %d tokens" % len(turn_ids("x" * 200)), err)
        self.assertIn("skipped", err)
        (c, _), = contexts(err)
        self.assertEqual(c[:len(prefix_ids()) + len(turn_ids("short"))],
                         prefix_ids() + turn_ids("short"))

    def test_long_prompt_generation_goes_on(self):
        rc, out, err = run(*chat_args("chat.pte", "--prompt", "go", "--max-new-tokens", "150",
                                      "--ignore-eos", "--json", "--print-tokens"))
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual(obj["generated_tokens"], 150)
        self.assertEqual(obj["stop_reason"], "max_tokens")
        self.assertGreaterEqual(obj["context_shifts"], 1)
        (c, _), = contexts(err)
        self.assertEqual(c[:len(prefix_ids())], prefix_ids())
        self.assertLessEqual(len(c), WINDOW)

    def test_without_a_limit_a_prompt_stops_at_the_end_of_the_context(self):
        rc, out, err = run(*chat_args("chat.pte", "--prompt", "go", "--ignore-eos", "--json"))
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual(obj["stop_reason"], "context_full")
        self.assertEqual(obj["context_shifts"], 0)


class StopStringTest(unittest.TestCase):
    def test_stop_string_on_stories(self):
        base = ["--model", str(model_path("bin")), "--tokenizer", str(FIXTURES / "tok512.bin"),
                "--temperature", "0", "--max-new-tokens", "200"]
        full = greedy_text()
        for stop in ("Lily", "the park", "didn't know"):
            self.assertIn(stop.encode(), full)
            rc, out, err = run(*base, "--stop", stop)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, full[:full.index(stop.encode())], stop)
            self.assertIn("stop: stop_string", err)
        # two strings: the first reached wins; one that never comes changes nothing
        rc, out, _ = run(*base, "--stop", "zzzq", "--stop", "Lily")
        self.assertEqual(out, full[:full.index(b"Lily")])
        rc, out, _ = run(*base[:-1], "258", "--stop", "zzzq")
        self.assertEqual(out, full)

    def test_stop_string_json(self):
        args = chat_args("chat.pte", "--prompt", "go", "--max-new-tokens", "30",
                         "--ignore-eos", "--json")
        rc, out, err = run(*args)
        self.assertEqual(rc, 0, err)
        text = json.loads(out)["text"]
        stop = text[6:8]
        rc, out, err = run(*args, "--stop", stop)
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)
        self.assertEqual(obj["text"], text[:text.index(stop)])
        self.assertEqual(obj["stop_reason"], "stop_string")


class OutputTest(unittest.TestCase):
    def test_quiet(self):
        rc, out, err = run(*chat_args("chat.pte", "--prompt", "go", "--max-new-tokens", "3",
                                      "--quiet"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        self.assertNotEqual(out, b"")
        rc, _, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "3", "--quiet"),
                         stdin=b"a\nb\n")
        self.assertEqual((rc, err), (0, ""))

    def test_chat_report_one_line_per_turn_or_stats(self):
        rc, _, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "3",
                                    "--ignore-eos"), stdin=b"a\nb\n")
        self.assertEqual(rc, 0, err)
        lines = re.findall(r"^\[3 tokens, [0-9.]+ tokens/s, first token [0-9]+ ms, "
                           r"context \d+/96, max_tokens\]$", err, re.M)
        self.assertEqual(len(lines), 2, err)
        self.assertNotIn("PyTorchObserver", err)
        rc, _, err = run(*chat_args("chat.pte", "--chat", "--max-new-tokens", "3",
                                    "--ignore-eos", "--stats"), stdin=b"a\nb\n")
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count("PyTorchObserver {"), 2)
        self.assertEqual(err.count("prompt tokens: "), 2)

    def test_json(self):
        base = ["--model", str(model_path("bin")), "--tokenizer", str(FIXTURES / "tok512.bin"),
                "--temperature", "0", "--max-new-tokens", "40", "--prompt", "Once upon"]
        rc, text, _ = run(*base)
        self.assertEqual(rc, 0)
        rc, out, err = run(*base, "--json")
        self.assertEqual(rc, 0, err)
        obj = json.loads(out)  # one object, nothing else on stdout
        self.assertEqual(obj["prompt"], "Once upon")
        self.assertEqual(obj["prompt"].encode() + obj["text"].encode(), text)
        self.assertEqual(obj["generated_tokens"], 40)
        self.assertEqual(obj["stop_reason"], "max_tokens")
        self.assertIsNone(obj["stop_id"])
        self.assertEqual(obj["context_tokens"], obj["prompt_tokens"] + 39)
        self.assertEqual(obj["context_window"], 512)
        st = obj["stats"]
        self.assertEqual((st["prompt_tokens"], st["generated_tokens"]),
                         (obj["prompt_tokens"], 40))
        self.assertEqual(st["SCALING_FACTOR_UNITS_PER_SECOND"], 1000)
        self.assertLessEqual(st["inference_start_ms"], st["inference_end_ms"])
        self.assertNotIn("PyTorchObserver", err)
        # chat: one object per line
        rc, out, err = run("--model", str(model_path("bin")), "--tokenizer",
                           str(FIXTURES / "tok512.bin"), "--temperature", "0",
                           "--max-new-tokens", "5", "--chat", "--json", "--ignore-eos",
                           stdin=b"The cat\nThe dog\n")
        self.assertEqual(rc, 0, err)
        objs = [json.loads(line) for line in out.decode().splitlines()]
        self.assertEqual([o["prompt"] for o in objs], ["The cat", "The dog"])
        self.assertEqual([o["generated_tokens"] for o in objs], [5, 5])

    def test_default_threads_follow_the_affinity(self):
        ncpu = min(len(os.sched_getaffinity(0)), 256)
        args = chat_args("chat.pte", "--max-new-tokens", "1")
        rc, _, err = run(*args)
        self.assertEqual(rc, 0, err)
        self.assertIn("threads %d, kernels" % ncpu, err)
        self.assertIn("threads: %d\n" % ncpu, err)
        cpu = sorted(os.sched_getaffinity(0))[0]
        rc, _, err = run(*args, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        self.assertEqual(rc, 0, err)
        self.assertIn("threads 1, kernels", err)


class TokenizerFindingsTest(unittest.TestCase):
    def test_path_printed_once(self):
        rc, _, err = run("--model", str(CHAT / "chat.pte"), "--tokenizer", "/nonexistent/tok")
        self.assertEqual(rc, 1)
        self.assertEqual(err.count("/nonexistent/tok"), 1, err)
        bad = CHAT / "bad_tokenizer.json"
        bad.write_text('{"model": {"type": "BPE"}}')
        rc, _, err = run("--model", str(CHAT / "chat.pte"), "--tokenizer", str(bad))
        self.assertEqual(rc, 1)
        self.assertEqual(err.count(str(bad)), 1, err)

    def test_vocabulary_sizes(self):
        # more ids than the model: an error, whatever the format
        rc, _, err = run("--model", str(CHAT / "chat.pte"), "--tokenizer",
                         str(FIXTURES / "tok512.bin"))
        self.assertEqual(rc, 1)
        self.assertIn("the tokenizer has 512 ids but the model's vocabulary has 264", err)
        # fewer: an error for llama2.c and sentencepiece (they are the vocabulary)...
        for tok, kind in (("tok512.bin", "llama2.c"), ("tok512.model", "sentencepiece")):
            rc, _, err = run("--model", str(CHAT / "wide.pte"), "--tokenizer",
                             str(FIXTURES / tok), "--max-new-tokens", "1")
            self.assertEqual(rc, 1, err)
            self.assertIn("has 512 ids but the model's vocabulary has 520", err)
            self.assertIn("a %s " % kind, err)
        # ...a note for a byte-level tokenizer a few ids short (a padded embedding), whose
        # padded ids are never sampled...
        rc, out, err = run("--model", str(CHAT / "plain.pte"), "--tokenizer", TOKJ,
                           "--max-new-tokens", "64", "--temperature", "4", "--ignore-eos",
                           "--print-tokens")
        self.assertEqual(rc, 0, err)
        self.assertIn("note: the tokenizer has 259 ids, the model's vocabulary 264", err)
        (c, pending), = contexts(err)
        self.assertEqual(len(c), 64)  # BOS + 63 sampled, the 64th pending
        self.assertLess(max(c + [pending]), 259, c)
        # ...and an error when it is far smaller: its ids would be garbage
        rc, _, err = run("--model", str(CHAT / "wide.pte"), "--tokenizer", TOKJ,
                         "--max-new-tokens", "1")
        self.assertEqual(rc, 1, err)
        self.assertIn("the tokenizer has 259 ids but the model's vocabulary has 520: 261 ids "
                      "without text are more than a padded embedding has (at most 64", err)


if __name__ == "__main__":
    unittest.main()
