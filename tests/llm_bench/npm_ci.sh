#!/usr/bin/env bash
# Install bench/llm's pinned npm packages (node-llama-cpp 3.21.1 and its prebuilt linux-x64
# library) into NODE_DIR, a build folder, from the committed package-lock.json.
#   npm_ci.sh BENCH_DIR NODE_DIR
# `npm ci --prefer-offline` reuses npm's cache when it holds the packages; otherwise it needs
# the registry. Optional platform packages (CUDA, Vulkan, other OSes) are omitted and install
# scripts are not run: nothing is built or downloaded besides the locked tarballs. The install
# is skipped when NODE_DIR already holds this lock's packages.
# Fails (exit 1, never "skipped") when node/npm is missing or the registry is unreachable.
set -euo pipefail
bench=$1
node_dir=$2
for tool in node npm; do
    if ! command -v $tool >/dev/null; then
        echo "llm_bench: '$tool' is not installed; the llama.cpp comparison needs Node.js and" \
             "npm (apt-get install nodejs npm)" >&2
        exit 1
    fi
done
mkdir -p "$node_dir"
stamp="$node_dir/node_modules/.etch-lock.sha256"
want=$(sha256sum "$bench/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
   [ -f "$node_dir/node_modules/node-llama-cpp/package.json" ]; then
    echo "llm_bench: node-llama-cpp already installed from this lock in $node_dir"
    exit 0
fi
cp "$bench/package.json" "$bench/package-lock.json" "$node_dir/"
if ! (cd "$node_dir" && npm ci --omit=optional --ignore-scripts --no-audit --no-fund \
                              --prefer-offline --loglevel=error); then
    echo "llm_bench: FAILED: 'npm ci' of bench/llm/package-lock.json (node-llama-cpp 3.21.1)" \
         "did not complete. The npm registry ($(npm config get registry)) or a cache holding" \
         "these packages must be reachable for this test." >&2
    exit 1
fi
echo "$want" > "$stamp"
echo "llm_bench: installed node-llama-cpp $(node -p "require('$node_dir/node_modules/node-llama-cpp/package.json').version") into $node_dir"
