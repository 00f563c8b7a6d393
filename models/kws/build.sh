#!/bin/sh
# Rebuild etch's keyword spotter from nothing, with fixed seeds and one thread:
# speech synthesized by flite -> MFCC by etch's C front end -> DS-CNN trained from scratch ->
# model_fp32.pte and model_int8.pte (etch.quantize "int8", static PTQ, histogram observer).
#
# usage: models/kws/build.sh [OUTDIR]        (default: models/kws)
# environment: PYTHON (default /usr/bin/python3: torch, numpy), ETCH_LIB (libetch.so: the
#              C front end and the exporter's operator check; default: the checkout's
#              build/libetch.so, built first when it is missing). Needs flite.
# About 3 minutes on an idle core.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE}
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
command -v flite >/dev/null || { echo "build.sh: flite is not installed" >&2; exit 1; }
if [ -z "${ETCH_LIB:-}" ]; then
    if [ ! -f "$REPO/build/libetch.so" ]; then
        echo "== libetch.so (the C front end, the exporter's operator check)" >&2
        cmake -S "$REPO" -B "$REPO/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$REPO/build" -j2 --target etch_shared >/dev/null
    fi
    export ETCH_LIB="$REPO/build/libetch.so"
fi
"$PYTHON" "$HERE/train.py" "$OUT"
cd "$OUT" && sha256sum model_fp32.pte model_int8.pte
