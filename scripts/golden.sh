#!/usr/bin/env bash
# llama.cpp's reference outputs (goldens) for one GGUF file, in the format of
# ../shared/golden/README.md: one JSON line per prompt with prompt_tokens, the top-20
# logits at every prompt position, the greedy tokens and their text.
#
#   scripts/golden.sh MODEL.gguf OUT.jsonl [--tokens N] [--prompts FILE] [--threads N]
#
# llama.cpp is the peer build of bench/peer.sh (the source node-llama-cpp ships; nothing of
# it is committed). LLAMA_DIR points at an existing checkout+build to reuse (default
# bench/work/llama.cpp; without one, bench/peer.sh clones and builds it). The dumper is our
# own tools/golden_dump.c, compiled here against llama.cpp's static libraries into
# bench/work/golden/golden_dump (rebuilt when the source or the libraries change).
# Options after OUT.jsonl go to golden_dump (--tokens, --prompts, --threads, --ubatch;
# defaults: the 5 prompts of the shared mini goldens, 24 tokens, 2 threads, one ubatch).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
MODEL="$1" OUT="$2"
shift 2

LLAMA_DIR="${LLAMA_DIR:-$ROOT/bench/work/llama.cpp}"
LIBS=(src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a)
have_libs() {
    for l in "${LIBS[@]}"; do [ -f "$LLAMA_DIR/build/$l" ] || return 1; done
}
if ! have_libs; then
    if [ "$LLAMA_DIR" = "$ROOT/bench/work/llama.cpp" ]; then
        bash "$ROOT/bench/peer.sh" >&2
    else
        cmake --build "$LLAMA_DIR/build" --target llama -j "${BENCH_JOBS:-2}" >&2
    fi
    have_libs || { echo "golden.sh: llama.cpp static libs missing under $LLAMA_DIR/build" >&2; exit 1; }
fi

DUMP_DIR="$ROOT/bench/work/golden"
DUMP="$DUMP_DIR/golden_dump"
SRC="$ROOT/tools/golden_dump.c"
mkdir -p "$DUMP_DIR"
stale=0
[ -x "$DUMP" ] || stale=1
[ "$stale" = 1 ] || [ "$SRC" -nt "$DUMP" ] && stale=1
for l in "${LIBS[@]}"; do [ "$LLAMA_DIR/build/$l" -nt "$DUMP" ] && stale=1; done
if [ "$stale" = 1 ]; then
    echo "golden.sh: compiling $DUMP against $LLAMA_DIR" >&2
    cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -c "$SRC" -o "$DUMP_DIR/golden_dump.o" \
        -I "$LLAMA_DIR/include" -I "$LLAMA_DIR/ggml/include"
    # the libraries are C++ (and ggml-cpu uses OpenMP when the peer build enables it)
    c++ -o "$DUMP" "$DUMP_DIR/golden_dump.o" "${LIBS[@]/#/$LLAMA_DIR/build/}" \
        -fopenmp -lm -lpthread
fi

tmp="$OUT.tmp.$$"
trap 'rm -f "$tmp"' EXIT
"$DUMP" "$MODEL" "$@" >"$tmp"
mv "$tmp" "$OUT"
trap - EXIT
echo "golden.sh: $(wc -l <"$OUT") lines -> $OUT ($(git -C "$LLAMA_DIR" log -1 --format='llama.cpp %h %cs' 2>/dev/null || echo 'llama.cpp'))" >&2
