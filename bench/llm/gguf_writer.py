"""A small GGUF (version 3) writer for llama decoders: F32, or llama.cpp's Q8_0 / Q4_0.

GGUF layout (little endian), as llama.cpp reads it:

* header: magic ``GGUF``, uint32 version (3), uint64 tensor count, uint64 metadata count;
* metadata: key (a GGUF string: uint64 byte length + UTF-8 bytes), uint32 value type, value;
  arrays are uint32 element type + uint64 count + the elements;
* tensor infos: name (string), uint32 n_dims, uint64 dims (innermost first: a PyTorch
  ``[rows, cols]`` matrix is ``[cols, rows]``), uint32 ggml type (0 = F32, 1 = F16, 2 = Q4_0,
  8 = Q8_0), uint64 offset of the data from the start of the data section (a multiple of the
  alignment);
* padding to ``general.alignment`` (32 by default), then the tensor data, each tensor padded
  to the alignment.

Weights come as a llama2.c-style state dict (``tok_embeddings.weight``,
``layers.N.attention.wq.weight``, ...: the names of ``etch.llm.model.Llama``) and are written
under llama.cpp's names (``token_embd``, ``blk.N.attn_q``, ...).

Rotary embeddings: etch's reference module (like llama2.c and Meta's original code) rotates
adjacent pairs ``(x[2i], x[2i+1])`` of each head; llama.cpp's ``llama`` architecture uses the
same "normal" (non-NeoX) rotation.  llama.cpp's convert script permutes the q/k rows of
*Hugging Face* checkpoints only, because Hugging Face's layout rotates halves ``(x[i],
x[i + d/2])``; weights in Meta/llama2.c layout are written as they are.  The stories260K test
(tests/llm_bench) checks this: llama.cpp reproduces the reference greedy text.

Tokenizer: a sentencepiece ``.model`` is read with Debian's python3-sentencepiece; its pieces,
scores and kinds become ``tokenizer.ggml.tokens`` / ``scores`` / ``token_type`` (1 normal,
2 unknown, 3 control, 5 unused, 6 byte) with ``tokenizer.ggml.model = "llama"``.

Quantized types (ggml's block layouts; each row of ``cols`` values, ``cols`` a multiple of 32,
is cut into blocks of 32 consecutive values, stored one block after the other, row after row),
computed as llama.cpp's reference quantizers ``quantize_row_q8_0_ref`` / ``quantize_row_q4_0_ref``
(ggml-quants.c) do, in float32:

* Q8_0 (34 bytes per block): fp16 ``d = max|x| / 127``, then 32 int8 ``q = roundf(x * (1/d))``
  (half away from zero; ``q = 0`` when ``d = 0``).  Value: ``q * d``.
* Q4_0 (18 bytes per block): ``m`` = the element of largest magnitude (the first one on a tie,
  with its sign), fp16 ``d = m / -8``; ``q = min(15, trunc(x * (1/d) + 8.5))`` (0..15); 16 bytes,
  byte ``j`` = ``q[j]`` in its low nibble and ``q[j + 16]`` in its high nibble.  Value:
  ``(q - 8) * d``.

``write_llama_gguf(..., quant="q8_0" | "q4_0")`` picks the types as llama.cpp's quantizer
(llama-quant.cpp, ``llama_tensor_get_type``) does for ``llama-quantize ... Q8_0`` / ``Q4_0``:
1-d tensors (the RMSNorm weights) stay F32; every matrix, the token embedding included, gets
the type; ``output.weight`` gets Q8_0 under Q4_0 (llama.cpp picks Q6_K there when the row
length is a multiple of 256, and Q8_0 otherwise: this writer has no Q6_K and always uses Q8_0,
a little more precise and larger; ``output_type=`` overrides); a matrix whose row length is not a
multiple of 32 (stories260K's ``ffn_down``, hidden 172) cannot hold 32-blocks and is written F16,
llama.cpp's last fallback.  ``general.file_type`` is 7 (MOSTLY_Q8_0) or 2 (MOSTLY_Q4_0) and
``general.quantization_version`` 2.

Usage as a script (a llama2.c ``.bin`` version 0 or PyTorch checkpoint, loaded by
``etch.llm.checkpoint``)::

    PYTHONPATH=python /usr/bin/python3 bench/llm/gguf_writer.py \\
        --checkpoint ckpt.bin --tokenizer tok.model [--context N] [--quant q8_0|q4_0] \\
        -o model.gguf
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0 = 0, 1, 2, 8
LLAMA_FTYPE_ALL_F32, LLAMA_FTYPE_MOSTLY_F16, LLAMA_FTYPE_MOSTLY_Q4_0, LLAMA_FTYPE_MOSTLY_Q8_0 = \
    0, 1, 2, 7
GGML_QNT_VERSION = 2
QK = 32                      # values per Q8_0 / Q4_0 block
# ggml type -> (values per block, bytes per block)
GGML_BLOCK = {GGML_TYPE_F32: (1, 4), GGML_TYPE_F16: (1, 2), GGML_TYPE_Q4_0: (QK, 2 + QK // 2),
              GGML_TYPE_Q8_0: (QK, 2 + QK)}
GGML_TYPE_NAMES = {GGML_TYPE_F32: "F32", GGML_TYPE_F16: "F16", GGML_TYPE_Q4_0: "Q4_0",
                   GGML_TYPE_Q8_0: "Q8_0"}
QUANT_TYPES = {"f32": GGML_TYPE_F32, "f16": GGML_TYPE_F16, "q8_0": GGML_TYPE_Q8_0,
               "q4_0": GGML_TYPE_Q4_0}

_SCALAR_FMT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
               T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
               T_FLOAT64: "<d"}
_ARRAY_DTYPE = {T_UINT8: "<u1", T_INT8: "<i1", T_UINT16: "<u2", T_INT16: "<i2",
                T_UINT32: "<u4", T_INT32: "<i4", T_FLOAT32: "<f4", T_BOOL: "<u1",
                T_UINT64: "<u8", T_INT64: "<i8", T_FLOAT64: "<f8"}

# sentencepiece piece kinds -> llama.cpp token types
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = \
    1, 2, 3, 4, 5, 6


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _blocks(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim < 1 or a.shape[-1] % QK:
        raise ValueError("rows of %s values cannot be cut into blocks of %d"
                         % (a.shape[-1] if a.ndim else 0, QK))
    if not np.all(np.isfinite(a)):
        raise ValueError("cannot quantize non-finite values")
    return a.reshape(-1, QK)


def _inverse(d: np.ndarray) -> np.ndarray:
    # float32 1/d, 0 where d is 0 (as ``id = d ? 1.0f/d : 0.0f``)
    out = np.zeros_like(d)
    nz = d != 0
    out[nz] = np.float32(1.0) / d[nz]
    return out


def quantize_q8_0(a: np.ndarray) -> np.ndarray:
    """llama.cpp's Q8_0 of a float array whose last dimension is a multiple of 32: the
    blocks' bytes (uint8, 34 per block), in order."""
    x = _blocks(a)
    d = np.max(np.abs(x), axis=1) / np.float32(127)            # float32, as amax / 127
    x0 = x * _inverse(d)[:, None]                                # float32 products
    # roundf (half away from zero) of a float32: exact in float64
    q = (np.sign(x0) * np.floor(np.abs(x0.astype(np.float64)) + 0.5)).astype(np.int8)
    out = np.empty((x.shape[0], 2 + QK), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def quantize_q4_0(a: np.ndarray) -> np.ndarray:
    """llama.cpp's Q4_0 of a float array whose last dimension is a multiple of 32: the
    blocks' bytes (uint8, 18 per block), in order."""
    x = _blocks(a)
    m = x[np.arange(x.shape[0]), np.argmax(np.abs(x), axis=1)]   # first largest |x|, signed
    d = m / np.float32(-8)
    t = x * _inverse(d)[:, None] + np.float32(8.5)               # float32, as x*id + 8.5f
    q = np.minimum(np.trunc(t), 15).astype(np.uint8)             # (int8_t) truncates; t >= 0
    out = np.empty((x.shape[0], 2 + QK // 2), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :QK // 2] | (q[:, QK // 2:] << 4)
    return out.reshape(-1)


def encode_tensor(array: np.ndarray, ggml_type: int) -> np.ndarray:
    """The bytes (or, for F32, the float32 array) stored for `array` as `ggml_type`."""
    if ggml_type == GGML_TYPE_F32:
        return np.ascontiguousarray(array, dtype="<f4")
    if ggml_type == GGML_TYPE_F16:
        return np.ascontiguousarray(array, dtype="<f2")
    if ggml_type == GGML_TYPE_Q8_0:
        return quantize_q8_0(array)
    if ggml_type == GGML_TYPE_Q4_0:
        return quantize_q4_0(array)
    raise ValueError("unsupported ggml type %r" % (ggml_type,))


class GGUFWriter:
    """Collects metadata and tensors, then writes the file in one pass."""

    def __init__(self, alignment: int = ALIGNMENT):
        if alignment <= 0 or alignment % 8:
            raise ValueError("alignment must be a positive multiple of 8")
        self.alignment = alignment
        self.kv: List[Tuple[str, int, object, int]] = []   # key, type, value, array elem type
        # name, dims (PyTorch order), ggml type, stored data (F32 array or bytes)
        self.tensors: List[Tuple[str, Tuple[int, ...], int, np.ndarray]] = []
        if alignment != ALIGNMENT:
            self.add("general.alignment", T_UINT32, alignment)

    # -- metadata ------------------------------------------------------------------------------
    def add(self, key: str, vtype: int, value) -> None:
        if any(k == key for k, _, _, _ in self.kv):
            raise ValueError("duplicate metadata key %s" % key)
        if vtype == T_ARRAY:
            raise ValueError("use add_array for arrays")
        self.kv.append((key, vtype, value, -1))

    def add_array(self, key: str, elem_type: int, values: Sequence) -> None:
        if any(k == key for k, _, _, _ in self.kv):
            raise ValueError("duplicate metadata key %s" % key)
        self.kv.append((key, T_ARRAY, values, elem_type))

    @staticmethod
    def _value(vtype: int, value) -> bytes:
        if vtype == T_STRING:
            return _string(value)
        return struct.pack(_SCALAR_FMT[vtype], value)

    def _kv_bytes(self) -> bytes:
        out = bytearray()
        for key, vtype, value, elem in self.kv:
            out += _string(key) + struct.pack("<I", vtype)
            if vtype != T_ARRAY:
                out += self._value(vtype, value)
                continue
            out += struct.pack("<IQ", elem, len(value))
            if elem == T_STRING:
                for s in value:
                    out += _string(s)
            else:
                out += np.asarray(value, dtype=_ARRAY_DTYPE[elem]).tobytes()
        return bytes(out)

    # -- tensors -------------------------------------------------------------------------------
    def add_tensor(self, name: str, array: np.ndarray, ggml_type: int = GGML_TYPE_F32) -> None:
        """`array` in PyTorch order (row-major, last axis fastest); stored as `ggml_type`
        (F32, F16, Q8_0 or Q4_0; the quantized ones need rows of a multiple of 32 values)."""
        a = np.asarray(array, dtype=np.float32)
        if a.ndim < 1 or a.ndim > 4:
            raise ValueError("tensor %s: %d dimensions (GGUF holds 1 to 4)" % (name, a.ndim))
        if any(t[0] == name for t in self.tensors):
            raise ValueError("duplicate tensor %s" % name)
        if ggml_type not in GGML_BLOCK:
            raise ValueError("tensor %s: unsupported ggml type %r" % (name, ggml_type))
        try:
            data = encode_tensor(a, ggml_type)
        except ValueError as e:
            raise ValueError("tensor %s as %s: %s" % (name, GGML_TYPE_NAMES[ggml_type], e))
        self.tensors.append((name, tuple(a.shape), ggml_type, data))

    def _pad(self, n: int) -> int:
        return (-n) % self.alignment

    def write(self, path: str) -> int:
        """Writes the file (atomically: a temporary file renamed); returns its size."""
        infos = bytearray()
        offset = 0
        for name, shape, gtype, a in self.tensors:
            dims = shape[::-1]   # innermost first
            infos += _string(name) + struct.pack("<I", len(dims))
            infos += struct.pack("<%dQ" % len(dims), *dims)
            infos += struct.pack("<IQ", gtype, offset)
            offset += a.nbytes + self._pad(a.nbytes)
        head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
        head += self._kv_bytes() + bytes(infos)
        head += b"\0" * self._pad(len(head))
        tmp = "%s.tmp%d" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                f.write(head)
                for _, _, _, a in self.tensors:
                    _write_array(f, a)
                    f.write(b"\0" * self._pad(a.nbytes))
                size = f.tell()
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return size


def _write_array(f: BinaryIO, a: np.ndarray) -> None:
    # chunks of rows, so a large tensor is not copied whole into a bytes object
    flat = a.reshape(-1)
    step = 1 << 22
    for i in range(0, flat.size, step):
        f.write(memoryview(flat[i:i + step]).cast("B"))


# -- llama ------------------------------------------------------------------------------------

def sentencepiece_vocab(model_path: str) -> Tuple[List[str], List[float], List[int], Dict]:
    """Pieces, scores, llama.cpp token types and special ids of a sentencepiece model."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    if not sp.Load(model_path):
        raise ValueError("%s: not a sentencepiece model" % model_path)
    tokens, scores, types = [], [], []
    for i in range(sp.GetPieceSize()):
        tokens.append(sp.IdToPiece(i))
        scores.append(float(sp.GetScore(i)))
        if sp.IsUnknown(i):
            t = TOKEN_UNKNOWN
        elif sp.IsControl(i):
            t = TOKEN_CONTROL
        elif sp.IsUnused(i):
            t = TOKEN_UNUSED
        elif sp.IsByte(i):
            t = TOKEN_BYTE
        else:
            t = TOKEN_NORMAL
        types.append(t)
    special = {"bos": sp.bos_id(), "eos": sp.eos_id(), "unk": sp.unk_id(), "pad": sp.pad_id()}
    return tokens, scores, types, special


_LAYER_NAMES = {
    "attention_norm.weight": "attn_norm.weight",
    "attention.wq.weight": "attn_q.weight",
    "attention.wk.weight": "attn_k.weight",
    "attention.wv.weight": "attn_v.weight",
    "attention.wo.weight": "attn_output.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "feed_forward.w1.weight": "ffn_gate.weight",
    "feed_forward.w3.weight": "ffn_up.weight",
    "feed_forward.w2.weight": "ffn_down.weight",
}


def tensor_type(gguf_name: str, shape: Sequence[int], quant: str = "f32",
                output_type: str = "") -> int:
    """The ggml type llama.cpp's quantizer gives a llama tensor under `quant` ("f32", "q8_0",
    "q4_0"; see the module's docstring); `output_type` overrides output.weight's."""
    if quant not in ("f32", "q8_0", "q4_0"):
        raise ValueError("quant must be f32, q8_0 or q4_0, not %r" % (quant,))
    if output_type and output_type not in QUANT_TYPES:
        raise ValueError("output type must be one of %s, not %r"
                         % (", ".join(sorted(QUANT_TYPES)), output_type))
    if quant == "f32" or len(shape) < 2:
        t = GGML_TYPE_F32
    elif gguf_name == "output.weight":
        t = QUANT_TYPES[output_type] if output_type else GGML_TYPE_Q8_0
    else:
        t = QUANT_TYPES[quant]
    if GGML_BLOCK[t][0] > 1 and shape[-1] % GGML_BLOCK[t][0]:
        t = GGML_TYPE_F16          # rows that blocks of 32 cannot cut: llama.cpp's fallback
    return t


def write_llama_gguf(path: str, args, state: Dict[str, object], tokenizer_model: str, *,
                     context_length: int = 0, name: str = "etch-bench-llama",
                     quant: str = "f32", output_type: str = "",
                     tensor_types: Optional[Dict[str, int]] = None) -> int:
    """Write a llama GGUF from `args` (etch.llm.model.ModelArgs) and a llama2.c-style state
    dict (torch tensors or numpy arrays): all F32 (`quant="f32"`, the default), or llama.cpp's
    Q8_0 / Q4_0 mixture (`quant="q8_0"` / `"q4_0"`, see the module's docstring and
    `tensor_type`).  The classifier is written as ``output`` (a copy of the token embedding
    when the checkpoint shares it).  `tensor_types`, when given, receives each tensor's ggml type.
    Returns the file size."""
    tensor_type("output.weight", (QK, QK), quant, output_type)    # checks the arguments
    tokens, scores, types, special = sentencepiece_vocab(tokenizer_model)
    if len(tokens) != args.vocab_size:
        raise ValueError("the tokenizer has %d pieces, the model's vocabulary is %d"
                         % (len(tokens), args.vocab_size))

    def arr(k: str) -> np.ndarray:
        if k not in state:
            raise ValueError("state dict has no %s" % k)
        v = state[k]
        if hasattr(v, "detach"):
            v = v.detach().float().cpu().numpy()
        return np.asarray(v, dtype=np.float32)

    w = GGUFWriter()
    w.add("general.architecture", T_STRING, "llama")
    w.add("general.name", T_STRING, name)
    w.add("general.file_type", T_UINT32, {"f32": LLAMA_FTYPE_ALL_F32,
                                           "q8_0": LLAMA_FTYPE_MOSTLY_Q8_0,
                                           "q4_0": LLAMA_FTYPE_MOSTLY_Q4_0}[quant])
    if quant != "f32":
        w.add("general.quantization_version", T_UINT32, GGML_QNT_VERSION)
    w.add("llama.context_length", T_UINT32, int(context_length or args.max_seq_len))
    w.add("llama.embedding_length", T_UINT32, args.dim)
    w.add("llama.block_count", T_UINT32, args.n_layers)
    w.add("llama.feed_forward_length", T_UINT32, args.hidden_dim)
    w.add("llama.attention.head_count", T_UINT32, args.n_heads)
    w.add("llama.attention.head_count_kv", T_UINT32, args.n_kv_heads)
    w.add("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, float(args.norm_eps))
    w.add("llama.rope.dimension_count", T_UINT32, args.dim // args.n_heads)
    w.add("llama.rope.freq_base", T_FLOAT32, float(args.rope_theta))
    w.add("llama.vocab_size", T_UINT32, args.vocab_size)
    w.add("tokenizer.ggml.model", T_STRING, "llama")
    w.add_array("tokenizer.ggml.tokens", T_STRING, tokens)
    w.add_array("tokenizer.ggml.scores", T_FLOAT32, scores)
    w.add_array("tokenizer.ggml.token_type", T_INT32, types)
    for key, sid in (("bos", special["bos"]), ("eos", special["eos"]),
                     ("unknown", special["unk"])):
        if sid >= 0:
            w.add("tokenizer.ggml.%s_token_id" % key, T_UINT32, sid)
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", T_BOOL, False)

    def add(gguf_name: str, a: np.ndarray) -> None:
        t = tensor_type(gguf_name, a.shape, quant, output_type)
        w.add_tensor(gguf_name, a, t)
        if tensor_types is not None:
            tensor_types[gguf_name] = t

    emb = arr("tok_embeddings.weight")
    add("token_embd.weight", emb)
    for l in range(args.n_layers):
        for src, dst in _LAYER_NAMES.items():
            add("blk.%d.%s" % (l, dst), arr("layers.%d.%s" % (l, src)))
    add("output_norm.weight", arr("norm.weight"))
    add("output.weight", arr("output.weight") if "output.weight" in state else emb)
    return w.write(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="llama checkpoint -> GGUF (F32, Q8_0 or Q4_0)")
    p.add_argument("--checkpoint", required=True,
                   help="llama2.c .bin (version 0) or PyTorch checkpoint, as etch.llm loads")
    p.add_argument("--tokenizer", required=True, help="sentencepiece .model")
    p.add_argument("--context", type=int, default=0,
                   help="llama.context_length (default: the checkpoint's max_seq_len)")
    p.add_argument("--quant", choices=("f32", "q8_0", "q4_0"), default="f32",
                   help="tensor types: all F32 (default) or llama.cpp's Q8_0 / Q4_0 mixture")
    p.add_argument("--output-type", choices=sorted(QUANT_TYPES), default="",
                   help="output.weight's type (default: F32 for f32, else Q8_0)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    try:
        from etch.llm.checkpoint import load_checkpoint
    except ImportError as e:
        print("error: cannot import etch.llm (set PYTHONPATH to the repository's python/): %s"
              % e, file=sys.stderr)
        return 1
    try:
        args, state = load_checkpoint(a.checkpoint)
        size = write_llama_gguf(a.output, args, state, a.tokenizer, context_length=a.context,
                                quant=a.quant, output_type=a.output_type)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s (%d bytes)" % (a.output, size), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
