"""ctypes view of the C library ``libetch.so``: the structs of include/etch/*.h, mirrored field
for field, and the functions the Python side calls.

The library is looked up in this order (the first that exists wins; :func:`find_library`):

1. ``ETCH_LIB``: the path of a ``libetch.so`` (an error if it names no file);
2. next to the package: ``etch/libetch.so*``, which ``pip install`` from a source checkout
   builds with CMake and ships;
3. the source checkout this package is imported from: ``<repo>/build/libetch.so``;
4. the installed prefix: ``$(pkg-config --variable=libdir etch)/libetch.so*``;
5. the system linker path: ``ctypes.util.find_library("etch")`` (ldconfig, LD_LIBRARY_PATH).

When none is found, :func:`load` raises :class:`LibraryNotFoundError` naming each place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple

ETCH_MAX_DIMS = 16

# etch_value tags (include/etch/tensor.h)
TAG_NONE, TAG_TENSOR, TAG_STRING, TAG_DOUBLE, TAG_INT, TAG_BOOL = 0, 1, 2, 3, 4, 5
TAG_BOOL_LIST, TAG_DOUBLE_LIST, TAG_INT_LIST, TAG_TENSOR_LIST = 6, 7, 8, 9
TAG_OPTIONAL_TENSOR_LIST = 11


class etch_tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sizes", ctypes.c_int64 * ETCH_MAX_DIMS),
        ("strides", ctypes.c_int64 * ETCH_MAX_DIMS),
        ("dim_order", ctypes.c_uint8 * ETCH_MAX_DIMS),
        ("capacity", ctypes.c_int64),
        ("dim", ctypes.c_uint8),
        ("dtype", ctypes.c_uint8),
        ("dynamism", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
    ]


class etch_value(ctypes.Structure):
    pass


class _str(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class _doubles(ctypes.Structure):
    _fields_ = [("ptr", ctypes.POINTER(ctypes.c_double)), ("len", ctypes.c_size_t)]


class _bools(ctypes.Structure):
    _fields_ = [("ptr", ctypes.POINTER(ctypes.c_uint8)), ("len", ctypes.c_size_t)]


class _list(ctypes.Structure):
    _fields_ = [("items", ctypes.POINTER(ctypes.POINTER(etch_value))),
                ("scratch", ctypes.POINTER(ctypes.c_int64)), ("len", ctypes.c_size_t)]


class _value_union(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("d", ctypes.c_double), ("b", ctypes.c_bool),
                ("tensor", ctypes.POINTER(etch_tensor)), ("str", _str),
                ("doubles", _doubles), ("bools", _bools), ("list", _list)]


etch_value._fields_ = [("tag", ctypes.c_uint32), ("u", _value_union)]


class etch_kernel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("signature", ctypes.c_char_p),
                ("fn", ctypes.c_void_p)]


# include/etch/program.h: loading a method into caller memory (etch.runtime.run_capturing)
class etch_method_memory(ctypes.Structure):
    _fields_ = [("pool", ctypes.c_void_p), ("pool_size", ctypes.c_size_t),
                ("arenas", ctypes.POINTER(ctypes.c_void_p)),
                ("arena_sizes", ctypes.POINTER(ctypes.c_size_t)),
                ("num_arenas", ctypes.c_size_t), ("temp", ctypes.c_void_p),
                ("temp_size", ctypes.c_size_t)]


class etch_method_options(ctypes.Structure):
    _fields_ = [("external_data", ctypes.c_void_p), ("threadpool", ctypes.c_void_p),
                ("no_fusion", ctypes.c_bool), ("no_prepack", ctypes.c_bool),
                ("no_blocked_layout", ctypes.c_bool)]


class etch_method_meta(ctypes.Structure):
    _fields_ = [("program", ctypes.c_void_p), ("index", ctypes.c_uint32),
                ("fallback_from", ctypes.c_char_p)]


# etch_module_kernels (include/etch/module.h): which kernels a module registers when it opens
KERNELS_OPTIMIZED, KERNELS_PORTABLE, KERNELS_REGISTERED = 0, 1, 2
KERNELS = {"optimized": KERNELS_OPTIMIZED, "portable": KERNELS_PORTABLE,
           "registered": KERNELS_REGISTERED}


class etch_module_options(ctypes.Structure):
    _fields_ = [("load_mode", ctypes.c_int), ("data_path", ctypes.c_char_p),
                ("temp_size", ctypes.c_size_t), ("num_threads", ctypes.c_int),
                ("kernels", ctypes.c_int), ("no_fusion", ctypes.c_bool),
                ("no_prepack", ctypes.c_bool), ("no_blocked_layout", ctypes.c_bool),
                ("quiet_fallback", ctypes.c_bool), ("no_backends", ctypes.c_bool)]


class LibraryNotFoundError(OSError):
    """No libetch shared library was found (the message names every place looked in)."""


PACKAGE_DIR = Path(__file__).resolve().parent


def default_library_path() -> Path:
    """``<repo>/build/libetch.so`` of the source checkout this package sits in."""
    return PACKAGE_DIR.parents[1] / "build" / "libetch.so"


def _in_checkout() -> bool:
    root = PACKAGE_DIR.parents[1]
    return PACKAGE_DIR.parent.name == "python" and (root / "CMakeLists.txt").is_file() and \
        (root / "include" / "etch").is_dir()


def _shared_in(d: Path) -> Optional[str]:
    """libetch.so in directory d, else its first versioned name (libetch.so.0, ...)."""
    exact = d / "libetch.so"
    if exact.is_file():
        return str(exact)
    versioned = sorted(d.glob("libetch.so.*"))
    for p in versioned:
        if p.is_file():
            return str(p)
    return None


def _pkg_config_libdir() -> Tuple[Optional[str], str]:
    """(libdir, how it went) from ``pkg-config --variable=libdir etch``."""
    try:
        r = subprocess.run(["pkg-config", "--variable=libdir", "etch"], capture_output=True,
                           text=True, timeout=30)
    except FileNotFoundError:
        return None, "pkg-config is not installed"
    except (OSError, subprocess.SubprocessError) as e:
        return None, "pkg-config failed: %s" % e
    libdir = r.stdout.strip()
    if r.returncode != 0 or not libdir:
        return None, "pkg-config knows no package etch"
    return libdir, "libdir %s" % libdir


def lookup() -> Tuple[Optional[str], List[str]]:
    """(the library found or None, one line per place looked in, in order)."""
    tried: List[str] = []
    env = os.environ.get("ETCH_LIB")
    if env:
        if os.path.isfile(env):
            return env, tried
        raise LibraryNotFoundError("ETCH_LIB=%s names no file: point it at a libetch.so, or "
                                   "unset it to search the usual places" % env)
    tried.append("ETCH_LIB (not set)")
    found = _shared_in(PACKAGE_DIR)
    if found:
        return found, tried
    tried.append("%s/libetch.so* (not shipped with this install)" % PACKAGE_DIR)
    if _in_checkout():
        p = default_library_path()
        if p.is_file():
            return str(p), tried
        tried.append("%s (source checkout, not built)" % p)
    libdir, how = _pkg_config_libdir()
    if libdir:
        found = _shared_in(Path(libdir))
        if found:
            return found, tried
        how += ", which has no libetch.so"
    tried.append("pkg-config etch (%s)" % how)
    name = ctypes.util.find_library("etch")
    if name:
        return name, tried
    tried.append("the system linker path (ctypes.util.find_library: nothing)")
    return None, tried


def find_library() -> Optional[str]:
    """The library :func:`load` would open (a path, or a bare name from the system linker
    path), or None."""
    return lookup()[0]


def not_found_message(tried: List[str], skip: str = "") -> str:
    """One line: where the library was looked for and how to provide it (`skip`: how to do
    without it, for callers that can)."""
    return ("libetch.so (the etch C library) was not found; looked in: %s. Install the package "
            "from a source checkout with cmake available (pip install ./python builds and ships "
            "it), build it in the checkout (cmake --build build --target etch_shared), install "
            "it (cmake --install build), or set ETCH_LIB=/path/to/libetch.so%s"
            % ("; ".join(tried), "; " + skip if skip else ""))


_LIBS = {}


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """The library at `path` (default: the lookup order of this module), with prototypes
    set.  A `path` without a directory that is no file here is a name for the system linker
    path (as find_library() may return)."""
    if path is None:
        path, tried = lookup()
        if path is None:
            raise LibraryNotFoundError(not_found_message(tried))
    path = os.fspath(path)
    if os.path.isfile(path):
        path = os.path.abspath(path)
    elif os.sep in path:
        raise FileNotFoundError("libetch: no file %s" % path)
    if path in _LIBS:
        return _LIBS[path]
    lib = ctypes.CDLL(path)
    c = ctypes
    P = c.POINTER
    proto = {
        "etch_status_str": (c.c_char_p, [c.c_int]),
        "etch_last_error": (c.c_char_p, []),
        "etch_kernels_register_portable": (c.c_int, []),
        "etch_kernels_count": (c.c_size_t, []),
        "etch_kernels_at": (P(etch_kernel), [c.c_size_t]),
        "etch_kernels_portable_dtypes": (c.c_uint32, [c.c_char_p]),
        "etch_module_default_options": (etch_module_options, []),
        "etch_module_open": (c.c_int, [c.c_char_p, P(etch_module_options), P(c.c_void_p)]),
        "etch_module_open_buffer": (c.c_int, [c.c_void_p, c.c_size_t, P(etch_module_options),
                                              P(c.c_void_p)]),
        "etch_module_close": (None, [c.c_void_p]),
        "etch_module_load_method": (c.c_int, [c.c_void_p, c.c_char_p, P(c.c_void_p)]),
        "etch_module_default_method": (c.c_int, [c.c_void_p, P(c.c_char_p)]),
        "etch_method_num_inputs": (c.c_size_t, [c.c_void_p]),
        "etch_method_num_outputs": (c.c_size_t, [c.c_void_p]),
        "etch_method_set_input_tensor": (c.c_int, [c.c_void_p, c.c_size_t, P(etch_tensor)]),
        "etch_method_set_input": (c.c_int, [c.c_void_p, c.c_size_t, P(etch_value)]),
        "etch_method_execute": (c.c_int, [c.c_void_p]),
        "etch_method_reset": (c.c_int, [c.c_void_p]),
        "etch_method_output": (P(etch_value), [c.c_void_p, c.c_size_t]),
        "etch_tensor_init": (c.c_int, [P(etch_tensor), c.c_int, c.c_size_t, P(c.c_int64),
                                       c.c_void_p]),
        "etch_dtype_size": (c.c_size_t, [c.c_int]),
    }
    for name, (res, args) in proto.items():
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = res
        fn.argtypes = args
    _LIBS[path] = lib
    return lib


def last_error(lib) -> str:
    msg = lib.etch_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def status_name(lib, st: int) -> str:
    s = lib.etch_status_str(st)
    return s.decode() if s else "status %d" % st
