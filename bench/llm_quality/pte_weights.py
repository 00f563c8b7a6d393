"""Recover a llama's float32 weights from a float ``.pte`` that ``python3 -m etch.llm export``
wrote, as a checkpoint ``python3 -m etch.llm export --checkpoint`` takes again.

The repository commits its default model (models/default) as ``model.pte`` only; its
checkpoint is rebuilt by ``models/default/build.sh`` (20+ minutes of training).  The program's
constants hold every weight, maybe transposed or copied (a shared classifier is stored as its
own copy).  Which constant is which weight is found by exporting a *tagged* model of the same
shape with the same exporter: every parameter element set to its own global index (exact in
float32 below 2^24), so each constant of the tagged program that is a copy of a parameter reads
back as the indices it was gathered from.  The same gather applied to the real program's
constants gives the weights.  Refused: a program whose constants do not line up with the tagged
one (another exporter version or another shape), a parameter no constant holds, two constants
disagreeing on a weight.  ``recover_checkpoint`` then checks the result end to end: PyTorch's
logits of the recovered model equal etch's logits of the original program (libetch).
"""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

import numpy as np
import torch

from etch.llm.model import Llama, ModelArgs
from etch.serialize import pte as _pte

_NP = {6: np.float32, 4: np.int64}   # ScalarType Float, Long


def _constants(buffer: bytes) -> List[Tuple[List[int], int, bytes]]:
    """(sizes, scalar type, bytes) of every constant tensor of `forward`, in value order."""
    parts = _pte.unpack_program(_pte.read_pte(buffer))
    plan = [p for p in parts.program.execution_plan if p.name == "forward"]
    if not plan:
        raise ValueError("the program has no forward method")
    out = []
    for v in plan[0].values:
        t = v.val
        if type(t).__name__ == "Tensor" and t.data_buffer_idx > 0 and t.allocation_info is None:
            out.append((list(t.sizes), int(t.scalar_type),
                        parts.data.constants[t.data_buffer_idx]))
    return out


def _array(sizes, st, raw) -> np.ndarray:
    if st not in _NP:
        return None
    n = int(np.prod(sizes)) if sizes else 1
    return np.frombuffer(raw, dtype=_NP[st], count=n).reshape(sizes)


def read_metadata(path: str, lib_path=None) -> Dict[str, int]:
    from etch import runtime
    m = runtime.load(path, lib_path=lib_path)
    md = {k: m.run_method(k) for k in ("get_vocab_size", "get_max_seq_len",
                                       "get_max_context_len", "get_n_layers")}
    m.close()
    return {k: int(v[0]) for k, v in md.items()}


def recover_state(pte_path: str, args: ModelArgs) -> Dict[str, torch.Tensor]:
    """The state dict (llama2.c names) of the float program at `pte_path`, whose shape is
    `args`."""
    from etch.llm.export import export_llama
    with open(pte_path, "rb") as f:
        real = _constants(f.read())
    tagged_model = Llama(args).eval()
    names, offsets, total = [], {}, 0
    with torch.no_grad():
        for name, p in tagged_model.named_parameters():
            if total + p.numel() >= 1 << 24:
                raise ValueError("too many parameters to tag exactly in float32")
            p.copy_(torch.arange(total, total + p.numel(), dtype=torch.float32).view(p.shape))
            offsets[name] = (total, p.numel(), tuple(p.shape))
            names.append(name)
            total += p.numel()
    tagged = _constants(export_llama(tagged_model, check_ops=False).buffer)
    if len(tagged) != len(real) or any(a[0] != b[0] or a[1] != b[1]
                                      for a, b in zip(tagged, real)):
        raise ValueError("%s: its constants (%d) do not line up with this exporter's program "
                         "for the shape given (%d): another exporter version or shape?"
                         % (pte_path, len(real), len(tagged)))
    flat = np.full(total, np.nan, dtype=np.float64)
    for (sizes, st, traw), (_, _, rraw) in zip(tagged, real):
        if st != 6:
            continue
        t = _array(sizes, st, traw).reshape(-1)
        r = _array(sizes, st, rraw).reshape(-1)
        if t.size == 0 or not np.all(t == np.round(t)) or t.min() < 0 or t.max() >= total:
            continue
        idx = t.astype(np.int64)
        # a weight copy is a permutation of one parameter's whole index range
        lo = int(idx.min())
        owner = [n for n in names if offsets[n][0] == lo and offsets[n][1] == idx.size]
        if not owner or not np.array_equal(np.sort(idx), np.arange(lo, lo + idx.size)):
            continue
        seen = ~np.isnan(flat[idx])
        if np.any(flat[idx][seen] != r[seen]):
            raise ValueError("%s: two constants disagree on %s" % (pte_path, owner[0]))
        flat[idx] = r
    state = {}
    for name in names:
        lo, n, shape = offsets[name]
        v = flat[lo:lo + n]
        if np.isnan(v).any():
            raise ValueError("%s: no constant holds parameter %s" % (pte_path, name))
        state[name] = torch.from_numpy(v.astype(np.float32).reshape(shape))
    return state


def recover_checkpoint(pte_path: str, args: ModelArgs, out_path: str, lib_path=None,
                       check_tokens: int = 24) -> float:
    """Write the recovered checkpoint (``model_args`` + ``model``, as etch.llm.train saves);
    returns the largest |PyTorch logit - etch logit| over `check_tokens` decode steps of a
    fixed token sequence, after checking it is below 1e-3."""
    from etch import runtime
    state = recover_state(pte_path, args)
    model = Llama(args).eval()
    model.load_weights(dict(state))
    g = torch.Generator().manual_seed(5)
    toks = torch.randint(0, args.vocab_size, (check_tokens,), generator=g)
    m = runtime.load(pte_path, lib_path=lib_path)
    worst = 0.0
    with torch.no_grad():
        for i in range(check_tokens):
            t = toks[i:i + 1].view(1, 1)
            sp = torch.tensor([i], dtype=torch.long)
            ref = model(t, sp)
            got = m.forward(t, sp)
            worst = max(worst, float((ref - got).abs().max()))
    m.close()
    if not worst < 1e-3:
        raise ValueError("%s: the recovered weights' logits differ from etch's by %g"
                         % (pte_path, worst))
    st = {k: v for k, v in state.items() if k != "output.weight"}
    ck = {"model_args": {"dim": args.dim, "hidden_dim": args.hidden_dim,
                         "n_layers": args.n_layers, "n_heads": args.n_heads,
                         "n_kv_heads": args.n_kv_heads, "vocab_size": args.vocab_size,
                         "max_seq_len": args.max_seq_len, "norm_eps": args.norm_eps},
          "model": st}
    tmp = "%s.tmp%d" % (out_path, os.getpid())
    torch.save(ck, tmp)
    os.replace(tmp, out_path)
    return worst
