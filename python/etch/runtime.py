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


# ---- every instruction's outputs (etch.inspect) -------------------------------------------

_OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                             ctypes.c_char_p)


class DynamicTensor:
    """A dynamically shaped tensor as :func:`run_capturing` read it: ``data``, the elements of
    its whole capacity (the stored upper-bound shape ``bound``), of which a run of shape S
    used the first prod(S), contiguous.  ``as_shape(S)`` gives that tensor (None when S does
    not fit the bound)."""

    def __init__(self, data: torch.Tensor, bound):
        self.data = data
        self.bound = bound

    def as_shape(self, shape) -> Optional[torch.Tensor]:
        shape = tuple(int(s) for s in shape)
        if len(shape) != len(self.bound) or any(s > b for s, b in zip(shape, self.bound)):
            return None
        n = 1
        for s in shape:
            n *= s
        return self.data[:n].reshape(shape).clone()


class Captured:
    """What :func:`run_capturing` returns: ``outputs`` (the method's, as ``forward`` returns
    them in a list), ``values[(chain, pc)]`` (a list per instruction: the tensors it wrote,
    read right after it ran; None for one that could not be read: a dynamically shaped or
    unplanned tensor) and ``method`` (the name run: a CPU twin's when the backend was
    missing)."""

    def __init__(self, outputs, values, method):
        self.outputs = outputs
        self.values = values
        self.method = method


def run_capturing(source, inputs, wanted, method: str = "forward", data=None,
                  kernels: str = "optimized", temp_size: int = 16 << 20) -> Captured:
    """Run `method` of a program once and keep the outputs of the instructions in `wanted`
    (``{(chain, pc): [value index, ...]}``: the Tensor values each one writes; or a function
    of the ExecutionPlan loaded, a CPU twin's when a backend is missing, returning that).

    Uses only the public C API (include/etch/program.h): the method is loaded into memory
    this function owns, with fusion, chained calls and the channel-blocked layout off (every
    instruction then writes its own result, in its dim order), and the instruction observer
    copies each wanted tensor out of the planned arena right after its instruction ran,
    before a later one can reuse the memory.  The tensors are read at their stored sizes;
    dynamically shaped ones come back as :class:`DynamicTensor` (their run-time shape is not
    known to the observer).  `source`: a path, bytes or an etch.Program;
    `kernels`: "optimized" or "portable" (as :func:`load`; the registry is process-wide)."""
    from .serialize import pte as _pte
    from .serialize import schema as S
    if hasattr(source, "buffer") and not isinstance(source, (bytes, bytearray, memoryview)):
        source = source.buffer
    if isinstance(source, (str, os.PathLike)):
        with open(os.fspath(source), "rb") as f:
            source = f.read()
    blob = bytes(source)
    if kernels not in ("optimized", "portable"):
        raise ValueError("kernels must be 'optimized' or 'portable', not %r" % (kernels,))
    lib = _lib.load()
    c, P = ctypes, ctypes.POINTER
    protos = {
        "etch_kernels_register_optimized": (c.c_int, []),
        "etch_backends_register_builtin": (c.c_int, []),
        "etch_program_open_buffer": (c.c_int, [c.c_void_p, c.c_size_t, c.c_void_p,
                                               P(c.c_void_p)]),
        "etch_program_close": (None, [c.c_void_p]),
        "etch_data_map_open_file": (c.c_int, [c.c_char_p, c.c_void_p, P(c.c_void_p)]),
        "etch_data_map_close": (None, [c.c_void_p]),
        "etch_program_method_meta": (c.c_int, [c.c_void_p, c.c_char_p, P(_lib.etch_method_meta)]),
        "etch_method_meta_name": (c.c_char_p, [P(_lib.etch_method_meta)]),
        "etch_method_meta_pool_size": (c.c_size_t, [P(_lib.etch_method_meta)]),
        "etch_method_meta_num_arenas": (c.c_size_t, [P(_lib.etch_method_meta)]),
        "etch_method_meta_arena_size": (c.c_size_t, [P(_lib.etch_method_meta), c.c_size_t]),
        "etch_method_load": (c.c_int, [c.c_void_p, c.c_char_p, P(_lib.etch_method_memory),
                                       P(_lib.etch_method_options), P(c.c_void_p)]),
        "etch_method_free": (None, [c.c_void_p]),
        "etch_method_set_observer": (None, [c.c_void_p, _OBSERVER, c.c_void_p]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args

    def check(st, what):
        if st != 0:
            raise RuntimeError_("%s: %s: %s" % (what, _lib.status_name(lib, st),
                                                _lib.last_error(lib)))

    if kernels == "portable":
        lib.etch_kernels_impl_of.restype = c.c_char_p
        lib.etch_kernels_impl_of.argtypes = [P(_lib.etch_kernel)]
        if any(lib.etch_kernels_impl_of(lib.etch_kernels_at(i)) == b"optimized"
               for i in range(lib.etch_kernels_count())):
            raise RuntimeError_("portable kernels only were asked for, but the optimized "
                                "kernels are already registered in this process (the kernel "
                                "registry is process-wide)")
    check(lib.etch_kernels_register_optimized() if kernels == "optimized"
          else lib.etch_kernels_register_portable(), "register kernels")
    check(lib.etch_backends_register_builtin(), "register backends")
    keep = ctypes.create_string_buffer(blob, len(blob))
    prog, dmap, m = c.c_void_p(), c.c_void_p(), c.c_void_p()
    check(lib.etch_program_open_buffer(ctypes.cast(keep, c.c_void_p), len(blob), None,
                                       ctypes.byref(prog)), "open program")
    try:
        meta = _lib.etch_method_meta()
        check(lib.etch_program_method_meta(prog, method.encode(), ctypes.byref(meta)),
              "method %s" % method)
        loaded = lib.etch_method_meta_name(ctypes.byref(meta)).decode()
        plan = next(p for p in _pte.read_pte(blob).program.execution_plan if p.name == loaded)
        if data is not None:
            check(lib.etch_data_map_open_file(os.fsencode(os.fspath(data)), None,
                                              ctypes.byref(dmap)), "open %s" % data)
        na = lib.etch_method_meta_num_arenas(ctypes.byref(meta))
        arenas = [ctypes.create_string_buffer(max(lib.etch_method_meta_arena_size(
            ctypes.byref(meta), j), 1) + 16) for j in range(na)]
        # 16-byte aligned views of them
        bases = [(ctypes.addressof(a) + 15) & ~15 for a in arenas]
        pool_size = lib.etch_method_meta_pool_size(ctypes.byref(meta))
        pool = ctypes.create_string_buffer(pool_size + 16)
        temp = ctypes.create_string_buffer(temp_size + 16)
        arr = (c.c_void_p * max(na, 1))(*bases)
        sizes = (c.c_size_t * max(na, 1))(*[lib.etch_method_meta_arena_size(
            ctypes.byref(meta), j) for j in range(na)])
        mem = _lib.etch_method_memory((ctypes.addressof(pool) + 15) & ~15, pool_size, arr,
                                      sizes, na, (ctypes.addressof(temp) + 15) & ~15,
                                      temp_size)
        opts = _lib.etch_method_options(dmap.value, None, True, False, True)
        check(lib.etch_method_load(prog, loaded.encode(), ctypes.byref(mem), ctypes.byref(opts),
                                   ctypes.byref(m)), "load method %s" % loaded)

        def reader(vi):
            v = plan.values[vi].val
            if not isinstance(v, S.Tensor) or v.allocation_info is None:
                return None
            dtype = _ops.TORCH_DTYPE.get(int(v.scalar_type))
            mid = v.allocation_info.memory_id
            if dtype is None or not 1 <= mid <= na:
                return None
            off, nbytes, shape = v.allocation_info.memory_offset, v.nbytes, list(v.sizes)
            order = list(v.dim_order) or list(range(len(shape)))
            if v.shape_dynamism != S.TensorShapeDynamism.STATIC:
                if order != list(range(len(shape))):
                    return None
                # a resized tensor keeps its data contiguous at its planned offset: the bytes
                # of the whole capacity, for a caller who knows the shape it should have
                def read_dynamic():
                    raw = ctypes.string_at(bases[mid - 1] + off, nbytes)
                    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if nbytes \
                        else torch.empty(0, dtype=torch.uint8)
                    return DynamicTensor(flat.view(dtype), tuple(shape))
                return read_dynamic

            def read():
                raw = ctypes.string_at(bases[mid - 1] + off, nbytes)
                t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if nbytes else \
                    torch.empty(0, dtype=torch.uint8)
                t = t.view(dtype).reshape([shape[d] for d in order])
                return t.permute([order.index(d) for d in range(len(shape))]).contiguous()
            return read

        if callable(wanted):
            wanted = wanted(plan)
        readers = {k: [reader(vi) for vi in vis] for k, vis in wanted.items()}
        values: Dict[Any, List[Any]] = {}
        errors: List[BaseException] = []

        def observe(_user, chain, pc, _op):
            rs = readers.get((chain, pc))
            if rs is None:
                return
            try:
                values[(chain, pc)] = [r() if r is not None else None for r in rs]
            except BaseException as e:     # never unwind through C
                errors.append(e)

        cb = _OBSERVER(observe)
        lib.etch_method_set_observer(m, cb, None)
        n_in = lib.etch_method_num_inputs(m)
        if len(inputs) != n_in:
            raise ValueError("method %s takes %d inputs, %d given" % (loaded, n_in, len(inputs)))
        held = []
        for i, x in enumerate(inputs):
            t = _ops.from_numpy(x, "input %d" % i)
            if not isinstance(t, torch.Tensor):
                raise TypeError("input %d: a tensor is needed, not %s" % (i, type(t).__name__))
            t = t.detach().contiguous().cpu()
            held.append(t)
            et = _lib.etch_tensor()
            dims = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
            check(lib.etch_tensor_init(ctypes.byref(et), _ops.scalar_type(t.dtype), t.dim(),
                                       dims, ctypes.c_void_p(t.data_ptr())), "input %d" % i)
            check(lib.etch_method_set_input_tensor(m, i, ctypes.byref(et)), "set input %d" % i)
        check(lib.etch_method_execute(m), "execute")
        lib.etch_method_set_observer(m, _OBSERVER(), None)
        if errors:
            raise errors[0]
        outs = [_to_python(lib.etch_method_output(m, i))
                for i in range(lib.etch_method_num_outputs(m))]
        return Captured(outs, values, loaded)
    finally:
        if m:
            lib.etch_method_free(m)
        if dmap:
            lib.etch_data_map_close(dmap)
        lib.etch_program_close(prog)
