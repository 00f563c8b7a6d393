#!/usr/bin/env python3
"""Write the tokenizer test strings (deterministic, seeded) to OUT/strings.bin.

Two halves:
  * generated Unicode: astral emoji (with ZWJ sequences, skin tones, flags), combining marks,
    CJK, kana, Hangul, Arabic, Hebrew, Devanagari, Thai, Cyrillic, Greek, tab/newline/space
    runs (and the other Unicode spaces), digits, punctuation, contractions, spellings of
    special tokens, and random assigned code points from the whole range;
  * real text: lines and paragraphs of /usr/share/common-licenses/GPL-3 and Apache-2.0
    (Debian base-files) and phrases of /usr/share/dict/words (Debian wamerican) when present.

Format: b"ETS1", u32 count, then per string u32 byte length + UTF-8 bytes.
Usage: gen_strings.py OUT_DIR [N_GENERATED] [N_REAL]
"""
import os
import random
import struct
import sys
import unicodedata

SEED = 20240611


def assigned(cp):
    cat = unicodedata.category(chr(cp))
    return cat not in ("Cn", "Cs")


def rand_cp(r, lo, hi):
    while True:
        cp = r.randint(lo, hi)
        if assigned(cp):
            return chr(cp)


WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "WORLD",
         "don't", "I'm", "we'll", "they've", "you're", "it's", "she'd", "O'Neil", "rock'n'roll",
         "naïve", "café", "Straße", "ﬁnance", "İstanbul", "ǅemal", "ΑΒΓ", "hello_world",
         "x86_64", "C++", "e-mail", "U.S.A.", "3.14159", "1,000,000", "2024-06-11", "v1.2.3"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "—", "–", "«", "»", "“", "”", "¿",
                                                       "¡", "§", "©", "€", "£", "¥", "°", "±"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ",
          "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\u0085", "\ufeff", "\u2581", "\x0b", "\x0c"]
SPECIALS = ["<s>", "</s>", "<unk>", "<0x41>", "<0x0A>", "<|endoftext|>", "<|begin_of_text|>",
            "<|eot_id|>", "<|im_start|>", "<pad>", "[INST]"]
EMOJI = ["😀", "😂", "🥲", "🤖", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "❤️", "✨", "🧑🏿‍🚀",
         "🐍", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "𐍈", "𠜎", "🀄"]
RANGES = {
    "cjk": (0x4E00, 0x9FFF), "hira": (0x3041, 0x3096), "kata": (0x30A1, 0x30FA),
    "hangul": (0xAC00, 0xD7A3), "arabic": (0x0621, 0x064A), "hebrew": (0x05D0, 0x05EA),
    "deva": (0x0905, 0x0939), "thai": (0x0E01, 0x0E30), "cyr": (0x0410, 0x044F),
    "greek": (0x0391, 0x03C9), "latin_ext": (0x0100, 0x024F), "emoji": (0x1F300, 0x1FAFF),
    "math": (0x2200, 0x22FF), "astral": (0x10000, 0x3134A),
}
MARKS = [chr(c) for c in range(0x0300, 0x0370)] + ["\u0651", "\u064e", "\u093f", "\u0e34",
                                                   "\u20dd", "\ufe0f", "\u200d"]


def fragment(r):
    k = r.random()
    if k < 0.16:
        return r.choice(WORDS)
    if k < 0.24:
        return "".join(r.choice(PUNCT) for _ in range(r.randint(1, 4)))
    if k < 0.36:
        return r.choice(SPACES)
    if k < 0.44:
        return "".join(r.choice("0123456789") for _ in range(r.randint(1, 9)))
    if k < 0.52:
        return r.choice(EMOJI)
    if k < 0.60:
        base = r.choice("aeiouAEIOUnszcαиא")
        return base + "".join(r.choice(MARKS) for _ in range(r.randint(1, 3)))
    if k < 0.64:
        return r.choice(SPECIALS)
    if k < 0.68:
        return "'" + r.choice(["s", "S", "t", "re", "RE", "Ve", "m", "ll", "LL", "d", "D", "x", "ſ"])
    if k < 0.94:
        name = r.choice(sorted(RANGES))
        lo, hi = RANGES[name]
        return "".join(rand_cp(r, lo, hi) for _ in range(r.randint(1, 6)))
    return "".join(rand_cp(r, 0x20, 0x10FFFF) for _ in range(r.randint(1, 4)))


def generated(r, n):
    out = []
    for _ in range(n):
        parts = [fragment(r) for _ in range(r.randint(1, 12))]
        s = ""
        for p in parts:
            s += p
            if r.random() < 0.45:
                s += " "
        out.append(s)
    return out


def real(r, n):
    texts = []
    for name in ("GPL-3", "Apache-2.0"):
        path = os.path.join("/usr/share/common-licenses", name)
        if os.path.exists(path):
            texts.append(open(path, encoding="utf-8").read())
    lines = [l for t in texts for l in t.split("\n")]
    words = []
    if os.path.exists("/usr/share/dict/words"):
        words = [w for w in open("/usr/share/dict/words", encoding="utf-8").read().split("\n") if w]
    out = []
    for i in range(n):
        k = i % 3
        if k == 0 and lines:
            out.append(r.choice(lines))
        elif k == 1 and lines:
            a = r.randrange(len(lines))
            out.append("\n".join(lines[a:a + r.randint(2, 12)]))
        elif words:
            out.append(" ".join(r.choice(words) for _ in range(r.randint(1, 14))))
        elif lines:
            out.append(r.choice(lines))
    return out


EDGE = ["", " ", "  ", "\n", "a", " a", "a ", "  leading", "trailing  ", "double  space",
        "\t\ttabs", "x\r\ny", "<s>", "hello<s>world", "\u2581", "\u2581a", "ab\u2581cd",
        "       ", "1234567890", "'s'S'T", "don't DON'T", "😀😀😀", "é", "e\u0301",
        "\ufeff\ufeff", " \u0085x", "a\u00a0b", "x" * 3000, " " * 1000 + "y", "ab" * 2000]


def main():
    out_dir = sys.argv[1]
    n_gen = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    n_real = int(sys.argv[3]) if len(sys.argv) > 3 else 6000
    r = random.Random(SEED)
    strings = EDGE + generated(r, n_gen) + real(r, n_real)
    os.makedirs(out_dir, exist_ok=True)
    blob = [b"ETS1" + struct.pack("<I", len(strings))]
    for s in strings:
        b = s.encode("utf-8")
        blob.append(struct.pack("<I", len(b)) + b)
    blob = b"".join(blob)
    path = os.path.join(out_dir, "strings.bin")
    # rewrite only on change, so that the reference steps can tell they are up to date
    if not (os.path.exists(path) and open(path, "rb").read() == blob):
        with open(path, "wb") as f:
            f.write(blob)
    print("gen_strings: %d strings (%d edge, %d generated, %d real) -> %s" %
          (len(strings), len(EDGE), n_gen, n_real, out_dir))


if __name__ == "__main__":
    main()
