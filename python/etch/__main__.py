"""python3 -m etch ..."""
import sys

from .cli import main

sys.exit(main())
