#!/usr/bin/python3
"""usage: cut_file.py IN OUT: write the first three quarters of IN's bytes to OUT."""
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
with open(sys.argv[1], "rb") as f:
    data = f.read()
with open(sys.argv[2], "wb") as f:
    f.write(data[:len(data) * 3 // 4])
