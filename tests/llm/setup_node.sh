#!/usr/bin/env bash
# Install the pinned npm reference tokenizers into NODE_DIR (a build folder, never the source
# tree) and write their references into DATA_DIR (ref_node.cjs).
#   setup_node.sh NODE_DIR DATA_DIR
# Versions are pinned by node/package.json and node/package-lock.json (exact versions and
# integrity hashes); `npm ci --prefer-offline` reuses npm's cache when it holds them. The install
# is skipped when NODE_DIR already holds this lock file's packages.
# Exit 77 (ctest: skipped) when node or npm is missing.
set -euo pipefail
node_dir=$1
data_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "setup_node: node/npm not installed (apt-get install nodejs npm); skipping"
    exit 77
fi
mkdir -p "$node_dir"
stamp="$node_dir/node_modules/.etch-lock.sha256"
want=$(sha256sum "$here/node/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    cp "$here/node/package.json" "$here/node/package-lock.json" "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
    echo "$want" > "$stamp"
fi
# the references are up to date when every output is newer than every input
outs="ref_hf_llama3.bin ref_cl100k.bin ref_cl100k_sp.bin ref_o200k.bin ref_o200k_sp.bin ref_gpt2.bin
      ref_cl100k_qwen2.bin cl100k_base.tiktoken o200k_base.tiktoken gpt2.tiktoken"
fresh=1
for o in $outs; do
    for i in "$data_dir/strings.bin" "$here/ref_node.cjs" "$stamp"; do
        if [ ! -f "$data_dir/$o" ] || [ "$i" -nt "$data_dir/$o" ]; then fresh=0; fi
    done
done
if [ $fresh = 1 ]; then
    echo "setup_node: references are up to date"
    exit 0
fi
node "$here/ref_node.cjs" "$node_dir" "$data_dir"
