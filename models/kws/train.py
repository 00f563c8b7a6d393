"""Train etch's keyword spotter: a DS-CNN on speech synthesized with Debian's flite, exported
float32 and int8 (etch's own static post-training quantization) for the C runtime.

    /usr/bin/python3 models/kws/train.py OUT_DIR      (models/kws/build.sh runs it)

The input is what ExecuTorch's Cortex-M keyword spotter takes (kws_dscnn_cortexm.pte): MFCC
[1, 1, 49, 10] of one second at 16 kHz (etch_features_default_config: 640-sample Hann frames
every 320 samples, 40 HTK mels 20-4000 Hz, dB with an 80 dB floor, 10 orthonormal DCT
coefficients), computed by the C front end itself (etch.audio), so the C pipeline feeds the
model exactly what it was trained on. The 12 classes are the same, in the same order:
silence, unknown, yes, no, up, down, left, right, on, off, stop, go.

Data: every keyword and 20 other words ("unknown") spoken by flite's 16 kHz voices (kal16,
slt, awb, rms) at 5 speeds and 3 pitches, each placed at a random offset in a one-second
window with added noise at a random level; "silence" is noise alone. The 8 kHz voice `kal`
(resampled by etch's resampler) is held out: the test set is a voice the model never heard.
Seeds are fixed and torch runs on one thread: the same inputs give the same files.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import etch  # noqa: E402
import etch.audio as ea  # noqa: E402

LABELS = ["silence", "unknown", "yes", "no", "up", "down", "left", "right", "on", "off", "stop",
          "go"]
UNKNOWN = ["bed", "bird", "cat", "dog", "eight", "five", "four", "happy", "house", "marvin",
           "nine", "one", "seven", "sheila", "six", "three", "tree", "two", "wow", "zero"]
TRAIN_VOICES = ["kal16", "slt", "awb", "rms"]
TEST_VOICES = ["kal"]
STRETCH = [0.8, 0.9, 1.0, 1.15, 1.3]
PITCH = [0.8, 1.0, 1.25]            # times each voice's own mean f0
VOICE_F0 = {"kal16": 105.0, "kal": 105.0, "slt": 160.0, "awb": 110.0, "rms": 95.0}
RATE = 16000


def synth(text, voice, stretch, pitch, tmp):
    path = os.path.join(tmp, "s.wav")
    subprocess.run(["flite", "-voice", voice, "--setf", "duration_stretch=%g" % stretch,
                    "--setf", "int_f0_target_mean=%g" % (VOICE_F0[voice] * pitch), "-t", text,
                    "-o", path], check=True, capture_output=True)
    x, rate = ea.read_wav(path)
    if rate != RATE:
        x = ea.resample(x, rate, RATE)
    # trim flite's leading and trailing silence (20 ms frames under 1% of the peak)
    frames = np.abs(x[: len(x) // 320 * 320]).reshape(-1, 320).max(axis=1)
    loud = np.nonzero(frames > 0.01 * frames.max())[0]
    x = x[loud[0] * 320:(loud[-1] + 1) * 320]
    return x[:RATE].astype(np.float32)


def noise(rng, n):
    """White or brown noise, unit peak."""
    w = rng.standard_normal(n)
    if rng.random() < 0.5:
        w = np.cumsum(w)
        w -= np.convolve(w, np.ones(400) / 400, mode="same")
    return w / max(np.abs(w).max(), 1e-9)


def place(rng, word, snr_db):
    """One second: `word` (or nothing) at a random offset, gain, and noise `snr_db` below it."""
    out = np.zeros(RATE)
    if word is not None:
        off = int(rng.integers(0, RATE - len(word) + 1))
        out[off:off + len(word)] = word * rng.uniform(0.3, 1.0)
        level = np.sqrt(np.mean(out[off:off + len(word)] ** 2)) * 10 ** (-snr_db / 20)
    else:
        level = 10 ** rng.uniform(-4.5, -1.3)
    out += noise(rng, RATE) * level * 3
    return np.clip(out, -1, 1).astype(np.float32)


def make_set(voices, rng, copies, tmp, log):
    xs, ys = [], []
    t0 = time.time()
    words = [(w, LABELS.index(w)) for w in LABELS[2:]] + [(w, 1) for w in UNKNOWN]
    for voice in voices:
        for text, label in words:
            for stretch in STRETCH:
                for pitch in PITCH:
                    clip = synth(text, voice, stretch, pitch, tmp)
                    for _ in range(copies if label != 1 else max(1, copies // 4)):
                        xs.append(ea.features(place(rng, clip, rng.uniform(5, 40))))
                        ys.append(label)
    n_sil = len(ys) // 11
    for _ in range(n_sil):
        xs.append(ea.features(place(rng, None, 0)))
        ys.append(0)
    log("  %s: %d examples (%.0f s)" % ("+".join(voices), len(ys), time.time() - t0))
    return np.stack(xs)[:, None].astype(np.float32), np.array(ys, dtype=np.int64)


class DSCNN(nn.Module):
    """DS-CNN (Zhang et al., "Hello Edge", the small variant): a 10x4 convolution, four
    depthwise-separable blocks of 64 channels, average pooling, a linear classifier."""

    def __init__(self, classes=12, ch=64):
        super().__init__()
        layers = [nn.Conv2d(1, ch, (10, 4), stride=(2, 2), padding=(5, 1), bias=False),
                  nn.BatchNorm2d(ch), nn.ReLU()]
        for _ in range(4):
            layers += [nn.Conv2d(ch, ch, 3, padding=1, groups=ch, bias=False), nn.BatchNorm2d(ch),
                       nn.ReLU(), nn.Conv2d(ch, ch, 1, bias=False), nn.BatchNorm2d(ch), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(ch, classes)

    def forward(self, x):
        # MFCC c0 spans hundreds, the others tens: a fixed scale keeps the first layer's
        # inputs near unit size (part of the model, so the .pte takes raw MFCCs)
        x = self.features(x * 0.02)
        return self.classifier(torch.flatten(self.pool(x), 1))


def accuracy(logits, y):
    return float((np.argmax(logits, axis=1) == y).mean())


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    log("etch keyword spotter: DS-CNN on flite speech, MFCC [1, 1, 49, 10]")
    with tempfile.TemporaryDirectory() as tmp:
        xtr, ytr = make_set(TRAIN_VOICES, rng, 4, tmp, log)
        xte, yte = make_set(TEST_VOICES, rng, 2, tmp, log)
    model = DSCNN()
    log("  parameters: %d" % sum(p.numel() for p in model.parameters()))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    epochs, batch = 24, 64
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, total_steps=epochs * (len(ytr) // batch))
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    t0 = time.time()
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(len(yt))
        tot = 0.0
        for i in range(len(yt) // batch):
            idx = perm[i * batch:(i + 1) * batch]
            xb = xt[idx]
            # time shift by up to 3 frames either way (the features move with the audio)
            xb = torch.roll(xb, int(torch.randint(-3, 4, ())), dims=2)
            loss = nn.functional.cross_entropy(model(xb), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += float(loss)
        model.eval()
        with torch.no_grad():
            te = accuracy(model(torch.from_numpy(xte)).numpy(), yte)
        log("  epoch %2d  loss %.4f  held-out voice accuracy %.4f  (%.0f s)"
            % (ep + 1, tot / (len(yt) // batch), te, time.time() - t0))
    model.eval()
    example = (torch.from_numpy(xte[:1]),)
    with torch.no_grad():
        f_logits = model(torch.from_numpy(xte)).numpy()
    fp32 = etch.export(model, example, debug_info=False)
    fp32.save(os.path.join(out_dir, "model_fp32.pte"))
    calib = [(torch.from_numpy(xtr[i:i + 1]),) for i in range(0, len(ytr), max(1, len(ytr) // 256))]
    qmodel = etch.quantize(model, example, "int8", calibration=calib, observer="histogram")
    with torch.no_grad():
        q_logits = np.concatenate([qmodel(torch.from_numpy(xte[i:i + 256])).numpy()
                                   for i in range(0, len(yte), 256)])
    int8 = etch.export(qmodel, example, debug_info=False)
    int8.save(os.path.join(out_dir, "model_int8.pte"))
    report = {
        "train_examples": int(len(ytr)), "test_examples": int(len(yte)),
        "test_voices": TEST_VOICES,
        "float32_accuracy": accuracy(f_logits, yte),
        "int8_accuracy": accuracy(q_logits, yte),
        "int8_float32_top1_agreement": float((q_logits.argmax(1) == f_logits.argmax(1)).mean()),
    }
    log("  float32 held-out accuracy %.4f, int8 %.4f, top-1 agreement %.4f"
        % (report["float32_accuracy"], report["int8_accuracy"],
           report["int8_float32_top1_agreement"]))
    np.save(os.path.join(out_dir, "test_inputs.npy"), xte[::max(1, len(yte) // 64)])
    with open(os.path.join(out_dir, "train_log.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
