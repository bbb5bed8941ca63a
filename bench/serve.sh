#!/usr/bin/env bash
# Serving under load (issue 11): N streaming clients (N = 1, 4, 16, 64 by default), each
# sending 2 completions one after the other (a ~50-token prompt, 64 tokens, greedy,
# ignore_eos), arrivals spread over the first second, so prompts keep arriving while
# others decode. Measured by bench/serve_load.py: time to first token and inter-token
# gap p50/p99, aggregate generated tokens/s. uvllm (cpu backend, default
# --itl-target-ms 100, and with the target off) and llama-server (built by bench/peer.sh,
# -np N) on the same model, interleaved, medians of $RUNS runs.
# Model: $SERVE_MODEL, else bench/work/small-q4_0.gguf written by `uvllm synth --shape
# small --type q4_0` (random weights, 12 layers x 768, Llama-2 vocabulary).
# Writes the "serve" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
D="$WORK/serve"; rm -rf "$D"; mkdir -p "$D"
NS="${SERVE_NS:-1 4 16 64}"
RUNS="${BENCH_RUNS:-3}"
THREADS="${SERVE_THREADS:-1}"
MODEL="${SERVE_MODEL:-$WORK/small-q4_0.gguf}"
if [ ! -s "$MODEL" ]; then
    need_shared tokenizer/ggml-vocab-llama-spm.gguf
    "$UVLLM_BIN" synth --shape small --vocab "$SHARED/tokenizer/ggml-vocab-llama-spm.gguf" \
        "$MODEL.tmp" --type q4_0 >&2 && mv "$MODEL.tmp" "$MODEL"
fi
LLAMA_SERVER="$LLAMA_BIN/llama-server"
[ -x "$LLAMA_SERVER" ] || echo "serve: $LLAMA_SERVER not built (bench/peer.sh): uvllm only" >&2
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# start NAME N: starts a server, sets PORT
start() {
    local name=$1 n=$2
    PORT=$(free_port)
    case $name in
    uvllm) taskset -c "$CPU_SERVER" "$UVLLM_BIN" serve --model "$MODEL" --threads "$THREADS" \
        --host 127.0.0.1 --port "$PORT" --log-level warn --ctx-size 512 --kv-mem 256M >"$D/$name-$n.log" 2>&1 & ;;
    uvllm-notarget) taskset -c "$CPU_SERVER" "$UVLLM_BIN" serve --model "$MODEL" --threads "$THREADS" \
        --host 127.0.0.1 --port "$PORT" --log-level warn --ctx-size 512 --kv-mem 256M --itl-target-ms 0 \
        >"$D/$name-$n.log" 2>&1 & ;;
    llama) taskset -c "$CPU_SERVER" "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" --host 127.0.0.1 \
        --port "$PORT" -np "$n" -c $((n * 256)) -b 512 >"$D/$name-$n.log" 2>&1 & ;;
    esac
    pids+=($!)
    wait_http "$PORT" /health 60 || die "$name did not start (see $D/$name-$n.log)"
}

servers=(uvllm uvllm-notarget)
[ -x "$LLAMA_SERVER" ] && servers+=(llama)
declare -A V
for n in $NS; do
    for ((r = 1; r <= RUNS; r++)); do
        for name in "${servers[@]}"; do
            start "$name" "$n"
            out=$(taskset -c "$CPU_CLIENT" python3 "$BENCH_DIR/serve_load.py" --port "$PORT" -n "$n" \
                --rounds 2 --prompt-words 40 --max-tokens 64)
            kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
            echo "serve: $name N=$n run $r: $out" >&2
            for k in ttft_p50 ttft_p99 itl_p50 itl_p99 tok_s errors; do
                v=$(python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print("" if v is None else v)' "$out" "$k")
                V[$name-$n-$k]="${V[$name-$n-$k]:-} $v"
            done
        done
    done
done

ms() { awk -v v="${1:-}" 'BEGIN{ if (v=="") print "n/a"; else printf "%.0f\n", v*1000 }'; }
rows=()
for n in $NS; do
    for name in "${servers[@]}"; do
        # shellcheck disable=SC2086
        rows+=("| $n | $name | $(ms "$(median ${V[$name-$n-ttft_p50]})") | $(ms "$(median ${V[$name-$n-ttft_p99]})") | $(ms "$(median ${V[$name-$n-itl_p50]})") | $(ms "$(median ${V[$name-$n-itl_p99]})") | $(printf '%.0f' "$(median ${V[$name-$n-tok_s]})") | ${V[$name-$n-errors]# } |")
    done
done
sec="$D/section.md"
{
    echo "## Serving under load: streaming clients, TTFT and inter-token gaps"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer: $(peer_commit)"
    echo "- model: $(basename "$MODEL"); server pinned with \`taskset -c $CPU_SERVER\`, $THREADS thread(s); client \`bench/serve_load.py -n N --rounds 2 --prompt-words 40 --max-tokens 64\` on core $CPU_CLIENT. uvllm: \`--ctx-size 512 --kv-mem 256M\`, default \`--itl-target-ms 100\` (uvllm) or \`--itl-target-ms 0\` (uvllm-notarget); llama-server: \`-np N -c N*256 -b 512\`. $RUNS runs, interleaved; medians (ms; tokens/s)."
    echo
    echo "| N | server | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | tokens/s | errors per run |"
    echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"
    printf '%s\n' "${rows[@]}"
} >"$sec"
results_section serve "$sec"
cat "$sec"
