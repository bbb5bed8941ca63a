#!/usr/bin/env bash
# How far F16 prefill can go on this CPU (issue 21's "prefill >= 1.3x llama.cpp" for F16):
# the FMA throughput of one core (bench/fma_peak.c: 12 independent 256-bit FMA chains,
# thread CPU time, best of 3), against the multiply-adds a prefill token needs on the
# TinyLlama-shaped F16 model of bench/engine.sh, and what llama.cpp and uvllm reach, with 1
# and 2 threads, interleaved, medians of $BENCH_RUNS rounds (default 3).
# A token's multiply-adds: every weight of the model once (bench/gguf_bytes.py's decode
# bytes / 2 for the F16 file, less the output matrix and the embedding row, which a
# prompt's tokens other than the last do not multiply), plus attention's QK and PV over
# the mean context of the prompt. Share of peak = t/s x MAC per token / (peak x threads).
# Writes the "f16-ceiling" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
RUNS="${BENCH_RUNS:-3}"
bench_dir "f16_ceiling" keep
N=256
ensure_models || die "models: $MODELS_NOTE"
[ -x "$LLAMA_BIN/llama-bench" ] || bash "$BENCH_DIR/peer.sh" >&2 || die "bench/peer.sh failed"
M="$(model_path f16)"
cc -O3 -mavx2 -mfma -o "$D/fma_peak" "$BENCH_DIR/fma_peak.c" || die "cannot compile fma_peak.c"
PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * (int(sys.argv[1]) - 1)), end="")' "$N")"
NTOK=$("$UVLLM_BIN" tokenize --model "$M" "$PROMPT" | wc -w)
[ "$NTOK" = "$N" ] || echo "f16_ceiling: WARNING: prompt is $NTOK tokens, not $N" >&2
read -r _ DEC_BYTES < <(python3 "$BENCH_DIR/gguf_bytes.py" "$M")
# TinyLlama shape (bench/engine.sh's synth): vocab 32000, n_embd 2048, 22 layers, 32 heads of 64
MAC_TOKEN=$(python3 -c "
dec, n = $DEC_BYTES, $N
w = dec / 2 - 32000 * 2048 - 2048
att = 22 * 32 * 64 * 2 * (n + 1) / 2
print(int(w + att))")

rm -f "$D"/*.json "$D"/*.err "$D"/peak-*
for ((r = 1; r <= RUNS; r++)); do
    nice -n -15 "$D/fma_peak" >"$D/peak-$r" || die "fma_peak failed"
    for t in 1 2; do
        nice -n -15 "$LLAMA_BIN/llama-bench" -m "$M" -p "$N" -n 0 -t "$t" -r 1 -o json \
            >"$D/llama-$t-$r.json" 2>"$D/llama-$t-$r.err" || echo "f16_ceiling: llama-bench failed" >&2
        nice -n -15 "$UVLLM_BIN" generate --model "$M" --prompt "$PROMPT" --max-tokens 1 \
            --threads "$t" --json >"$D/uvllm-$t-$r.json" 2>"$D/uvllm-$t-$r.err" ||
            echo "f16_ceiling: uvllm failed" >&2
    done
    echo "f16_ceiling: round $r done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

sec="$D/section.md"
{
    echo "## F16 prefill against the FMA peak (issue 21), TinyLlama-1.1B shape"
    echo
    echo "- machine: $(machine_line); ISA avx2 (uvllm's --json \"isa\" checked)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit), $(llama_build_note avx2)"
    echo "- commands: \`fma_peak\` (bench/fma_peak.c); \`llama-bench -m tinyllama-f16.gguf -p $N -n 0 -t T -r 1\`; \`uvllm generate --model tinyllama-f16.gguf --prompt P --max-tokens 1 --threads T --json\` (P = $NTOK tokens with BOS); rounds interleaved, all at nice -15 in a session of their own; medians of $RUNS rounds"
    echo "- multiply-adds per prompt token: $MAC_TOKEN (weights less output and embedding, plus QK/PV over a mean context of $(( (N + 1) / 2 )))"
    echo
    python3 - "$D" "$RUNS" "$MAC_TOKEN" <<'PY'
import json, statistics, sys
d, runs, mac = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
peak = statistics.median(float(open(f"{d}/peak-{r}").read().split()[0]) for r in range(1, runs + 1))
print(f"FMA peak of one thread: **{peak:.1f} GMAC/s** (median of {runs}); a prefill token at that peak on T threads: {peak * 1e9 / mac:.1f} x T t/s.")
print()
print("| threads | llama.cpp t/s | llama.cpp % of peak | uvllm t/s | uvllm % of peak | ratio | 1.3x llama.cpp would be % of peak | best round: llama.cpp, uvllm (% of peak) | 1.3x llama.cpp's best round would be |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
alls = []
for t in (1, 2):
    lp, up = [], []
    for r in range(1, runs + 1):
        try:
            lp += [e["avg_ts"] for e in json.load(open(f"{d}/llama-{t}-{r}.json")) if e.get("n_prompt")]
        except Exception:
            pass
        try:
            u = json.load(open(f"{d}/uvllm-{t}-{r}.json"))
            if u.get("isa") == "avx2":
                up.append(u["prefill_tokens_per_s"])
        except Exception:
            pass
    if not lp or not up:
        print(f"| {t} | missing runs | | | | | | | |")
        continue
    l, u = statistics.median(lp), statistics.median(up)
    share = lambda tps: 100 * tps * mac / (peak * 1e9 * t)
    print(f"| {t} | {l:.1f} | {share(l):.0f}% | {u:.1f} | {share(u):.0f}% | {u / l:.2f} | {share(1.3 * l):.0f}% | {max(lp):.1f} ({share(max(lp)):.0f}%), {max(up):.1f} ({share(max(up)):.0f}%) | {share(1.3 * max(lp)):.0f}% |")
    alls.append(f"- {t} thread(s), all runs: llama.cpp {', '.join(f'{x:.1f}' for x in lp)}; uvllm {', '.join(f'{x:.1f}' for x in up)}")
print()
print("\n".join(alls))
PY
    echo
    echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$sec"
results_section f16-ceiling "$sec"
cat "$sec"
