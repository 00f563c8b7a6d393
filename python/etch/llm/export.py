"""Export a llama decoder (:class:`etch.llm.model.Llama`) to a ``.pte`` program for etch's LLM
runner (and ExecuTorch's, which reads the same methods).

The program has:

* ``forward(tokens: int64[1, T], start_pos: int64[1]) -> float32[1, vocab_size]``, T dynamic
  in 1..max_seq_len: writes the keys and values of positions start_pos .. start_pos + T - 1
  into the KV cache (mutable state in planned memory, updated in place with
  ``aten::index_put_``, zero at load) and returns the logits of the last position.  Prefill
  is one call with the whole prompt; decoding is T = 1.
* metadata as zero-instruction methods returning constants, under ExecuTorch's names:
  ``get_vocab_size``, ``get_max_seq_len`` (most tokens one forward call takes),
  ``get_max_context_len`` (the KV cache's positions), ``get_bos_id``, ``get_eos_ids`` (one
  ``Int`` output per id), ``get_n_layers`` (Int), ``use_kv_cache`` and
  ``enable_dynamic_shape`` (Bool);
* for Hugging Face checkpoints with a chat template (:mod:`etch.llm.chat`),
  ``get_chat_template``: 8 ``String`` outputs (conversation_prefix, system_prefix,
  system_suffix, user_prefix, user_suffix, assistant_prefix, assistant_suffix,
  default_system).

With ``fused_attention=True`` attention is the etch-only operator ``etch::sdpa_kv``
(:mod:`etch.llm.attention`: reads only the keys up to the last new position, streaming
softmax), the k cache is stored ``[n_kv, S, head_dim]``, and the file loads in etch only; by
default the program uses ExecuTorch's operators only.  The methods are the same either way.

With ``executorch_llm_ops=True`` the caches are ``[1, S, n_kv, head_dim]`` (ExecuTorch's
``[B, S_max, H, D]``), written by ExecuTorch's ``llama::update_cache`` and read by its
``llama::custom_sdpa`` (:mod:`etch.llm.et_ops`), as ExecuTorch's own llama export writes them
with ``--use_sdpa_with_kv_cache``; the file keeps to ExecuTorch's namespaces and adds the
metadata method ``use_sdpa_with_kv_cache`` (True).

``kv_cache="int8"`` stores the cache as int8 with a float32 scale and an int8 zero point
per position and kv head (README.md, "int8 KV cache"), and adds the metadata methods
``get_kv_cache_dtype`` (String) and ``get_kv_cache_bytes_per_token`` (Int).

``etch.export`` emits only ``forward``; the metadata methods are appended here to the same
program with :mod:`etch.serialize` (the ``.pte`` schema's dataclasses).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..serialize import pte as _pte
from ..serialize import schema as S
from .model import Llama

__all__ = ["export_llama", "metadata_plan", "LlamaExport", "METADATA_METHODS"]

METADATA_METHODS = ("get_vocab_size", "get_max_seq_len", "get_max_context_len", "get_bos_id",
                    "get_eos_ids", "get_n_layers", "use_kv_cache", "enable_dynamic_shape")

Scalar = Union[bool, int, float, str]


def metadata_plan(name: str, values: Sequence[Scalar]) -> S.ExecutionPlan:
    """A method with no inputs and no instructions whose outputs are the constants `values`
    (Bool for bools, Int for ints, Double for floats, String for str)."""
    evs: List[S.EValue] = []
    for v in values:
        if isinstance(v, str):
            evs.append(S.EValue(S.String(v)))
        elif isinstance(v, bool):
            evs.append(S.EValue(S.Bool(v)))
        elif isinstance(v, int):
            evs.append(S.EValue(S.Int(int(v))))
        elif isinstance(v, float):
            evs.append(S.EValue(S.Double(v)))
        else:
            raise TypeError("metadata %s: unsupported value %r" % (name, v))
    n = len(evs)
    out_spec = "$" if n == 1 else "T%d%s(%s)" % (n, "#1" * n, ",".join("$" * n))
    return S.ExecutionPlan(
        name=name,
        container_meta_type=S.ContainerMetadata("T2#0#0(T0(),D0())", out_spec),
        values=evs,
        inputs=[],
        outputs=list(range(n)),
        chains=[S.Chain(inputs=[], outputs=[], instructions=[])],
        operators=[],
        delegates=[],
        non_const_buffer_sizes=[0],
    )


class LlamaExport:
    """The exported program: ``buffer`` (the .pte bytes), ``save(path)``, the ``metadata``
    dict, and the underlying :class:`etch.program.Program` of ``forward``."""

    def __init__(self, program, metadata: Dict[str, Tuple[Scalar, ...]]):
        self.program = program
        self.kv_cache: Optional[Tuple[str, int]] = None   # (dtype, bytes per position)
        self.metadata = dict(metadata)
        plans = [m.plan for m in program.methods]
        plans += [metadata_plan(k, v) for k, v in self.metadata.items()]
        self.buffer = _pte.serialize_program(S.Program(version=0, execution_plan=plans),
                                             program.data)

    def save(self, path) -> None:
        import os
        tmp = "%s.tmp%d" % (os.fspath(path), os.getpid())
        with open(tmp, "wb") as f:
            f.write(self.buffer)
        os.replace(tmp, path)

    def summary(self) -> str:
        meta = ", ".join("%s=%r" % (k, v[0] if len(v) == 1 else list(v))
                         for k, v in self.metadata.items())
        kv = "" if self.kv_cache is None else \
            "\nkv cache: %s, %d bytes per token" % self.kv_cache
        return "%s\nmetadata: %s%s\nfile: %d bytes" % (self.program.summary(), meta, kv,
                                                       len(self.buffer))


OUTPUT_QUANTIZE = ("auto", "same", "8w", "int8-dynamic", "4w", "8da4w")


def _quantized(model, example, scheme, group_size, symmetric, embedding, pad,
               output_quantize="auto"):
    from ..quant import quantize as _quantize
    if scheme is None:
        # Embedding only: 8w's walk with every Linear skipped.
        skip = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]
        q = _quantize(model, example, "8w", embedding=embedding, skip=skip)
        rep = q.etch_quantization
        rep.scheme, rep.options = "embedding only", {"embedding": rep.options["embedding"]}
        rep.kept_float = [(n, "Linear: no linear quantization asked for" if n in skip else w)
                          for n, w in rep.kept_float]
        return q
    # the classifier: at 8 bits under a 4-bit scheme ("auto"; llama.cpp's Q4_0 keeps it at 8
    # bits or more too), else as the other linears
    out = output_quantize
    if out == "auto":
        out = "8w" if scheme in ("4w", "8da4w") else "same"
    overrides = {} if out == "same" else {"output": out}
    return _quantize(model, example, scheme, group_size=group_size, symmetric=symmetric,
                     embedding=embedding, pad=pad, overrides=overrides)


def export_llama(model: Llama, *, bos_id: int = 1, eos_ids: Sequence[int] = (1, 2),
                 check_ops="auto", progress: Optional[Callable[[str], None]] = None,
                 fused_attention: bool = False,
                 extra_metadata: Optional[Dict[str, Sequence[Scalar]]] = None,
                 quantize: Optional[str] = None, group_size: Optional[int] = None,
                 symmetric: bool = True, embedding_quantize=None,
                 pad_groups: bool = False, kv_cache: str = "float32",
                 output_quantize: str = "auto",
                 executorch_llm_ops: bool = False,
                 backend: Optional[str] = None) -> LlamaExport:
    """Export `model` (its KV cache sized by ``model.args.max_seq_len``).

    The default ``eos_ids`` suit llama2.c's TinyStories models: 2 is the tokenizer's EOS, and
    those models end a story by starting the next one with BOS (1), where llama2.c's own
    generator stops too.  ``bos_id`` -1: the model has no BOS (the runner adds none).
    ``extra_metadata``: more metadata methods (name -> constants), e.g. get_chat_template.

    fused_attention: attend with the etch-only operator ``etch::sdpa_kv`` (the file then
    loads in etch only); the model is switched for the export and switched back after.

    executorch_llm_ops: attend with ExecuTorch's LLM custom operators: the KV cache
    ``[1, S, n_kv, head_dim]`` per layer written by ``llama::update_cache`` and attention by
    ``llama::custom_sdpa`` (causal, over positions ``0 .. start_pos + T - 1`` only), what
    ExecuTorch's llama export writes with ``--use_sdpa_with_kv_cache``; the file loads in
    ExecuTorch with its custom ops library linked (and in etch), and ``use_sdpa_with_kv_cache``
    says True.  Not with ``fused_attention`` or ``kv_cache="int8"``.

    quantize: a scheme of :func:`etch.quantize` (``4w``, ``8da4w``, ``8w``, ``int8-dynamic``)
    for the linear layers (the classifier included), with ``group_size`` / ``symmetric`` /
    ``pad_groups`` (pad in_features that the group size does not divide: stories260K's 172);
    output_quantize: the classifier's scheme: ``"auto"`` (``8w`` under ``4w``/``8da4w``, as
    llama.cpp's Q4_0 keeps it at 8 bits; else as the other linears), ``"same"``, or a scheme;
    embedding_quantize: ``"8"``, ``"8,G"`` or ``"4,G"`` for the token embedding (alone, or
    with ``quantize``).  A shared classifier is quantized twice from the one float table; with
    ``4w``/``8da4w``, ``output_quantize="same"`` and ``embedding_quantize="4,G"`` at the same G
    both are the same bytes and the file stores them once.  The model itself is not changed (a quantized copy is
    exported).

    kv_cache: ``"float32"`` (default) or ``"int8"``: per position and kv head int8 values with
    a float32 scale and an int8 zero point (ExecuTorch's per-token asymmetric quantization of
    each new row, ``choose_qparams_per_token_asymmetric`` + ``quantize_per_token``); without
    fused attention the whole cache is dequantized (``dequantize_per_token``) before the
    masked attention, so the file stays ExecuTorch-loadable; with it, the etch-only
    ``etch::sdpa_kv_q8`` reads the int8 cache.  Any other value is an error before anything
    is traced."""
    from ..exporter import export
    from .model import KV_CACHE_DTYPES
    if output_quantize not in OUTPUT_QUANTIZE:
        raise ValueError("output_quantize %r: expected one of %s"
                         % (output_quantize, ", ".join(OUTPUT_QUANTIZE)))
    if kv_cache not in KV_CACHE_DTYPES:
        raise ValueError("--kv-cache %r: expected one of %s" % (kv_cache,
                                                                ", ".join(KV_CACHE_DTYPES)))
    if executorch_llm_ops and (fused_attention or kv_cache != "float32"):
        raise ValueError("executorch_llm_ops cannot be combined with fused_attention or an "
                         "int8 KV cache")
    a = model.args
    S_ = a.max_seq_len
    model = model.eval()
    was_fused, was_kv = model.fused_attention, model.kv_cache_dtype
    was_et = model.executorch_llm_ops
    passes = ()
    if executorch_llm_ops:
        from . import et_ops
        passes = (et_ops.lower,)
    model.set_fused_attention(bool(fused_attention))
    model.set_kv_cache(kv_cache)
    model.set_executorch_llm_ops(bool(executorch_llm_ops))
    kv_bytes = model.kv_cache_bytes_per_token()
    try:
        tokens = torch.ones(1, S_, dtype=torch.long)
        start = torch.zeros(1, dtype=torch.long)
        target = model
        if quantize is not None or embedding_quantize is not None:
            target = _quantized(model, (tokens, start), quantize, group_size, symmetric,
                                embedding_quantize, pad_groups, output_quantize)
        program = export(target, (tokens, start), dynamic_shapes=[{1: S_}, None],
                         check_ops=check_ops, progress=progress,
                         allow_etch_ops=bool(fused_attention), graph_passes=passes,
                         backend=backend,
                         # no stack traces: the file stays a function of the checkpoint alone
                         # (models/default is rebuilt byte for byte from any checkout path)
                         debug_info=False)
    finally:
        model.set_executorch_llm_ops(was_et)
        model.set_kv_cache(was_kv)
        model.set_fused_attention(was_fused)
    if not eos_ids:
        raise ValueError("at least one EOS id is needed")
    for t in ((bos_id,) if bos_id != -1 else ()) + tuple(eos_ids):
        if not 0 <= int(t) < a.vocab_size:
            raise ValueError("token id %d outside the vocabulary (%d)" % (t, a.vocab_size))
    meta: Dict[str, Tuple[Scalar, ...]] = {
        "get_vocab_size": (a.vocab_size,),
        "get_max_seq_len": (S_,),
        "get_max_context_len": (S_,),
        "get_bos_id": (int(bos_id),),
        "get_eos_ids": tuple(int(t) for t in eos_ids),
        "get_n_layers": (a.n_layers,),
        "use_kv_cache": (True,),
        "enable_dynamic_shape": (True,),
    }
    if executorch_llm_ops:
        # only then, so that a default export stays byte for byte what it was
        meta["use_sdpa_with_kv_cache"] = (True,)
    if kv_cache != "float32":
        # only then, so that a default export stays byte for byte what it was
        meta["get_kv_cache_dtype"] = (kv_cache,)
        meta["get_kv_cache_bytes_per_token"] = (kv_bytes,)
    for k, v in (extra_metadata or {}).items():
        if k in meta or k == "forward":
            raise ValueError("metadata method %s already exists" % k)
        meta[k] = tuple(v)
    exp = LlamaExport(program, meta)
    exp.kv_cache = (kv_cache, kv_bytes)
    return exp
