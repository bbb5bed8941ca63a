#!/usr/bin/env bash
# Regenerates the gemma3 / phi3 test models (tests/models) and their llama.cpp goldens
# (tests/golden), which tests/unit/cpu/test_golden.c, test_forward_arch.c and
# tests/integration/test_arch_local.py check:
#
#   scripts/golden_arch.sh            (needs build/uvllm and scripts/golden.sh)
#
# The models are `uvllm synth` output (deterministic: fixed seed, vocabulary of the shared
# aidreams260K.gguf, 512 SPM tokens, so each file stays under 1 MB); the goldens come from
# scripts/golden.sh (llama.cpp's C API through our tools/golden_dump.c, nothing of
# llama.cpp committed) with the prompts below: 31-55 tokens, longer than gemma3-tiny's
# window of 8 and shorter than the 64 tokens at which llama.cpp's CPU flash attention
# switches to its tiled f32 path. LLAMA_DIR as for scripts/golden.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UVLLM="${UVLLM_BIN:-$ROOT/build/uvllm}"
SHARED="${UVLLM_SHARED:-$ROOT/../shared}"
VOCAB="$SHARED/models/aidreams260K.gguf"
[ -x "$UVLLM" ] || { echo "golden_arch.sh: build uvllm first ($UVLLM)" >&2; exit 1; }
[ -f "$ROOT/scripts/golden.sh" ] || { echo "golden_arch.sh: scripts/golden.sh missing" >&2; exit 1; }

prompts="$(mktemp)"
trap 'rm -f "$prompts"' EXIT
cat >"$prompts" <<'P'
Once upon a time, in a quiet village by the sea, a little robot dreamed of flying.
The capital of France is Paris, and the capital of Italy is
I had a dream about a garden where the flowers sang softly at night.
Hello, world! 12345 and then some more words to fill the window.
Streaming servers batch tokens every tick, and the sliding window keeps only the last few.
P

mkdir -p "$ROOT/tests/models" "$ROOT/tests/golden"
for arch in gemma3 phi3; do
    model="$ROOT/tests/models/$arch-tiny-f16.gguf"
    "$UVLLM" synth --arch "$arch" --shape "$arch-tiny" --type f16 --vocab "$VOCAB" "$model"
    bash "$ROOT/scripts/golden.sh" "$model" "$ROOT/tests/golden/$arch-tiny-f16.jsonl" \
        --prompts "$prompts"
done
