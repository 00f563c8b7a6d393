"""A small GGUF (version 3) writer for llama decoders, fp32 only.

GGUF layout (little endian), as llama.cpp reads it:

* header: magic ``GGUF``, uint32 version (3), uint64 tensor count, uint64 metadata count;
* metadata: key (a GGUF string: uint64 byte length + UTF-8 bytes), uint32 value type, value;
  arrays are uint32 element type + uint64 count + the elements;
* tensor infos: name (string), uint32 n_dims, uint64 dims (innermost first: a PyTorch
  ``[rows, cols]`` matrix is ``[cols, rows]``), uint32 ggml type (0 = F32), uint64 offset of
  the data from the start of the data section (a multiple of the alignment);
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

Usage as a script (a llama2.c ``.bin`` version 0 or PyTorch checkpoint, loaded by
``etch.llm.checkpoint``)::

    PYTHONPATH=python /usr/bin/python3 bench/llm/gguf_writer.py \\
        --checkpoint ckpt.bin --tokenizer tok.model [--context N] -o model.gguf
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import BinaryIO, Dict, List, Sequence, Tuple

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
GGML_TYPE_F32 = 0
LLAMA_FTYPE_ALL_F32 = 0

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


class GGUFWriter:
    """Collects metadata and tensors, then writes the file in one pass."""

    def __init__(self, alignment: int = ALIGNMENT):
        if alignment <= 0 or alignment % 8:
            raise ValueError("alignment must be a positive multiple of 8")
        self.alignment = alignment
        self.kv: List[Tuple[str, int, object, int]] = []   # key, type, value, array elem type
        self.tensors: List[Tuple[str, np.ndarray]] = []
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
    def add_tensor(self, name: str, array: np.ndarray) -> None:
        """`array` in PyTorch order (row-major, last axis fastest); stored as F32."""
        a = np.ascontiguousarray(array, dtype="<f4")
        if a.ndim < 1 or a.ndim > 4:
            raise ValueError("tensor %s: %d dimensions (GGUF holds 1 to 4)" % (name, a.ndim))
        if any(n == name for n, _ in self.tensors):
            raise ValueError("duplicate tensor %s" % name)
        self.tensors.append((name, a))

    def _pad(self, n: int) -> int:
        return (-n) % self.alignment

    def write(self, path: str) -> int:
        """Writes the file (atomically: a temporary file renamed); returns its size."""
        infos = bytearray()
        offset = 0
        for name, a in self.tensors:
            dims = a.shape[::-1]   # innermost first
            infos += _string(name) + struct.pack("<I", len(dims))
            infos += struct.pack("<%dQ" % len(dims), *dims)
            infos += struct.pack("<IQ", GGML_TYPE_F32, offset)
            offset += a.nbytes + self._pad(a.nbytes)
        head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
        head += self._kv_bytes() + bytes(infos)
        head += b"\0" * self._pad(len(head))
        tmp = "%s.tmp%d" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                f.write(head)
                for _, a in self.tensors:
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


def write_llama_gguf(path: str, args, state: Dict[str, object], tokenizer_model: str, *,
                     context_length: int = 0, name: str = "etch-bench-llama") -> int:
    """Write a llama GGUF (all F32) from `args` (etch.llm.model.ModelArgs) and a llama2.c-style
    state dict (torch tensors or numpy arrays).  The classifier is written as ``output``
    (a copy of the token embedding when the checkpoint shares it).  Returns the file size."""
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
    w.add("general.file_type", T_UINT32, LLAMA_FTYPE_ALL_F32)
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

    emb = arr("tok_embeddings.weight")
    w.add_tensor("token_embd.weight", emb)
    for l in range(args.n_layers):
        for src, dst in _LAYER_NAMES.items():
            w.add_tensor("blk.%d.%s" % (l, dst), arr("layers.%d.%s" % (l, src)))
    w.add_tensor("output_norm.weight", arr("norm.weight"))
    w.add_tensor("output.weight", arr("output.weight") if "output.weight" in state else emb)
    return w.write(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="llama checkpoint -> GGUF (F32)")
    p.add_argument("--checkpoint", required=True,
                   help="llama2.c .bin (version 0) or PyTorch checkpoint, as etch.llm loads")
    p.add_argument("--tokenizer", required=True, help="sentencepiece .model")
    p.add_argument("--context", type=int, default=0,
                   help="llama.context_length (default: the checkpoint's max_seq_len)")
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
        size = write_llama_gguf(a.output, args, state, a.tokenizer, context_length=a.context)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s (%d bytes)" % (a.output, size), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
