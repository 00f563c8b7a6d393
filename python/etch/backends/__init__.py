"""Backends (delegates) the exporter can lower to: :mod:`etch.backends.xnnpack`."""

BACKENDS = ("xnnpack",)

# A method NAME__cpu is the plain-operator twin of a delegated method NAME (python/README.md).
CPU_TWIN_SUFFIX = "__cpu"

__all__ = ["BACKENDS", "CPU_TWIN_SUFFIX"]
