"""CNN quality of etch's static int8 (PTQ, minmax and histogram observers) and QAT, run by
libetch: top-1 agreement with float32, logit cosine and accuracy on held-out generated images.

    /usr/bin/python3 bench/quality/cnn/cnn_int8.py            # writes bench/quality/cnn/REPORT.md
    /usr/bin/python3 bench/quality/cnn/cnn_int8.py --tiny --no-write   # the ctest smoke's size

(REPORT.md's last section, "Against the targets", is written by hand from the run's figures;
a new run rewrites the generated part.)

Models (all seeded, deterministic, nothing downloaded):
* ``ShapesCNN``: a small CNN (conv+BN+ReLU, depthwise, max pooling, a residual add, global
  average pooling, linear head) trained here on generated "shapes" images (8 classes: disk,
  square, ring, horizontal / vertical stripes, X, plus, triangle; random position, size,
  colours and noise).
* torchvision ``resnet18`` and ``mobilenet_v2`` architectures: no pretrained weights can be
  downloaded, and training them fully is beyond a few CPU minutes, so: random initialization
  (torchvision's), BatchNorm statistics measured in train mode over generated images
  (realistic per-channel mean/variance), and the classifier head trained on the generated
  task over the frozen features.  Every conv/BN/linear of the architecture is quantized.

Each model is exported with etch.export as float32 and as int8 and both files are run by
libetch (etch.runtime) on held-out images; the int8 file is also compared with the
exporter's reference interpreter (the same quantized math in PyTorch) in units of the output
quantization step."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import etch  # noqa: E402

CLASSES = ("disk", "square", "ring", "h-stripes", "v-stripes", "X", "plus", "triangle")
TARGET_AGREE, TARGET_COS = 0.99, 0.999


# ---- data -----------------------------------------------------------------------------------

def shapes(n: int, seed: int, size: int = 32):
    """n generated images [n, 3, size, size] (normalized) and labels [n] (int64)."""
    g = torch.Generator().manual_seed(seed)
    u = lambda *s: torch.rand(*s, generator=g)  # noqa: E731
    y = torch.randint(0, len(CLASSES), (n,), generator=g)
    k = size / 32.0
    cx = (10 + 12 * u(n)) * k
    cy = (10 + 12 * u(n)) * k
    r = (5 + 5 * u(n)) * k
    yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                            torch.arange(size, dtype=torch.float32), indexing="ij")
    dx = xx[None] - cx[:, None, None]
    dy = yy[None] - cy[:, None, None]
    rr = r[:, None, None]
    ad, bd = dx.abs(), dy.abs()
    dist = torch.sqrt(dx * dx + dy * dy)
    box = torch.maximum(ad, bd) < rr
    period = ((4 + 4 * u(n)) * k)[:, None, None]
    phase = (2 * math.pi * u(n))[:, None, None]
    w = rr / 3
    masks = torch.stack([
        dist < rr,                                                          # disk
        box,                                                                # square
        (dist < rr) & (dist > 0.55 * rr),                                   # ring
        torch.sin(2 * math.pi * yy[None] / period + phase) > 0,            # h-stripes
        torch.sin(2 * math.pi * xx[None] / period + phase) > 0,            # v-stripes
        ((ad - bd).abs() < 0.45 * w) & box,                                 # X
        ((ad < 0.5 * w) | (bd < 0.5 * w)) & box,                            # plus
        (dy < rr) & (dy > -rr) & (ad < (dy + rr) / 2),                      # triangle
    ], 1)                                                                   # [n, 8, H, W]
    mask = masks[torch.arange(n), y].to(torch.float32)[:, None]
    fg = 0.5 + 0.5 * u(n, 3, 1, 1)
    bg = 0.4 * u(n, 3, 1, 1)
    img = bg + mask * (fg - bg) + 0.08 * torch.randn(n, 3, size, size, generator=g)
    return (img - 0.45) / 0.3, y


# ---- models ---------------------------------------------------------------------------------

def conv_bn(cin, cout, k=3, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))


class ShapesCNN(nn.Module):
    """conv+BN+ReLU, depthwise + pointwise, a residual block (add), max pooling, global
    average pooling, linear head."""

    def __init__(self, classes=len(CLASSES), width=16):
        super().__init__()
        w = width
        self.stem = conv_bn(3, w)
        self.dw = conv_bn(w, w, 3, 2, groups=w)                 # depthwise, stride 2
        self.pw = conv_bn(w, 2 * w, 1)
        self.res1 = conv_bn(2 * w, 2 * w)
        self.res2 = conv_bn(2 * w, 2 * w, relu=False)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv = conv_bn(2 * w, 4 * w)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * w, classes)

    def forward(self, x):
        x = self.pw(self.dw(self.stem(x)))
        x = self.relu(x + self.res2(self.res1(x)))
        x = self.conv(self.pool(x))
        return self.fc(torch.flatten(self.gap(x), 1))


def train(model, steps, batch, size, seed, lr=3e-3):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    model.train()
    for i in range(steps):
        x, y = shapes(batch, int(torch.randint(0, 2 ** 30, (1,), generator=g)), size)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
    return model.eval()


def finetune_qat(model, example, steps, batch, size, seed, lr=3e-4):
    """etch.prepare_qat -> a short fine-tune (observers and BN statistics frozen for the last
    third) -> etch.convert_qat."""
    from torch.ao.quantization import disable_observer
    from torch.nn.intrinsic.qat import freeze_bn_stats
    qat = etch.prepare_qat(model, (example,))
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(qat.parameters(), lr, momentum=0.9)
    qat.train()
    for i in range(steps):
        if i == (2 * steps) // 3:
            qat.apply(disable_observer)
            qat.apply(freeze_bn_stats)
        x, y = shapes(batch, int(torch.randint(0, 2 ** 30, (1,), generator=g)), size)
        opt.zero_grad()
        F.cross_entropy(qat(x), y).backward()
        opt.step()
    return etch.convert_qat(qat.eval())


def torchvision_model(name, size, seed, steps, batch, classes=len(CLASSES)):
    """torchvision architecture (its own random initialization; nothing downloaded), trained
    end to end on the generated task for `steps` Adam steps of `batch` images."""
    import torchvision
    torch.manual_seed(seed)
    m = getattr(torchvision.models, name)(num_classes=classes)
    return train(m, steps, batch, size, seed, lr=1e-3)


def sensitivity(model, xs, labels_unused=None):
    """float32 against float32 with every input pixel moved by up to half a step of the
    uint8 input quantization (uniform noise): how much a perturbation of the size int8 adds
    at the input alone moves this model's top-1 and logits (a model trained for a few
    steps, or random, can be far more sensitive than a converged one)."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        a, b = [], []
        for x in xs:
            step = float(x.max() - x.min()) / 255
            a.append(model(x))
            b.append(model(x + (torch.rand(x.shape, generator=g) - 0.5) * step))
    a, b = torch.cat(a), torch.cat(b)
    cos = F.cosine_similarity(a.double(), b.double(), 1)
    return float((a.argmax(1) == b.argmax(1)).double().mean()), float(cos.mean())


# ---- measurement ----------------------------------------------------------------------------

def run_file(program, batches, workdir, name):
    """Save `program`, load it with libetch, run every batch; the stacked outputs."""
    path = os.path.join(workdir, name + ".pte")
    program.save(path)
    mod = etch.runtime.load(path)
    try:
        return torch.cat([mod.forward(x) for x in batches])
    finally:
        mod.close()


def output_step(program):
    """The scale of the last quantize_per_tensor before the output (one output step)."""
    g = program.graphs["forward"].graph
    steps = [n.args[1] for n in g.nodes if str(n.target).endswith("quantize_per_tensor.default")
             and "dequantize" not in str(n.target)]
    return float(steps[-1])


def compare(q, f, labels):
    cos = F.cosine_similarity(q.double(), f.double(), 1)
    return {"agree": float((q.argmax(1) == f.argmax(1)).double().mean()),
            "cos_mean": float(cos.mean()), "cos_min": float(cos.min()),
            "acc": float((q.argmax(1) == labels).double().mean())}


def sqnr_by_layer(qmodel, x, k=4):
    """Per-layer error of an int8 model (the GraphModule etch.quantize returns): at each
    activation dequantize, the SQNR (dB) of its value against the same model run with every
    activation quantize/dequantize removed (float activations, int8 weights).  The k worst."""
    from etch.quant.decomposed import ops as qd
    qfn = (qd.quantize_per_tensor.default, qd.dequantize_per_tensor.default)

    class Run(torch.fx.Interpreter):
        def __init__(self, gm, bypass):
            super().__init__(gm)
            self.bypass, self.seen = bypass, {}

        def run_node(self, n):
            if self.bypass and n.op == "call_function" and n.target in qfn:
                v = self.env[n.args[0]]
            else:
                v = super().run_node(n)
            if n.op == "call_function" and n.target is qfn[1]:
                self.seen[n.args[0].args[0].name] = v
            return v

    with torch.no_grad():
        a, b = Run(qmodel, False), Run(qmodel, True)
        a.run(x)
        b.run(x)
    out = []
    for name, v in a.seen.items():
        r = b.seen[name]
        err = float(((v - r) ** 2).mean())
        sig = float((r ** 2).mean())
        out.append((10 * math.log10(sig / err) if err > 0 else float("inf"), name))
    return sorted(out)[:k]


def evaluate(name, float_model, qmodels, size, eval_n, batch, seed, workdir, layers, log=print):
    """Export float32 and each int8 model, run all with libetch on held-out images."""
    xs, ys = [], []
    for i in range(eval_n // batch):
        x, y = shapes(batch, seed + i, size)
        xs.append(x)
        ys.append(y)
    labels = torch.cat(ys)
    t0 = time.time()
    pf = etch.export(float_model, (xs[0],))
    flt = run_file(pf, xs, workdir, name + "_f32")
    sa, sc = sensitivity(float_model, xs)
    rows = [dict(model=name, variant="float32", acc=float((flt.argmax(1) == labels)
                                                          .double().mean()),
                 sens_agree=sa, sens_cos=sc)]
    for variant, qm in qmodels:
        p = etch.export(qm, (xs[0],))
        got = run_file(p, xs, workdir, "%s_%s" % (name, variant))
        # the reference interpreter is slow: the first two batches
        ref = torch.cat([p.graphs["forward"].run([x])[0] for x in xs[:2]])
        step = output_step(p)
        row = dict(model=name, variant=variant, **compare(got, flt, labels))
        row["ref_steps"] = float((got[:len(ref)] - ref).abs().max()) / step
        row["ref_agree"] = float((got[:len(ref)].argmax(1) == ref.argmax(1)).double().mean())
        if layers:
            row["worst"] = sqnr_by_layer(qm, xs[0], layers)
        rows.append(row)
    log("  %s: %.1fs" % (name, time.time() - t0))
    return rows


# ---- the run --------------------------------------------------------------------------------

CONFIGS = {
    # size: image side; steps: float training; qat: fine-tune steps; cal: calibration batches
    "default": dict(size=32, steps=300, batch=64, qat=120, cal=8, cal_batch=32, eval_n=2000,
                    eval_batch=100, tv_size=32, tv_steps=100, tv_batch=16, tv_eval=300,
                    torchvision=("resnet18", "mobilenet_v2"), layers=4),
    "tiny": dict(size=16, steps=60, batch=32, qat=10, cal=2, cal_batch=16, eval_n=128,
                 eval_batch=64, tv_size=32, tv_steps=2, tv_batch=8, tv_eval=64,
                 torchvision=(), layers=0),
}


def run(cfg, log=print):
    torch.manual_seed(0)
    torch.set_num_threads(1)      # deterministic, and faster on a shared machine
    rows = []
    c = cfg
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        model = train(ShapesCNN(), c["steps"], c["batch"], c["size"], 1)
        log("  ShapesCNN trained: %.1fs" % (time.time() - t0))
        cal = [(shapes(c["cal_batch"], 100 + i, c["size"])[0],) for i in range(c["cal"])]
        ex = cal[0][0]
        qm = [(obs, etch.quantize(model, (ex,), "int8", cal, observer=obs))
              for obs in ("minmax", "histogram")]
        t0 = time.time()
        qm.append(("qat", finetune_qat(model, ex, c["qat"], c["batch"], c["size"], 2)))
        log("  QAT fine-tune: %.1fs" % (time.time() - t0))
        rows += evaluate("ShapesCNN", model, qm, c["size"], c["eval_n"], c["eval_batch"],
                         10000, d, c["layers"], log)
        for name in c["torchvision"]:
            t0 = time.time()
            m = torchvision_model(name, c["tv_size"], 3, c["tv_steps"], c["tv_batch"])
            cal = [(shapes(16, 200 + i, c["tv_size"])[0],) for i in range(c["cal"])]
            qm = [(obs, etch.quantize(m, (cal[0][0],), "int8", cal, observer=obs))
                  for obs in ("minmax", "histogram")]
            log("  %s trained and quantized: %.1fs" % (name, time.time() - t0))
            rows += evaluate(name, m, qm, c["tv_size"], c["tv_eval"], 50, 20000, d,
                             c["layers"], log)
    return rows


def _fmt(v, target=None):
    s = "%.4f" % v if v < 0.99 or v == 1 else "%.5f" % v
    if target is None:
        return s
    return s + (" ✓" if v >= target else " ✗")


def report(rows, cfg, seconds) -> str:
    out = ["# CNN int8 quality (static PTQ and QAT, run by libetch)", "",
           "Written by `bench/quality/cnn/cnn_int8.py` (%.0f s on a 2-core machine shared with "
           "other builds; the figures do not depend on timing).  Targets (issue 17): top-1 "
           "agreement with float32 >= %.0f%%, logit cosine >= %g." % (
               seconds, 100 * TARGET_AGREE, TARGET_COS), "",
           "Every figure is measured on the outputs of the `.pte` files run by libetch "
           "(`etch.runtime`): float32 = `etch.export` of the float model, int8 = "
           "`etch.export(etch.quantize(model, x, \"int8\", calibration, observer=...))`, "
           "qat = `etch.convert_qat` after `etch.prepare_qat` and a short fine-tune.  "
           "Agreement: share of held-out images whose top-1 class equals float32's; cosine: "
           "per-image cosine of the logit vectors (mean, and the minimum); accuracy: against "
           "the generated labels; vs ref: the largest difference between libetch's int8 "
           "output and the exporter's reference interpreter (PyTorch on the same graph), in "
           "output quantization steps.", "",
           "output quantization steps (first two batches).  The float32 row's agreement and "
           "cosine are float32 against float32 with the input moved by up to half a uint8 "
           "input step (noise): the model's own sensitivity to a perturbation the size of the "
           "input quantization alone.", "",
           "| model | variant | top-1 agree | cosine mean | cosine min | accuracy | vs ref (steps) |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["variant"] == "float32":
            out.append("| %s | float32 (input noise) | %.4f | %s | | %.4f | |" % (
                r["model"], r["sens_agree"], _fmt(r["sens_cos"]), r["acc"]))
        else:
            out.append("| %s | int8 %s | %s | %s | %.5f | %.4f | %.2f |" % (
                r["model"], r["variant"], _fmt(r["agree"], TARGET_AGREE),
                _fmt(r["cos_mean"], TARGET_COS), r["cos_min"], r["acc"], r["ref_steps"]))
    worst = [r for r in rows if r.get("worst")]
    if worst:
        out += ["", "## Where the error enters", "",
                "The SQNR of each activation quantization point against the same int8 graph "
                "run with float activations (int8 weights), the lowest four per variant:", ""]
        for r in worst:
            out.append("* %s %s: %s" % (r["model"], r["variant"], ", ".join(
                "%s %.1f dB" % (n, s) for s, n in r["worst"])))
    c = cfg
    out += ["", "## Setup", "",
            "* Data: generated %dx%d RGB \"shapes\" images, 8 classes (%s), random position, "
            "size, colours and pixel noise; training, calibration and evaluation images come "
            "from disjoint seeds." % (c["size"], c["size"], ", ".join(CLASSES)),
            "* ShapesCNN (%d parameters): conv+BN+ReLU, depthwise 3x3 stride 2, pointwise, "
            "a residual block with an add, max pooling, conv, global average pooling, linear; "
            "trained %d Adam steps of %d images.  Calibration: %d batches of %d images.  QAT: "
            "%d SGD steps from the float weights (observers and BN statistics frozen for the "
            "last third).  Evaluation: %d held-out images." % (
                sum(p.numel() for p in ShapesCNN().parameters()), c["steps"], c["batch"],
                c["cal"], c["cal_batch"], c["qat"], c["eval_n"]),
            "* torchvision %s: the architectures (torchvision's random initialization; no "
            "weights can be downloaded here) trained end to end on the generated task at "
            "%dx%d for %d Adam steps of %d images (what a few CPU minutes allow: far from "
            "converged); calibration %d batches of 16; %d held-out images." % (
                " and ".join(c["torchvision"]), c["tv_size"], c["tv_size"], c["tv_steps"],
                c["tv_batch"], c["cal"], c["tv_eval"])]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the smoke test's configuration")
    ap.add_argument("--no-write", action="store_true", help="print only, no REPORT.md")
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "REPORT.md"))
    a = ap.parse_args(argv)
    cfg = CONFIGS["tiny" if a.tiny else "default"]
    t0 = time.time()
    rows = run(cfg)
    text = report(rows, cfg, time.time() - t0)
    print(text)
    if not a.no_write:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
