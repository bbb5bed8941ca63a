#!/usr/bin/env bash
# Engine benchmark, issue 13 row: a Qwen2.5-1.5B-shaped Q4_K_M (random weights, written
# directly by `uvllm synth --arch qwen2 --shape qwen2.5-1.5b --type q4_k_m`, the recipe
# mixing Q4_K / Q6_K per tensor as llama-quantize does) - prefill and decode of uvllm vs
# llama.cpp (llama-bench) on the same file: 512-token prompt, 128 generated tokens,
# 2 threads, both at nice -15 in a session of their own, interleaved per round, medians of
# $RUNS.
# Writes the "engine-qwen" section of RESULTS.md. Called by engine.sh when
# ENGINE_QWEN=1, or on its own. PEER_BIN overrides llama.cpp's bin directory.
set -euo pipefail
# With sched_autogroup, nice orders processes only within a session: run in a session of
# our own whose autogroup gets nice -15 (as root), as serve.sh and batched.sh do.
if [ -z "${BENCH_SESSION:-}" ] && command -v setsid >/dev/null; then
    BENCH_SESSION=1 exec setsid --wait bash "${BASH_SOURCE[0]}" "$@"
fi
echo "${BENCH_NICE:--15}" >/proc/self/autogroup 2>/dev/null || true
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LLAMA_BIN="${PEER_BIN:-$LLAMA_BIN}"
D="$WORK/engine-qwen"; mkdir -p "$D"
THREADS=2
N_PROMPT="${ENGINE_QWEN_PROMPT:-512}" # smaller on a crowded machine
N_GEN="${ENGINE_QWEN_GEN:-128}"
M="$WORK/qwen2.5-1.5b-q4_k_m.gguf"
VOCAB="$SHARED/models/qwen2-tiny-f16.gguf"
NICE=(nice -n -15)
sec="$D/section.md"
[ -x "$LLAMA_BIN/llama-bench" ] || die "no llama-bench in $LLAMA_BIN (bench/peer.sh, or set PEER_BIN)"
need_shared models/qwen2-tiny-f16.gguf

if [ ! -s "$M" ]; then
    t0=$SECONDS
    "$UVLLM_BIN" synth --arch qwen2 --shape qwen2.5-1.5b --vocab "$VOCAB" --type q4_k_m "$M.tmp" ||
        { rm -f "$M.tmp"; die "uvllm synth failed"; }
    mv "$M.tmp" "$M"
    echo "engine-qwen: synth wrote $M in $((SECONDS - t0)) s" >&2
fi

# "hello" repeated to exactly N_PROMPT tokens (whether or not the vocabulary adds a BOS)
for k in $((N_PROMPT - 1)) $N_PROMPT; do
    PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * int(sys.argv[1])), end="")' "$k")"
    NTOK=$("$UVLLM_BIN" tokenize --model "$M" "$PROMPT" | wc -w)
    [ "$NTOK" -ge "$N_PROMPT" ] && break
done
echo "engine-qwen: prompt of $k words = $NTOK tokens" >&2
LOAD0="$(cut -d' ' -f1-3 /proc/loadavg)"
MACHINE="$(machine_line)"

rm -f "$D"/*.json
for ((r = 1; r <= RUNS; r++)); do
    "${NICE[@]}" "$LLAMA_BIN/llama-bench" -m "$M" -p "$N_PROMPT" -n "$N_GEN" -t "$THREADS" -r 1 \
        -o json >"$D/llama-$r.json" 2>"$D/llama-$r.err" || echo "engine-qwen: llama-bench failed" >&2
    "${NICE[@]}" "$UVLLM_BIN" generate --model "$M" --prompt "$PROMPT" --max-tokens "$N_GEN" \
        --threads "$THREADS" --json >"$D/uvllm-$r.json" 2>"$D/uvllm-$r.err" ||
        echo "engine-qwen: uvllm generate failed (see $D/uvllm-$r.err)" >&2
    "${NICE[@]}" "$UVLLM_BIN" generate --model "$M" --prompt "hello" --max-tokens "$N_GEN" \
        --threads "$THREADS" --json >"$D/uvllm-s-$r.json" 2>"$D/uvllm-s-$r.err" ||
        echo "engine-qwen: uvllm generate (short prompt) failed" >&2
    echo "engine-qwen: round $r done" >&2
done
LOAD1="$(cut -d' ' -f1-3 /proc/loadavg)"

{
    echo "## Engine: Qwen2.5-1.5B shape, Q4_K_M (issue 13)"
    echo
    echo "- machine: $MACHINE; load average at the end: $LOAD1"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(git -C "$LLAMA_BIN/../.." log -1 --format=%h 2>/dev/null || peer_commit)"
    echo "- model: \`uvllm synth --arch qwen2 --shape qwen2.5-1.5b --type q4_k_m\` (n_embd 1536, 28 layers, 12 heads, 2 kv heads, n_ff 8960, q/k/v biases; random weights; vocabulary of qwen2-tiny-f16, $(python3 -c 'import os,sys; print(f"{os.path.getsize(sys.argv[1])/1e9:.2f}")' "$M") GB; separate output.weight), types mixed by the q4_k_m recipe (Q4_K, Q6_K for output, attn_v and ffn_down in the more-bits layers)"
    echo "- peer: \`llama-bench -m MODEL -p $N_PROMPT -n $N_GEN -t $THREADS -r 1 -o json\` (pp$N_PROMPT, tg$N_GEN); uvllm: \`uvllm generate --model MODEL --prompt P --max-tokens $N_GEN --threads $THREADS --json\`, P = $NTOK tokens (prefill, decode after it) and P = \"hello\" (decode from an empty context, against tg$N_GEN); all in a session of their own at autogroup nice -15 (\`setsid\`, \`/proc/self/autogroup\`) and \`nice -n -15\`, $RUNS rounds interleaved (peer, then uvllm), medians"
    echo
    python3 - "$D" "$RUNS" "$N_PROMPT" "$N_GEN" <<'PY'
import json, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
lp, lg, up, ud, udd = [], [], [], [], []
for r in range(1, runs + 1):
    for e in load(f"{d}/llama-{r}.json") or []:
        if e.get("n_prompt") and not e.get("n_gen"): lp.append(e["avg_ts"])
        if e.get("n_gen") and not e.get("n_prompt"): lg.append(e["avg_ts"])
    u = load(f"{d}/uvllm-{r}.json")
    if u:
        up.append(u["prefill_tokens_per_s"]); udd.append(u["decode_tokens_per_s"])
    u = load(f"{d}/uvllm-s-{r}.json")
    if u:
        ud.append(u["decode_tokens_per_s"])
med = lambda v: statistics.median(v) if v else None
f = lambda x, nd=1: "—" if x is None else f"{x:.{nd}f}"
ratio = lambda a, b: None if a is None or not b else a / b
verdict = lambda r, t: "" if r is None else f" (target {t}: {'met' if r >= t else 'MISSED'})"
LP, LG, UP, UD, UDD = map(med, (lp, lg, up, ud, udd))
print("| | llama.cpp t/s | uvllm t/s | ratio |")
print("| --- | ---: | ---: | ---: |")
print(f"| prefill (pp{sys.argv[3]}) | {f(LP)} | {f(UP)} | {f(ratio(UP, LP), 2)}{verdict(ratio(UP, LP), 1.5)} |")
print(f"| decode (tg{sys.argv[4]}, empty context) | {f(LG, 2)} | {f(UD, 2)} | {f(ratio(UD, LG), 2)}{verdict(ratio(UD, LG), 1.2)} |")
print(f"| uvllm decode after the {sys.argv[3]}-token prompt | | {f(UDD, 2)} | |")
print()
print(f"- runs: llama-bench {len(lp)}, uvllm {len(up)} / {len(ud)}; all values: llama pp {[round(x,1) for x in lp]}, tg {[round(x,2) for x in lg]}; uvllm prefill {[round(x,1) for x in up]}, decode {[round(x,2) for x in ud]}")
PY
} >"$sec"
results_section engine-qwen "$sec"
cat "$sec"
