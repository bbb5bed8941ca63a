#!/usr/bin/env bash
# Rewrites the qwen3moe test model and its llama.cpp golden:
#   tests/models/qwen3moe-tiny-f16.gguf   `uvllm synth --arch qwen3moe` (shape moe-tiny, seed 42)
#                                         with aidreams260K's 512-token SPM vocabulary
#   tests/golden/qwen3moe-tiny-f16.jsonl  scripts/golden.sh on it (5 default prompts, 24 tokens)
# tests/unit/cpu/test_moe.c and tests/integration/test_arch_moe.py check uvllm against them.
# Needs build/uvllm (make build) and llama.cpp (LLAMA_DIR, see scripts/golden.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UVLLM="${UVLLM_BIN:-$ROOT/build/uvllm}"
SHARED="${UVLLM_SHARED:-$ROOT/../shared}"
mkdir -p "$ROOT/tests/models" "$ROOT/tests/golden"
"$UVLLM" synth --arch qwen3moe --shape moe-tiny --type f16 --seed 42 \
    --vocab "$SHARED/models/aidreams260K.gguf" "$ROOT/tests/models/qwen3moe-tiny-f16.gguf"
bash "$ROOT/scripts/golden.sh" "$ROOT/tests/models/qwen3moe-tiny-f16.gguf" \
    "$ROOT/tests/golden/qwen3moe-tiny-f16.jsonl"
