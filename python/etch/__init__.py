"""etch: Python tooling for the etch runtime (serialization of .pte/.ptd/.bpte files, and
later the exporter).  Subpackages are imported explicitly, e.g. ``from etch import
serialize``."""
