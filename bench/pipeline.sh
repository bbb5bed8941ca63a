#!/usr/bin/env bash
# Pipelined steps (serve --pipeline 2) against one step at a time (--pipeline 1), the same
# server binary otherwise: N streaming clients, 2 completions each (bench/serve_load.py),
# rounds interleaved, medians of generated tokens/s, inter-token p50/p99 and TTFT p50.
# Cases (PIPE_CASES):
#   null   --backend null --null-delay-us $PIPE_NULL_US: a device whose step takes a fixed
#          time while the host is free (what a GPU looks like to the loop); N=$PIPE_NULL_N
#   tiny   cpu, aidreams260K (shared models): steps of ~1 ms, where the loop's turnaround
#          between steps is a large part of a step; N=16
#   q4_0   cpu, the TinyLlama-shaped Q4_0 of bench/engine.sh (tens of ms a step); N=16
# Writes the "pipeline" section of RESULTS.md.
#   BENCH_RUNS=3 PIPE_CASES="null tiny q4_0" PIPE_NULL_US=3000 PIPE_NULL_N=64 PIPE_THREADS=2
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
bench_dir "pipeline"
RUNS="${BENCH_RUNS:-3}"
CASES="${PIPE_CASES:-null tiny q4_0}"
NULL_US="${PIPE_NULL_US:-3000}"
NULL_N="${PIPE_NULL_N:-64}"
THREADS="${PIPE_THREADS:-2}"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

case_args() { # case -> server args, N, max tokens
    case $1 in
    null) SARGS=(--backend null --null-delay-us "$NULL_US" --max-batch-tokens 4096); N=$NULL_N; MAXT=128; PW=40 ;;
    tiny) need_shared models/aidreams260K.gguf # a 128-token context
        SARGS=(--model "$SHARED/models/aidreams260K.gguf" --threads "$THREADS"); N=16; MAXT=64; PW=10 ;;
    q4_0) ensure_models || die "models: $MODELS_NOTE"
        SARGS=(--model "$(model_path q4_0)" --threads "$THREADS"); N=16; MAXT=64; PW=40 ;;
    *) die "unknown case $1" ;;
    esac
}

run_one() { # case depth round
    local c=$1 p=$2 r=$3 out="$D/$1-p$2-$3.json"
    case_args "$c"
    PORT=$(free_port)
    "${NICE[@]}" "$UVLLM_BIN" serve "${SARGS[@]}" --pipeline "$p" --host 127.0.0.1 --port "$PORT" \
        --log-level warn --max-seqs 4096 2>"$D/$c-p$p-$r.log" &
    local pid=$!
    pids+=("$pid")
    wait_http "$PORT" /health 60 || die "server ($c, pipeline $p) did not start: $D/$c-p$p-$r.log"
    "${NICE[@]}" python3 "$BENCH_DIR/serve_load.py" --port "$PORT" -n "$N" --rounds 2 \
        --max-tokens "$MAXT" --prompt-words "$PW" >"$out" || echo "pipeline: client failed ($c p$p r$r)" >&2
    grep -q '"errors": 0' "$out" || echo "pipeline: requests failed ($c p$p r$r): $out" >&2
    curl -fs "http://127.0.0.1:$PORT/metrics" | grep -E '^uvllm_(steps_total|steps_ahead_total|tokens_chained_total) ' \
        >"$D/$c-p$p-$r.metrics" || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for c in $CASES; do
    for ((r = 1; r <= RUNS; r++)); do
        for p in 1 2; do run_one "$c" "$p" "$r"; done
        echo "pipeline: $c round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
done

field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null || true; }
med() { # case depth field
    local v=() f x
    for f in "$D/$1-p$2-"*.json; do x=$(field "$f" "$3"); [ -n "$x" ] && v+=("$x"); done
    median "${v[@]}"
}
ahead() { # case: steps built ahead / steps, last round of pipeline 2
    awk '/steps_ahead_total/{a=$2} /^uvllm_steps_total/{s=$2} END{ if (s) printf "%d of %d", a, s }' \
        "$D/$1-p2-$RUNS.metrics" 2>/dev/null || true
}

sec="$D/section.md"
{
    echo "## Pipelined steps (serve --pipeline 2 against --pipeline 1)"
    echo
    echo "- machine: $(machine_line | sed 's/load average at start: .*//')load average at start: $load_start, at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- uvllm: $(uvllm_commit); one binary, only \`--pipeline\` differs; each server and the client in a session of their own at nice ${BENCH_NICE:--15}"
    echo "- load: \`bench/serve_load.py -n N --rounds 2 --max-tokens M --prompt-words W\` (streaming, greedy, ignore_eos, arrivals over the first second); $RUNS rounds, pipeline 1 then 2 in each; medians"
    echo "- cases: null = \`--backend null --null-delay-us $NULL_US\` (a device step of $((NULL_US / 1000)) ms with the host free, as with a GPU), N=$NULL_N, M=128, W=40; tiny = aidreams260K (128-token context) on $THREADS CPU threads, N=16, M=64, W=10; q4_0 = TinyLlama-shaped Q4_0 on $THREADS threads, N=16, M=64, W=40"
    echo
    echo "| case | tokens/s p1 | tokens/s p2 | ratio | ITL p50 p1 / p2 (ms) | ITL p99 p1 / p2 (ms) | TTFT p50 p1 / p2 (s) | steps built ahead (p2, last round) |"
    echo "|---|---|---|---|---|---|---|---|"
    for c in $CASES; do
        t1=$(med "$c" 1 tok_s); t2=$(med "$c" 2 tok_s)
        i1=$(med "$c" 1 itl_p50); i2=$(med "$c" 2 itl_p50)
        j1=$(med "$c" 1 itl_p99); j2=$(med "$c" 2 itl_p99)
        f1=$(med "$c" 1 ttft_p50); f2=$(med "$c" 2 ttft_p50)
        ms() { awk -v x="${1:-}" 'BEGIN{ if (x=="") print "n/a"; else printf "%.1f", x*1000 }'; }
        s3() { awk -v x="${1:-}" 'BEGIN{ if (x=="") print "n/a"; else printf "%.3f", x }'; }
        printf '| %s | %.1f | %.1f | %s | %s / %s | %s / %s | %s / %s | %s |\n' "$c" "${t1:-0}" "${t2:-0}" \
            "$(ratio "$t2" "$t1")" "$(ms "$i1")" "$(ms "$i2")" "$(ms "$j1")" "$(ms "$j2")" \
            "$(s3 "$f1")" "$(s3 "$f2")" "$(ahead "$c")"
    done
} >"$sec"
cat "$sec"
results_section pipeline "$sec"
