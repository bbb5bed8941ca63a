#!/usr/bin/env bash
# Attention's share of a long prefill (issue 21): a 2047-token prompt (the TinyLlama shape's
# 2048-token context less the one generated token) through `uvllm generate` on the Q4_0
# model of bench/engine.sh, with UVLLM_PROFILE=1, which logs the wall time of the steps and
# of their attention phases (thread 0, barrier to barrier: forward.c). For every ISA of
# bench_isas, with the tiled attention path (the default for sequences of 64+ tokens in a
# step) and without it (UVLLM_ATTN_TILED=0: every token on the per-token path), and
# llama.cpp's pp2048 on the same file in the same rounds for scale. Medians of $RUNS rounds
# (default 3), interleaved. Writes the "attention-share" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
RUNS="${BENCH_RUNS:-3}"
bench_dir "attn_share" keep
TYPE="${ATTN_TYPE:-q4_0}"
N=2047
THREADS=2
ensure_models || die "models: $MODELS_NOTE"
[ -x "$LLAMA_BIN/llama-bench" ] || bash "$BENCH_DIR/peer.sh" >&2 || die "bench/peer.sh failed"
M="$(model_path "$TYPE")"
ISAS=($(bench_isas))
declare -A LB
for isa in "${ISAS[@]}"; do LB[$isa]="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"; done
PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * (int(sys.argv[1]) - 1)), end="")' "$N")"
NTOK=$("$UVLLM_BIN" tokenize --model "$M" "$PROMPT" | wc -w)
[ "$NTOK" = "$N" ] || echo "attn_share: WARNING: prompt is $NTOK tokens, not $N" >&2

rm -f "$D"/*.json "$D"/*.err
for ((r = 1; r <= RUNS; r++)); do
    for isa in "${ISAS[@]}"; do
        nice -n -15 "${LB[$isa]}/llama-bench" -m "$M" -p $((N + 1)) -n 0 -t "$THREADS" -r 1 -o json \
            >"$D/llama-$isa-$r.json" 2>"$D/llama-$isa-$r.err" || echo "attn_share: llama-bench failed" >&2
        for tiled in 1 0; do
            UVLLM_ISA=$isa UVLLM_PROFILE=1 UVLLM_ATTN_TILED=$tiled nice -n -15 "$UVLLM_BIN" generate \
                --model "$M" --prompt "$PROMPT" --max-tokens 1 --threads "$THREADS" --json --verbose \
                >"$D/uvllm-$isa-$tiled-$r.json" 2>"$D/uvllm-$isa-$tiled-$r.err" ||
                echo "attn_share: uvllm $isa tiled=$tiled failed" >&2
        done
        echo "attn_share: round $r $isa done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
done

sec="$D/section.md"
{
    echo "## Attention's share of a 2047-token prefill, TinyLlama-1.1B shape $TYPE"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit); ISAs: ${ISAS[*]}"
    echo "- command: \`UVLLM_ISA=ISA UVLLM_PROFILE=1 [UVLLM_ATTN_TILED=0] uvllm generate --model $(basename "$M") --prompt P --max-tokens 1 --threads $THREADS --json --verbose\`, P = \"hello\" x $((N - 1)) ($NTOK tokens with BOS; the prompt goes in steps of max_batch_tokens, 512); the profile line gives the wall time of all steps and of their attention phases (from the barrier before to the barrier after, thread 0). Peer: \`llama-bench -m MODEL -p $((N + 1)) -n 0 -t $THREADS -r 1\` in the same rounds. Medians of $RUNS rounds, all at nice -15."
    echo
    python3 - "$D" "$RUNS" "${ISAS[*]}" <<'PY'
import json, re, statistics, sys
d, runs, isas = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def med(v):
    return statistics.median(v) if v else None
def f(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"
print("| ISA | attention path | uvllm prefill t/s | attention s | step s | attention share | llama.cpp pp2048 t/s | runs |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for isa in isas:
    lp = []
    for r in range(1, runs + 1):
        try:
            lp += [e["avg_ts"] for e in json.load(open(f"{d}/llama-{isa}-{r}.json")) if e.get("n_prompt")]
        except Exception:
            pass
    for tiled, name in ((1, "tiled from 64 tokens (default)"), (0, "per token (UVLLM_ATTN_TILED=0)")):
        tps, att, tot, share = [], [], [], []
        for r in range(1, runs + 1):
            try:
                u = json.load(open(f"{d}/uvllm-{isa}-{tiled}-{r}.json"))
                m = re.search(r"attention ([0-9.]+) s of ([0-9.]+) s step time",
                              open(f"{d}/uvllm-{isa}-{tiled}-{r}.err").read())
            except Exception:
                continue
            if not m or u.get("isa") != isa:
                continue
            tps.append(u["prefill_tokens_per_s"])
            a, t = float(m.group(1)), float(m.group(2))
            att.append(a); tot.append(t); share.append(100 * a / t)
        print(f"| {isa} | {name} | {f(med(tps))} | {f(med(att), 2)} | {f(med(tot), 2)} | {f(med(share))}% | {f(med(lp)) if tiled else ''} | {len(tps)} |")
PY
} >"$sec"
results_section attention-share "$sec"
cat "$sec"
