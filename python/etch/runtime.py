"""Run ``.pte`` programs through the etch C runtime from Python (ctypes over ``libetch.so``,
module API of include/etch/module.h).

    m = etch.runtime.load("model.pte")       # or load(program.buffer) / load(program)
    m = etch.runtime.load("model.pte", num_threads=4, kernels="portable")
    m = etch.runtime.load("model.pte", data="weights.ptd")   # constants in a .ptd
    y = m.forward(x)                          # torch tensors (or numpy arrays) in,
                                              # torch tensors out (copies)
    ys = m.run_method("forward", x, y)        # always a list of outputs

The library is found as :mod:`etch._lib` describes (``ETCH_LIB``, the package's own copy, the
source checkout's build, pkg-config, the system linker path).
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any, Dict, List, Optional, Union

import torch

from . import _lib
from . import ops as _ops

__all__ = ["load", "Module", "RuntimeError_"]


class RuntimeError_(RuntimeError):
    """A call into the C runtime failed; the message carries etch_last_error()."""


class Module:
    """An open program; methods load on first use."""

    def __init__(self, source, lib_path: Optional[str] = None, num_threads: int = 1,
                 kernels: str = "optimized", data=None):
        self._handle = ctypes.c_void_p()
        self._methods: Dict[str, ctypes.c_void_p] = {}
        if not isinstance(kernels, str):
            raise TypeError("kernels must be a str (one of %s), not %s"
                            % (", ".join(sorted(_lib.KERNELS)), type(kernels).__name__))
        if kernels not in _lib.KERNELS:
            raise ValueError("kernels must be one of %s, not %r"
                             % (", ".join(sorted(_lib.KERNELS)), kernels))
        if isinstance(num_threads, bool) or not isinstance(num_threads, int):
            raise TypeError("num_threads must be an int >= 0 (0 or 1: serial), not %s"
                            % type(num_threads).__name__)
        if num_threads < 0:
            raise ValueError("num_threads must be an int >= 0 (0 or 1: serial), not %r"
                             % (num_threads,))
        if hasattr(source, "buffer") and not isinstance(source, (bytes, bytearray, memoryview)):
            source = source.buffer
        if isinstance(source, (str, os.PathLike)):
            source = os.fspath(source)
            if not os.path.exists(source):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
            if os.path.isdir(source):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), source)
        elif not isinstance(source, (bytes, bytearray, memoryview)):
            raise TypeError("etch.runtime.load takes a path, the bytes of a .pte/.bpte or an "
                            "etch.Program, not %s" % type(source).__name__)
        self._lib = _lib.load(lib_path)
        opts = self._lib.etch_module_default_options()
        opts.num_threads = num_threads
        opts.kernels = _lib.KERNELS[kernels]
        self._data = None
        if data is not None:
            if not isinstance(data, (str, os.PathLike)):
                raise TypeError("data must be the path of a .ptd file, not %s"
                                % type(data).__name__)
            self._data = os.fspath(data)
            if not os.path.isfile(self._data):
                raise FileNotFoundError("external data file %s does not exist" % self._data)
            opts.data_path = os.fsencode(self._data)
        self._opts = opts
        if isinstance(source, (bytes, bytearray, memoryview)):
            # The module borrows the memory: keep an aligned copy alive with it.
            data = bytes(source)
            self._keep = ctypes.create_string_buffer(data, len(data))
            st = self._lib.etch_module_open_buffer(ctypes.cast(self._keep, ctypes.c_void_p),
                                                   len(data), ctypes.byref(opts),
                                                   ctypes.byref(self._handle))
            what = "<buffer of %d bytes>" % len(data)
        else:
            what = source
            st = self._lib.etch_module_open(what.encode(), ctypes.byref(opts),
                                            ctypes.byref(self._handle))
        self._check(st, "open %s" % what)

    def _check(self, st: int, what: str) -> None:
        if st != 0:
            raise RuntimeError_("%s: %s: %s" % (what, _lib.status_name(self._lib, st),
                                                _lib.last_error(self._lib)))

    def close(self) -> None:
        if self._handle:
            self._lib.etch_module_close(self._handle)
            self._handle = ctypes.c_void_p()
            self._methods.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _method(self, name: Optional[str]) -> ctypes.c_void_p:
        if name is None:
            p = ctypes.c_char_p()
            self._check(self._lib.etch_module_default_method(self._handle, ctypes.byref(p)),
                        "default method")
            name = p.value.decode()
        m = self._methods.get(name)
        if m is None:
            m = ctypes.c_void_p()
            st = self._lib.etch_module_load_method(self._handle, name.encode(), ctypes.byref(m))
            if st != 0 and self._data is None and self._needs_data(name):
                raise RuntimeError_("load method %s: it keeps its constants in external data "
                                    "(a .ptd file): pass data='FILE.ptd' to etch.runtime.load"
                                    % name)
            self._check(st, "load method %s" % name)
            self._methods[name] = m
        return m

    def _needs_data(self, name: str) -> bool:
        msg = _lib.last_error(self._lib)
        return "external" in msg.lower() or ".ptd" in msg

    def forward(self, *inputs: Any):
        """Run `forward` (or the only method) on tensors, numpy arrays or Python scalars; one
        output is returned bare (a torch tensor, or a Python scalar), several as a list."""
        outs = self.run_method(None, *inputs)
        return outs[0] if len(outs) == 1 else outs

    __call__ = forward

    def run_method(self, name: Optional[str], *inputs: Any) -> List[Any]:
        m = self._method(name)
        lib = self._lib
        n_in = lib.etch_method_num_inputs(m)
        if len(inputs) != n_in:
            raise ValueError("method takes %d inputs, %d given" % (n_in, len(inputs)))
        keep = []
        for i, x in enumerate(inputs):
            x = _ops.from_numpy(x, "input %d" % i)
            if isinstance(x, torch.Tensor):
                t = x.detach().contiguous().cpu()
                keep.append(t)
                et = _lib.etch_tensor()
                sizes = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
                st = lib.etch_tensor_init(ctypes.byref(et), _ops.scalar_type(t.dtype), t.dim(),
                                          sizes, ctypes.c_void_p(t.data_ptr()))
                self._check(st, "input %d" % i)
                self._check(lib.etch_method_set_input_tensor(m, i, ctypes.byref(et)),
                            "set input %d" % i)
            else:
                v = _lib.etch_value()
                if x is None:
                    v.tag = _lib.TAG_NONE
                elif isinstance(x, bool):
                    v.tag, v.u.b = _lib.TAG_BOOL, x
                elif isinstance(x, int):
                    v.tag, v.u.i = _lib.TAG_INT, x
                elif isinstance(x, float):
                    v.tag, v.u.d = _lib.TAG_DOUBLE, x
                else:
                    raise TypeError("input %d: unsupported %s" % (i, type(x).__name__))
                self._check(lib.etch_method_set_input(m, i, ctypes.byref(v)),
                            "set input %d" % i)
        self._check(lib.etch_method_execute(m), "execute")
        del keep
        return [_to_python(lib.etch_method_output(m, i))
                for i in range(lib.etch_method_num_outputs(m))]


def _to_python(vp) -> Any:
    if not vp:
        return None
    v = vp.contents
    if v.tag == _lib.TAG_TENSOR:
        return tensor_to_torch(v.u.tensor.contents)
    if v.tag == _lib.TAG_INT:
        return int(v.u.i)
    if v.tag == _lib.TAG_DOUBLE:
        return float(v.u.d)
    if v.tag == _lib.TAG_BOOL:
        return bool(v.u.b)
    if v.tag == _lib.TAG_NONE:
        return None
    if v.tag == _lib.TAG_STRING:
        return ctypes.string_at(v.u.str.ptr, v.u.str.len).decode()
    raise NotImplementedError("output of value kind %d" % v.tag)


def tensor_to_torch(t: "_lib.etch_tensor") -> torch.Tensor:
    """A torch copy of an etch tensor (any dim order)."""
    dtype = _ops.TORCH_DTYPE.get(t.dtype)
    if dtype is None:
        raise NotImplementedError("etch dtype %d has no torch equivalent" % t.dtype)
    dim = t.dim
    sizes = [t.sizes[i] for i in range(dim)]
    strides = [t.strides[i] for i in range(dim)]
    numel = 1
    for s in sizes:
        numel *= s
    esize = torch.empty((), dtype=dtype).element_size()
    if numel == 0:
        return torch.empty(sizes, dtype=dtype)
    span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
    raw = ctypes.string_at(t.data, span * esize)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype) if esize else None
    return torch.as_strided(flat, sizes, strides).clone()


def load(source: Union[str, bytes, Any], lib_path: Optional[str] = None,
         num_threads: int = 1, kernels: str = "optimized", data=None) -> Module:
    """Open a program: a path, the bytes of a .pte/.bpte, or an etch.Program.

    data: the path of the .ptd holding the program's external constants (a program
    exported with external_data=; the file Program.save wrote).

    num_threads: threads for kernels that split their work, the calling one included (0 or
    1: serial). kernels: "optimized" (the default: SIMD kernels, activations fused into the
    convolution/gemm before them at load), "portable" (the reference kernels only) or
    "registered" (whatever the process registered with etch_kernels_register*). The C
    kernel registry is process-wide: once a module opened with the optimized kernels, a
    portable-only module is refused in the same process (RuntimeError_ says so)."""
    return Module(source, lib_path, num_threads, kernels, data)
