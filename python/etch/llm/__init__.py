"""etch.llm: llama-family decoders for etch's LLM runner.

* :mod:`etch.llm.model` — a reference llama module (RMSNorm, rotary embeddings, grouped-query
  attention, SwiGLU, tied or separate classifier) that owns its KV cache;
* :mod:`etch.llm.checkpoint` — llama2.c ``.bin`` (version 0) and PyTorch checkpoints;
* :mod:`etch.llm.hf` — Hugging Face model folders (Llama, Qwen2; :mod:`etch.llm.safetensors`,
  the chat template: :mod:`etch.llm.chat`);
* :mod:`etch.llm.export` — the ``.pte`` with ``forward(tokens, start_pos)`` and ExecuTorch's
  metadata methods.

Command line::

    /usr/bin/python3 -m etch.llm export --checkpoint stories260K.bin -o model.pte
    /usr/bin/python3 -m etch.llm export --hf path/to/hf-model-folder -o model.pte
    /usr/bin/python3 -m etch.llm generate --checkpoint stories260K.bin --max-new-tokens 32
"""

from .checkpoint import build_model, load_checkpoint  # noqa: F401
from .export import METADATA_METHODS, export_llama  # noqa: F401
from .model import Llama, ModelArgs, greedy  # noqa: F401

__all__ = ["Llama", "ModelArgs", "greedy", "build_model", "load_checkpoint", "export_llama",
           "METADATA_METHODS"]
