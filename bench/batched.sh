#!/usr/bin/env bash
# Batched decode (issue 11): B sequences decoding together, aggregate decode
# tokens/s of `uvllm generate --parallel B` (the scheduler's step path, no
# HTTP) against llama.cpp's `llama-batched-bench` S_TG at the same B, on the
# TinyLlama-1.1B-shaped random-weight models of bench/engine.sh (same GGUF,
# 2 threads). Prompts of $PP tokens, $TG generated tokens per sequence.
# Rounds are interleaved (per round, per B: peer then uvllm); medians of
# $RUNS rounds. The load average is logged next to every run.
# Every ISA of bench_isas (lib.sh): the host's best and, on an AVX-512 host, AVX2
# (UVLLM_ISA=avx2 against llama.cpp built for AVX2), interleaved per round.
# Writes the "batched" section of RESULTS.md.
#   BATCHED_B="1 4 16 64"  BATCHED_TYPES="q4_0"  BATCHED_PP=32  BATCHED_TG=128
#   BATCHED_TIMEOUT=900 (s per run; a run cut short has no number)
#   BATCHED_SECTION=batched (the RESULTS.md section written; work files go under it)
#   BATCHED_REPORT_ONLY=1: no runs, rewrite the section from the files of an earlier
#     (e.g. cut short) run, with BENCH_RUNS = the rounds it completed
#   BATCHED_BASE=/path/to/older/uvllm: also run that binary, interleaved (A/B column)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# With sched_autogroup (the kernel default on most distributions) nice orders processes only
# within one session; sessions share the CPU equally whatever their processes' nice. So the
# benchmark runs in a session of its own whose autogroup gets the same nice (as root).
if [ -z "${BENCH_SESSION:-}" ] && command -v setsid >/dev/null; then
    BENCH_SESSION=1 exec setsid --wait bash "${BASH_SOURCE[0]}" "$@"
fi
echo "${BENCH_NICE:--15}" >/proc/self/autogroup 2>/dev/null || true
SECTION="${BATCHED_SECTION:-batched}"
bench_dir "$SECTION" keep
BS=(${BATCHED_B:-1 4 16 64})
TYPES=(${BATCHED_TYPES:-q4_0})
PP="${BATCHED_PP:-32}"
TG="${BATCHED_TG:-128}"
THREADS=2
TMO="${BATCHED_TIMEOUT:-900}"
BASE="${BATCHED_BASE:-}"
sec="$D/section.md"

ensure_models || die "models: $MODELS_NOTE"
[ -x "$LLAMA_BIN/llama-batched-bench" ] || bash "$BENCH_DIR/peer.sh" >&2 || die "bench/peer.sh failed"
ISAS=($(bench_isas))
declare -A LB
for isa in "${ISAS[@]}"; do LB[$isa]="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"; done
# Both engines run at nice -15 (as root; otherwise at the caller's priority), so other
# work on a shared host takes less of their cores.

# A prompt of exactly PP tokens with BOS ("hello" is one token in the llama vocab).
PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * (int(sys.argv[1]) - 1)), end="")' "$PP")"
NTOK=$("$UVLLM_BIN" tokenize --model "$(model_path "${TYPES[0]}")" "$PROMPT" | wc -w)
[ "$NTOK" = "$PP" ] || echo "batched: WARNING: prompt is $NTOK tokens, not $PP" >&2

load() { cut -d' ' -f1 /proc/loadavg; }
BASE_NOTE="${BATCHED_BASE_NOTE:-older build}"
if [ -z "${BATCHED_REPORT_ONLY:-}" ]; then
    rm -f "$D"/*.json "$D"/*.jsonl "$D"/load-*
    for ((r = 1; r <= RUNS; r++)); do
      for isa in "${ISAS[@]}"; do
        for t in "${TYPES[@]}"; do
            M="$(model_path "$t")"
            for b in "${BS[@]}"; do
                ctx=$((b * (PP + TG) + 16))
                k="$isa-$t-$b-$r"
                echo "$(load)" >"$D/load-llama-$k"
                timeout "$TMO" "${NICE[@]}" "${LB[$isa]}/llama-batched-bench" -m "$M" -c "$ctx" -b 2048 -ub 512 -npp "$PP" \
                    -ntg "$TG" -npl "$b" -t "$THREADS" -tb "$THREADS" --output-format jsonl \
                    >"$D/llama-$k.jsonl" 2>"$D/llama-$k.err" ||
                    echo "batched: llama-batched-bench $isa $t B=$b failed" >&2
                echo "$(load)" >"$D/load-uvllm-$k"
                UVLLM_ISA=$isa timeout "$TMO" "${NICE[@]}" "$UVLLM_BIN" generate --model "$M" --prompt "$PROMPT" --parallel "$b" \
                    --max-tokens "$TG" --threads "$THREADS" --json >"$D/uvllm-$k.json" \
                    2>"$D/uvllm-$k.err" || echo "batched: uvllm generate $isa $t B=$b failed" >&2
                if [ -n "$BASE" ]; then
                    UVLLM_ISA=$isa timeout "$TMO" "${NICE[@]}" "$BASE" generate --model "$M" --prompt "$PROMPT" --parallel "$b" \
                        --max-tokens "$TG" --threads "$THREADS" --json >"$D/base-$k.json" \
                        2>"$D/base-$k.err" || echo "batched: base generate $isa $t B=$b failed" >&2
                fi
                echo "batched: round $r $isa $t B=$b done (load $(load))" >&2
            done
        done
      done
    done
fi

{
    echo "## Batched decode: B sequences together, TinyLlama-1.1B shape (random weights)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit); ISAs: ${ISAS[*]} (uvllm with UVLLM_ISA=ISA; llama.cpp per ISA: $(for i in "${ISAS[@]}"; do printf '%s: %s; ' "$i" "$(llama_build_note "$i")"; done))"
    echo "- models: bench/work/$MODEL_PREFIX-TYPE.gguf, ${MODELS_SRC:-}"
    echo "- peer: \`llama-batched-bench -m MODEL -c B*($PP+$TG)+16 -b 2048 -ub 512 -npp $PP -ntg $TG -npl B -t $THREADS -tb $THREADS --output-format jsonl\` (its default flash-attention setting; S_TG = B*$TG / decode time); uvllm: \`uvllm generate --model MODEL --prompt P --parallel B --max-tokens $TG --threads $THREADS --json\` with P = \"hello\" x $((PP - 1)) ($NTOK tokens with BOS): decode_tokens_per_s = tokens sampled after every sequence has its first one / their time; both decode B x $TG tokens after a $PP-token prompt per sequence."
    [ -n "$BASE" ] && echo "- base: \`$BASE\` ($BASE_NOTE), same command, run right after uvllm in every round."
    echo "- both at \`nice -n ${BENCH_NICE:--15}\`. $RUNS rounds, interleaved (per round and B: peer, then uvllm); medians. Load average (1 min) logged before every run: see the load column (min-max over the runs)."
    echo
    python3 - "$D" "$RUNS" "${TYPES[*]}" "${BS[*]}" "$BASE" "${ISAS[*]}" <<'PY'
import json, statistics, sys
d, runs, types, bs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), [int(x) for x in sys.argv[4].split()]
base = sys.argv[5]
isas = sys.argv[6].split()
# issue 11 on AVX-512, issue 21 on AVX2
TARGETS = {"avx512": {4: 1.3, 16: 1.5}, "avx2": {4: 1.2, 16: 1.3}}
def jl(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
    except Exception:
        return []
def js(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
def med(v):
    return statistics.median(v) if v else None
def f(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"
def ld(kind, isa, t, b):
    v = []
    for r in range(1, runs + 1):
        try:
            v.append(float(open(f"{d}/load-{kind}-{isa}-{t}-{b}-{r}").read()))
        except Exception:
            pass
    return f"{min(v):.1f}–{max(v):.1f}" if v else "—"
bh = " base decode t/s (median) | base runs |" if base else ""
print(f"| ISA | model | B | llama.cpp S_TG t/s (median) | uvllm decode t/s (median) | ratio | target | llama.cpp runs | uvllm runs |{bh} llama.cpp S_PP t/s | uvllm prefill t/s | load (llama / uvllm) |")
print("| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |" + (" ---: | --- |" if base else "") + " ---: | ---: | --- |")
for isa, t, b in [(i, t, b) for i in isas for t in types for b in bs]:
        TARGET = TARGETS.get(isa, {})
        ltg, lpp, utg, upp, btg = [], [], [], [], []
        for r in range(1, runs + 1):
            k = f"{isa}-{t}-{b}-{r}"
            for e in jl(f"{d}/llama-{k}.jsonl"):
                if e.get("pl") == b:
                    ltg.append(e["speed_tg"]); lpp.append(e["speed_pp"])
            u = js(f"{d}/uvllm-{k}.json")
            if u:
                utg.append(u["decode_tokens_per_s"]); upp.append(u["prefill_tokens_per_s"])
            u = js(f"{d}/base-{k}.json") if base else None
            if u:
                btg.append(u["decode_tokens_per_s"])
        a, c = med(ltg), med(utg)
        ratio = c / a if a and c else None
        tg = TARGET.get(b)
        verdict = "" if tg is None or ratio is None else f">= {tg}: {'met' if ratio >= tg else 'MISSED'}"
        bc = f" {f(med(btg))} | {' '.join(f(x) for x in btg)} |" if base else ""
        print(f"| {isa} | {t} | {b} | {f(a)} | {f(c)} | {f(ratio, 2)} | {verdict} | {' '.join(f(x) for x in ltg)} | {' '.join(f(x) for x in utg)} |{bc} {f(med(lpp))} | {f(med(upp))} | {ld('llama', isa, t, b)} / {ld('uvllm', isa, t, b)} |")
PY
} >"$sec"
results_section "$SECTION" "$sec"
cat "$sec"
