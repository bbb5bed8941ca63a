#!/usr/bin/env bash
# Serving under load (issue 11): N streaming clients (N = 1, 4, 16, 64 by default), each
# sending 2 completions one after the other (a ~50-token prompt, 64 tokens, greedy,
# ignore_eos), arrivals spread over the first second, so prompts keep arriving while
# others decode. Measured by bench/serve_load.py: time to first token and inter-token
# gap p50/p99, aggregate generated tokens/s.
# Servers: uvllm (cpu backend, default --itl-target-ms 100) and llama-server -np N (built
# by bench/peer.sh, which this script runs when the binary is missing), same GGUF, same
# threads; rounds interleaved (per round and N: uvllm, then llama-server); medians. At
# N = $ITL_N, uvllm also runs with each --itl-target-ms of $ITL_TARGETS (0 = off) in every
# round: the inter-token p99 vs TTFT p99 table.
# Every server and the client run under `nice -n $BENCH_NICE` (default -15; as root).
# Model: $SERVE_MODEL, else the TinyLlama-1.1B-shaped Q4_0 of bench/engine.sh
# (bench/work/tinyllama-q4_0.gguf, `uvllm synth` + `uvllm quantize`, random weights).
# Writes the "serve" section of RESULTS.md ($SERVE_SECTION names another, e.g. for a partial
# rerun with fewer N that must not replace the full table).
#   SERVE_NS="1 4 16 64"  SERVE_THREADS=2  BENCH_RUNS=3  SERVE_RUNS_BIG=(runs at N >= 64,
#   default BENCH_RUNS)  SERVE_ITL_N=16  SERVE_ITL_TARGETS="50 200 0"
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# With sched_autogroup (the kernel default on most distributions) nice orders processes only
# within one session; sessions share the CPU equally whatever their processes' nice. So the
# benchmark runs in a session of its own whose autogroup gets the same nice (as root).
if [ -z "${BENCH_SESSION:-}" ] && command -v setsid >/dev/null; then
    BENCH_SESSION=1 exec setsid --wait bash "${BASH_SOURCE[0]}" "$@"
fi
echo "${BENCH_NICE:--15}" >/proc/self/autogroup 2>/dev/null || true
bench_dir "serve"
NS="${SERVE_NS:-1 4 16 64}"
RUNS="${BENCH_RUNS:-3}"
RUNS_BIG="${SERVE_RUNS_BIG:-$RUNS}"
THREADS="${SERVE_THREADS:-2}"
ITL_N="${SERVE_ITL_N:-16}"
ITL_TARGETS="${SERVE_ITL_TARGETS:-50 200 0}"
CLIENT_TIMEOUT="${SERVE_CLIENT_TIMEOUT:-900}"
if [ -n "${SERVE_MODEL:-}" ]; then
    MODEL="$SERVE_MODEL"
else
    ensure_models || die "models: $MODELS_NOTE"
    MODEL="$(model_path q4_0)"
fi
LLAMA_SERVER="$LLAMA_BIN/llama-server"
if [ ! -x "$LLAMA_SERVER" ]; then
    bash "$BENCH_DIR/peer.sh" >&2 || echo "serve: bench/peer.sh failed: uvllm only" >&2
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# start NAME N: starts a server, sets PORT. NAME: uvllm, uvllm-itlMS or llama.
start() {
    local name=$1 n=$2 log="$D/$1-$2-$3.log"
    PORT=$(free_port)
    case $name in
    uvllm*)
        local itl=()
        [[ $name == uvllm-itl* ]] && itl=(--itl-target-ms "${name#uvllm-itl}")
        # debug: one line per step (sched.c), for the decode-only step times
        "${NICE[@]}" "$UVLLM_BIN" serve --model "$MODEL" --threads "$THREADS" --host 127.0.0.1 \
            --port "$PORT" --log-level debug --ctx-size 512 --kv-mem 384M "${itl[@]}" >"$log" 2>&1 &
        ;;
    llama)
        "${NICE[@]}" "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" --host 127.0.0.1 --port "$PORT" \
            -np "$n" -c $((n * 256)) -b 512 >"$log" 2>&1 &
        ;;
    esac
    pids+=($!)
    wait_http "$PORT" /health 120 || die "$name did not start (see $log)"
}

# run NAME N R: one measurement; appends its values to V[NAME-N-key]
declare -A V
run() {
    local name=$1 n=$2 r=$3 out ld
    ld=$(cut -d' ' -f1 /proc/loadavg)
    start "$name" "$n" "$r"
    out=$(timeout "$CLIENT_TIMEOUT" "${NICE[@]}" python3 "$BENCH_DIR/serve_load.py" --port "$PORT" \
        -n "$n" --rounds 2 --prompt-words 40 --max-tokens 64) || out='{"errors": "timeout"}'
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    if [[ $name == uvllm* ]]; then # decode-only steps' times from the step log (ms)
        out=$(python3 - "$D/$name-$n-$r.log" "$out" <<'PY'
import json, re, sys
t = sorted(float(m.group(2)) for m in (re.search(r"step \d+: (\d+) decode \+ 0 prefill tokens.*took ([\d.]+) ms", l) for l in open(sys.argv[1], errors="replace")) if m and int(m.group(1)) > 0)
o = json.loads(sys.argv[2])
if t:
    o["dec_p50"], o["dec_p99"] = t[len(t) // 2] / 1e3, t[min(len(t) - 1, int(0.99 * (len(t) - 1) + 0.5))] / 1e3
print(json.dumps(o))
PY
        )
    fi
    echo "serve: $name N=$n run $r (load $ld): $out" >&2
    echo "$name $n $r $ld $out" >>"$D/runs.txt"
    for k in ttft_p50 ttft_p99 itl_p50 itl_p99 tok_s errors dec_p50 dec_p99; do
        v=$(python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$out" "$k")
        V[$name-$n-$k]="${V[$name-$n-$k]:-} $v"
    done
    V[$name-$n-load]="${V[$name-$n-load]:-} $ld"
}

servers=(uvllm)
[ -x "$LLAMA_SERVER" ] && servers+=(llama)
itl_servers=()
for t in $ITL_TARGETS; do itl_servers+=("uvllm-itl$t"); done
START_LINE="$(machine_line)"
maxr=$RUNS; [ "$RUNS_BIG" -gt "$maxr" ] && maxr=$RUNS_BIG
for ((r = 1; r <= maxr; r++)); do
    for n in $NS; do
        if [ "$n" -ge 64 ]; then [ "$r" -le "$RUNS_BIG" ] || continue; else [ "$r" -le "$RUNS" ] || continue; fi
        for name in "${servers[@]}"; do run "$name" "$n" "$r"; done
        if [ "$n" = "$ITL_N" ]; then
            for name in "${itl_servers[@]}"; do run "$name" "$n" "$r"; done
        fi
    done
done

med() { # med NAME N KEY: median of the runs ("" when none)
    # shellcheck disable=SC2086
    median ${V[$1-$2-$3]:-}
}
ms() { awk -v v="${1:-}" 'BEGIN{ if (v=="") print "n/a"; else printf "%.0f\n", v*1000 }'; }
num() { awk -v v="${1:-}" 'BEGIN{ if (v=="") print "n/a"; else printf "%.1f\n", v }'; }
span() { # min-max of the values
    printf '%s\n' $1 | sort -g | awk 'NR==1{a=$1} {b=$1} END{ if (NR) printf "%s-%s", a, b }'
}
rows=()
for n in $NS; do
    u_tok=$(med uvllm "$n" tok_s); l_tok=$(med llama "$n" tok_s)
    row="| $n | $(num "$u_tok") | $(num "$l_tok") | **$(ratio "$u_tok" "$l_tok")**"
    for k in ttft_p50 ttft_p99 itl_p50 itl_p99; do
        u=$(med uvllm "$n" $k); l=$(med llama "$n" $k)
        row+=" | $(ms "$u") | $(ms "$l") | **$(ratio "$u" "$l")**"
    done
    row+=" | ${V[uvllm-$n-errors]# } / ${V[llama-$n-errors]:- n/a} | $(span "${V[uvllm-$n-load]:-}") / $(span "${V[llama-$n-load]:-}") |"
    rows+=("$row")
done
# contract T DEC_P50 ITL_P99 (s): the latency contract's verdict at target T ms
contract() {
    awk -v t="$1" -v d="${2:-}" -v i="${3:-}" 'BEGIN{
        if (t == 0 || d == "" || i == "") print "n/a";
        else if (d * 1000 > 0.8 * t) printf "n/a (decode-only steps over 0.8 T)\n";
        else if (i * 1000 <= 1.1 * t) print "met"; else print "MISSED" }'
}
itl_rows=()
for name in "${itl_servers[@]}" uvllm; do
    t=${name#uvllm-itl}; tv=$t; [ "$name" = uvllm ] && t="100 (default)" && tv=100; [ "$t" = 0 ] && t="0 (off)"
    dp50=$(med "$name" "$ITL_N" dec_p50); ip99=$(med "$name" "$ITL_N" itl_p99)
    itl_rows+=("| $t | $(ms "$(med "$name" "$ITL_N" itl_p50)") | $(ms "$ip99") | $(ms "$(med "$name" "$ITL_N" ttft_p50)") | $(ms "$(med "$name" "$ITL_N" ttft_p99)") | $(num "$(med "$name" "$ITL_N" tok_s)") | $(ms "$dp50") / $(ms "$(med "$name" "$ITL_N" dec_p99)") | $(contract "$tv" "$dp50" "$ip99") | ${V[$name-$ITL_N-itl_p99]# } |")
done
verdict() { # verdict VALUE OP TARGET
    awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN{ if (v=="n/a") print "n/a";
        else if ((op==">=" && v+0>=t) || (op=="<=" && v+0<=t)) print "met"; else print "MISSED" }'
}
t16=$(ratio "$(med uvllm 16 tok_s)" "$(med llama 16 tok_s)")
f16=$(ratio "$(med uvllm 16 ttft_p99)" "$(med llama 16 ttft_p99)")
i16=$(ratio "$(med uvllm 16 itl_p99)" "$(med llama 16 itl_p99)")
sec="$D/section.md"
{
    echo "## Serving under load: streaming clients, uvllm vs llama-server"
    echo
    echo "- machine: $START_LINE"
    echo "- uvllm: $(uvllm_commit); peer: llama.cpp $(peer_commit)"
    echo "- model: $(basename "$MODEL") (TinyLlama-1.1B shape, random weights, \`uvllm synth\` + \`uvllm quantize\`), $THREADS threads each."
    echo "- client: \`bench/serve_load.py -n N --rounds 2 --prompt-words 40 --max-tokens 64\` (N clients, each 2 streaming completions in turn, ~50-token prompts, 64 tokens with ignore_eos, greedy; arrivals spread over the first second). Every server and the client at \`nice -n ${BENCH_NICE:--15}\`, unpinned (2 server threads need both cores)."
    echo "- uvllm: \`uvllm serve --model M --threads $THREADS --ctx-size 512 --kv-mem 384M --log-level debug\` (default \`--itl-target-ms 100\`; debug: a log line per step); llama-server: \`llama-server -m M -t $THREADS -np N -c N*256 -b 512\`."
    echo "- $RUNS rounds at N < 64, $RUNS_BIG at N = 64, interleaved (per round and N: uvllm, then llama-server, then the --itl-target-ms variants at N = $ITL_N); medians. Ratios are uvllm / llama-server (for times, lower is better). Load: 1-minute load average before each run (min-max)."
    echo
    echo "| N | uvllm tok/s | llama tok/s | ratio | uvllm TTFT p50 ms | llama | ratio | uvllm TTFT p99 ms | llama | ratio | uvllm ITL p50 ms | llama | ratio | uvllm ITL p99 ms | llama | ratio | errors per run (uvllm / llama) | load (uvllm / llama) |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Targets at N = 16: throughput >= 2x llama-server: $t16 ($(verdict "$t16" ">=" 2)); TTFT p99 <= 0.5x: $f16 ($(verdict "$f16" "<=" 0.5)); inter-token p99 <= 1.0x: $i16 ($(verdict "$i16" "<=" 1.0))."
    echo
    echo "uvllm at N = $ITL_N by \`--itl-target-ms\` T (medians of the same rounds; decode-only steps: the backend's time for steps without prefill, from uvllm's step log; contract: ITL p99 <= 1.1 T, judged when the decode-only steps' median is <= 0.8 T; last column: ITL p99 of every run, s):"
    echo
    echo "| --itl-target-ms | ITL p50 ms | ITL p99 ms | TTFT p50 ms | TTFT p99 ms | tok/s | decode-only step p50 / p99 ms | contract | ITL p99 runs |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    printf '%s\n' "${itl_rows[@]}"
} >"$sec"
cp "$D/runs.txt" "$D/runs-$(date -u +%H%M).txt"
results_section "${SERVE_SECTION:-serve}" "$sec"
cat "$sec"
