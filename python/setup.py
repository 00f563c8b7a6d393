"""The etch Python package: ``pip install ./python`` (from the repository root).

There is deliberately no pyproject.toml: with one, pip (23.0, Debian 12's) builds in an
isolated environment and downloads setuptools into it, which fails offline.  Without one, pip
builds with the setuptools and wheel already installed (Debian's python3-setuptools and
python3-wheel, visible in a venv made with --system-site-packages), no network needed.

Built from a source checkout (``..`` holds CMakeLists.txt) with ``cmake`` on PATH, the build
step also builds the C library (target ``etch_shared``, tests off, in the build's temporary
directory) and ships it as ``etch/libetch.so``, where etch._lib looks first after ``ETCH_LIB``.
Without the tree or cmake, the package is built without it (pure Python) and finds the library
as python/README.md describes; a CMake build that fails fails the install.
"""

import glob
import os
import re
import shutil
import subprocess

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _version():
    with open(os.path.join(HERE, "etch", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _source_tree():
    """The checkout's root when this is one with the C sources, else None."""
    if os.path.isfile(os.path.join(ROOT, "CMakeLists.txt")) and \
            os.path.isdir(os.path.join(ROOT, "include", "etch")) and \
            os.path.isdir(os.path.join(ROOT, "src")):
        return ROOT
    return None


def _will_build_library():
    return _source_tree() is not None and shutil.which("cmake") is not None


def _jobs():
    env = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")
    if env:
        return env
    try:
        return str(len(os.sched_getaffinity(0)))
    except AttributeError:
        return str(os.cpu_count() or 1)


class BuildPyWithLibrary(build_py):
    """build_py, then libetch.so built with CMake into the package (see the module doc)."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "etch", "libetch.so")
        if os.path.exists(dest):
            os.remove(dest)
        root = _source_tree()
        if root is None:
            self.announce("etch: no source tree at %s; building without libetch.so" % ROOT, 2)
            return
        if shutil.which("cmake") is None:
            self.announce("etch: cmake not found; building without libetch.so", 2)
            return
        build_temp = self.get_finalized_command("build").build_temp
        tree = os.path.abspath(os.path.join(build_temp, "etch-cmake"))
        cache = os.path.join(tree, "CMakeCache.txt")
        if os.path.exists(cache):
            with open(cache) as f:
                m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", f.read(), re.M)
            if m is None or os.path.realpath(m.group(1)) != os.path.realpath(root):
                shutil.rmtree(tree)    # a tree configured for another checkout
        self.announce("etch: building libetch.so with CMake in %s" % tree, 2)
        self._cmake(["-S", root, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
                     "-DETCH_BUILD_TESTS=OFF", "-DETCH_SANITIZE=OFF", "-DETCH_FUZZ=OFF"])
        self._cmake(["--build", tree, "--target", "etch_shared", "-j", _jobs()])
        found = [p for p in glob.glob(os.path.join(tree, "**", "libetch.so"), recursive=True)
                 if "CMakeFiles" not in p]
        if not found:
            raise RuntimeError("etch: the CMake build made no libetch.so under %s" % tree)
        # The file itself (libetch.so links to the versioned name): ctypes opens it by path.
        shutil.copyfile(os.path.realpath(found[0]), dest)
        os.chmod(dest, 0o755)

    def _cmake(self, args):
        cmd = ["cmake"] + args
        self.announce("etch: " + " ".join(cmd), 2)
        r = subprocess.run(cmd)
        if r.returncode != 0:
            raise RuntimeError("etch: %s failed (exit %d); install cmake and a C compiler, or "
                               "build from a copy of python/ alone to skip the C library"
                               % (" ".join(cmd), r.returncode))


class EtchDistribution(Distribution):
    def has_ext_modules(self):
        # With libetch.so inside, the wheel is platform-specific (cp3X-cp3X-linux_<arch>).
        return _will_build_library()


setup(
    name="etch",
    version=_version(),
    description="Export PyTorch models to ExecuTorch .pte programs and run them on the etch C "
                "runtime",
    long_description=open(os.path.join(HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    # torch (Debian's python3-torch) is needed by the exporter and the ctypes binding, numpy by
    # nothing (accepted where it is installed); the serializer (etch.serialize) is pure
    # Python.  Not declared, so that an offline install works with the system torch.
    install_requires=[],
    packages=find_packages(include=["etch", "etch.*"]),
    package_data={"etch": ["*.md"], "etch.llm": ["*.md"]},
    entry_points={"console_scripts": [
        "etch-export = etch.cli:export_main",
        "etch-llm = etch.llm.cli:main",
    ]},
    cmdclass={"build_py": BuildPyWithLibrary},
    distclass=EtchDistribution,
    zip_safe=False,
)
