#!/usr/bin/env bash
# Engine benchmark, issue 13 row: a Qwen2.5-1.5B-shaped Q4_K_M (random weights, written
# directly by `uvllm synth --arch qwen2 --shape qwen2.5-1.5b --type q4_k_m`, the recipe
# mixing Q4_K / Q6_K per tensor as llama-quantize does) - prefill and decode of uvllm vs
# llama.cpp (llama-bench) on the same file: 512-token prompt, 128 generated tokens,
# 2 threads, both at nice -15 in a session of their own, interleaved per round, medians of
# $RUNS.
# Every ISA of bench_isas (lib.sh) gets its table: the host's best, and on an AVX-512 host
# also AVX2 (uvllm with UVLLM_ISA=avx2 against llama.cpp built for AVX2).
# Writes the "engine-qwen" section of RESULTS.md. Called by engine.sh when
# ENGINE_QWEN=1, or on its own. PEER_BIN overrides llama.cpp's bin directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@" # a session of its own at autogroup nice -15, as serve.sh and batched.sh
bench_dir "engine-qwen" keep
THREADS=2
N_PROMPT="${ENGINE_QWEN_PROMPT:-512}" # smaller on a crowded machine
N_GEN="${ENGINE_QWEN_GEN:-128}"
M="$WORK/qwen2.5-1.5b-q4_k_m.gguf"
VOCAB="$SHARED/models/qwen2-tiny-f16.gguf"
sec="$D/section.md"
[ -x "${PEER_BIN:-$LLAMA_BIN}/llama-bench" ] || die "no llama-bench in ${PEER_BIN:-$LLAMA_BIN} (bench/peer.sh, or set PEER_BIN)"
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

ISAS=($(bench_isas))
for isa in "${ISAS[@]}"; do
    mkdir -p "$D/$isa"
    LB="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"
    LLAMA_BIN="${PEER_BIN:-$LB}" UVLLM_ISA="$isa" \
        peer_rounds "engine-qwen $isa" "$D/$isa" "$M" "$THREADS" "$N_PROMPT" "$N_GEN" "$PROMPT" "$N_GEN"
done
LOAD1="$(cut -d' ' -f1-3 /proc/loadavg)"

{
    echo "## Engine: Qwen2.5-1.5B shape, Q4_K_M (issue 13)"
    echo
    echo "- machine: $MACHINE; load average at the end: $LOAD1"
    peer_versions_line
    echo "- model: \`uvllm synth --arch qwen2 --shape qwen2.5-1.5b --type q4_k_m\` (n_embd 1536, 28 layers, 12 heads, 2 kv heads, n_ff 8960, q/k/v biases; random weights; vocabulary of qwen2-tiny-f16, $(python3 -c 'import os,sys; print(f"{os.path.getsize(sys.argv[1])/1e9:.2f}")' "$M") GB; separate output.weight), types mixed by the q4_k_m recipe (Q4_K, Q6_K for output, attn_v and ffn_down in the more-bits layers)"
    echo "- peer: \`llama-bench -m MODEL -p $N_PROMPT -n $N_GEN -t $THREADS -r 1 -o json\` (pp$N_PROMPT, tg$N_GEN); uvllm: \`uvllm generate --model MODEL --prompt P --max-tokens $N_GEN --threads $THREADS --json\`, P = $NTOK tokens (prefill, decode after it) and P = \"hello\" (decode from an empty context, against tg$N_GEN); all in a session of their own at autogroup nice -15 (\`setsid\`, \`/proc/self/autogroup\`) and \`nice -n -15\`, $RUNS rounds interleaved (peer, then uvllm), medians"
    for isa in "${ISAS[@]}"; do
    echo
    python3 - "$BENCH_DIR" "$D/$isa" "$RUNS" "$N_PROMPT" "$N_GEN" "$isa" "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" <<'PY'
import json
import sys
sys.path.insert(0, sys.argv.pop(1))
from peer_runs import median as med, ratio, runs
d, runs_n = sys.argv[1], int(sys.argv[2])
v = runs(d, runs_n)
try:
    got = json.load(open(f"{d}/uvllm-d-1.json")).get("isa", "?")
except (OSError, ValueError):
    got = "?"
print(f"### {sys.argv[5]} ({sys.argv[6]}; uvllm reported isa {got})")
print()
lp, lg, up, ud, udd = v["llama_pp"], v["llama_tg"], v["prefill"], v["decode"], v["decode_after"]
f = lambda x, nd=1: "—" if x is None else f"{x:.{nd}f}"
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
    done
} >"$sec"
results_section engine-qwen "$sec"
cat "$sec"
