# Kept for tools that still call setup.py; the configuration is in pyproject.toml.
from setuptools import setup

setup()
