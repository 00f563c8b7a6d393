"""Shared set-up for the Python tests: makes `python/` importable and finds the fixtures.

Run the suite from the repository root with:
    /usr/bin/python3 -m unittest discover -s tests/python
"""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_DIR = os.path.join(REPO, "python")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

# ETCH_FIXTURES (set by ctest) points at ../shared/fixtures; the .pte files are in pte/.
FIXTURES = os.environ.get("ETCH_FIXTURES") or os.path.join(os.path.dirname(REPO), "shared",
                                                           "fixtures")
PTE_FIXTURES = os.path.join(FIXTURES, "pte")
INVALID_FIXTURES = {"legacy_et02.pte", "not_a_program.pte"}


def fixture_path(name):
    return os.path.join(PTE_FIXTURES, name)


def read_fixture(name):
    with open(fixture_path(name), "rb") as f:
        return f.read()


def fixture_names(suffix):
    if not os.path.isdir(PTE_FIXTURES):
        return []
    return sorted(n for n in os.listdir(PTE_FIXTURES)
                  if n.endswith(suffix) and n not in INVALID_FIXTURES)
