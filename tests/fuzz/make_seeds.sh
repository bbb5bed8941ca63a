#!/usr/bin/env bash
# Writes the fuzz seed corpus to OUT_DIR: the first 64 KiB of every shared model and
# vocabulary file (header, metadata and tensor infos, where the parser's work is) and the
# small complete aidreams260K.gguf (a whole valid file, so mutations also reach tensor
# placement and the model loader).
# usage: make_seeds.sh OUT_DIR        (shared data: $UVLLM_SHARED, else <repo>/../shared)
set -euo pipefail
out=${1:?usage: make_seeds.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
shared=${UVLLM_SHARED:-$here/../../../shared}
if [ ! -d "$shared/models" ]; then
    echo "make_seeds.sh: shared test data not found at $shared (set UVLLM_SHARED)" >&2
    exit 1
fi
mkdir -p "$out"
n=0
for f in "$shared"/models/*.gguf "$shared"/tokenizer/*.gguf; do
    [ -f "$f" ] || continue
    head -c 65536 "$f" >"$out/head-$(basename "$f")"
    n=$((n + 1))
done
cp "$shared/models/aidreams260K.gguf" "$out/full-aidreams260K.gguf"
echo "make_seeds.sh: $((n + 1)) seeds in $out" >&2
