#!/usr/bin/env bash
# Structured output's cost (issue 25): the allowed-token mask per token on the Qwen2 151k and
# GPT-2 50k vocabularies, batch 1 and 16, a JSON Schema and a GBNF grammar, against a decode
# step of the Qwen2.5-1.5B-shaped model, and llama-server's grammar sampling on the same
# model and schema in the same run (bench/grammar.py). Writes the "grammar" section of
# RESULTS.md. GRAMMAR_ROUNDS (default 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [ -z "${BENCH_SESSION:-}" ] && command -v setsid >/dev/null; then
    BENCH_SESSION=1 exec setsid --wait bash "${BASH_SOURCE[0]}" "$@"
fi
echo "${BENCH_NICE:--15}" >/proc/self/autogroup 2>/dev/null || true
bench_dir "grammar" keep
BUILD="$ROOT/build"
VQ="$BUILD/vocab/ggml-vocab-qwen2.gguf"
VG="$SHARED/tokenizer/ggml-vocab-gpt-2.gguf"
M="$WORK/qwen2.5-1.5b-q4_k_m-v151k.gguf"
need_shared tokenizer/ggml-vocab-gpt-2.gguf
[ -x "$LLAMA_BIN/llama-server" ] || bash "$BENCH_DIR/peer.sh" >&2 || die "bench/peer.sh failed"
[ -s "$VQ" ] || bash "$ROOT/tests/tokenizer/fetch_hf_vocabs.sh" "$BUILD" "$UVLLM_BIN" >&2
if [ ! -s "$M" ]; then
    "$UVLLM_BIN" synth --arch qwen2 --shape qwen2.5-1.5b --vocab "$VQ" --type q4_k_m "$M.tmp" ||
        { rm -f "$M.tmp"; die "uvllm synth failed"; }
    mv "$M.tmp" "$M"
fi
cc -O2 -g -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src" "$BENCH_DIR/grammar_mask.c" \
    "$BUILD/libul_engine.a" "$BUILD/libul_model.a" "$BUILD/libul_base.a" \
    -lcjson -lpcre2-8 -lm -lpthread -o "$WORK/grammar_mask"
UVLLM_BIN="$UVLLM_BIN" nice -n "${BENCH_NICE:--15}" python3 "$BENCH_DIR/grammar.py" "$M" "$VQ" "$VG" \
    "$LLAMA_BIN" "${GRAMMAR_ROUNDS:-3}" "$D/section.md"
{
    cat "$D/section.md"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit)"
} >"$D/section.full.md"
results_section grammar "$D/section.full.md"
