"""ctypes view of the C library ``libetch.so``: the structs of include/etch/*.h, mirrored field
for field, and the functions the Python side calls.

The library is found through the ``ETCH_LIB`` environment variable, else
``<repo>/build/libetch.so`` next to this source tree.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

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


# etch_module_kernels (include/etch/module.h): which kernels a module registers when it opens
KERNELS_OPTIMIZED, KERNELS_PORTABLE, KERNELS_REGISTERED = 0, 1, 2
KERNELS = {"optimized": KERNELS_OPTIMIZED, "portable": KERNELS_PORTABLE,
           "registered": KERNELS_REGISTERED}


class etch_module_options(ctypes.Structure):
    _fields_ = [("load_mode", ctypes.c_int), ("data_path", ctypes.c_char_p),
                ("temp_size", ctypes.c_size_t), ("num_threads", ctypes.c_int),
                ("kernels", ctypes.c_int), ("no_fusion", ctypes.c_bool),
                ("no_prepack", ctypes.c_bool), ("no_blocked_layout", ctypes.c_bool)]


def default_library_path() -> Path:
    return Path(__file__).resolve().parents[2] / "build" / "libetch.so"


def find_library() -> Optional[str]:
    env = os.environ.get("ETCH_LIB")
    if env:
        return env if os.path.exists(env) else None
    p = default_library_path()
    return str(p) if p.exists() else None


_LIBS = {}


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """The library at `path` (default: find_library()), with prototypes set."""
    path = path or find_library()
    if path is None:
        raise OSError("libetch not found: set ETCH_LIB or build %s" % default_library_path())
    path = os.path.abspath(path)
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
