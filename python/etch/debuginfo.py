"""Debug information of exported programs: for every graph node, the name it had when the
model was captured, the module it was computed in (``features.3.conv.1``) and the Python
source frames of the model that led to it.

Recording: :func:`recording` is active while :mod:`etch.capture` traces; every node the
tracer creates gets a :class:`NodeDebug` in ``node.meta["debug"]``.  The module path comes
from the innermost Python frame whose ``self`` is a submodule of the model (torch's own
``Conv2d.forward`` included, so a convolution inside ``features.3.conv`` is
``features.3.conv.0``); the source frames are the model's own code (frames in torch, functorch
and etch's machinery are left out; ``etch/zoo.py`` counts as model code), outermost first.

Carrying: a pass that replaces node X by a node Y computing X's value calls
:func:`take` (Y gets X's debug information, so the capture-time name keeps naming the value).

Storing: :func:`frame_list` turns it into the ``FrameList`` of the instruction that computes the
node, in ``Chain.stacktrace`` (one per instruction, ExecuTorch's schema): the source frames as
ExecuTorch writes them (``filename``, ``lineno``, ``name`` = the function, ``context`` = the
source line), outermost first, then one closing frame ``filename = "<etch>"`` with
``name`` = the node's capture-time name and ``context`` = the module path (absent: the root
module).  ExecuTorch's tools show that frame as one more line of the stack; etch's runtime
(``etch_method_meta_instruction_debug``) and :func:`from_frame_list` read it back.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx

__all__ = ["NodeDebug", "SourceFrame", "recording", "take", "frame_list", "from_frame_list",
           "ETCH_FRAME_FILE"]

ETCH_FRAME_FILE = "<etch>"


@dataclass(frozen=True)
class SourceFrame:
    filename: str
    lineno: int
    function: str
    context: str    # the source line, stripped


@dataclass(frozen=True)
class NodeDebug:
    node: str                       # the node's name in the captured graph (a delegate:
                                    # its outputs', comma separated)
    module: Optional[str]           # module path ("" = the root module), None: unknown
    frames: Tuple[SourceFrame, ...] = field(default=())  # outermost first

    @property
    def source(self) -> Optional[SourceFrame]:
        """The innermost frame of the model's code (the line that computed the node)."""
        return self.frames[-1] if self.frames else None


def _dirs_of(*modules) -> Tuple[str, ...]:
    out = []
    for m in modules:
        f = getattr(m, "__file__", None)
        if f:
            out.append(os.path.dirname(os.path.abspath(f)) + os.sep)
    return tuple(out)


_ETCH_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ZOO = os.path.join(_ETCH_DIR, "zoo.py")


def _library_dirs() -> Tuple[str, ...]:
    mods = [torch]
    try:
        import functorch
        mods.append(functorch)
    except ImportError:     # pragma: no cover - functorch ships with torch 1.13
        pass
    dirs = _dirs_of(*mods) + (_ETCH_DIR, os.path.dirname(os.__file__) + os.sep)
    return dirs


def _is_model_code(filename: str, lib_dirs: Sequence[str]) -> bool:
    path = os.path.abspath(filename)
    if path == _ZOO:
        return True
    if filename.startswith("<"):    # <string>, <frozen ...>
        return False
    return not any(path.startswith(d) for d in lib_dirs)


class _Recorder:
    def __init__(self, model: torch.nn.Module, stop_code):
        self.paths: Dict[int, str] = {}
        for name, mod in model.named_modules():
            self.paths.setdefault(id(mod), name)
        self.stop_code = stop_code      # the frame that calls the model: frames above are not
        self.lib_dirs = _library_dirs()
        self.cache: Dict[Tuple[str, int], str] = {}

    def context(self, filename: str, lineno: int) -> str:
        key = (filename, lineno)
        if key not in self.cache:
            self.cache[key] = linecache.getline(filename, lineno).strip()
        return self.cache[key]

    def info(self, node_name: str) -> NodeDebug:
        f = sys._getframe(2)
        module = None
        frames: List[SourceFrame] = []
        while f is not None and f.f_code is not self.stop_code:
            code = f.f_code
            if module is None and code.co_argcount and code.co_varnames[0] == "self":
                path = self.paths.get(id(f.f_locals.get("self")))
                if path is not None:
                    module = path
            if _is_model_code(code.co_filename, self.lib_dirs):
                frames.append(SourceFrame(code.co_filename, f.f_lineno, code.co_name,
                                          self.context(code.co_filename, f.f_lineno)))
            f = f.f_back
        if f is None:           # not called from the model (the tracer's own nodes)
            return NodeDebug(node_name, None, ())
        return NodeDebug(node_name, module, tuple(reversed(frames)))


@contextlib.contextmanager
def recording(model: torch.nn.Module, stop_code):
    """While active, every node any torch.fx.Graph creates gets ``meta["debug"]``.
    `stop_code`: the code object of the function that calls the model."""
    rec = _Recorder(model, stop_code)
    orig = torch.fx.Graph.create_node

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        node = orig(self, op, target, args, kwargs, name, type_expr)
        if op == "call_function":
            node.meta["debug"] = rec.info(node.name)
        return node

    torch.fx.Graph.create_node = create_node
    try:
        yield rec
    finally:
        torch.fx.Graph.create_node = orig


def take(new: torch.fx.Node, old: torch.fx.Node) -> torch.fx.Node:
    """`new` replaces `old` (computes its value): it takes old's debug information."""
    d = old.meta.get("debug")
    if d is not None:
        new.meta["debug"] = d
    return new


def of(node: torch.fx.Node) -> Optional[NodeDebug]:
    return node.meta.get("debug")


def merged(outputs: Sequence[Optional[NodeDebug]],
           members: Sequence[Optional[NodeDebug]]) -> Optional[NodeDebug]:
    """The debug information of one call computing several nodes (a delegate): node = the
    capture-time names of its outputs, comma separated, in output order; module = the
    deepest module holding every member; frames = the last member's."""
    known = [d for d in members if d is not None]
    if not known:
        return None
    names = ",".join(d.node if d is not None else "" for d in outputs)
    paths = [d.module for d in known if d.module is not None]
    module = None
    if paths:
        parts = paths[0].split(".") if paths[0] else []
        for p in paths[1:]:
            q = p.split(".") if p else []
            k = 0
            while k < min(len(parts), len(q)) and parts[k] == q[k]:
                k += 1
            parts = parts[:k]
        module = ".".join(parts)
    return NodeDebug(names, module, known[-1].frames)


def frame_list(d: Optional[NodeDebug]):
    """The ``FrameList`` of an instruction computing a node with debug information `d`
    (an empty one when there is none)."""
    from .serialize import schema as S
    if d is None:
        return S.FrameList(items=[])
    items = [S.Frame(filename=f.filename, lineno=int(f.lineno), name=f.function,
                     context=f.context) for f in d.frames]
    # (an empty string is not written: a frame without context is the root module's)
    items.append(S.Frame(filename=ETCH_FRAME_FILE, lineno=0, name=d.node,
                         context=d.module or None))
    return S.FrameList(items=items)


def from_frame_list(fl) -> Optional[NodeDebug]:
    """Read back what :func:`frame_list` wrote (None for an empty list).  A list without
    etch's closing frame (ExecuTorch's own) gives its source frames and no node/module."""
    items = list(getattr(fl, "items", None) or [])
    if not items:
        return None
    node, module = "", None
    last = items[-1]
    if last.filename == ETCH_FRAME_FILE:
        node, module = last.name or "", last.context or ""
        items = items[:-1]
    frames = tuple(SourceFrame(f.filename or "", int(f.lineno or 0), f.name or "",
                               f.context or "") for f in items)
    return NodeDebug(node, module, frames)


def describe(d: Optional[NodeDebug]) -> str:
    """``features.3.conv.1 (conv2d_3) model.py:42`` style one-liner."""
    if d is None:
        return ""
    parts = []
    if d.module is not None:
        parts.append(d.module or "<root>")
    if d.node:
        parts.append("(%s)" % d.node)
    s = d.source
    if s is not None:
        parts.append("%s:%d" % (os.path.basename(s.filename), s.lineno))
    return " ".join(parts)
