"""The training recipe of models/default (python/etch/llm/train.py), needs torch and
sentencepiece (Debian's python3-torch, python3-sentencepiece); fails without them.

* the batched, cache-free training pass gives the logits of the module's own forward (token by
  token through the KV cache, and one prefill), grouped-query attention included;
* the tokenizer trained twice on the same text: identical bytes;
* a short training run (a tiny llama, a few steps) twice: identical checkpoint tensors, and
  their exports identical bytes; exporting one checkpoint twice: identical bytes; the held-out
  loss falls;
* bad inputs (missing files, too little text) are errors with a message, not tracebacks.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402

from etch.llm import storygen, train  # noqa: E402
from etch.llm.checkpoint import build_model  # noqa: E402
from etch.llm.export import export_llama  # noqa: E402
from etch.llm.model import Llama, ModelArgs  # noqa: E402


class TrainLogitsTest(unittest.TestCase):
    def test_same_as_forward(self):
        torch.manual_seed(0)
        a = ModelArgs(dim=64, hidden_dim=160, n_layers=2, n_heads=4, n_kv_heads=2,
                      vocab_size=100, max_seq_len=32)
        m = Llama(a)
        train._init_weights(m, 2, 3)
        with torch.no_grad():
            for p in m.parameters():     # norms away from 1, so they are exercised too
                if p.dim() == 1:
                    p.uniform_(0.5, 1.5)
        m.eval()
        toks = torch.randint(0, 100, (2, 20))
        with torch.no_grad():
            full = train.train_logits(m, toks)
            for b in range(2):
                m.reset_cache()
                for t in range(20):
                    y = m(toks[b:b + 1, t:t + 1], torch.tensor([t]))
                    torch.testing.assert_close(y[0], full[b, t], rtol=1e-5, atol=1e-5)
                m.reset_cache()
                y = m(toks[b:b + 1], torch.tensor([0]))
                torch.testing.assert_close(y[0], full[b, -1], rtol=1e-5, atol=1e-5)


class ReproducibleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = Path(cls.tmp.name)
        cls.d = d
        with open(d / "train.txt", "w", encoding="utf-8") as f:
            for s in storygen.generate(400, 1):
                f.write(s + "\n")
        with open(d / "val.txt", "w", encoding="utf-8") as f:
            for s in storygen.generate(40, 2):
                f.write(s + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def tokenizer(self, name):
        return train.train_tokenizer(str(self.d / "train.txt"), str(self.d / name), 400)

    def short_run(self, tok, out):
        lines = []
        loss = train.train_model(str(self.d / "train.txt"), str(self.d / "val.txt"), tok,
                                 str(out), steps=6, batch=4, seq_len=64, dim=32, n_layers=2,
                                 n_heads=2, lr=3e-3, warmup=2, seed=7, eval_every=3,
                                 eval_windows=8, log=lines.append)
        return loss, lines

    def test_tokenizer_and_training_twice(self):
        t1, t2 = self.tokenizer("tok1"), self.tokenizer("tok2")
        self.assertEqual(Path(t1).read_bytes(), Path(t2).read_bytes())
        l1, log1 = self.short_run(t1, self.d / "a.pt")
        l2, log2 = self.short_run(t1, self.d / "b.pt")
        self.assertEqual(l1, l2)
        a = torch.load(self.d / "a.pt")["model"]
        b = torch.load(self.d / "b.pt")["model"]
        self.assertEqual(sorted(a), sorted(b))
        for k in a:
            self.assertTrue(torch.equal(a[k], b[k]), k)
        first = float(log1[3].split()[-1])         # "step 0  held-out loss X"
        self.assertLess(l1, first, log1)
        self.assertRegex(log1[-1], r"^final held-out loss \d+\.\d+")
        pa = export_llama(build_model(str(self.d / "a.pt")), check_ops=False).buffer
        pb = export_llama(build_model(str(self.d / "b.pt")), check_ops=False).buffer
        pa2 = export_llama(build_model(str(self.d / "a.pt")), check_ops=False).buffer
        self.assertEqual(pa, pb)
        self.assertEqual(pa, pa2)
        self.assertEqual(pa[4:8], b"ET12")

    def test_errors(self):
        err = io.StringIO()
        with redirect_stderr(err):
            rc = train.main(["model", "--train", str(self.d / "nope.txt"), "--val",
                             str(self.d / "val.txt"), "--tokenizer", "x.model", "--steps", "1",
                             "-o", str(self.d / "x.pt")])
        self.assertEqual(rc, 1)
        self.assertIn("nope.txt", err.getvalue())
        (self.d / "empty.txt").write_text("\n\n")
        tok = self.tokenizer("tok3")
        err = io.StringIO()
        with redirect_stderr(err):
            rc = train.main(["model", "--train", str(self.d / "empty.txt"), "--val",
                             str(self.d / "val.txt"), "--tokenizer", tok, "--steps", "1",
                             "-o", str(self.d / "x.pt")])
        self.assertEqual(rc, 1)
        self.assertIn("no text", err.getvalue())
        self.assertFalse(os.path.exists(self.d / "x.pt"))
        with redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                train.main(["model", "--steps", "x"])


if __name__ == "__main__":
    unittest.main()
