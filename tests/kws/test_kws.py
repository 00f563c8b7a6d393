"""etch's keyword spotter (models/kws) end to end: words spoken by flite's `kal` voice, which
the model never heard in training, through `etch features` (the C front end) and the C
runtime; and the int8 program against the float32 one on the held-out inputs committed with
the model."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import etch.runtime as er

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(REPO, "models", "kws")
LABELS = ["silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off", "stop",
          "go"]


class KeywordSpotter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fp32 = er.load(os.path.join(MODELS, "model_fp32.pte"))
        cls.int8 = er.load(os.path.join(MODELS, "model_int8.pte"))

    def test_int8_agrees_with_float32(self):
        x = np.load(os.path.join(MODELS, "test_inputs.npy"))
        agree = 0
        for i in range(len(x)):
            f = self.fp32.forward(x[i:i + 1])[0].numpy()
            q = self.int8.forward(x[i:i + 1])[0].numpy()
            agree += int(f.argmax() == q.argmax())
            # 12 logits on int8's output scale: within a few of its steps of float
            self.assertLess(np.abs(f - q).max(), 0.15 * max(1.0, np.abs(f).max()))
        self.assertGreaterEqual(agree / len(x), 0.97)

    def test_new_speech_through_the_c_front_end(self):
        d = tempfile.mkdtemp()
        try:
            right = {"fp32": 0, "int8": 0}
            words = LABELS[2:]
            for w in words:
                wav, npy = os.path.join(d, w + ".wav"), os.path.join(d, w + ".npy")
                # kal is 8 kHz: etch features resamples it to 16 kHz
                subprocess.run(["flite", "-voice", "kal", "-t", w, "-o", wav], check=True)
                r = subprocess.run([os.environ["ETCH_CLI"], "features", wav, "--frames", "49",
                                    "--shape", "1,1,49,10", "-o", npy], capture_output=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                x = np.load(npy)
                for name, m in (("fp32", self.fp32), ("int8", self.int8)):
                    got = LABELS[int(m.forward(x)[0].numpy().argmax())]
                    right[name] += int(got == w)
            # a voice the model never heard, each word once, at its natural position (the
            # start of the window): most, not all, are expected right
            print("keywords right of %d: %s" % (len(words), right))
            for name, n in right.items():
                self.assertGreaterEqual(n, 8, "%s: %d of %d keywords" % (name, n, len(words)))
        finally:
            shutil.rmtree(d)


class ExecuTorchKeywordSpotter(unittest.TestCase):
    """ExecuTorch's own Cortex-M program (trained on Google Speech Commands, cortex_m::
    operators) fed by etch's C front end: flite speech is far from its training data, but
    the MFCC parameters are right when most words come out right (chance is 1 in 12; the
    natural-log variant of the same features gets 5 of 40)."""

    def test_flite_words(self):
        pte = os.path.join(os.environ["ETCH_FIXTURES"], "pte", "kws_dscnn_cortexm.pte")
        m = er.load(pte)
        d = tempfile.mkdtemp()
        try:
            right = 0
            for w in LABELS[2:]:
                for voice in ("slt", "awb", "kal16", "rms"):
                    wav, npy = os.path.join(d, "w.wav"), os.path.join(d, "w.npy")
                    subprocess.run(["flite", "-voice", voice, "-t", w, "-o", wav], check=True)
                    r = subprocess.run([os.environ["ETCH_CLI"], "features", wav, "--frames",
                                        "49", "--shape", "1,1,49,10", "-o", npy],
                                       capture_output=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    right += int(LABELS[int(m.forward(np.load(npy))[0].numpy().argmax())] == w)
            print("ExecuTorch's KWS on flite speech: %d of 40 right" % right)
            self.assertGreaterEqual(right, 15)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
