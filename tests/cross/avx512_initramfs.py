"""Build the initramfs that tests/cross/run_avx512.sh boots in Bochs.

Reads the ctest listing (``ctest --show-only=json-v1``) of the build tree, keeps the tests
whose names match a regular expression, and writes a gzip'd newc archive holding:

- /init: the static program built from avx512_init.c;
- each selected test's executable, and every argument that names a file or directory
  (its generated programs and golden data), at the same absolute paths as on the host, so
  that the command lines run unchanged;
- the shared libraries and loader the executables need (from ``ldd``);
- /etch/commands: one line per test, name, working directory and arguments separated by tabs
  (also written beside the archive, OUT.cpio.gz.commands, for the script to check the run);
- /dev/console, /proc, /tmp.

usage: avx512_initramfs.py CTEST_JSON REGEX INIT_BINARY OUT.cpio.gz
"""

import gzip
import json
import os
import re
import stat
import subprocess
import sys


class Newc:
    """A cpio archive in the "newc" format the kernel unpacks."""

    def __init__(self, out):
        self.out = out
        self.ino = 1
        self.seen = set()

    def _entry(self, name, mode, data=b"", rdev=(0, 0)):
        name_b = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
        self.ino += 1
        head = b"070701" + b"".join(b"%08x" % v for v in fields)
        self.out.write(head + name_b)
        self.out.write(b"\0" * (-(len(head) + len(name_b)) % 4))
        self.out.write(data)
        self.out.write(b"\0" * (-len(data) % 4))

    def directory(self, path):
        path = path.strip("/")
        parts = path.split("/") if path else []
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self.seen:
                self.seen.add(d)
                self._entry(d, stat.S_IFDIR | 0o755)

    def file(self, path, data, mode=0o755):
        path = path.strip("/")
        if path in self.seen:
            return
        self.directory(os.path.dirname(path))
        self.seen.add(path)
        self._entry(path, stat.S_IFREG | mode, data)

    def host_file(self, host_path, inside=None):
        real = os.path.realpath(host_path)
        with open(real, "rb") as f:
            data = f.read()
        self.file(inside or host_path, data, os.stat(real).st_mode & 0o777)

    def host_tree(self, host_dir):
        for root, dirs, files in os.walk(host_dir):
            self.directory(root)
            for name in sorted(files):
                self.host_file(os.path.join(root, name))

    def char_device(self, path, major, minor):
        self.seen.add(path)
        self._entry(path, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def trailer(self):
        self._entry("TRAILER!!!", 0)


def shared_libraries(executable):
    """The loader and libraries `ldd` resolves for a dynamic executable (none if static)."""
    out = subprocess.run(["ldd", executable], capture_output=True, text=True)
    if out.returncode != 0:  # "not a dynamic executable"
        return []
    libs = []
    for line in out.stdout.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    listing, regex, init_binary, out_path = sys.argv[1:]
    with open(listing) as f:
        tests = json.load(f)["tests"]
    pattern = re.compile(regex)
    selected = [t for t in tests if pattern.search(t["name"])]
    if not selected:
        sys.exit(f"error: no test matches {regex!r}")
    commands = []
    with open(out_path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb",
                                                    compresslevel=1, mtime=0) as gz:
        cpio = Newc(gz)
        for d in ("dev", "proc", "tmp", "etch"):
            cpio.directory(d)
        cpio.char_device("dev/console", 5, 1)
        cpio.host_file(init_binary, "init")
        for t in selected:
            argv = t["command"]
            exe = argv[0]
            if not os.path.isabs(exe) or not os.access(exe, os.X_OK):
                sys.exit(f"error: test {t['name']}: {exe} is not an executable path")
            cpio.host_file(exe)
            for lib in shared_libraries(exe):
                cpio.host_file(lib)
            for arg in argv[1:]:
                if os.path.isdir(arg):
                    cpio.host_tree(arg)
                elif os.path.isfile(arg):
                    cpio.host_file(arg)
            workdir = "/"
            for prop in t.get("properties", []):
                if prop["name"] == "WORKING_DIRECTORY":
                    workdir = prop["value"]
            cpio.directory(workdir)
            if any("\t" in a or "\n" in a for a in argv):
                sys.exit(f"error: test {t['name']}: an argument holds a tab or newline")
            commands.append("\t".join([t["name"], workdir] + argv))
        listing_text = "\n".join(commands) + "\n"
        cpio.file("etch/commands", listing_text.encode(), 0o644)
        cpio.trailer()
    with open(out_path + ".commands", "w") as f:
        f.write(listing_text)
    print(f"initramfs: {len(selected)} tests: {' '.join(t['name'] for t in selected)}")


if __name__ == "__main__":
    main()
