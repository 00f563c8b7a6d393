"""Magnitude pruning: ``etch.prune(model, sparsity, pattern)``.

    pruned = etch.prune(model, 0.5, pattern="2:4")        # a pruned copy
    for x, y in data:                                     # optional fine-tune
        loss(pruned(x), y).backward(); opt.step(); opt.zero_grad()
        etch.apply_prune_masks(pruned)                    # zeros stay zeros
    etch.export(pruned, (x,)).save("model.pte")

The pruned weights are plain zeros in the ordinary float (or, after ``etch.quantize``,
quantized) weights, so the file stays a normal ExecuTorch program; the runtime recognizes a 2:4
weight at load (src/kernels/optimized/sparse.c) and runs its linear from a compressed form.

Patterns (weights seen as 2-d ``[out, in]``; a Conv2d's ``[O, I, kh, kw]`` as ``[O, I*kh*kw]``,
the order of its im2col GEMM):

* ``"2:4"``: in every group of 4 consecutive input weights of a row, the 2 of smallest
  magnitude become zero (sparsity must be 0.5; ``in`` must be a multiple of 4).
* ``"block"``: ``block=(rows, cols)`` tiles (default (1, 8)); the fraction ``sparsity`` of the
  tiles of each layer with the smallest L1 norm becomes zero (the block must divide the
  weight).
* ``"unstructured"``: the fraction ``sparsity`` of each layer's weights of smallest magnitude.

The masks (True: kept) are kept in ``model.etch_prune_masks`` (a plain attribute, name ->
bool tensor, never exported); ``etch.apply_prune_masks(model)`` multiplies each pruned weight
by its mask again (call it after every optimizer step of a fine-tune).  ``model.etch_pruning``
records the pattern and, per layer, the sparsity reached or why a layer was left dense.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

PATTERNS = ("2:4", "block", "unstructured")


@dataclass
class PruningReport:
    pattern: str
    sparsity: float
    block: Optional[Tuple[int, int]] = None
    pruned: Dict[str, float] = field(default_factory=dict)   # name -> zero fraction reached
    skipped: Dict[str, str] = field(default_factory=dict)    # name -> reason

    def summary(self) -> str:
        lines = ["pruning %s (sparsity %.3g%s): %d layer(s) pruned, %d left dense"
                 % (self.pattern, self.sparsity,
                    ", block %dx%d" % self.block if self.block else "",
                    len(self.pruned), len(self.skipped))]
        lines += ["  %-40s %.1f%% zeros" % (n, 100 * s) for n, s in self.pruned.items()]
        lines += ["  %-40s dense: %s" % (n, r) for n, r in self.skipped.items()]
        return "\n".join(lines)


def _matrix(w: torch.Tensor) -> torch.Tensor:
    return w.reshape(w.shape[0], -1)


def _mask_2_4(w2: torch.Tensor) -> torch.Tensor:
    g = w2.abs().reshape(w2.shape[0], -1, 4)
    # keep the 2 largest of each 4 (ties: the lower index, as topk is stable on CPU)
    keep = torch.zeros_like(g, dtype=torch.bool)
    keep.scatter_(2, g.topk(2, dim=2).indices, True)
    return keep.reshape(w2.shape)


def _mask_block(w2: torch.Tensor, sparsity: float, br: int, bc: int) -> torch.Tensor:
    rows, cols = w2.shape
    tiles = w2.abs().reshape(rows // br, br, cols // bc, bc).sum(dim=(1, 3))
    k = int(round(sparsity * tiles.numel()))
    keep = torch.ones(tiles.numel(), dtype=torch.bool)
    if k:
        keep[tiles.flatten().argsort()[:k]] = False
    keep = keep.reshape(tiles.shape)
    return keep.repeat_interleave(br, 0).repeat_interleave(bc, 1)


def _mask_unstructured(w2: torch.Tensor, sparsity: float) -> torch.Tensor:
    k = int(round(sparsity * w2.numel()))
    keep = torch.ones(w2.numel(), dtype=torch.bool)
    if k:
        keep[w2.abs().flatten().argsort()[:k]] = False
    return keep.reshape(w2.shape)


def _unfit(m: nn.Module, pattern: str, block: Tuple[int, int]) -> Optional[str]:
    """Why the pattern does not fit this layer's weight; None when it does."""
    w = m.weight
    if w.dtype != torch.float32:
        return "weight is %s, not float32" % str(w.dtype).replace("torch.", "")
    if isinstance(m, nn.Conv2d) and m.groups != 1:
        return "grouped convolution (groups=%d)" % m.groups
    rows, cols = _matrix(w).shape
    if pattern == "2:4" and cols % 4:
        return "%d input weights per row, not a multiple of 4" % cols
    if pattern == "block" and (rows % block[0] or cols % block[1]):
        return "block %dx%d does not divide the %dx%d weight" % (block + (rows, cols))
    return None


def _check_args(sparsity, pattern, block):
    if pattern not in PATTERNS:
        raise ValueError("unknown pruning pattern %r; known: %s" % (pattern, ", ".join(PATTERNS)))
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or \
            not 0.0 < float(sparsity) < 1.0:
        raise ValueError("sparsity must be a number in (0, 1), got %r" % (sparsity,))
    if pattern == "2:4" and float(sparsity) != 0.5:
        raise ValueError("pattern 2:4 zeros half of the weights: sparsity must be 0.5, got %r"
                         % (sparsity,))
    if pattern != "block":
        if block is not None:
            raise ValueError("block= applies to pattern 'block' only")
        return None
    if block is None:
        return (1, 8)
    if isinstance(block, int):
        block = (1, block)
    if len(tuple(block)) != 2 or not all(isinstance(b, int) and not isinstance(b, bool)
                                         and b > 0 for b in block):
        raise ValueError("block must be (rows, cols) of positive ints, got %r" % (block,))
    return tuple(block)


def prune(model: nn.Module, sparsity: float = 0.5, pattern: str = "2:4", *,
          block=None, modules: Optional[Sequence[str]] = None, skip: Sequence[str] = (),
          conv: bool = True, inplace: bool = False) -> nn.Module:
    """Magnitude-prune the weights of every nn.Linear (and, with ``conv``, every ungrouped
    nn.Conv2d) of ``model``; returns the pruned model (a deep copy unless ``inplace``).

    ``modules``: only these layers (names as in ``named_modules``), each of which must take the
    pattern (else ValueError); by default every fitting layer, the others left dense and named
    in ``model.etch_pruning.skipped``.  ``skip``: names to leave dense.  Every error is raised
    before anything is changed."""
    if not isinstance(model, nn.Module):
        raise TypeError("etch.prune needs an nn.Module, got %s" % type(model).__name__)
    block = _check_args(sparsity, pattern, block)
    sparsity = float(sparsity)
    kinds = (nn.Linear, nn.Conv2d) if conv else (nn.Linear,)
    named = dict(model.named_modules())
    for n in list(modules or []) + list(skip):
        if n not in named:
            raise ValueError("no module named %r in the model" % n)
    report = PruningReport(pattern, sparsity, block)
    chosen: List[str] = []
    for name, m in named.items():
        if name in skip or (modules is not None and name not in modules):
            continue
        if not isinstance(m, kinds) or getattr(m, "weight", None) is None:
            if modules is not None:
                raise ValueError("module %r is a %s: only Linear%s are pruned"
                                 % (name, type(m).__name__, " and Conv2d" if conv else ""))
            continue
        why = _unfit(m, pattern, block)
        if why is not None:
            if modules is not None:
                raise ValueError("cannot prune %r with pattern %s: %s" % (name, pattern, why))
            report.skipped[name] = why
            continue
        chosen.append(name)
    if not inplace:
        model = copy.deepcopy(model)
        named = dict(model.named_modules())
    masks = dict(getattr(model, "etch_prune_masks", {}) or {})
    with torch.no_grad():
        for name in chosen:
            w = named[name].weight
            w2 = _matrix(w.detach())
            if pattern == "2:4":
                keep = _mask_2_4(w2)
            elif pattern == "block":
                keep = _mask_block(w2, sparsity, *block)
            else:
                keep = _mask_unstructured(w2, sparsity)
            keep = keep.reshape(w.shape)
            if name in masks:          # pruned before: keep the earlier zeros too
                keep = keep & masks[name]
            w.mul_(keep.to(w.dtype))
            masks[name] = keep
            report.pruned[name] = float((w == 0).sum()) / w.numel()
    model.etch_prune_masks = masks
    model.etch_pruning = report
    return model


def apply_prune_masks(model: nn.Module) -> nn.Module:
    """Zero again what etch.prune zeroed (after an optimizer step of a fine-tune)."""
    masks = getattr(model, "etch_prune_masks", None)
    if not masks:
        raise ValueError("the model has no pruning masks (etch.prune it first)")
    named = dict(model.named_modules())
    with torch.no_grad():
        for name, keep in masks.items():
            if name not in named or tuple(named[name].weight.shape) != tuple(keep.shape):
                raise ValueError("pruning mask of %r no longer fits the model" % name)
            named[name].weight.mul_(keep.to(named[name].weight.dtype))
    return model


def is_2_4(w: torch.Tensor) -> bool:
    """At most 2 nonzero weights in every group of 4 consecutive inputs of a row (the last,
    shorter group too): the test the runtime makes at load."""
    w2 = _matrix(w)
    cols = w2.shape[1]
    pad = (-cols) % 4
    if pad:
        w2 = torch.cat([w2, w2.new_zeros(w2.shape[0], pad)], dim=1)
    return bool(((w2 != 0).reshape(w2.shape[0], -1, 4).sum(2) <= 2).all())
