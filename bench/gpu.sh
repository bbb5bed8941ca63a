#!/usr/bin/env bash
# The CUDA backend on a GPU machine (issue 15): decode and prefill tokens/s through
# `uvllm serve --backend cuda`, the memory bandwidth decode achieves (weight bytes read per
# token x tokens/s) against the device's peak (memory clock x bus width, from the CUDA
# runtime), and the serving load of bench/serve.sh (bench/serve_load.py, N streaming
# clients) on the same server. Medians of $RUNS runs.
# Model: $GPU_MODEL, else bench/work/small-q4_0.gguf as bench/serve.sh makes it.
# Also decode with the full device sampler (temperature, top-k, top-p, penalties) and with
# CUDA graphs off (UVLLM_CUDA_GRAPHS=0), interleaved run by run with the greedy decode; the
# serving load runs with --pipeline 1 and 2 (step N+1 submitted while N computes), run by run.
# Device: $GPU_DEVICE (default 0). Writes the "gpu" section of RESULTS.md only when a
# device ran the benchmark; without one it says so and exits 1, claiming nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "gpu"
RUNS="${BENCH_RUNS:-3}"
DEVICE="${GPU_DEVICE:-0}"
NS="${GPU_NS:-1 4 16 64}"
MODEL="${GPU_MODEL:-$WORK/small-q4_0.gguf}"
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [ ! -s "$MODEL" ]; then
    need_shared tokenizer/ggml-vocab-llama-spm.gguf
    "$UVLLM_BIN" synth --shape small --vocab "$SHARED/tokenizer/ggml-vocab-llama-spm.gguf" \
        "$MODEL.tmp" --type q4_0 >&2 && mv "$MODEL.tmp" "$MODEL"
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The device's name and peak bandwidth (GB/s) from the runtime's attributes.
cat >"$D/peak.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
int main(int argc, char **argv) {
    int dev = argc > 1 ? atoi(argv[1]) : 0, clk = 0, bus = 0;
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return 1;
    cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, dev);     // kHz
    cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev); // bits
    printf("%s|%.1f\n", p.name, 2.0 * clk * 1e3 * (bus / 8) / 1e9);
    return 0;
}
EOF
"$NVCC" -o "$D/peak" "$D/peak.cu" >&2 || die "nvcc could not build the device query"
if ! peak_line=$("$D/peak" "$DEVICE"); then
    echo "gpu: no CUDA device $DEVICE here: nothing measured, RESULTS.md left alone" >&2
    exit 1
fi
GPU_NAME="${peak_line%%|*}"; PEAK_GBS="${peak_line##*|}"
# bytes one decode token reads (every weight once, one embedding row): gguf_bytes.py's second
read -r _ WEIGHT_BYTES <<<"$(python3 "$BENCH_DIR/gguf_bytes.py" "$MODEL")"

start() { # [graphs 1|0] [pipeline 1|2]
    PORT=$(free_port)
    UVLLM_CUDA_GRAPHS="${1:-1}" "$UVLLM_BIN" serve --backend cuda --device "$DEVICE" --model "$MODEL" --host 127.0.0.1 \
        --port "$PORT" --log-level warn --ctx-size 2048 --pipeline "${2:-1}" >"$D/server.log" 2>&1 &
    pids+=($!)
    wait_http "$PORT" /health 120 || die "uvllm --backend cuda did not start (see $D/server.log)"
}

# one_request PROMPT_WORDS MAX_TOKENS [sampled]: prints "prompt_tokens prefill_s n_gen
# decode_s" from one streaming request, greedy or (sampled) with every sampler stage on
# (prefill = time to the first token).
one_request() {
    python3 - "$PORT" "$1" "$2" "${3:-greedy}" <<'EOF'
import http.client, json, sys, time
port, words, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
req = {"prompt": " ".join(["the quick brown fox"] * (words // 4)), "max_tokens": n,
       "temperature": 0, "ignore_eos": True, "stream": True,
       "stream_options": {"include_usage": True}}
if sys.argv[4] == "sampled":
    req.update(temperature=0.8, top_k=40, top_p=0.9, frequency_penalty=0.5,
               presence_penalty=0.3, seed=1)
body = json.dumps(req)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
t0 = time.monotonic()
c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
r = c.getresponse()
times, usage = [], None
for line in r:
    line = line.strip()
    if not line.startswith(b"data: ") or line == b"data: [DONE]":
        continue
    j = json.loads(line[6:])
    if j.get("usage"):
        usage = j["usage"]
    if j.get("choices") and j["choices"][0].get("text"):
        times.append(time.monotonic())
if not times or not usage:
    sys.exit("no tokens")
print(usage["prompt_tokens"], times[0] - t0, usage["completion_tokens"] - 1, times[-1] - times[0])
EOF
}

declare -A V
start
for ((r = 1; r <= RUNS; r++)); do
    read -r pt pf _ _ <<<"$(one_request 512 1)"
    V[prefill]="${V[prefill]:-} $(awk -v a="$pt" -v b="$pf" 'BEGIN{printf "%.1f", a/b}')"
    read -r _ _ ng dt <<<"$(one_request 16 256)"
    tps=$(awk -v a="$ng" -v b="$dt" 'BEGIN{printf "%.1f", a/b}')
    V[decode]="${V[decode]:-} $tps"
    V[bw]="${V[bw]:-} $(awk -v t="$tps" -v w="$WEIGHT_BYTES" 'BEGIN{printf "%.1f", t*w/1e9}')"
    read -r _ _ ng dt <<<"$(one_request 16 256 sampled)"
    V[sampled]="${V[sampled]:-} $(awk -v a="$ng" -v b="$dt" 'BEGIN{printf "%.1f", a/b}')"
    echo "gpu: run $r: prefill ${V[prefill]##* } tok/s, decode $tps tok/s," \
        "sampled decode ${V[sampled]##* } tok/s" >&2
done
# graphs off: a second server, decode only (the serving load below runs with graphs on)
kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
start 0
for ((r = 1; r <= RUNS; r++)); do
    read -r _ _ ng dt <<<"$(one_request 16 256)"
    V[nograph]="${V[nograph]:-} $(awk -v a="$ng" -v b="$dt" 'BEGIN{printf "%.1f", a/b}')"
    echo "gpu: run $r: decode without graphs ${V[nograph]##* } tok/s" >&2
done
kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
for ((r = 1; r <= RUNS; r++)); do
    for p in 1 2; do
        start 1 "$p"
        for n in $NS; do
            out=$(python3 "$BENCH_DIR/serve_load.py" --port "$PORT" -n "$n" --rounds 2 \
                --prompt-words 40 --max-tokens 64)
            echo "gpu: serve --pipeline $p N=$n run $r: $out" >&2
            for k in ttft_p50 itl_p50 itl_p99 tok_s errors; do
                v=$(python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print("" if v is None else v)' "$out" "$k")
                V[$p-$n-$k]="${V[$p-$n-$k]:-} $v"
            done
        done
        kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
    done
done

# shellcheck disable=SC2086
bw=$(median ${V[bw]})
sec="$D/section.md"
{
    echo "## CUDA backend: decode, prefill, bandwidth, serving load"
    echo
    echo "- machine: $(machine_line); device $DEVICE: $GPU_NAME, peak $PEAK_GBS GB/s"
    echo "- uvllm: $(uvllm_commit); model $(basename "$MODEL") ($WEIGHT_BYTES weight bytes); $RUNS runs, medians"
    echo
    echo "| prefill tok/s (512-word prompt) | decode tok/s (1 stream) | achieved GB/s | of peak | decode, device sampler | decode, no graphs |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    # shellcheck disable=SC2086
    echo "| $(median ${V[prefill]}) | $(median ${V[decode]}) | $bw | $(awk -v a="$bw" -v b="$PEAK_GBS" 'BEGIN{printf "%.0f%%", 100*a/b}') | $(median ${V[sampled]}) | $(median ${V[nograph]}) |"
    echo
    echo "| --pipeline | N | TTFT p50 s | ITL p50 s | ITL p99 s | tokens/s | errors per run |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for p in 1 2; do
        for n in $NS; do
            # shellcheck disable=SC2086
            echo "| $p | $n | $(median ${V[$p-$n-ttft_p50]}) | $(median ${V[$p-$n-itl_p50]}) | $(median ${V[$p-$n-itl_p99]}) | $(median ${V[$p-$n-tok_s]}) | ${V[$p-$n-errors]# } |"
        done
    done
} >"$sec"
results_section gpu "$sec"
cat "$sec"
