#!/usr/bin/env bash
# Builds the uvllm binary from a committed state (default HEAD) in
# bench/work/src-COMMIT, away from the shared work tree's uncommitted edits,
# so a benchmark names exactly the code it measured. Prints the exports to
# use: eval "$(bash bench/snapshot.sh [COMMIT])"; bash bench/run.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rev="$(git -C "$ROOT" rev-parse --short "${1:-HEAD}")"
src="$WORK/src-$rev"
if [ ! -x "$src/build/uvllm" ]; then
    rm -rf "$src"; mkdir -p "$src"
    git -C "$ROOT" archive "$rev" | tar -x -C "$src"
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DUVLLM_TESTS=OFF >/dev/null
    cmake --build "$src/build" --target uvllm -j "${BENCH_JOBS:-2}" >&2
fi
echo "export UVLLM_BIN='$src/build/uvllm' UVLLM_BIN_COMMIT='$rev'"
