#!/usr/bin/env bash
# Mixture-of-experts benchmark (issue 13): prefill and decode tokens/s of uvllm's CPU engine
# vs llama.cpp (llama-bench) on one Qwen3-30B-A3B-shaped qwen3moe file with the real layer
# width and experts (n_embd 2048, 32 heads / 4 kv of head_dim 128, 128 experts of n_ff 768,
# 8 used per token) but $MOE_LAYERS layers (default 12), random weights in the Q4_K_M mix,
# written directly by `uvllm synth --arch qwen3moe --shape 30b-a3b --layers 12 --type q4_k_m`
# (no F16 file in between; the recipe and K-quant quantisers come with the `quant` branch)
# unless MOE_MODEL names an existing file. PEER_BIN overrides llama.cpp's bin directory.
# Every ISA of bench_isas (lib.sh) gets its table: the host's best, and on an AVX-512 host
# also AVX2 (uvllm with UVLLM_ISA=avx2 against llama.cpp built for AVX2).
# 512-token prompt, 128 generated tokens, 2 threads; both sides under `nice -n -15` in a
# session of their own at autogroup nice -15, runs interleaved (lib.sh's peer_rounds:
# llama-bench -r 1, then uvllm generate, per round), medians of $RUNS. Each round also
# measures the read bandwidth of 2 threads (bench/membw.c) right before uvllm's decode run,
# and the section shows decode's share of it: the bytes a decode token reads (the weights
# once, one embedding row, 8 of the 128 experts of every layer, bench/gguf_bytes.py; plus
# the KV cache) times decode t/s.
# Writes the "moe" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
bench_dir "moe" keep
THREADS=2
N_PROMPT=512
N_GEN=128
LAYERS="${MOE_LAYERS:-12}"
M="${MOE_MODEL:-$WORK/qwen3moe-a3b-${LAYERS}l-q4_k_m.gguf}"
sec="$D/section.md"

need_shared models/qwen3-tiny-f16.gguf
if [ ! -f "$M" ]; then
    "$UVLLM_BIN" synth --arch qwen3moe --shape 30b-a3b --layers "$LAYERS" --type q4_k_m \
        --vocab "$SHARED/models/qwen3-tiny-f16.gguf" "$M" || die "cannot write $M"
fi

# A prompt of exactly N_PROMPT tokens (the gpt2 BPE vocabulary adds no BOS).
count_tokens() { "$UVLLM_BIN" tokenize --model "$M" "$1" | wc -w; }
words() { python3 -c 'import sys; print(" ".join(["hello"] * int(sys.argv[1])), end="")' "$1"; }
k=$N_PROMPT
for _ in 1 2 3 4 5 6; do
    n=$(count_tokens "$(words "$k")")
    [ "$n" = "$N_PROMPT" ] && break
    if ((n > N_PROMPT * 11 / 10 || n < N_PROMPT * 9 / 10)); then
        k=$((k * N_PROMPT / n))
    else
        k=$((k + N_PROMPT - n))
    fi
    ((k >= 1)) || k=1
done
PROMPT="$(words "$k")"
NTOK=$(count_tokens "$PROMPT")
[ "$NTOK" = "$N_PROMPT" ] || echo "moe: WARNING: prompt is $NTOK tokens, not $N_PROMPT" >&2
LOAD0="$(cut -d' ' -f1-3 /proc/loadavg)"
MACHINE="$(machine_line)"

cc -O3 -march=native -pthread -o "$D/membw" "$BENCH_DIR/membw.c" || die "cannot compile membw.c"
ISAS=($(bench_isas))
for isa in "${ISAS[@]}"; do
    mkdir -p "$D/$isa"
    LB="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"
    LLAMA_BIN="${PEER_BIN:-$LB}" UVLLM_ISA="$isa" PEER_MEMBW="$D/membw" \
        peer_rounds "moe $isa" "$D/$isa" "$M" "$THREADS" "$N_PROMPT" "$N_GEN" "$PROMPT" 4
done
LOAD1="$(cut -d' ' -f1-3 /proc/loadavg)"
LAYERS="$("$UVLLM_BIN" info "$M" | awk '$1 == "n_layer" {print $2}')" # of MOE_MODEL too
USED="$("$UVLLM_BIN" info "$M" | awk '$1 == "experts" {sub(/^\(/, "", $3); print $3}')"
read -r _ WBYTES <<<"$(python3 "$BENCH_DIR/gguf_bytes.py" "$M" "${USED:-8}")"
KVB=$("$UVLLM_BIN" info "$M" | awk '$1 == "n_layer" {l = $2} $1 == "n_head_kv" {h = $2} $1 == "head_dim" {d = $2} END {print l * h * d * 2 * 2}')

{
    echo "## qwen3moe: Qwen3-30B-A3B layer shape, $LAYERS layers, Q4_K_M (random weights)"
    echo
    echo "- machine: $MACHINE; load average at end: $LOAD1"
    peer_versions_line %H
    echo "- model: $(basename "$M"), $(du -m "$M" | cut -f1) MiB: qwen3moe, n_embd 2048, $LAYERS layers, 32 heads / 4 kv heads of head_dim 128, 128 experts of n_ff 768 with 8 used per token, vocabulary $("$UVLLM_BIN" info "$M" | awk '$1 == "n_vocab" {print $2}') (of qwen3-tiny-f16.gguf); $("$UVLLM_BIN" info "$M" | awk '$1 ~ /^(f32|q[0-9]_k|q8_0)$/ {printf "%s%s x%s", sep, $1, $2; sep=", "}') tensors; written directly by uvllm synth"
    echo "- peer: \`nice -n -15 llama-bench -m MODEL -p $N_PROMPT -n $N_GEN -t $THREADS -r 1 -o json\` (pp$N_PROMPT; tg$N_GEN from an empty context); uvllm: \`nice -n -15 uvllm generate --model MODEL --prompt P --threads $THREADS --json\` with P = \"hello\" x $k ($NTOK tokens, prefill_tokens_per_s, --max-tokens 4) and P = \"hello\" (decode_tokens_per_s over --max-tokens $N_GEN); before that decode run, \`membw 2 1024\` (bench/membw.c: 2 threads, 1 GiB, best of 5); $RUNS rounds interleaved (peer, then uvllm, per round), in a session of their own at autogroup nice -15; medians"
    for isa in "${ISAS[@]}"; do
        echo
        python3 - "$BENCH_DIR" "$D/$isa" "$RUNS" "$WBYTES" "${KVB:-0}" "$N_GEN" "$isa" "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" "${USED:-8}" <<'PY'
import json
import sys
sys.path.insert(0, sys.argv[1])
from peer_runs import median as med, ratio, runs
d, isa, cpu, used = sys.argv[2], sys.argv[7], sys.argv[8], sys.argv[9]
v = runs(d, int(sys.argv[3]))
wbytes, kv_per_pos, n_gen = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
try:
    got = json.load(open(f"{d}/uvllm-d-1.json")).get("isa", "?")
except (OSError, ValueError):
    got = "?"
# decode from "hello" (1-2 prompt tokens): token i reads the KV of about i + 1 positions
kv = kv_per_pos * (n_gen / 2 + 1)
tok_bytes = wbytes + kv
lp, lg, up, ud = v["llama_pp"], v["llama_tg"], v["prefill"], v["decode"]
f = lambda x: "—" if x is None else f"{x:.2f}"
print(f"### {isa} ({cpu}; uvllm reported isa {got})")
print()
print("| | llama.cpp t/s | uvllm t/s | ratio (uvllm / llama.cpp) | target | runs (llama.cpp / uvllm) | all runs llama.cpp | all runs uvllm |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
for name, a, b, t in (("prefill 512", lp, up, 1.5), ("decode 128", lg, ud, 1.2)):
    r = ratio(med(b), med(a))
    met = "" if r is None else (" met" if r >= t else " MISSED")
    print(f"| {name} | {f(med(a))} | {f(med(b))} | {f(r)} | {t}{met} | {len(a)} / {len(b)} | "
          f"{', '.join(f(x) for x in a)} | {', '.join(f(x) for x in b)} |")
bw = v["membw"]
if bw:
    print()
    print(f"Decode against the read bandwidth of the moment: a decode token reads {wbytes / 1e6:.1f} MB "
          f"of weights (bench/gguf_bytes.py MODEL 8: file bytes of every non-expert tensor, one "
          f"embedding row and 8 of the 128 experts of every layer; uvllm's packed copies are 1-3% "
          f"larger, not counted) and about {kv / 1e6:.2f} MB of f16 KV cache (its mean over "
          f"{n_gen} tokens), {tok_bytes / 1e6:.1f} MB in all; read GB/s = that x uvllm decode t/s; "
          f"share = read GB/s / membw GB/s measured just before the same decode run.")
    print()
    print("| round | membw GB/s | uvllm decode t/s | read GB/s | share of membw |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    shares = []
    for i, (g, t) in enumerate(bw, 1):
        rd = tok_bytes * t / 1e9
        shares.append(rd / g)
        print(f"| {i} | {g:.1f} | {t:.2f} | {rd:.1f} | {100 * rd / g:.0f}% |")
    m = med(shares)
    print()
    print(f"Median share: {100 * m:.0f}% (target 70%: {'met' if m >= 0.7 else 'MISSED'}).")
PY
    done
} >"$sec"
results_section moe "$sec"
cat "$sec"
