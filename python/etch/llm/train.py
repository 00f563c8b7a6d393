"""Training a small llama (the reference module of :mod:`etch.llm.model`) from scratch on CPU,
reproducibly: the recipe of etch's default model (``models/default``, built by
``models/default/build.sh``).

    python3 -m etch.llm.train tokenizer --text train.txt --vocab-size 1024 -o tokenizer
    python3 -m etch.llm.train model --train train.txt --val val.txt --tokenizer tokenizer.model \\
        --steps 1200 -o model.pt --log train_log.txt

``tokenizer`` trains a sentencepiece BPE model (Debian's python3-sentencepiece) with byte
fallback, the ``identity`` normalization (etch's reader refuses precompiled charsmaps), one
thread and no input sampling or shuffling (so the same text gives the same model), writing
``<prefix>.model``.

``model`` encodes every line (one story) as BOS + pieces, concatenates the lines, and trains on
windows of ``seq_len + 1`` tokens drawn at offsets from a seeded ``torch.Generator`` (the data
order depends only on ``--seed``).  AdamW, linear warm-up then cosine decay to a tenth of the
peak rate, gradient clipping at 1.  The run is bounded by ``--steps`` (never by wall time) and,
with ``torch.set_num_threads(1)`` and the same torch build, gives the same weights bit for bit.
The held-out loss (mean cross entropy per token, nats) is measured on fixed windows of
``--val`` every ``--eval-every`` steps and at the end.  The checkpoint is the PyTorch format the
exporter loads (``model_args`` + ``model``), so ``python3 -m etch.llm export`` takes it as is.

Training runs the module's own parameters through :func:`train_logits`, a batched, cache-free
pass with the same math as :meth:`Llama.forward` (the test compares the two).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Callable, List, Optional, Sequence

import torch
import torch.nn.functional as F

__all__ = ["train_tokenizer", "encode_corpus", "train_logits", "train_model", "main"]


# ---------------------------------------------------------------------------------------------
# Tokenizer


def train_tokenizer(text: str, prefix: str, vocab_size: int = 1024) -> str:
    """Train a sentencepiece BPE model on the file `text` (one sentence per line); returns the
    path of ``prefix.model``."""
    import sentencepiece as spm
    if vocab_size < 300:
        raise ValueError("vocab_size %d is too small (256 byte pieces + specials + merges)"
                         % vocab_size)
    import io
    # The trainer records its input path and model prefix in the model; training from an
    # iterator into a buffer leaves both empty, so the bytes depend on the text only.
    with open(text, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="bpe",
        vocab_size=vocab_size, byte_fallback=True, character_coverage=1.0,
        normalization_rule_name="identity", num_threads=1, split_digits=True,
        max_sentence_length=16384, shuffle_input_sentence=False, minloglevel=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    with open(prefix + ".model", "wb") as f:
        f.write(buf.getvalue())
    return prefix + ".model"


def encode_corpus(path: str, tokenizer: str):
    """int64 tensor: BOS (1) + pieces of each non-empty line, concatenated."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=tokenizer)
    bos = sp.bos_id()
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    if not lines:
        raise ValueError("%s: no text" % path)
    ids: List[int] = []
    for piece_ids in sp.encode(lines):
        ids.append(bos)
        ids.extend(piece_ids)
    return torch.tensor(ids, dtype=torch.long), sp.vocab_size()


# ---------------------------------------------------------------------------------------------
# The batched training pass


def _rotate_b(x, cos, sin):
    """x [B, T, heads, hd], cos/sin [T, 1, hd/2]: the pairs (2i, 2i+1) rotated, as
    etch.llm.model._rotate does per sequence."""
    B, T, h, hd = x.shape
    xp = x.reshape(B, T, h, hd // 2, 2)
    x0 = xp[..., 0]
    x1 = xp[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(B, T, h, hd)


def train_logits(model, tokens):
    """Logits of every position, [B, T, vocab], for tokens [B, T] starting at position 0,
    with causal attention and no KV cache; the same math as ``model.forward`` (which returns
    the last position only)."""
    a = model.args
    B, T = tokens.shape
    H, KV, hd = a.n_heads, a.n_kv_heads, a.head_dim
    G = H // KV
    cos = model.rope_cos[:T].unsqueeze(1)
    sin = model.rope_sin[:T].unsqueeze(1)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    h = model.tok_embeddings(tokens)                                   # [B, T, D]
    scale = 1.0 / math.sqrt(hd)
    for layer in model.layers:
        at = layer.attention
        x = layer.attention_norm(h)
        q = _rotate_b(at.wq(x).view(B, T, H, hd), cos, sin)
        k = _rotate_b(at.wk(x).view(B, T, KV, hd), cos, sin)
        v = at.wv(x).view(B, T, KV, hd)
        q = q.view(B, T, KV, G, hd).permute(0, 2, 3, 1, 4)            # [B, KV, G, T, hd]
        k = k.permute(0, 2, 3, 1).unsqueeze(2)                         # [B, KV, 1, hd, T]
        v = v.permute(0, 2, 1, 3).unsqueeze(2)                         # [B, KV, 1, T, hd]
        s = torch.matmul(q, k) * scale                                 # [B, KV, G, T, T]
        p = torch.softmax(s.masked_fill(future, float("-inf")), -1)
        o = torch.matmul(p, v)                                         # [B, KV, G, T, hd]
        o = o.permute(0, 3, 1, 2, 4).reshape(B, T, H * hd)
        h = h + at.wo(o)
        h = h + layer.feed_forward(layer.ffn_norm(h))
    return model.output(model.norm(h))


# ---------------------------------------------------------------------------------------------
# Training


def _init_weights(model, n_layers: int, seed: int) -> None:
    """N(0, 0.02) for embeddings and projections, 0.02 / sqrt(2 L) for the projections that
    write into the residual stream (wo, w2); norms stay 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:
                continue
            std = 0.02
            if name.endswith(("attention.wo.weight", "feed_forward.w2.weight")):
                std = 0.02 / math.sqrt(2 * n_layers)
            p.copy_(torch.randn(p.shape, generator=g) * std)


def _lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    low = peak / 10
    return low + 0.5 * (peak - low) * (1 + math.cos(math.pi * min(1.0, t)))


def _val_windows(val, seq_len: int, n: int):
    """`n` fixed, evenly spaced windows of seq_len + 1 tokens of the held-out stream."""
    span = val.numel() - (seq_len + 1)
    if span < 0:
        raise ValueError("held-out text has %d tokens, fewer than one window of %d"
                         % (val.numel(), seq_len + 1))
    starts = [int(i * span / max(1, n - 1)) for i in range(n)]
    return torch.stack([val[s:s + seq_len + 1] for s in starts])


def evaluate(model, windows, batch: int) -> float:

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, windows.shape[0], batch):
            w = windows[i:i + batch]
            logits = train_logits(model, w[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                                   reduction="sum")
            total += float(loss)
            count += w[:, 1:].numel()
    return total / count


def train_model(train_text: str, val_text: str, tokenizer: str, out: str, *, steps: int,
                batch: int = 16, seq_len: int = 256, dim: int = 128, n_layers: int = 4,
                n_heads: int = 4, hidden_dim: Optional[int] = None, lr: float = 2e-3,
                warmup: int = 50, weight_decay: float = 0.1, seed: int = 1234,
                eval_every: int = 100, eval_windows: int = 64,
                log: Callable[[str], None] = print) -> float:
    """Train and write the checkpoint `out`; returns the final held-out loss."""

    from .model import Llama, ModelArgs
    if steps < 1 or batch < 1 or seq_len < 2:
        raise ValueError("steps, batch must be >= 1 and seq_len >= 2")
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()
    data, vocab = encode_corpus(train_text, tokenizer)
    val, _ = encode_corpus(val_text, tokenizer)
    if data.numel() < seq_len + 2:
        raise ValueError("%s: %d tokens, too few for windows of %d" % (train_text, data.numel(),
                                                                       seq_len + 1))
    vwin = _val_windows(val, seq_len, eval_windows)
    hidden = hidden_dim or 32 * ((8 * dim // 3 + 31) // 32)
    args = ModelArgs(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads,
                     n_kv_heads=n_heads, vocab_size=vocab, max_seq_len=seq_len,
                     shared_classifier=True)
    model = Llama(args)
    _init_weights(model, n_layers, seed)
    n_params = sum(p.numel() for p in model.parameters())
    log("data: %s: %d tokens (train), %s: %d tokens (held out, %d windows); vocab %d"
        % (os.path.basename(train_text), data.numel(), os.path.basename(val_text), val.numel(),
           eval_windows, vocab))
    log("model: dim %d, hidden %d, %d layers, %d heads, context %d, shared classifier; "
        "%d parameters (%.2f MB fp32)" % (dim, hidden, n_layers, n_heads, seq_len, n_params,
                                          n_params * 4 / 1e6))
    log("training: %d steps x %d windows x %d tokens = %d tokens (%.2f epochs), AdamW lr %g "
        "(warm-up %d, cosine to %g), weight decay %g, seed %d, 1 thread"
        % (steps, batch, seq_len, steps * batch * seq_len,
           steps * batch * seq_len / data.numel(), lr, warmup, lr / 10, weight_decay, seed))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(seed)
    span = data.numel() - (seq_len + 1)
    model.train()
    val_loss = evaluate(model, vwin, batch)
    log("step %5d  held-out loss %.4f" % (0, val_loss))
    run_loss, run_n = 0.0, 0
    for step in range(steps):
        cur = _lr_at(step, steps, lr, warmup)
        for g in opt.param_groups:
            g["lr"] = cur
        starts = torch.randint(0, span + 1, (batch,), generator=gen)
        w = torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])
        logits = train_logits(model, w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        run_loss += float(loss)
        run_n += 1
        done = step + 1
        if done % eval_every == 0 or done == steps:
            val_loss = evaluate(model, vwin, batch)
            el = time.time() - t0
            log("step %5d  lr %.2e  train loss %.4f  held-out loss %.4f  (%.0f s, %.2f steps/s)"
                % (done, cur, run_loss / run_n, val_loss, el, done / el))
            run_loss, run_n = 0.0, 0
    model.eval()
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("_cache")}
    state.pop("output.weight", None)    # shared with tok_embeddings
    ck = {"model_args": {"dim": dim, "hidden_dim": hidden, "n_layers": n_layers,
                         "n_heads": n_heads, "n_kv_heads": n_heads, "vocab_size": vocab,
                         "max_seq_len": seq_len, "norm_eps": args.norm_eps},
          "model": state,
          "train": {"steps": steps, "batch": batch, "lr": lr, "warmup": warmup,
                    "weight_decay": weight_decay, "seed": seed, "val_loss": val_loss}}
    tmp = out + ".tmp%d" % os.getpid()
    torch.save(ck, tmp)
    os.replace(tmp, out)
    log("final held-out loss %.4f (nats/token, %d windows of %d tokens); %.0f s; wrote %s"
        % (val_loss, eval_windows, seq_len, time.time() - t0, out))
    return val_loss


# ---------------------------------------------------------------------------------------------
# Command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m etch.llm.train",
                                description="train a sentencepiece tokenizer or a small llama")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer", help="sentencepiece BPE with byte fallback")
    t.add_argument("--text", required=True, help="training text, one sentence/story a line")
    t.add_argument("--vocab-size", type=int, default=1024)
    t.add_argument("-o", "--prefix", required=True, help="writes PREFIX.model")
    m = sub.add_parser("model", help="train the reference llama")
    m.add_argument("--train", required=True, help="training text, one story a line")
    m.add_argument("--val", required=True, help="held-out text, one story a line")
    m.add_argument("--tokenizer", required=True, help="sentencepiece .model")
    m.add_argument("-o", "--output", required=True, help="checkpoint (.pt)")
    m.add_argument("--log", help="also append the log lines to this file")
    m.add_argument("--steps", type=int, required=True)
    m.add_argument("--batch", type=int, default=16)
    m.add_argument("--seq-len", type=int, default=256)
    m.add_argument("--dim", type=int, default=128)
    m.add_argument("--layers", type=int, default=4)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--hidden-dim", type=int, default=None)
    m.add_argument("--lr", type=float, default=2e-3)
    m.add_argument("--warmup", type=int, default=50)
    m.add_argument("--weight-decay", type=float, default=0.1)
    m.add_argument("--seed", type=int, default=1234)
    m.add_argument("--eval-every", type=int, default=100)
    m.add_argument("--eval-windows", type=int, default=64)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.cmd == "tokenizer":
            if not os.path.isfile(a.text):
                raise ValueError("%s: no such file" % a.text)
            print(train_tokenizer(a.text, a.prefix, a.vocab_size))
            return 0
        for f in (a.train, a.val, a.tokenizer):
            if not os.path.isfile(f):
                raise ValueError("%s: no such file" % f)
        logf = open(a.log, "a", encoding="utf-8") if a.log else None

        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)
            if logf:
                logf.write(msg + "\n")
                logf.flush()

        try:
            train_model(a.train, a.val, a.tokenizer, a.output, steps=a.steps, batch=a.batch,
                        seq_len=a.seq_len, dim=a.dim, n_layers=a.layers, n_heads=a.heads,
                        hidden_dim=a.hidden_dim, lr=a.lr, warmup=a.warmup,
                        weight_decay=a.weight_decay, seed=a.seed, eval_every=a.eval_every,
                        eval_windows=a.eval_windows, log=log)
        finally:
            if logf:
                logf.close()
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
