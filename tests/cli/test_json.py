"""`etch info --json` and `etch run --json` on the shared fixtures: stdout is one JSON object
(Python's json module parses it), and it states the same facts as the text output (parsed here
line by line) and the same values as the .npy files --output-dir writes.

    ETCH_CLI=build/etch ETCH_FIXTURES=../shared/fixtures python3 -m unittest tests.cli.test_json
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

import numpy as np

CLI = os.environ.get("ETCH_CLI", "build/etch")
PTE = Path(os.environ.get("ETCH_FIXTURES", "../shared/fixtures")) / "pte"
PROGRAMS = ["add.pte", "add_constant_segment.pte", "addmul_external.pte",
            "bundled_add_mul.bpte", "kws_dscnn_cortexm.pte",
            "lenet_bundled.bpte", "linear_constant_buffer.pte", "xnnpack_add_2023.pte",
            "xnnpack_clamp5.pte", "xnnpack_quantized.pte", "xnnpack_simple_cnn.pte"]


def etch(*args):
    p = subprocess.run([CLI, *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def text_facts(text: str) -> dict:
    """What `etch info` prints, read back from its lines."""
    f = {"methods": {}}
    method = None
    for line in text.splitlines():
        m = re.match(r"^(identifier|program image|segments|named data|constant data): (\S+)",
                     line)
        if m:
            f[m.group(1)] = m.group(2)
        m = re.match(r"^method '(.*)'$", line)
        if m:
            method = f["methods"].setdefault(m.group(1), {"io": [], "ops": [], "arenas": []})
            continue
        if method is None:
            continue
        m = re.match(r"^    (input|output) (\d+): (\w+)(?: (\w+) \[([0-9, ]*)\] (\w+))?", line)
        if m:
            shape = [int(x) for x in m.group(5).split(",")] if m.group(5) else \
                ([] if m.group(4) else None)
            method["io"].append((m.group(1), m.group(3), m.group(4), shape))
        m = re.match(r"^    (\S+::\S+) +(\d+) calls?(  MISSING)?$", line)
        if m:
            method["ops"].append((m.group(1), int(m.group(2)), not m.group(3)))
        m = re.match(r"^    arena \d+: (\d+) bytes$", line)
        if m:
            method["arenas"].append(int(m.group(1)))
        m = re.match(r"^  (planned memory|method pool|constant bytes|values|instructions): (\d+)",
                     line)
        if m:
            method[m.group(1)] = int(m.group(2))
        m = re.match(r"^  values: (\d+), instructions: (\d+)$", line)
        if m:
            method["values"], method["instructions"] = int(m.group(1)), int(m.group(2))
        m = re.match(r"^  needs external data: (yes|no)", line)
        if m:
            method["external"] = m.group(1) == "yes"
    return f


class InfoJsonTest(unittest.TestCase):
    def test_programs(self):
        for name in PROGRAMS:
            with self.subTest(name):
                rc, text, err = etch("info", str(PTE / name))
                self.assertEqual(rc, 0, err)
                rc, out, err = etch("info", "--json", str(PTE / name))
                self.assertEqual(rc, 0, err)
                j = json.loads(out)
                t = text_facts(text)
                self.assertEqual(j["file"], str(PTE / name))
                self.assertEqual(j["identifier"], t["identifier"])
                self.assertEqual(j["program_image"], int(t["program image"]))
                self.assertEqual(len(j["segments"]), int(t["segments"]))
                self.assertEqual(j["named_data"], int(t["named data"]))
                self.assertEqual(j["constant_bytes"], int(t["constant data"]))
                self.assertEqual([m["name"] for m in j["methods"]], list(t["methods"]))
                for m in j["methods"]:
                    tm = t["methods"][m["name"]]
                    io = [("input", v["kind"], v.get("dtype"), v.get("shape"))
                          for v in m["inputs"]]
                    io += [("output", v["kind"], v.get("dtype"), v.get("shape"))
                           for v in m["outputs"]]
                    self.assertEqual(io, tm["io"])
                    self.assertEqual([(o["name"], o["calls"], o["available"])
                                      for o in m["operators"]], tm["ops"])
                    self.assertEqual(m["arenas"], tm["arenas"])
                    self.assertEqual(m["planned_memory"], tm["planned memory"])
                    self.assertEqual(m["method_pool"], tm["method pool"])
                    self.assertEqual(m["constant_bytes"], tm["constant bytes"])
                    self.assertEqual((m["values"], m["instructions"]),
                                     (tm["values"], tm["instructions"]))
                    self.assertEqual(m["needs_external_data"], tm["external"])
                if name.endswith(".bpte"):
                    n = int(re.search(r"^bundled test cases: (\d+)$", text, re.M).group(1))
                    self.assertEqual(j["bundled_test_cases"], n)
                    self.assertEqual(sum(s["test_cases"] for s in j["bundled_suites"]), n)

    def test_data_map(self):
        rc, text, _ = etch("info", str(PTE / "addmul_external.ptd"))
        rc, out, err = etch("info", str(PTE / "addmul_external.ptd"), "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertEqual(j["identifier"], "FT01")
        n = int(re.search(r"^entries: (\d+)$", text, re.M).group(1))
        self.assertEqual(len(j["entries"]), n)
        for e in j["entries"]:
            self.assertIn("  %s: %d bytes" % (e["key"], e["size"]), text)

    def test_errors_leave_stdout_empty(self):
        rc, out, err = etch("info", "--json", str(PTE / "not_a_program.pte"))
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("error", err)


class RunJsonTest(unittest.TestCase):
    def test_outputs_values_files(self):
        for name in ("add.pte", "lenet_bundled.bpte", "linear_constant_buffer.pte",
                     "add_constant_segment.pte"):
            with self.subTest(name), tempfile.TemporaryDirectory() as d:
                rc, out, err = etch("run", str(PTE / name), "--json", "--print-output",
                                    "--output-dir", d, "--num-executions", "3",
                                    "--cpu-threads", "1")
                self.assertEqual(rc, 0, err)
                j = json.loads(out)
                self.assertEqual(j["method"], "forward")
                self.assertEqual((j["threads"], j["kernels"]), (1, "optimized"))
                self.assertEqual(j["executions"], 3)
                self.assertEqual(len(j["times_ms"]), 3)
                self.assertEqual(j["min_ms"], min(j["times_ms"]))
                self.assertEqual(j["max_ms"], max(j["times_ms"]))
                self.assertEqual(j["output_dir"], d)
                rc, text, _ = etch("run", str(PTE / name), "--cpu-threads", "1")
                n_out = len(re.findall(r"^output \d+: ", text, re.M))
                self.assertEqual(len(j["outputs"]), n_out)
                for o in j["outputs"]:
                    self.assertEqual(o["kind"], "Tensor")
                    self.assertEqual(o["file"], "%s/output_%d.npy" % (d, o["index"]))
                    ref = np.load(o["file"])
                    self.assertEqual(list(ref.shape), o["shape"])
                    self.assertIn("Tensor %s [%s]" % (o["dtype"],
                                                      ", ".join(map(str, o["shape"]))), text)
                    np.testing.assert_array_equal(
                        np.array(o["values"], dtype=ref.dtype).reshape(ref.shape), ref)

    def test_without_print_output_or_dir(self):
        rc, out, err = etch("run", str(PTE / "add.pte"), "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        (o,) = j["outputs"]
        self.assertNotIn("values", o)
        self.assertIsNone(o["file"])
        self.assertIsNone(j["output_dir"])
        # the default inputs are ones: add gives 2
        rc, out, _ = etch("run", str(PTE / "add.pte"), "--json", "--print-output")
        self.assertEqual(json.loads(out)["outputs"][0]["values"], [2.0])


if __name__ == "__main__":
    unittest.main()
