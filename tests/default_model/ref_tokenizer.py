#!/usr/bin/env python3
"""Reference ids for default_model.tokenizer: 2,000 stories of the generator (seed 99, not the
training seeds) plus edge cases (byte fallback: accents, CJK, emoji; digits; repeated and
leading/trailing spaces; punctuation), encoded and decoded by Debian's python3-sentencepiece.

usage: ref_tokenizer.py TOKENIZER.model OUTDIR
writes OUTDIR/stories.txt (one string a line), stories_ids.txt (the ids, space separated) and
stories_dec.txt (sentencepiece's decode of those ids). Fails when sentencepiece is missing."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))

try:
    import sentencepiece as spm
except ImportError:
    sys.exit("ref_tokenizer: python3-sentencepiece is not installed "
             "(apt-get install python3-sentencepiece)")
from etch.llm.storygen import generate  # noqa: E402

EDGE = ["", " ", "Hello", "  two  spaces  and trailing  ", "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
        "\u4f60\u597d\uff0c\u4e16\u754c", "emoji \U0001F600\U0001F44D\U0001F3FD ok",
        "numbers 12345 and 3.14", "Tab\there", "\"Quotes,\" she said; (parens) [x] {y}!?",
        "UPPER lower MiXeD", "<s> </s> <unk> <0x41>", "\u2581already escaped",
        "Once upon a time, there was a little girl named Lily."]


def main():
    model, out = sys.argv[1], sys.argv[2]
    if not os.path.isfile(model):
        sys.exit("ref_tokenizer: %s: no such file" % model)
    os.makedirs(out, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=model)
    strings = EDGE + list(generate(2000, 99))
    with open(os.path.join(out, "stories.txt"), "w", encoding="utf-8", newline="\n") as ft, \
            open(os.path.join(out, "stories_ids.txt"), "w", newline="\n") as fi, \
            open(os.path.join(out, "stories_dec.txt"), "w", encoding="utf-8",
                 newline="\n") as fd:
        for s in strings:
            assert "\n" not in s
            ids = sp.encode(s)
            ft.write(s + "\n")
            fi.write(" ".join(str(i) for i in ids) + "\n")
            fd.write(sp.decode(ids) + "\n")
    print("ref_tokenizer: %d strings" % len(strings))


if __name__ == "__main__":
    main()
