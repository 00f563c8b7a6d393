"""etch.quant: quantized export through ExecuTorch's ``quantized_decomposed`` operators.

    qmodel = etch.quantize(model, (x,), "8da4w", group_size=32)
    etch.export(qmodel, (x,)).save("model.pte")

:mod:`etch.quant.decomposed` defines the operators for torch 1.13 (with reference
implementations); :mod:`etch.quant.quantize` swaps layers for quantized ones.  The file
representation of every scheme: README.md in this folder.
"""

from __future__ import annotations

from . import decomposed  # noqa: F401  (defines torch.ops.quantized_decomposed.*)
from .quantize import (DEFAULT_GROUP_SIZE, GROUP_SIZES, SCHEMES, Int4Linear, Int8Linear,
                       QuantizationReport, QuantizedEmbedding, parse_embedding_spec, quantize,
                       quantize_weight)
from .static import convert_qat, prepare_qat

__all__ = ["quantize", "SCHEMES", "GROUP_SIZES", "DEFAULT_GROUP_SIZE", "QuantizationReport",
           "Int8Linear", "Int4Linear", "QuantizedEmbedding", "parse_embedding_spec",
           "quantize_weight", "decomposed", "prepare_qat", "convert_qat"]
