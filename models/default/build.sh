#!/bin/sh
# Rebuild etch's default language model from nothing, with fixed seeds and one thread:
#   1. stories from the project's own generator (python/etch/llm/storygen.py)
#   2. a sentencepiece BPE tokenizer (vocab 1024, byte fallback)
#   3. a small llama trained from scratch (python/etch/llm/train.py), bounded by step count
#   4. the .pte export (python3 -m etch.llm export), then its sha256
#
# usage: models/default/build.sh [OUTDIR]        (default: models/default)
# environment: WORK (scratch folder, default a new temporary one), STEPS (default 800),
#              PYTHON (default /usr/bin/python3, which needs torch and sentencepiece),
#              ETCH_LIB (libetch.so for the exporter's operator check; default: the
#              checkout's build/libetch.so, built first when it is missing)
# Run from anywhere; needs about 20 minutes on an idle core.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-800}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$OUT" "$WORK"
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# The export checks every operator against libetch: have it before hours of training.
if [ -z "${ETCH_LIB:-}" ]; then
    if [ ! -f "$REPO/build/libetch.so" ]; then
        echo "== libetch.so (the exporter's operator check)" >&2
        cmake -S "$REPO" -B "$REPO/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$REPO/build" -j2 --target etch_shared >/dev/null
    fi
    export ETCH_LIB="$REPO/build/libetch.so"
fi

echo "== stories (work folder $WORK)" >&2
"$PYTHON" -m etch.llm.storygen --stories 20000 --seed 1 -o "$WORK/train.txt"
"$PYTHON" -m etch.llm.storygen --stories 1000 --seed 2 -o "$WORK/val.txt"

echo "== tokenizer" >&2
"$PYTHON" -m etch.llm.train tokenizer --text "$WORK/train.txt" --vocab-size 1024 \
    -o "$WORK/tokenizer" >/dev/null

echo "== model ($STEPS steps)" >&2
rm -f "$WORK/train_log.txt"
"$PYTHON" -m etch.llm.train model --train "$WORK/train.txt" --val "$WORK/val.txt" \
    --tokenizer "$WORK/tokenizer.model" --steps "$STEPS" --batch 16 --seq-len 256 \
    --dim 128 --layers 4 --heads 4 --lr 2e-3 --warmup 50 --seed 1234 \
    -o "$WORK/model.pt" --log "$WORK/train_log.txt"

echo "== export" >&2
"$PYTHON" -m etch.llm export --checkpoint "$WORK/model.pt" --bos-id 1 --eos-ids 1,2 \
    -o "$OUT/model.pte"
cp "$WORK/tokenizer.model" "$OUT/tokenizer.model"
cp "$WORK/train_log.txt" "$OUT/train_log.txt"
sha256sum "$OUT/model.pte" "$OUT/tokenizer.model"
