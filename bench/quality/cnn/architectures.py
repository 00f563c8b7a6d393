"""Which common architectures etch.quantize(..., "int8") takes: quantize, export (with the
operator check against libetch), run through libetch, compare with the exporter's reference
interpreter and with float32.  Writes bench/quality/cnn/ARCHITECTURES.md.

    /usr/bin/python3 bench/quality/cnn/architectures.py [--no-write] [NAME ...]

The models are torchvision's architectures with their random initialization (nothing can be
downloaded here) and BatchNorm statistics measured in train mode over generated images, plus
a small ViT-like classifier (patch conv, attention built from Linear / matmul / softmax,
LayerNorm, GELU, residual adds) and torch's nn.TransformerEncoderLayer.  Untrained networks
are very sensitive to small perturbations (the float32 row measures it), so their agreement
figures say little about a trained model's; what this file records is whether each
architecture quantizes, exports and runs, and how close libetch stays to the reference."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cnn_int8 as Q  # noqa: E402  (sets up sys.path for etch)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import etch  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.f1, self.f2, self.act = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.GELU()

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, -1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.f2(self.act(self.f1(self.n2(x))))


class TinyViT(nn.Module):
    def __init__(self, classes=len(Q.CLASSES), d=48, size=32, patch=4):
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2, d) * 0.1)
        self.blocks = nn.Sequential(Block(d, 4), Block(d, 4))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.norm(self.blocks(x)).mean(1))


class TorchEncoder(nn.Module):
    def __init__(self, classes=len(Q.CLASSES), d=48):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.enc = nn.TransformerEncoderLayer(d, 4, 2 * d, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.enc(self.embed(x).flatten(2).transpose(1, 2)).mean(1))


NAMES = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
         "shufflenet_v2_x1_0", "efficientnet_b0", "TinyViT", "TorchEncoder")


def build(name, size):
    torch.manual_seed(0)
    if name == "TinyViT":
        return TinyViT(size=size).eval()
    if name == "TorchEncoder":
        return TorchEncoder().eval()
    import torchvision
    m = getattr(torchvision.models, name)(num_classes=len(Q.CLASSES))
    for mod in m.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        for i in range(4):
            m(Q.shapes(16, 5000 + i, size)[0])
    return m.eval()


def check(name, size, n_eval, workdir):
    m = build(name, size)
    cal = [(Q.shapes(16, 200 + i, size)[0],) for i in range(4)]
    xs = [Q.shapes(n_eval, 9000, size)[0]]
    row = {"model": name}
    try:
        q = etch.quantize(m, (xs[0],), "int8", cal)
        rep = q.etch_quantization
        row["quantized"], row["float"] = len(rep.quantized), [n for n, _ in rep.kept_float]
        p = etch.export(q, (xs[0],), check_ops=True)
    except Exception as e:
        row["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
        traceback.print_exc(limit=2)
        return row
    pf = etch.export(m, (xs[0],))
    flt = Q.run_file(pf, xs, workdir, name + "_f32")
    got = Q.run_file(p, xs, workdir, name + "_int8")
    ref = p.graphs["forward"].run([xs[0]])[0]
    row.update(Q.compare(got, flt, flt.argmax(1)))
    row["ref_steps"] = float((got - ref).abs().max()) / Q.output_step(p)
    row["ref_cos"] = float(F.cosine_similarity(got.double(), ref.double(), 1).mean())
    row["sens_agree"], row["sens_cos"] = Q.sensitivity(m, xs)
    return row


def report(rows, size, n_eval, seconds):
    out = ["# int8 (static PTQ) on common architectures, run by libetch", "",
           "Written by `bench/quality/cnn/architectures.py` (%.0f s, a shared 2-core machine). "
           "Each model: `etch.quantize(m, x, \"int8\", calibration)` (minmax, 4 batches of 16 "
           "generated %dx%d images), `etch.export(..., check_ops=True)` (every operator "
           "registered in libetch), run by libetch on %d held-out images, against float32 "
           "(`etch.export` of the float model, also run by libetch) and against the "
           "exporter's reference interpreter.  Weights: torchvision's random initialization "
           "with BatchNorm statistics measured on generated images (untrained: see the "
           "sensitivity columns: float32 against float32 with the input moved by half a "
           "uint8 step).  Trained models: `REPORT.md`." % (seconds, size, size, n_eval), "",
           "| model | exports and runs | layers int8 | kept float | top-1 agree | cosine | "
           "libetch vs ref (steps / cosine) | float32 sensitivity (agree / cosine) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append("| %s | no: %s | | | | | | |" % (r["model"], r["error"].replace("|", "/")))
            continue
        kept = ", ".join(r["float"][:4]) + (" ... (%d)" % len(r["float"])
                                             if len(r["float"]) > 4 else "")
        out.append("| %s | yes | %d | %s | %.3f | %.4f | %.0f / %.5f | %.3f / %.4f |" % (
            r["model"], r["quantized"], kept or "none", r["agree"], r["cos_mean"],
            r["ref_steps"], r["ref_cos"], r["sens_agree"], r["sens_cos"]))
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--eval", type=int, default=32)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in a.names:
            t = time.time()
            rows.append(check(n, a.size, a.eval, d))
            print("  %s: %.1fs" % (n, time.time() - t), flush=True)
    text = report(rows, a.size, a.eval, time.time() - t0)
    print(text)
    if not a.no_write:
        with open(os.path.join(HERE, "ARCHITECTURES.md"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
