#!/usr/bin/env bash
# Embedding goldens (issue 26): llama.cpp's llama-embedding on a model, for a few prompts and
# each pooling, written as JSONL lines {"prompt","pooling","tokens","embedding"} (the tokens
# as llama.cpp tokenized them, the vector L2-normalised as --embd-normalize 2 gives it).
# tests/unit/cpu/test_embed_golden.c runs the same tokens through uvllm and compares.
#   scripts/golden_embed.sh LLAMA_EMBEDDING MODEL.gguf OUT.jsonl [POOLINGS]
# LLAMA_EMBEDDING: a llama.cpp build's bin/llama-embedding (CPU); POOLINGS default
# "mean cls last".
set -euo pipefail
bin=$1 model=$2 out=$3 poolings=${4:-mean cls last}
prompts=(
    "The quick brown fox jumps over the lazy dog"
    "hello"
    "Embeddings turn a text into one vector; similar texts get vectors that point the same way, so a search can rank documents by the cosine of their vectors with the query's."
    "1 + 1 = 2, and 2 * 3 = 6."
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$out"
for pool in $poolings; do
    for p in "${prompts[@]}"; do
        # llama-embedding (de3ff81) now and then exits 0 having printed no vectors or a cut
        # JSON (seen with the bert models, 1 run in 3): run it again, at most 5 times
        for try in 1 2 3 4 5; do
            "$bin" -m "$model" -p "$p" --pooling "$pool" --embd-normalize 2 \
                --embd-output-format json -t 2 -c 512 --verbose-prompt >"$tmp/out" 2>"$tmp/err"
            python3 -c 'import json, sys; t = open(sys.argv[1]).read(); json.loads(t[t.index("{"):])' \
                "$tmp/out" 2>/dev/null && break
        done
        python3 - "$tmp/out" "$p" "$pool" >>"$out" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
start = text.index("{")
toks = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> '", text[:start], re.M)]
emb = json.loads(text[start:])["data"][0]["embedding"]
print(json.dumps({"prompt": sys.argv[2], "pooling": sys.argv[3], "tokens": toks, "embedding": emb}))
PY
    done
done
echo "wrote $(wc -l <"$out") lines to $out"
