"""Reading ``torch.save`` files without running code stored in them.

A ``torch.save`` file is a pickle, and unpickling calls whatever callables the file names: a
checkpoint from elsewhere could run any code. ``torch.load(..., weights_only=True)`` exists
in torch 1.13 but refuses common checkpoints (its unpickler has no opcode for floats, so a
``{"norm_eps": 1e-5}`` in ``model_args`` fails), and its ``pickle_module`` argument is ignored
unless ``weights_only`` is set. :func:`load_tensors` reads with an unpickler
that resolves only what tensors and plain containers need (torch's tensor and parameter
rebuild functions, storages, ``OrderedDict``, ``torch.Size``, dtypes, byte strings); any other
name in the file is refused with :class:`pickle.UnpicklingError` before it is called.
"""
import collections
import pickle
import types

import torch

# (module, name) pairs a file of tensors and plain containers refers to.
_ALLOWED = {
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch", "Size"),
    ("_codecs", "encode"),          # bytes under pickle protocol 2
}
_DTYPES = {name for name in dir(torch) if isinstance(getattr(torch, name, None), torch.dtype)}


class _TensorUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        # storages (torch.FloatStorage, ...) are resolved by torch.load's own wrapper first
        if (module, name) in _ALLOWED or (module == "torch" and name in _DTYPES):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            "refusing %s.%s: the file names code to run, not only tensors and plain "
            "containers" % (module, name))


def _load(file, **kwargs):
    return _TensorUnpickler(file, **kwargs).load()


# what torch.load calls: pickle_module.Unpickler and pickle_module.load
_pickle_module = types.ModuleType("etch_tensor_pickle")
_pickle_module.Unpickler = _TensorUnpickler
_pickle_module.load = _load
_pickle_module.__dict__["OrderedDict"] = collections.OrderedDict


def load_tensors(path, map_location="cpu"):
    """``torch.load(path)`` for a file of tensors and plain containers (dicts, lists, tuples,
    numbers, strings); refuses (:class:`pickle.UnpicklingError`) a file that would run
    anything else while loading."""
    ser = torch.serialization
    # torch 1.13's torch.load ignores pickle_module unless weights_only is set (and then
    # refuses one): its own readers take the module, for both of torch.save's formats
    if not (hasattr(ser, "_load") and hasattr(ser, "_legacy_load")):
        return torch.load(path, map_location=map_location, weights_only=True)
    with open(path, "rb") as f:
        if ser._is_zipfile(f):
            with ser._open_zipfile_reader(f) as z:
                if ser._is_torchscript_zip(z):
                    raise pickle.UnpicklingError("%s is a TorchScript archive, not a file of "
                                                 "tensors" % path)
                return ser._load(z, map_location, _pickle_module, encoding="utf-8")
        return ser._legacy_load(f, map_location, _pickle_module, encoding="utf-8")
