"""The package as users install it (python/README.md, "Install"), offline, and how it finds the
C library.

* InstalledPackageTest: a copy of the checkout; ``pip install ./python`` in a venv made with
  ``--system-site-packages`` (the build step builds libetch.so with CMake and ships it); then,
  with no PYTHONPATH / ETCH_LIB and outside the tree: the console scripts export models
  (a ``torch.save`` file, a ``.py`` factory, the zoo) and ``etch.runtime.load(...).forward``
  on numpy arrays matches torch; ``etch.llm`` imports and ``python -m etch.llm --help`` works;
  the library loaded is the package's own.
* DebianInterpreterTest: ``/usr/bin/python3 -m pip install --break-system-packages`` (relocated
  with ``--root``) from python/ alone, so without the C library; then the export is an error
  naming the lookup order, and ``--no-check`` exports anyway.
* LookupOrderTest / ArgumentErrorTest / NumpyInputTest: etch._lib's order (ETCH_LIB, package,
  checkout, pkg-config, linker path) and Python's own errors and numpy inputs, in process.

The environment of the installs drops every PIP_* setting and sets PIP_NO_INDEX=1 and an empty
pip configuration: an install that needed a download (an isolated build fetching setuptools)
fails here instead of passing on a machine with a wheel cache.
"""

from __future__ import annotations

import ctypes.util
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np
import torch

from tests.export._common import REPO, lib_path, needs_lib

import etch  # noqa: E402
from etch import _lib  # noqa: E402
from etch.cli import load_factory  # noqa: E402

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".work", "venv", ".venv"}


def _ignore(d, names):
    """The checkout as a fresh clone has it: no build trees, caches or installs."""
    out = []
    for n in names:
        p = os.path.join(d, n)
        if n in _SKIP_DIRS or n.endswith(".egg-info") or \
                (os.path.isdir(p) and n.startswith("build")):
            out.append(n)
    return out


def clean_env(home: str, **extra) -> dict:
    """PATH and a HOME only: no PYTHONPATH, ETCH_LIB, PIP_* or library paths."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def pip_env(home: str) -> dict:
    return clean_env(home, PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull,
                     PIP_DISABLE_PIP_VERSION_CHECK="1")


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _package_dirs(root: str):
    """Every package of the source tree (a directory with __init__.py), dotted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(root, "etch")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        if "__init__.py" in files:
            out.append(os.path.relpath(d, root).replace(os.sep, "."))
    return sorted(out)


_MODEL_PY = """
import torch


def make():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).eval()
"""

_RUN_PTE = """
import json, sys
import numpy as np
import etch
pte, x_npy, y_npy = sys.argv[1:]
x = np.load(x_npy)
m = etch.runtime.load(pte)
y = m.forward(x)
np.save(y_npy, y.numpy())
maps = open("/proc/self/maps").read()
print(json.dumps({"etch": etch.__file__, "lib": etch._lib.find_library(),
                  "loaded": [l.split()[-1] for l in maps.splitlines() if "libetch" in l],
                  "type": type(y).__name__}))
"""


class InstalledPackageTest(unittest.TestCase):
    """One venv install shared by the tests (its CMake build takes a while on few cores)."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="etch-pkg-")
        t = cls.tmp = cls._tmp.name
        cls.home = os.path.join(t, "home")
        cls.work = os.path.join(t, "work")     # outside the checkout and its copy
        os.makedirs(cls.home)
        os.makedirs(cls.work)
        src = os.path.join(t, "checkout")
        shutil.copytree(REPO, src, ignore=_ignore, symlinks=True)
        cls.venv = os.path.join(t, "venv")
        r = run([PY, "-m", "venv", "--system-site-packages", cls.venv], env=clean_env(cls.home))
        if r.returncode != 0:
            raise AssertionError("python3 -m venv failed (Debian: apt-get install python3-venv):"
                                 "\n" + r.stdout + r.stderr)
        cls.bin = os.path.join(cls.venv, "bin")
        # python/README.md: `pip install ./python` from the repository root, venv active
        cls.install = run([os.path.join(cls.bin, "pip"), "install", "./python"], cwd=src,
                          env=pip_env(cls.home))
        if cls.install.returncode != 0:
            raise AssertionError("pip install ./python failed:\n" + cls.install.stdout +
                                 cls.install.stderr)
        r = run([os.path.join(cls.bin, "python"), "-c",
                 "import etch, os; print(os.path.dirname(etch.__file__))"],
                cwd=cls.work, env=clean_env(cls.home))
        cls.pkg = r.stdout.strip()
        shutil.rmtree(src)      # nothing may point back into the tree it was built from

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def env(self):
        return clean_env(self.home)

    def venv_run(self, *cmd):
        return run(cmd, cwd=self.work, env=self.env())

    def test_installed_offline_into_the_venv(self):
        self.assertTrue(self.pkg.startswith(self.venv), self.pkg)
        self.assertIn("Successfully installed etch", self.install.stdout)

    def test_every_subpackage_and_the_library_are_installed(self):
        want = _package_dirs(str(REPO / "python"))
        for sub in ("etch.llm", "etch.passes", "etch.serialize"):
            self.assertIn(sub, want)
        got = _package_dirs(os.path.dirname(self.pkg))
        self.assertEqual(got, want)
        for py in glob.glob(str(REPO / "python" / "etch" / "**" / "*.py"), recursive=True):
            rel = os.path.relpath(py, REPO / "python" / "etch")
            self.assertTrue(os.path.isfile(os.path.join(self.pkg, rel)), rel)
        so = os.path.join(self.pkg, "libetch.so")
        self.assertTrue(os.path.isfile(so) and not os.path.islink(so))
        self.assertIsNotNone(ctypes.CDLL(so).etch_module_open)

    def test_console_scripts_export_and_the_runtime_matches_torch(self):
        exe = os.path.join(self.bin, "etch-export")
        self.assertTrue(os.access(exe, os.X_OK))
        # three ways to name the model: a torch.save file, a .py factory, the zoo
        model_py = os.path.join(self.work, "tiny.py")
        with open(model_py, "w") as f:
            f.write(_MODEL_PY)
        ns = {}
        exec(_MODEL_PY, ns)
        model = ns["make"]()
        model_pt = os.path.join(self.work, "tiny.pt")
        torch.save(model, model_pt)
        x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
        x_npy = os.path.join(self.work, "x.npy")
        np.save(x_npy, x)
        with torch.no_grad():
            ref = model(torch.from_numpy(x))
        cases = {
            "file": ([exe, model_pt, "--trust-pickle"], ref),
            "factory": ([exe, "tiny.py:make"], ref),
            "module": ([os.path.join(self.bin, "python"), "-m", "etch", "export",
                        model_py + ":make"], ref),
        }
        for name, (cmd, expected) in cases.items():
            with self.subTest(name):
                pte = os.path.join(self.work, name + ".pte")
                r = self.venv_run(*cmd, "--input", "1x2x6x6:float32", "-o", pte)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("checking operators", r.stderr)
                y_npy = os.path.join(self.work, name + "_y.npy")
                r = self.venv_run(os.path.join(self.bin, "python"), "-c", _RUN_PTE, pte, x_npy,
                                  y_npy)
                self.assertEqual(r.returncode, 0, r.stderr)
                info = json.loads(r.stdout)
                self.assertEqual(info["type"], "Tensor")
                self.assertEqual(os.path.dirname(info["etch"]), self.pkg)
                shipped = os.path.join(self.pkg, "libetch.so")
                self.assertEqual(info["lib"], shipped)
                self.assertEqual(set(info["loaded"]), {shipped})
                got = np.load(y_npy)
                self.assertEqual(got.shape, tuple(expected.shape))
                np.testing.assert_allclose(got, expected.numpy(), rtol=1e-4, atol=1e-5)

    def test_zoo_model_with_bundle(self):
        pte = os.path.join(self.work, "lenet.pte")
        bpte = os.path.join(self.work, "lenet.bpte")
        r = self.venv_run(os.path.join(self.bin, "etch-export"), "etch.zoo:lenet", "--input",
                          "1x1x28x28:float32", "-o", pte, "--bundle", bpte, "--summary")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("aten::convolution.out", r.stdout)
        # the bundle's cases were run through the shipped library when it was written; its
        # expected outputs (torch's) against a fresh run of the .pte on the same input
        r = self.venv_run(os.path.join(self.bin, "python"), "-c", textwrap.dedent("""
            import sys, numpy as np, etch
            from etch.serialize import bundled as B
            bp = B.read_bpte(open(sys.argv[1], "rb").read())
            case = bp.method_test_suites[0].test_cases[0]
            def arr(v):
                t = v.val
                return np.frombuffer(t.data, np.float32).reshape(t.sizes)
            y = etch.runtime.load(sys.argv[2]).forward(arr(case.inputs[0]))
            print(float(np.abs(y.numpy() - arr(case.expected_outputs[0])).max()))
            """), bpte, pte)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(float(r.stdout), 1e-4)

    def test_llm_imports_and_its_command_line(self):
        py = os.path.join(self.bin, "python")
        r = self.venv_run(py, "-c", "import etch.llm, etch.llm.export, etch.llm.checkpoint, "
                          "etch.llm.model; print(etch.llm.__file__)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().startswith(self.pkg), r.stdout)
        for cmd in ([py, "-m", "etch.llm", "--help"], [os.path.join(self.bin, "etch-llm"),
                                                         "--help"]):
            with self.subTest(cmd[-2]):
                r = self.venv_run(*cmd)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("export", r.stdout)
                self.assertIn("generate", r.stdout)

    def test_llm_export_from_the_installed_package(self):
        """etch-llm export of stories260K with the shipped library (no environment) writes
        the same bytes as the checkout's exporter, and the program generates."""
        ckpt = os.path.join(os.environ.get("ETCH_FIXTURES", str(REPO.parent / "shared" /
                                                                "fixtures")),
                            "llm", "stories260K.pt")
        if not os.path.isfile(ckpt):
            self.fail("fixture %s not found" % ckpt)
        got = os.path.join(self.work, "s260k.pte")
        r = self.venv_run(os.path.join(self.bin, "etch-llm"), "export", "--checkpoint", ckpt,
                          "-o", got)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = os.path.join(self.work, "s260k_tree.pte")
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        r = run([PY, "-m", "etch.llm", "export", "--checkpoint", ckpt, "-o", want], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(got, "rb") as a, open(want, "rb") as b:
            self.assertEqual(a.read(), b.read())
        from tests.export._common import cli_path
        tok = os.path.join(os.path.dirname(ckpt), "tok512.model")
        r = run([cli_path(), "llm", "--model", got, "--tokenizer", tok, "--temperature", "0",
                 "--max-new-tokens", "16", "--quiet"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(len(r.stdout.strip()), 0)

    def test_errors_are_one_line_without_traceback(self):
        exe = os.path.join(self.bin, "etch-export")
        for args, want in ((["missing.py:make"], "No such file or directory: missing.py"),
                           (["missing.pt"], "No such file or directory: missing.pt"),
                           (["etch.zoo:nope"], "etch.zoo has no nope"),
                           (["etch.zoo:lenet", "--input", "1x1x28x28:complex"],
                            "unknown dtype")):
            with self.subTest(args[0]):
                r = self.venv_run(exe, *args, "-o", "x.pte")
                self.assertEqual(r.returncode, 1)
                self.assertNotIn("Traceback", r.stderr)
                last = r.stderr.strip().splitlines()[-1]
                self.assertTrue(last.startswith("etch-export: error: "), r.stderr)
                self.assertIn(want, last)
        r = self.venv_run(exe)     # argparse: usage and exit 2
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: etch-export", r.stderr)


class DebianInterpreterTest(unittest.TestCase):
    """Debian's interpreter with --break-system-packages, from python/ alone (no C tree: the
    package is built without libetch.so), relocated with --root so that the system stays
    untouched (pip skips its PEP 668 check under --root, so this tests the offline build with
    the system's setuptools and wheel, not the flag itself)."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="etch-deb-")
        t = cls._tmp.name
        cls.home = os.path.join(t, "home")
        cls.work = os.path.join(t, "work")
        os.makedirs(cls.home)
        os.makedirs(cls.work)
        src = os.path.join(t, "alone")
        shutil.copytree(REPO / "python", os.path.join(src, "python"), ignore=_ignore)
        cls.root = os.path.join(t, "root")
        cls.install = run([PY, "-m", "pip", "install", "--break-system-packages", "--root",
                           cls.root, "./python"], cwd=src, env=pip_env(cls.home))
        if cls.install.returncode != 0:
            raise AssertionError("pip install --break-system-packages failed:\n" +
                                 cls.install.stdout + cls.install.stderr)
        inits = glob.glob(os.path.join(cls.root, "**", "etch", "__init__.py"), recursive=True)
        if len(inits) != 1:
            raise AssertionError("installed etch packages: %s" % inits)
        cls.site = os.path.dirname(os.path.dirname(inits[0]))
        cls.scripts = glob.glob(os.path.join(cls.root, "**", "bin", "etch-export"),
                                recursive=True)
        cls.nopc = os.path.join(t, "no-pkgconfig")
        os.makedirs(cls.nopc)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def env(self):
        # the --root tree is not on sys.path by itself; no ETCH_LIB, and a pkg-config that
        # sees no installed etch.pc
        return clean_env(self.home, PYTHONPATH=self.site, PKG_CONFIG_LIBDIR=self.nopc,
                         PKG_CONFIG_PATH="")

    def test_built_without_the_library(self):
        self.assertFalse(glob.glob(os.path.join(self.site, "etch", "libetch.so*")))
        self.assertTrue(os.path.isfile(os.path.join(self.site, "etch", "llm", "cli.py")))
        self.assertEqual(len(self.scripts), 1, self.install.stdout)

    def test_export_without_a_library_is_an_error_unless_no_check(self):
        self.assertIsNone(ctypes.util.find_library("etch"),
                          "this machine has a libetch on its linker path: the test needs one "
                          "without")
        pte = os.path.join(self.work, "lenet.pte")
        args = [self.scripts[0], "etch.zoo:lenet", "--input", "1x1x28x28:float32", "-o", pte]
        r = run(args, cwd=self.work, env=self.env())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("etch-export: error: libetch.so (the etch C library) "
                                        "was not found; looked in: ETCH_LIB (not set); "), last)
        for part in (os.path.join(self.site, "etch") + "/libetch.so*", "pkg-config etch",
                     "the system linker path", "set ETCH_LIB=", "--no-check"):
            self.assertIn(part, last)
        self.assertFalse(os.path.exists(pte))
        # the bundle's verification run needs the library too: --no-check skips both
        bpte = os.path.join(self.work, "lenet.bpte")
        r = run(args + ["--no-check", "--bundle", bpte], cwd=self.work, env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("checking operators", r.stderr)
        with open(pte, "rb") as f:
            self.assertEqual(f.read(8)[4:], b"ET12")
        self.assertTrue(os.path.getsize(bpte) > os.path.getsize(pte))
        # the API: check_ops=True (the default) raises, check_ops=False exports
        r = run([PY, "-c", textwrap.dedent("""
            import torch, etch
            from etch import _lib
            m, x = torch.nn.Linear(3, 2), torch.randn(1, 3)
            try:
                etch.export(m, (x,))
            except _lib.LibraryNotFoundError as e:
                assert isinstance(e, OSError) and "looked in" in str(e), e
            else:
                raise SystemExit("export without a library passed the check")
            try:
                etch.runtime.load(etch.export(m, (x,), check_ops=False))
            except _lib.LibraryNotFoundError:
                pass
            else:
                raise SystemExit("runtime.load without a library")
            print("ok")
            """)], cwd=self.work, env=self.env())
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)


_FIND = "import etch._lib as L; p, tried = L.lookup(); print(p); print('|'.join(tried))"


@needs_lib
class LookupOrderTest(unittest.TestCase):
    """Each step of etch._lib's order, with a copy of the package that ships no library (so
    that the next step decides) and the library of this build."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="etch-lookup-")
        t = cls._tmp.name
        cls.site = os.path.join(t, "site")
        shutil.copytree(REPO / "python" / "etch", os.path.join(cls.site, "etch"),
                        ignore=_ignore)
        real = os.path.realpath(lib_path())
        cls.libdir = os.path.join(t, "prefix", "lib")
        os.makedirs(cls.libdir)
        shutil.copyfile(real, os.path.join(cls.libdir, "libetch.so.0.1.0"))
        os.symlink("libetch.so.0.1.0", os.path.join(cls.libdir, "libetch.so.0"))
        os.symlink("libetch.so.0", os.path.join(cls.libdir, "libetch.so"))
        cls.pcdir = os.path.join(t, "pkgconfig")
        os.makedirs(cls.pcdir)
        with open(os.path.join(cls.pcdir, "etch.pc"), "w") as f:
            f.write("prefix=%s\nlibdir=${prefix}/lib\n\nName: etch\nDescription: etch\n"
                    "Version: 0.1.0\nLibs: -L${libdir} -letch\n" % os.path.join(t, "prefix"))
        cls.empty = os.path.join(t, "empty")
        os.makedirs(cls.empty)
        cls.home = t

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def lookup(self, **extra):
        env = clean_env(self.home, PYTHONPATH=self.site, PKG_CONFIG_LIBDIR=self.empty,
                        PKG_CONFIG_PATH="")
        env.update(extra)
        r = run([PY, "-c", _FIND], cwd=self.home, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        path, tried = r.stdout.splitlines()
        return path, tried

    def test_pkg_config_libdir(self):
        if shutil.which("pkg-config") is None:
            self.fail("pkg-config is not installed (Debian: apt-get install pkg-config)")
        path, tried = self.lookup(PKG_CONFIG_LIBDIR=self.pcdir)
        self.assertEqual(path, os.path.join(self.libdir, "libetch.so"))
        self.assertIn("ETCH_LIB (not set)", tried)
        self.assertIn(os.path.join(self.site, "etch", "libetch.so*"), tried)

    def test_system_linker_path(self):
        # ctypes.util.find_library looks through LD_LIBRARY_PATH (after ldconfig's cache)
        path, tried = self.lookup(LD_LIBRARY_PATH=self.libdir)
        self.assertEqual(path, "libetch.so.0")
        self.assertIn("pkg-config etch (pkg-config knows no package etch)", tried)
        env = clean_env(self.home, PYTHONPATH=self.site, PKG_CONFIG_LIBDIR=self.empty,
                        LD_LIBRARY_PATH=self.libdir)
        r = run([PY, "-c", "import etch._lib as L; lib = L.load(); "
                 "print(lib.etch_kernels_register_portable() == 0)"], cwd=self.home, env=env)
        self.assertEqual(r.stdout.strip(), "True", r.stderr)

    def test_package_copy_comes_before_pkg_config(self):
        shutil.copyfile(os.path.join(self.libdir, "libetch.so.0.1.0"),
                        os.path.join(self.site, "etch", "libetch.so"))
        try:
            path, tried = self.lookup(PKG_CONFIG_LIBDIR=self.pcdir)
            self.assertEqual(path, os.path.join(self.site, "etch", "libetch.so"))
            self.assertEqual(tried, "ETCH_LIB (not set)")
            # ETCH_LIB first of all; one naming no file is an error, not a fallback
            other = os.path.join(self.libdir, "libetch.so.0.1.0")
            self.assertEqual(self.lookup(ETCH_LIB=other)[0], other)
            env = clean_env(self.home, PYTHONPATH=self.site, ETCH_LIB="/nonexistent/libetch.so")
            r = run([PY, "-c", _FIND], cwd=self.home, env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("LibraryNotFoundError: ETCH_LIB=/nonexistent/libetch.so names no file",
                          r.stderr)
        finally:
            os.remove(os.path.join(self.site, "etch", "libetch.so"))

    def test_checkout_build_comes_before_pkg_config(self):
        # a package imported from a checkout (python/etch beside CMakeLists.txt, include/etch)
        # with ETCH_LIB unset and no shipped copy: <checkout>/build/libetch.so
        co = os.path.join(self.home, "checkout")
        shutil.copytree(os.path.join(self.site, "etch"), os.path.join(co, "python", "etch"))
        os.makedirs(os.path.join(co, "include", "etch"))
        os.makedirs(os.path.join(co, "build"))
        open(os.path.join(co, "CMakeLists.txt"), "w").close()
        env = clean_env(self.home, PYTHONPATH=os.path.join(co, "python"),
                        PKG_CONFIG_LIBDIR=self.pcdir)
        r = run([PY, "-c", _FIND], cwd=self.home, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        path, tried = r.stdout.splitlines()     # not built there: pkg-config's
        self.assertEqual(path, os.path.join(self.libdir, "libetch.so"))
        self.assertIn(os.path.join(co, "build", "libetch.so") + " (source checkout, not built)",
                      tried)
        shutil.copyfile(os.path.join(self.libdir, "libetch.so.0.1.0"),
                        os.path.join(co, "build", "libetch.so"))
        r = run([PY, "-c", _FIND], cwd=self.home, env=env)
        self.assertEqual(r.stdout.splitlines()[0], os.path.join(co, "build", "libetch.so"),
                         r.stderr)
        # an installed package is no checkout: the same relative path is not tried
        path, tried = self.lookup()
        self.assertNotIn("source checkout", tried)


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x, y):
        return self.fc(x) * y


class ArgumentErrorTest(unittest.TestCase):
    def test_runtime_load(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError) as cm:
                etch.runtime.load(os.path.join(d, "missing.pte"))
            self.assertEqual(cm.exception.filename, os.path.join(d, "missing.pte"))
            with self.assertRaises(IsADirectoryError):
                etch.runtime.load(d)
        for bad in (123, None, [b"ET12"]):
            with self.subTest(bad):
                with self.assertRaises(TypeError):
                    etch.runtime.load(bad)
        with self.assertRaises(FileNotFoundError):
            _lib.load("/nonexistent/libetch.so")

    def test_export_arguments(self):
        m = _Linear()
        x, y = torch.randn(2, 6), torch.randn(2, 3)
        with self.assertRaises(TypeError):
            etch.export(lambda a, b: a, (x, y), check_ops=False)
        with self.assertRaises(TypeError):
            etch.export(m, 5, check_ops=False)
        with self.assertRaises(TypeError):
            etch.export(m, (x, "y"), check_ops=False)
        with self.assertRaises(TypeError):
            etch.export(m, (x, np.zeros((2, 3), np.uint16)), check_ops=False)
        with self.assertRaises(ValueError):
            etch.export(m, (x, y), check_ops="sometimes")
        with self.assertRaises(TypeError):
            etch.export(m, (x, y), dynamic_shapes=[5, None], check_ops=False)
        with self.assertRaises(ValueError):
            etch.export(m, (x, y), dynamic_shapes=[{0: 8}], check_ops=False)
        with self.assertRaises(ValueError):
            etch.bundle(etch.export(m, (x, y), check_ops=False), [(x, y)], verify="maybe")

    def test_cli_targets(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(FileNotFoundError):
                load_factory(os.path.join(d, "missing.py") + ":make")
            with self.assertRaises(FileNotFoundError):
                load_factory(os.path.join(d, "missing.pt"))
            with self.assertRaises(ValueError):
                load_factory(os.path.join(d, "model.py"))     # no :FACTORY
            sd = os.path.join(d, "sd.pt")
            torch.save(_Linear().state_dict(), sd)
            with self.assertRaises(TypeError):
                load_factory(sd)
        with self.assertRaises(ValueError):
            load_factory("etch.zoo:no_such_model")
        with self.assertRaises(ValueError):
            load_factory("nothing-like-a-target")


@needs_lib
class NumpyInputTest(unittest.TestCase):
    def test_export_run_and_bundle_take_numpy(self):
        m = _Linear().eval()
        rng = np.random.default_rng(5)
        xn = rng.standard_normal((2, 6)).astype(np.float32)
        yn = np.asfortranarray(rng.standard_normal((2, 3)))[:, :].astype(np.float32)
        xt, yt = torch.from_numpy(xn.copy()), torch.from_numpy(np.ascontiguousarray(yn))
        with torch.no_grad():
            ref = m(xt, yt)
        p_np = etch.export(m, (xn, yn))
        p_t = etch.export(m, (xt, yt))
        self.assertEqual(p_np.buffer, p_t.buffer)
        mod = etch.runtime.load(p_np)
        got = mod.forward(xn, yn)
        self.assertIsInstance(got, torch.Tensor)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
        # read-only, non-contiguous and big-endian arrays are converted, not misread
        ro = xn.copy()
        ro.flags.writeable = False
        wide = np.zeros((2, 12), np.float32)
        wide[:, ::2] = xn
        strided = wide[:, ::2]
        torch.testing.assert_close(mod.forward(ro, yn), ref, rtol=1e-5, atol=1e-6)
        self.assertEqual(strided.flags.c_contiguous, False)
        torch.testing.assert_close(mod.forward(strided, yn), ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(mod.forward(xn.astype(">f4"), yn), ref, rtol=1e-5,
                                   atol=1e-6)
        with self.assertRaises(TypeError):
            mod.forward(xn.astype(np.complex64), yn)
        # bundling: numpy cases (with and without expected outputs) == tensor cases
        self.assertEqual(etch.bundle(p_t, [(xn, yn)]), etch.bundle(p_t, [(xt, yt)]))
        self.assertEqual(etch.bundle(p_t, [((xn, yn), (ref.numpy(),))]),
                         etch.bundle(p_t, [((xt, yt), (ref,))]))


if __name__ == "__main__":
    unittest.main()
