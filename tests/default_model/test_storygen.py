"""The story generator (python/etch/llm/storygen.py), the default model's training text: every
word of every word list and template, and every word of 7,000 generated stories, is in
/usr/share/dict/words (case-folded, possessive 's dropped); a missing dictionary fails. The
same seed gives the same stories; another seed other ones. Standard library only."""

from __future__ import annotations

import hashlib
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from etch.llm import storygen  # noqa: E402
from tests.default_model.test_generate import load_dict  # noqa: E402


class StorygenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.words = load_dict()

    def test_vocabulary_in_dictionary(self):
        vocab = storygen.all_words()
        self.assertGreater(len(vocab), 300)
        missing = [w for w in vocab if w not in self.words]
        self.assertEqual(missing, [])

    def test_generated_words_in_dictionary(self):
        seen, missing, n = set(), set(), 0
        for seed in (1, 2, 99):
            for s in storygen.generate(5000 if seed == 1 else 1000, seed):
                self.assertNotIn("\n", s)
                for w in storygen.words_of(s):
                    n += 1
                    seen.add(w)
                    if w not in self.words:
                        missing.add(w)
        print("%d words, %d distinct, all in the dictionary: %s" % (n, len(seen), not missing))
        self.assertEqual(sorted(missing), [])

    def test_seeded(self):
        a = list(storygen.generate(200, 5))
        self.assertEqual(a, list(storygen.generate(200, 5)))
        self.assertNotEqual(a, list(storygen.generate(200, 6)))
        self.assertGreater(len(set(a)), 195)       # varied

    def test_stable_text(self):
        """The training text of models/default: the first 1,000 stories of seed 1 hash to the
        value recorded when the model was built (a changed grammar changes the model)."""
        h = hashlib.sha256()
        for s in storygen.generate(1000, 1):
            h.update(s.encode("utf-8") + b"\n")
        self.assertEqual(h.hexdigest(), STORIES_SHA256)


STORIES_SHA256 = "637c68784ac9d1d79a52d0a54fa54b0bd0bd021740fb1dcfc0e311ee54a7e244"

if __name__ == "__main__":
    unittest.main()
