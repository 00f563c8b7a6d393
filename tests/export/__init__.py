"""Tests of the Python exporter (python/etch): run with
``/usr/bin/python3 -m unittest discover -s tests/export -t .`` from the repository root
(PYTHONPATH=python; ETCH_LIB / ETCH_CLI point at the built library / CLI, else build/)."""
