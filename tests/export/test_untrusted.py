"""Files from elsewhere never run code during export (issue 20's adversarial review).

- A pickle whose unpickling runs code (``__reduce__``) given as the model file is refused
  unless ``--trust-pickle`` / ``trust_pickle=True``, and nothing in it runs; a file of plain
  tensors (a state dict) is still read, and refused as not being a module.
- etch.llm's checkpoint reader and its Hugging Face ``pytorch_model.bin`` reader resolve only
  what tensors and plain containers need (etch.safe_load): a checkpoint that would run code
  fails to load, nothing in it runs, and a real checkpoint (floats in ``model_args``) loads.
- ``python -m etch export`` and ``python -m etch.llm`` do not import modules from the current
  directory ahead of installed ones (``python -m`` puts the directory first on the path).
Each case checks that a marker file the payload would write does not appear.
"""
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

from tests.export._common import REPO, python_env


class _Payload:
    """Unpickling calls open(marker, 'w'): the marker appears if the file's code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _write_payload(path, marker, wrap=None):
    obj = _Payload(marker) if wrap is None else wrap(_Payload(marker))
    import torch
    torch.save(obj, path)


class UntrustedFilesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.marker = os.path.join(self.d, "code-ran")

    def tearDown(self):
        self.tmp.cleanup()

    def assert_not_ran(self):
        self.assertFalse(os.path.exists(self.marker), "code stored in the file ran")

    def test_model_file_with_code_is_refused(self):
        from etch.cli import load_factory
        path = os.path.join(self.d, "model.pt")
        _write_payload(path, self.marker)
        with self.assertRaises(ValueError) as cm:
            load_factory(path)
        self.assertIn("--trust-pickle", str(cm.exception))
        self.assert_not_ran()

    def test_export_cli_refuses_it_too(self):
        path = os.path.join(self.d, "model.pt")
        _write_payload(path, self.marker)
        r = subprocess.run([sys.executable, "-m", "etch", "export", path, "--input",
                            "1x4:float32", "-o", os.path.join(self.d, "m.pte"), "--no-check"],
                           capture_output=True, text=True, env=python_env(), cwd=REPO)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--trust-pickle", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assert_not_ran()

    def test_trusted_whole_module_still_loads(self):
        import torch
        from etch.cli import load_factory
        path = os.path.join(self.d, "lin.pt")
        torch.save(torch.nn.Linear(4, 2), path)
        with self.assertRaises(ValueError):
            load_factory(path)
        m = load_factory(path, trust_pickle=True)
        self.assertIsInstance(m, torch.nn.Linear)

    def test_llm_checkpoint_with_code_fails_without_running_it(self):
        from etch.llm.checkpoint import load_torch_checkpoint
        path = os.path.join(self.d, "ckpt.pt")
        _write_payload(path, self.marker,
                       wrap=lambda p: {"model_args": {"dim": 8}, "model": {"x": p}})
        with self.assertRaises(Exception):
            load_torch_checkpoint(path)
        self.assert_not_ran()

    def test_plain_checkpoint_with_floats_loads(self):
        import torch
        from etch.safe_load import load_tensors
        path = os.path.join(self.d, "plain.pt")
        ck = {"model_args": {"dim": 8, "norm_eps": 1e-5}, "model": {"w": torch.ones(2, 3)},
              "train": [1.5, "text", b"bytes", (2, None, True)]}
        torch.save(ck, path)
        got = load_tensors(path)
        self.assertEqual(got["model_args"], ck["model_args"])
        self.assertEqual(got["train"], ck["train"])
        self.assertTrue(torch.equal(got["model"]["w"], ck["model"]["w"]))

    def test_hf_bin_with_code_fails_without_running_it(self):
        from etch.llm.hf import load_hf_weights
        _write_payload(os.path.join(self.d, "pytorch_model.bin"), self.marker,
                       wrap=lambda p: {"w": p})
        with self.assertRaises(Exception):
            load_hf_weights(self.d)
        self.assert_not_ran()

    def _shadowing_dir(self, names):
        for n in names:
            with open(os.path.join(self.d, n + ".py"), "w") as f:
                f.write("open(%r, 'w').close()\nraise SystemExit('shadow module imported')\n"
                        % self.marker)

    def test_current_directory_does_not_shadow_installed_modules(self):
        self._shadowing_dir(["torch", "numpy"])
        env = python_env()
        out = os.path.join(self.d, "lenet.pte")
        r = subprocess.run([sys.executable, "-m", "etch", "export", "etch.zoo:lenet", "--input",
                            "1x1x28x28:float32", "-o", out, "--no-check"],
                           capture_output=True, text=True, env=env, cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(out))
        self.assert_not_ran()
        r = subprocess.run([sys.executable, "-m", "etch.llm", "--help"],
                           capture_output=True, text=True, env=env, cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_not_ran()

    def test_a_factory_in_the_current_directory_still_works(self):
        with open(os.path.join(self.d, "mymodel.py"), "w") as f:
            f.write("import torch\n\ndef make():\n    return torch.nn.Linear(4, 2)\n")
        out = os.path.join(self.d, "m.pte")
        r = subprocess.run([sys.executable, "-m", "etch", "export", "mymodel:make", "--input",
                            "1x4:float32", "-o", out, "--no-check"],
                           capture_output=True, text=True, env=python_env(), cwd=self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(out))


if __name__ == "__main__":
    unittest.main()
