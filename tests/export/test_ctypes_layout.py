"""The ctypes mirrors in etch/_lib.py match the C structs of include/etch (sizes and field
offsets as the C compiler lays them out)."""

import ctypes
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.export._common import REPO
from etch import _lib

C_SRC = r"""
#include <stddef.h>
#include <stdio.h>
#include "etch/etch.h"
#include "etch/module.h"
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
#define Z(T) printf(#T " %zu\n", sizeof(T))
int main(void) {
    Z(etch_tensor); F(etch_tensor, data); F(etch_tensor, sizes); F(etch_tensor, strides);
    F(etch_tensor, dim_order); F(etch_tensor, capacity); F(etch_tensor, dim);
    F(etch_tensor, dtype); F(etch_tensor, dynamism); F(etch_tensor, flags);
    Z(etch_value); F(etch_value, tag); F(etch_value, u);
    Z(etch_kernel); F(etch_kernel, name); F(etch_kernel, signature); F(etch_kernel, fn);
    Z(etch_module_options); F(etch_module_options, load_mode);
    F(etch_module_options, data_path); F(etch_module_options, temp_size);
    F(etch_module_options, num_threads); F(etch_module_options, kernels);
    F(etch_module_options, no_fusion); F(etch_module_options, no_prepack);
    Z(etch_method_memory); F(etch_method_memory, pool); F(etch_method_memory, pool_size);
    F(etch_method_memory, arenas); F(etch_method_memory, arena_sizes);
    F(etch_method_memory, num_arenas); F(etch_method_memory, temp);
    F(etch_method_memory, temp_size);
    Z(etch_method_options); F(etch_method_options, external_data);
    F(etch_method_options, threadpool); F(etch_method_options, no_fusion);
    F(etch_method_options, no_prepack); F(etch_method_options, no_blocked_layout);
    Z(etch_method_meta); F(etch_method_meta, program); F(etch_method_meta, index);
    F(etch_method_meta, fallback_from);
    printf("kernels.optimized %d\n", (int)ETCH_MODULE_KERNELS_OPTIMIZED);
    printf("kernels.portable %d\n", (int)ETCH_MODULE_KERNELS_PORTABLE);
    printf("kernels.registered %d\n", (int)ETCH_MODULE_KERNELS_REGISTERED);
    return 0;
}
"""

MIRRORS = {"etch_tensor": _lib.etch_tensor, "etch_value": _lib.etch_value,
           "etch_kernel": _lib.etch_kernel, "etch_module_options": _lib.etch_module_options,
           "etch_method_memory": _lib.etch_method_memory,
           "etch_method_options": _lib.etch_method_options,
           "etch_method_meta": _lib.etch_method_meta}


class CtypesLayoutTest(unittest.TestCase):
    def test_layout_matches_the_headers(self):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write(C_SRC)
            r = subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), src, "-o", exe],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            what, value = line.split()
            value = int(value)
            if what.startswith("kernels."):
                self.assertEqual(_lib.KERNELS[what.split(".")[1]], value, what)
            elif "." in what:
                struct, field = what.split(".")
                self.assertEqual(getattr(MIRRORS[struct], field).offset, value, what)
            else:
                self.assertEqual(ctypes.sizeof(MIRRORS[what]), value, what)


if __name__ == "__main__":
    unittest.main()
