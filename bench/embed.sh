#!/usr/bin/env bash
# Embeddings throughput (issue 26): inputs per second with 16 concurrent clients, each input
# 64 random token ids (the same inputs for both servers: the same work; never cached), on /v1/embeddings, against
# llama-server --embedding on the same GGUF (qwen3 models with last-token pooling, as
# Qwen3-Embedding is served: the shared qwen3-tiny-f16 and a synthetic bge-base-sized one), both servers pinned to CPU_SERVER with 1 thread,
# both able to batch all 16 inputs in one step (1024 tokens), the load (bench/embed_load.py)
# on CPU_CLIENT. Interleaved rounds, medians of $RUNS. Target: uvllm >= 1.5x.
# LLAMA_SERVER: the llama-server binary (default: bench/peer.sh's build).
# Writes the "embed" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
D="$WORK/embed"; rm -rf "$D"; mkdir -p "$D"
need_shared models/qwen3-tiny-f16.gguf
LLAMA_SERVER="${LLAMA_SERVER:-$LLAMA_BIN/llama-server}"
[ -x "$LLAMA_SERVER" ] || { bash "$BENCH_DIR/peer.sh" >&2; LLAMA_SERVER="$LLAMA_BIN/llama-server"; }
# seconds of load per round: a round stops sending then and waits for the answers in flight,
# so it spans whole batches; qwen3-small's batch of 16 takes ~10 s here, hence its longer rounds
SECS="${EMBED_SECONDS:-10}" SECS_SMALL="${EMBED_SECONDS_SMALL:-40}"
CLIENTS=16 TOKENS=64
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# model_file NAME: a shared model, or "qwen3-small": uvllm synth's GPT-2-small-sized shape
# (768 wide, 12 layers) as qwen3 with qwen3-tiny's 50257-token vocabulary, f16, written once
# into bench/work: the size of the common embedders (bge-base, gte-base), whose layers
# outweigh the vocabulary projection, where qwen3-tiny is mostly vocabulary.
model_file() {
    if [ "$1" = qwen3-small ]; then
        local f="$WORK/embed-qwen3-small-f16.gguf"
        [ -s "$f" ] || "$UVLLM_BIN" synth --shape small --arch qwen3 --type f16 --seed 7 \
            --vocab "$SHARED/models/qwen3-tiny-f16.gguf" "$f" >&2
        echo "$f"
    else
        echo "$SHARED/models/$1.gguf"
    fi
}

rows=()
for name in ${EMBED_MODELS:-qwen3-tiny-f16 qwen3-small}; do
    MODEL=$(model_file "$name")
    secs=$SECS; [ "$name" = qwen3-small ] && secs=$SECS_SMALL
    pu=$(free_port)
    taskset -c "$CPU_SERVER" "$UVLLM_BIN" serve --model "$MODEL" --model-alias m --threads 1 \
        --pooling last --ctx-size 2048 --max-batch-tokens 1024 --host 127.0.0.1 --port "$pu" \
        --log-level warn >"$D/uvllm-$name.log" 2>&1 &
    pids+=($!)
    pl=$(free_port)
    taskset -c "$CPU_SERVER" "$LLAMA_SERVER" -m "$MODEL" --embedding --pooling last -t 1 -tb 1 \
        -c 2048 -np "$CLIENTS" -b 1024 -ub 1024 --host 127.0.0.1 --port "$pl" \
        >"$D/llama-$name.log" 2>&1 &
    pids+=($!)
    wait_http "$pu" /health 30 || die "uvllm did not start (see $D/uvllm-$name.log)"
    wait_http "$pl" /health 60 || die "llama-server did not start (see $D/llama-$name.log)"
    declare -A R=()
    for ((r = 1; r <= RUNS; r++)); do
        for who in uvllm llama; do
            port=$pu; [ $who = llama ] && port=$pl
            out=$(taskset -c "$CPU_CLIENT" python3 "$BENCH_DIR/embed_load.py" --port "$port" \
                --clients $CLIENTS --tokens $TOKENS --seconds "$secs")
            errs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["errors"])' "$out")
            [ "$errs" = 0 ] || die "$name $who round $r: $errs errors ($out)"
            v=$(python3 -c 'import json,sys; print("%.2f" % json.loads(sys.argv[1])["inputs_s"])' "$out")
            R[$who]="${R[$who]:-} $v"
            echo "embed: $name round $r $who: $v inputs/s" >&2
        done
    done
    kill "${pids[-1]}" "${pids[-2]}"; wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
    # shellcheck disable=SC2086
    mu=$(median ${R[uvllm]}); ml=$(median ${R[llama]})
    rows+=("| $name | $mu | ${R[uvllm]# } | $ml | ${R[llama]# } | **$(ratio "$mu" "$ml")** |")
done

sec="$D/section.md"
{
    echo "## Embeddings: /v1/embeddings inputs/s, 16 clients, 64-token inputs, vs llama-server --embedding"
    echo
    echo "- machine: $(machine_line); uvllm ISA: $(uvllm_isa)"
    echo "- uvllm: $(uvllm_commit); llama.cpp: $(git -C "$(dirname "$LLAMA_SERVER")/../.." log -1 --format='%h (%cs)' 2>/dev/null || echo unknown) (-DGGML_NATIVE=ON)"
    echo "- models: qwen3-tiny-f16.gguf (shared) and qwen3-small (see the script), last-token pooling on both; each input 64 random token ids (the same sequence of inputs for both); both servers pinned with \`taskset -c $CPU_SERVER\`, 1 thread, steps of up to 1024 tokens (uvllm \`--max-batch-tokens 1024\`; llama-server \`-np 16 -c 2048 -b 1024 -ub 1024\`); load: \`bench/embed_load.py --clients 16 --tokens 64 --seconds S\` on CPU $CPU_CLIENT (S: $SECS for qwen3-tiny, $SECS_SMALL for qwen3-small; the answers in flight at S are waited for and counted). $RUNS rounds, interleaved; median."
    echo
    echo "| model | uvllm inputs/s (median) | uvllm rounds | llama-server inputs/s (median) | llama-server rounds | ratio |"
    echo "| --- | ---: | --- | ---: | --- | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "- target: ratio uvllm / llama-server >= 1.5. llama-server computes the vocabulary projection (logits) of every token of an embedding input of a decoder model as well; uvllm computes only the pooled hidden state. On qwen3-tiny (128 wide, 50257-token vocabulary) that projection is most of the work, on qwen3-small much less of it."
} >"$sec"
results_section embed "$sec"
cat "$sec"
