"""Hugging Face model folders exported with `python3 -m etch.llm export --hf` (the folders and
golden data: gen_checkpoints.py, run by llm_hf.gen; the exports: llm_hf.export.<model>).

* SafetensorsReader: etch.llm.safetensors reads what this test's writer (torch's bytes) wrote,
  every dtype; lying headers are refused, naming the file and the tensor;
* Config: unsupported configs, missing tensors and a tokenizer with more ids than the model
  are errors with a message, exit status 1;
* Chat: the 8 strings derived from each template reproduce jinja's rendering, and the
  expected strings of ChatML / Llama 3; Llama 2's template is refused with a reason;
* Program: get_chat_template read back from the .pte (8 Strings), the other metadata, and the
  last position's logits of forward against the PyTorch reference (reference.py);
* CRuntime: greedy ids through the C API (hf_ids) and the text of `etch llm` equal the
  reference's;
* ChatEndToEnd: `etch llm --chat --system` on each exported program feeds exactly the ids of
  jinja's own rendering of the conversation (encoded by this test's tokenizer), and a chat
  reply stops at the template's end-of-turn token.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_checkpoints as G  # noqa: E402
from etch.llm import chat, safetensors  # noqa: E402

MODELS = Path(os.environ.get("LLMHF_MODELS", REPO / "build" / "tests" / "llm_hf" / "models"))
CLI = os.environ.get("ETCH_CLI", str(REPO / "build" / "etch"))
HF_IDS = os.environ.get("HF_IDS", str(REPO / "build" / "tests" / "llm_hf" / "hf_ids"))
NAMES = ("llama", "qwen2", "smollm", "llama2")
WITH_TEMPLATE = ("llama", "qwen2", "smollm")


def ref(name):
    return json.loads((MODELS / name / "reference.json").read_text())


def export(args):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run([sys.executable, "-m", "etch.llm", "export", *args, "--no-check"],
                          capture_output=True, text=True, env=env)


class SafetensorsReader(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def path(self, name="t.safetensors"):
        return os.path.join(self.tmp, name)

    def test_reads_torch_data(self):
        g = torch.Generator().manual_seed(0)
        ts = {"a.f32": torch.randn(3, 5, generator=g),
              "b.f16": torch.randn(7, generator=g).half(),
              "c.bf16": torch.randn(2, 3, 4, generator=g).bfloat16(),
              "d.i64": torch.arange(-3, 9).reshape(4, 3),
              "e.scalar": torch.tensor(2.5),
              "f.empty": torch.zeros(0, 4)}
        G.write_safetensors(self.path(), ts, {"format": "pt"})
        got = safetensors.load_file(self.path())
        self.assertEqual(sorted(got), sorted(ts))
        for k, v in ts.items():
            self.assertEqual(got[k].dtype, v.dtype, k)
            self.assertEqual(tuple(got[k].shape), tuple(v.shape), k)
            self.assertTrue(torch.equal(got[k], v), k)
        header, meta, _, _ = safetensors.read_header(self.path())
        self.assertEqual(meta, {"format": "pt"})
        self.assertEqual(header["c.bf16"]["dtype"], "BF16")

    def raw(self, header: dict, data: bytes, hlen=None):
        js = json.dumps(header).encode()
        with open(self.path(), "wb") as f:
            f.write(struct.pack("<Q", len(js) if hlen is None else hlen) + js + data)
        return self.path()

    def refused(self, path, *words):
        with self.assertRaises(ValueError) as cm:
            safetensors.load_file(path)
        msg = str(cm.exception)
        self.assertIn(path, msg)
        for w in words:
            self.assertIn(w, msg)

    def test_lying_files(self):
        ok = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
        self.refused(self.raw(ok, b"\0" * 8, hlen=10 ** 6), "header length")
        with open(self.path(), "wb") as f:
            f.write(b"\1\0\0")
        self.refused(self.path(), "8-byte")
        self.refused(self.raw(ok, b"\0" * 4), "'w'", "outside")
        self.refused(self.raw({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                              b"\0" * 8), "'w'", "needs 12 bytes")
        self.refused(self.raw({"w": {"dtype": "F8_E4M3", "shape": [8],
                                     "data_offsets": [0, 8]}}, b"\0" * 8), "'w'", "F8_E4M3")
        self.refused(self.raw({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}},
                              b"\0" * 8), "'w'", "shape")
        self.refused(self.raw({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8]}},
                              b"\0" * 8), "'w'", "data_offsets")
        self.refused(self.raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                              b"\0" * 12), "'b'", "overlaps")
        self.refused(self.raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}},
                              b"\0" * 8), "belong to no tensor")
        self.refused(self.raw(ok, b"\0" * 12), "after the last tensor")
        self.refused(self.raw([1, 2], b""), "not a JSON object")
        with open(self.path(), "wb") as f:
            f.write(struct.pack("<Q", 4) + b"{\"a\"")
        self.refused(self.path(), "JSON")
        self.refused(self.raw({"__metadata__": {"format": 1}}, b""), "__metadata__")


class Config(unittest.TestCase):
    def folder(self, name="qwen2"):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        shutil.copytree(MODELS / name, d, dirs_exist_ok=True)
        return Path(d)

    def edit(self, d, fn, **kv):
        p = d / fn
        j = json.loads(p.read_text())
        j.update(kv)
        p.write_text(json.dumps(j))

    def fails(self, d, *words, extra=()):
        r = export(["--hf", str(d), "-o", str(d / "m.pte"), "--max-seq-len", "16", *extra])
        self.assertEqual(r.returncode, 1, r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)
        self.assertFalse((d / "m.pte").exists())

    def test_unsupported_config(self):
        d = self.folder()
        self.edit(d, "config.json", architectures=["MistralForCausalLM"], model_type="mistral")
        self.fails(d, "MistralForCausalLM", "not supported")
        d = self.folder()
        self.edit(d, "config.json", hidden_act="gelu")
        self.fails(d, "hidden_act", "gelu")
        d = self.folder("llama")
        self.edit(d, "config.json", rope_scaling={"rope_type": "yarn", "factor": 4.0})
        self.fails(d, "yarn")
        d = self.folder("llama")
        self.edit(d, "config.json", rope_scaling={"rope_type": "llama3", "factor": 8.0})
        self.fails(d, "low_freq_factor")
        d = self.folder()
        self.fails(d, "max_position_embeddings", extra=["--max-seq-len", "40000"])
        d = self.folder()
        self.edit(d, "config.json", num_key_value_heads=3)
        self.fails(d, "num_key_value_heads")

    def test_weights_must_match(self):
        d = self.folder()
        sd = safetensors.load_file(str(d / "model.safetensors"))
        del sd["model.layers.1.self_attn.k_proj.bias"]
        G.write_safetensors(str(d / "model.safetensors"), sd)
        self.fails(d, "model.layers.1.self_attn.k_proj.bias", "missing")
        d = self.folder("smollm")
        self.edit(d, "config.json", intermediate_size=64)
        self.fails(d, "mlp.gate_proj.weight", "shape")
        d = self.folder("llama")
        (d / "model-00002-of-00002.safetensors").unlink()
        self.fails(d, "model-00002-of-00002.safetensors", "missing")

    def test_tokenizer_vocab(self):
        d = self.folder("smollm")         # tokenizer ids == vocab_size: fine; one less: error
        cfg = json.loads((d / "config.json").read_text())
        n = json.loads((MODELS / "smollm" / "config.json").read_text())["vocab_size"]
        cfg["vocab_size"] = n - 1
        (d / "config.json").write_text(json.dumps(cfg))
        self.fails(d, "tokenizer.json", "%d token ids" % n, "vocab_size %d" % (n - 1))
        # qwen2's vocabulary is padded beyond the tokenizer: accepted, and said
        d = self.folder("qwen2")
        r = export(["--hf", str(d), "-o", str(d / "m.pte"), "--max-seq-len", "16"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("padded vocabulary", r.stderr)


class Chat(unittest.TestCase):
    def test_rerendering(self):
        for name in WITH_TEMPLATE:
            r = ref(name)
            t, why = chat.derive(r["chat_template"], r["special"])
            self.assertIsNotNone(t, "%s: %s" % (name, why))
            for system in (None, "You answer in rhymes."):
                turns = [("Hi!", "Hello."), ("What is 2+2?", "4.")]
                want = chat.render(r["chat_template"], chat._msgs(system, turns, "Thanks"),
                                   True, r["special"])
                self.assertEqual(chat.compose(t, system, turns, "Thanks"), want, name)
                want = chat.render(r["chat_template"], chat._msgs(system, turns, None), False,
                                   r["special"])
                self.assertEqual(chat.compose(t, system, turns, None), want, name)

    def test_known_templates(self):
        qwen, _ = chat.derive(G.CHATML_QWEN2, {"eos_token": "<|im_end|>"})
        self.assertEqual(qwen, ("", "<|im_start|>system\n", "<|im_end|>\n",
                                "<|im_start|>user\n", "<|im_end|>\n",
                                "<|im_start|>assistant\n", "<|im_end|>\n",
                                "You are a helpful assistant."))
        l3, _ = chat.derive(G.LLAMA3, {"bos_token": "<|begin_of_text|>"})
        h = "<|start_header_id|>%s<|end_header_id|>\n\n"
        self.assertEqual(l3, ("<|begin_of_text|>", h % "system", "<|eot_id|>", h % "user",
                              "<|eot_id|>", h % "assistant", "<|eot_id|>", ""))
        self.assertTrue(chat.strips_text(G.LLAMA3, {"bos_token": "<|begin_of_text|>"}))
        self.assertFalse(chat.strips_text(G.CHATML_QWEN2, {}))

    def test_llama2_refused(self):
        t, why = chat.derive(G.LLAMA2, {"bos_token": "<s>", "eos_token": "</s>"})
        self.assertIsNone(t)
        self.assertTrue(why)
        # a template that refuses system messages (raise_exception) is refused too
        t, why = chat.derive("{% for m in messages %}{% if m['role'] == 'system' %}"
                             "{{ raise_exception('System role not supported') }}{% endif %}"
                             "{{ m['role'] + ': ' + m['content'] + '\n' }}{% endfor %}"
                             "{% if add_generation_prompt %}assistant: {% endif %}", {})
        self.assertIsNone(t)
        self.assertIn("System role not supported", why)


class Program(unittest.TestCase):
    """The exported programs through etch's runtime (libetch loaded into Python)."""

    def module(self, name):
        from etch import runtime
        return runtime.load(str(MODELS / ("%s.pte" % name)))

    def test_metadata(self):
        for name in NAMES:
            r = ref(name)
            cfg = json.loads((MODELS / name / "config.json").read_text())
            m = self.module(name)
            if name in WITH_TEMPLATE:
                got = m.run_method("get_chat_template")
                want, _ = chat.derive(r["chat_template"], r["special"])
                self.assertEqual(len(got), 8)
                self.assertEqual(tuple(got), want, name)
            else:
                with self.assertRaises(Exception):
                    m.run_method("get_chat_template")
            self.assertEqual(m.run_method("get_vocab_size"), [cfg["vocab_size"]])
            ctx = 2048 if name == "llama" else 64
            self.assertEqual(m.run_method("get_max_context_len"), [ctx])
            bos = r["prompt_ids"][0] if name in ("llama", "llama2") else -1
            self.assertEqual(m.run_method("get_bos_id"), [bos], name)
            gp = MODELS / name / "generation_config.json"
            eos = json.loads(gp.read_text())["eos_token_id"] if gp.exists() else \
                cfg["eos_token_id"]
            self.assertEqual(m.run_method("get_eos_ids"), eos if isinstance(eos, list)
                             else [eos], name)

    def test_logits(self):
        for name in NAMES:
            r = ref(name)
            m = self.module(name)
            got = m.forward(torch.tensor([r["prompt_ids"]]), torch.tensor([0]))[0]
            want = torch.tensor(r["logits"])
            err = float((got - want).abs().max())
            self.assertLess(err, 2e-4 * max(1.0, float(want.abs().max())),
                            "%s: logits differ by %g" % (name, err))


class CRuntime(unittest.TestCase):
    def test_greedy_ids(self):
        for name in NAMES:
            r = ref(name)
            p = subprocess.run([HF_IDS, str(MODELS / ("%s.pte" % name)),
                                str(MODELS / name / "tokenizer.json"),
                                ",".join(map(str, r["prompt_ids"])),
                                str(len(r["greedy_ids"]))],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            ids = [int(x) for x in p.stdout.splitlines()[1].split(",")]
            self.assertEqual(ids, r["greedy_ids"], name)

    def test_etch_llm_text(self):
        """etch llm --raw (the chat template left out) tokenizes the prompt with
        tokenizer.json (BOS from get_bos_id) and generates the reference's text."""
        for name in NAMES:
            r = ref(name)
            p = subprocess.run([CLI, "llm", "--model", str(MODELS / ("%s.pte" % name)),
                                "--tokenizer", str(MODELS / name / "tokenizer.json"),
                                "--prompt", r["prompt"], "--raw", "--temperature", "0",
                                "--ignore-eos", "--max-new-tokens",
                                str(len(r["greedy_ids"]))],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, r["prompt"] + r["greedy_text"], name)
            self.assertIn('"prompt_tokens":%d' % len(r["prompt_ids"]),
                          p.stderr.replace(" ", ""), name)


def encode_rendered(tok, text):
    """The ids of a rendered conversation: its special tokens as such, the rest byte-level
    BPE with the test vocabulary's merges (all within lowercase runs, optionally after one
    space: splitting every other character off alone gives the pre-tokenizers' result)."""
    specials = sorted(tok.specials, key=len, reverse=True)
    pat = "(%s)" % "|".join(re.escape(t) for t in specials)
    rank = {p: i for i, p in enumerate(G.MERGES)}
    ids = []
    for k, seg in enumerate(re.split(pat, text)):
        if k % 2:
            ids.append(tok.vocab[seg])
            continue
        for w in re.findall(r" ?[a-z]+|.", seg, re.S):
            parts = [tok.char_of[b] for b in w.encode()]
            while len(parts) > 1:
                r, i = min((rank.get((parts[i], parts[i + 1]), 1 << 30), i)
                           for i in range(len(parts) - 1))
                if r == 1 << 30:
                    break
                parts[i:i + 2] = [parts[i] + parts[i + 1]]
            ids += [tok.vocab[p] for p in parts]
    return ids


class RawPrompt(unittest.TestCase):
    def test_raw_refuses_system(self):
        p = subprocess.run([CLI, "llm", "--model", str(MODELS / "qwen2.pte"), "--tokenizer",
                            str(MODELS / "qwen2" / "tokenizer.json"), "--prompt", "the cat",
                            "--raw", "--system", "be brief"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--raw", p.stderr)

    def test_template_by_default(self):
        """Without --raw a --prompt on a program with a chat template is one formatted user
        turn: only the reply is printed, and its context starts with the template's text."""
        r = ref("qwen2")
        p = subprocess.run([CLI, "llm", "--model", str(MODELS / "qwen2.pte"), "--tokenizer",
                            str(MODELS / "qwen2" / "tokenizer.json"), "--prompt", "the cat",
                            "--temperature", "0", "--max-new-tokens", "2", "--ignore-eos",
                            "--print-tokens", "--quiet"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(p.stdout.startswith("the cat"))
        tok = {m["name"]: m["tok"] for m in G.models()}["qwen2"]
        want = encode_rendered(tok, chat.render(r["chat_template"],
                                                [{"role": "user", "content": "the cat"}],
                                                True, r["special"]))
        ctx = [int(x) for x in re.search(r"^context:(.*)$", p.stderr, re.M).group(1).split()]
        self.assertEqual(ctx[:len(want)], want)


class ChatEndToEnd(unittest.TestCase):
    SYSTEM, TURNS = "be brief", ("hello there", "how are you")

    def chat(self, name, *extra):
        p = subprocess.run([CLI, "llm", "--model", str(MODELS / ("%s.pte" % name)),
                            "--tokenizer", str(MODELS / name / "tokenizer.json"), "--chat",
                            "--temperature", "0", "--print-tokens", "--quiet", *extra],
                           input="\n".join(self.TURNS) + "\n", capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        ctx = [[int(x) for x in m.split()]
               for m in re.findall(r"^context:(.*)$", p.stderr, re.M)]
        return ctx

    def test_ids_are_jinjas_rendering(self):
        toks = {m["name"]: m["tok"] for m in G.models()}
        for name in WITH_TEMPLATE:
            r, tok = ref(name), toks[name]
            ctx = self.chat(name, "--system", self.SYSTEM, "--ignore-eos",
                            "--max-new-tokens", "3")
            self.assertEqual(len(ctx), 2, name)
            msgs = [{"role": "system", "content": self.SYSTEM},
                    {"role": "user", "content": self.TURNS[0]}]
            first = chat.render(r["chat_template"], msgs, True, r["special"])
            want = encode_rendered(tok, first)
            # the context after the first reply: the rendered prompt, then the 3 reply ids
            # (the last one generated is still pending, not yet in the context)
            self.assertEqual(ctx[0][:len(want)], want, name)
            self.assertEqual(len(ctx[0]), len(want) + 2, name)
            if name != "llama":
                continue   # 64-position windows: the second turn drops the first (shifting)
            # the second turn continues the first: reply, then jinja's text after the reply
            reply = ctx[1][len(want):len(want) + 3]
            self.assertEqual(ctx[1][:len(want) + 2], ctx[0], name)
            reply_text = tok.decode(reply).decode("utf-8")
            msgs2 = msgs + [{"role": "assistant", "content": reply_text},
                            {"role": "user", "content": self.TURNS[1]}]
            both = chat.render(r["chat_template"], msgs2, True, r["special"])
            self.assertTrue(both.startswith(first + reply_text), name)
            rest = encode_rendered(tok, both[len(first) + len(reply_text):])
            self.assertEqual(ctx[1][len(want) + 3:len(want) + 3 + len(rest)], rest, name)

    def test_reply_stops_at_end_of_turn(self):
        """Without --ignore-eos a reply ends at the first stop id, and the program's stop ids
        include the token that opens assistant_suffix (e.g. <|im_end|>)."""
        from etch import runtime
        for name in WITH_TEMPLATE:
            m = runtime.load(str(MODELS / ("%s.pte" % name)))
            suffix = m.run_method("get_chat_template")[6]
            eos = m.run_method("get_eos_ids")
            toks = {t["name"]: t["tok"] for t in G.models()}[name]
            first = next(t for t in toks.specials if suffix.startswith(t))
            self.assertIn(toks.vocab[first], eos, name)
