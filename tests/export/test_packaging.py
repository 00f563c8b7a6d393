"""`pip install --no-build-isolation --no-index ./python` works offline (into a target
directory here: Debian's PEP 668 marker refuses installs into the system interpreter unless
--break-system-packages is given or a venv is used)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.export._common import REPO


class PackagingTest(unittest.TestCase):
    def test_offline_install_and_import(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            shutil.copytree(REPO / "python", src,
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            target = os.path.join(d, "site")
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                                "--no-index", "--target", target, src],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for sub in ("etch/__init__.py", "etch/passes/__init__.py",
                        "etch/serialize/__init__.py", "etch/cli.py"):
                self.assertTrue(os.path.exists(os.path.join(target, sub)), sub)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = target
            r = subprocess.run([sys.executable, "-c",
                                "import etch, etch.serialize; print(etch.__file__); "
                                "print(etch.export.__name__)"],
                               capture_output=True, text=True, env=env, cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(target), r.stdout)


if __name__ == "__main__":
    unittest.main()
