"""`etch llm` on the committed default model (models/default), as `make run` uses it.

* >= 90% of the generated words are in /usr/share/dict/words (Debian's wamerican): words are
  runs of letters (an apostrophe inside a word kept), case-folded, a possessive 's dropped;
  checked per run and over all runs (four seeds without a prompt, four with prompts, the `make
  run` command itself, past EOS, temperature 1, greedy).  A missing dictionary is a failure,
  not a skip.
* stdout is only the text (the prompt first), valid UTF-8, no log lines; stderr ends with one
  `PyTorchObserver {...}` line whose counts match.
* models/default/model.pte's sha256 is the one models/default/README.md states, and the
  training log ends with the final held-out loss.

Python standard library only: this runs where torch is not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DM = Path(os.environ.get("DM_DIR", REPO / "models" / "default"))
CLI = os.environ.get("ETCH_CLI", str(REPO / "build" / "etch"))
DICT = Path("/usr/share/dict/words")
WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
MIN_RATIO = 0.90


def load_dict():
    if not DICT.is_file():
        raise AssertionError("%s is missing: install Debian's wamerican "
                             "(apt-get install wamerican); the dictionary check needs it"
                             % DICT)
    return {w.strip().lower() for w in DICT.read_text(encoding="utf-8").splitlines()
            if w.strip()}


def words_of(text: str):
    out = []
    for w in WORD_RE.findall(text):
        w = w.lower()
        if w.endswith("'s"):
            w = w[:-2]
        out.append(w)
    return out


def known(word: str, words) -> bool:
    return word in words or ("'" in word and all(p in words for p in word.split("'") if p))


def run_llm(*args):
    p = subprocess.run([CLI, "llm", "--model", str(DM / "model.pte"), "--tokenizer",
                        str(DM / "tokenizer.model"), *args], capture_output=True, timeout=300)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def stats_of(stderr: str):
    lines = [ln for ln in stderr.splitlines() if ln.startswith("PyTorchObserver ")]
    return lines


def make_run_args():
    """The arguments of `etch llm` in the Makefile's run target."""
    mk = (REPO / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^run:.*\n((?:\t.*\n)+)", mk, re.M)
    assert m, "Makefile has no run target"
    for line in m.group(1).splitlines():
        if " llm " in line:
            argv = shlex.split(line.strip().replace("$(BUILD)", "build"))
            return argv[argv.index("llm") + 1:]
    raise AssertionError("the run target does not call etch llm")


class GenerateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.words = load_dict()
        cls.total = 0
        cls.good = 0

    def check_run(self, args, prompt=None, label=""):
        rc, out, err = run_llm(*args)
        self.assertEqual(rc, 0, err)
        text = out.decode("utf-8")          # stdout is valid UTF-8 text
        self.assertNotIn("PyTorchObserver", text)
        if prompt is not None:
            self.assertTrue(text.startswith(prompt), text[:200])
            gen = text[len(prompt):]
        else:
            gen = text
        st = stats_of(err)
        self.assertEqual(len(st), 1, err)
        self.assertTrue(err.rstrip("\n").splitlines()[-1].startswith("PyTorchObserver {"), err)
        s = json.loads(st[0][len("PyTorchObserver "):])
        self.assertGreater(s["generated_tokens"], 20, s)
        ws = words_of(gen)
        self.assertGreater(len(ws), 10, gen)
        bad = [w for w in ws if not known(w, self.words)]
        ratio = 1 - len(bad) / len(ws)
        print("%-40s %4d words, %5.1f%% in the dictionary; not: %s"
              % (label, len(ws), 100 * ratio, sorted(set(bad))[:20]))
        self.assertGreaterEqual(ratio, MIN_RATIO, gen)
        type(self).total += len(ws)
        type(self).good += len(ws) - len(bad)
        return gen

    def test_1_no_prompt(self):
        for seed in (1, 2, 3, 4):
            self.check_run(["--max-new-tokens", "200", "--seed", str(seed)],
                           label="no prompt, seed %d" % seed)

    def test_2_prompts(self):
        prompts = ["Once upon a time, there was a little girl named Lily.",
                   "One day, Tom went to the park", "The dog was scared of the dark.",
                   "Sam had a red ball."]
        for i, p in enumerate(prompts):
            self.check_run(["--prompt", p, "--max-new-tokens", "150", "--seed", str(10 + i),
                            "--temperature", "0.8"], prompt=p, label="prompt %d" % i)

    def test_3_make_run(self):
        args = make_run_args()
        prompt = args[args.index("--prompt") + 1] if "--prompt" in args else None
        self.check_run([a for a in args if a not in ("--model", "--tokenizer") and
                        not a.startswith("models/")], prompt=prompt, label="make run")

    def test_4_long_and_hot(self):
        """Past the end of a story (--ignore-eos: the next one starts) and at temperature 1."""
        self.check_run(["--ignore-eos", "--max-new-tokens", "250", "--seed", "5"],
                       label="ignore eos, 250 tokens")
        self.check_run(["--temperature", "1.0", "--top-p", "1.0", "--max-new-tokens", "200",
                        "--seed", "6"], label="temperature 1, top-p 1")

    def test_5_greedy(self):
        self.check_run(["--temperature", "0", "--max-new-tokens", "120"], label="greedy")

    @classmethod
    def tearDownClass(cls):
        if cls.total:
            print("overall: %d words, %.2f%% in %s" % (cls.total, 100 * cls.good / cls.total,
                                                        DICT))


class ArtifactsTest(unittest.TestCase):
    def test_sha256_stated(self):
        readme = (DM / "README.md").read_text(encoding="utf-8")
        m = re.search(r"model\.pte`?\s+sha256:?\s*`?([0-9a-f]{64})", readme)
        self.assertIsNotNone(m, "models/default/README.md does not state model.pte's sha256")
        digest = hashlib.sha256((DM / "model.pte").read_bytes()).hexdigest()
        self.assertEqual(digest, m.group(1))

    def test_small_files(self):
        for name in ("model.pte", "tokenizer.model", "train_log.txt"):
            size = (DM / name).stat().st_size
            self.assertLess(size, 8 << 20, name)
            self.assertGreater(size, 0, name)

    def test_log_has_heldout_loss(self):
        log = (DM / "train_log.txt").read_text(encoding="utf-8")
        m = re.search(r"^final held-out loss (\d+\.\d+)", log, re.M)
        self.assertIsNotNone(m, "train_log.txt has no final held-out loss")
        self.assertLess(float(m.group(1)), 2.0)


class ErrorsTest(unittest.TestCase):
    def test_missing_model_is_an_error(self):
        p = subprocess.run([CLI, "llm", "--model", str(DM / "no_such.pte"), "--tokenizer",
                            str(DM / "tokenizer.model")], capture_output=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"no_such.pte", p.stderr)
        self.assertEqual(p.stdout, b"")


if __name__ == "__main__":
    unittest.main()
