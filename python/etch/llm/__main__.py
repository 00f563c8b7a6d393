"""python3 -m etch.llm export|generate ... (see etch.llm.cli)."""
import sys

from .cli import main

sys.exit(main())
