"""Paths shared by the LLM runner's Python tests (set by tests/llm_runner/CMakeLists.txt)."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

FIXTURES = Path(os.environ.get("LLMR_FIXTURES", REPO.parent / "shared" / "fixtures" / "llm"))
MODELS = Path(os.environ.get("LLMR_MODELS", REPO / "build" / "tests" / "llm_runner"))
CLI = os.environ.get("ETCH_CLI", str(REPO / "build" / "etch"))
GREEDY_TOKENS = 258     # tokens of stories260K_greedy.txt after BOS (its last one is "\n")


def model_path(kind: str) -> Path:
    """The program exported by llm_runner.export.<kind> (kind: bin or pt)."""
    return MODELS / ("stories260K_%s.pte" % kind)


def greedy_text() -> bytes:
    return (FIXTURES / "stories260K_greedy.txt").read_bytes()


def llama2c_pieces(path) -> list:
    """The pieces of a llama2.c tokenizer.bin: int32 max length, then per token a float32
    score, an int32 length and the bytes."""
    data = Path(path).read_bytes()
    off, pieces = 4, []
    while off < len(data):
        _, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n])
        off += n
    return pieces


def llama2c_decode(pieces, ids, prev: int = 1) -> bytes:
    """llama2.c's rule: a piece's leading space is dropped after BOS (1); <0xXX> is a byte."""
    out = b""
    for t in ids:
        p = pieces[t]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        out += p
        prev = t
    return out
