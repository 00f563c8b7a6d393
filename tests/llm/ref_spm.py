#!/usr/bin/env python3
"""sentencepiece references (Debian python3-sentencepiece) for the tokenizer tests.

For each model: encode every string of strings.bin, decode the ids, write ref_<name>.bin;
also decode random id sequences (decode-only checks) into dec_<name>.bin. Trains two small
unigram models on the license texts (so that the unigram path has a reference too) and one
BPE model without byte fallback.
Usage: ref_spm.py DATA_DIR FIXTURES_LLM_DIR
Exit 77 (ctest: skipped) when sentencepiece is not installed."""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_io import read_strings, write_refs  # noqa: E402

try:
    import sentencepiece as spm
except ImportError:
    print("ref_spm: python3-sentencepiece is not installed (apt-get install python3-sentencepiece)")
    sys.exit(77)


def train(data_dir, name, **kw):
    model = os.path.join(data_dir, name + ".model")
    if os.path.exists(model):
        return model
    corpus = os.path.join(data_dir, "train_corpus.txt")
    if not os.path.exists(corpus):
        with open(corpus, "w", encoding="utf-8") as f:
            for lic in ("GPL-3", "Apache-2.0", "LGPL-3", "MPL-2.0", "Artistic"):
                p = os.path.join("/usr/share/common-licenses", lic)
                if os.path.exists(p):
                    f.write(open(p, encoding="utf-8").read())
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(data_dir, name),
                                   num_threads=1, normalization_rule_name="identity",
                                   minloglevel=2, **kw)
    return model


def up_to_date(data_dir, names, inputs):
    outs = [os.path.join(data_dir, "%s_%s.bin" % (k, n)) for n in names for k in ("ref", "dec")]
    if not all(os.path.exists(o) for o in outs):
        return False
    oldest = min(os.path.getmtime(o) for o in outs)
    return all(os.path.getmtime(i) <= oldest for i in inputs)


def main():
    data_dir, fixtures = sys.argv[1], sys.argv[2]
    names = ["tok512", "llama2", "uni", "uni_bf", "bpe_nobf"]
    inputs = [os.path.join(data_dir, "strings.bin"), os.path.abspath(__file__),
              os.path.join(fixtures, "tok512.model"),
              os.path.join(fixtures, "llama2_tokenizer_32000.model")]
    if up_to_date(data_dir, names, inputs):
        print("ref_spm: references are up to date")
        return
    strings = read_strings(os.path.join(data_dir, "strings.bin"))
    models = {
        "tok512": os.path.join(fixtures, "tok512.model"),
        "llama2": os.path.join(fixtures, "llama2_tokenizer_32000.model"),
        "uni": train(data_dir, "uni", model_type="unigram", vocab_size=700,
                     character_coverage=0.9995),
        "uni_bf": train(data_dir, "uni_bf", model_type="unigram", vocab_size=900,
                        byte_fallback=True, add_dummy_prefix=False,
                        remove_extra_whitespaces=False),
        "bpe_nobf": train(data_dir, "bpe_nobf", model_type="bpe", vocab_size=600,
                          character_coverage=0.9995, remove_extra_whitespaces=False),
    }
    for name, path in models.items():
        sp = spm.SentencePieceProcessor(model_file=path)
        rows = []
        for s in strings:
            ids = sp.encode(s)
            rows.append((ids, sp.decode(ids)))
        write_refs(os.path.join(data_dir, "ref_%s.bin" % name), rows)
        # decode-only: random id sequences (bytes, controls, unknown, pieces)
        r = random.Random(7)
        n = sp.get_piece_size()
        rows = []
        for _ in range(3000):
            ids = [r.randrange(n) if r.random() < 0.6 else r.randrange(min(n, 300))
                   for _ in range(r.randint(0, 12))]
            rows.append((ids, sp.decode(ids)))
        write_refs(os.path.join(data_dir, "dec_%s.bin" % name), rows)
        print("ref_spm: %s (%s): %d strings" % (name, os.path.basename(path), len(strings)))


if __name__ == "__main__":
    main()
