#!/usr/bin/env bash
# Engine benchmark (issues 4, 21): prefill and decode tokens/s of uvllm's CPU
# engine vs llama.cpp (llama-bench) on TinyLlama-1.1B-shaped random-weight
# models written by `uvllm synth` (f16) and `uvllm quantize` (q8_0, q4_0):
# 512-token prompt, 128 generated tokens, 2 threads. Runs interleaved
# (llama-bench -r 1, then uvllm generate, per round), medians of $RUNS.
# Plus the machine's read bandwidth (bench/membw.c, 2 threads, 1 GiB, best
# of 5) and decode as a fraction of the bandwidth bound:
# weight bytes read per token x tokens/s / bandwidth.
# Every ISA of bench_isas (lib.sh) gets its rows: the host's best, and on an
# AVX-512 host also AVX2 (uvllm with UVLLM_ISA=avx2 against llama.cpp built for
# AVX2), each ISA's runs interleaved with its peer's.
# Writes the "engine" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@" # a session of its own at autogroup nice -15
bench_dir "engine" keep
TYPES=(${ENGINE_TYPES:-f16 q8_0 q4_0})
THREADS=2
N_PROMPT=512
N_GEN=128
sec="$D/section.md"

cc -O3 -march=native -Wall -Wextra -pthread -o "$D/membw" "$BENCH_DIR/membw.c" || die "cannot compile membw.c"
BW1=$("$D/membw" 2 1024)

header() {
    echo "## Engine: prefill and decode, TinyLlama-1.1B shape (random weights)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit); ISAs: ${ISAS[*]} (uvllm with UVLLM_ISA=ISA, its --json \"isa\" checked; llama.cpp per ISA: $(for i in "${ISAS[@]}"; do printf '%s: %s; ' "$i" "$(llama_build_note "$i")"; done))"
    echo "- models (n_embd 2048, 22 layers, 32 heads, 4 kv heads, n_ff 5632, vocab 32000, bench/work/$MODEL_PREFIX-TYPE.gguf): ${MODELS_SRC:-none}"
    echo "- peer: \`llama-bench -m MODEL -p $N_PROMPT -n $N_GEN -t $THREADS -r 1 -o json\` (pp$N_PROMPT, and tg$N_GEN from an empty context) and \`llama-bench -m MODEL -p 0 -n $N_GEN -d $N_PROMPT ...\` (tg$N_GEN after $N_PROMPT tokens of context); uvllm: \`uvllm generate --model MODEL --prompt P --max-tokens $N_GEN --threads $THREADS --json\` with P = \"hello\" repeated so that the prompt is exactly $N_PROMPT tokens with BOS (prefill, and decode after $N_PROMPT tokens), and the same with P = \"hello\" (2 tokens: decode from an empty context, the issue's decode target); $RUNS rounds, interleaved (peer then uvllm per round); medians of llama-bench's avg_ts and uvllm's prefill_tokens_per_s / decode_tokens_per_s. After round 1, a side that has spent more than ${ENGINE_BUDGET_S:-240} s on one model gets no further runs (run counts below)."
}

if ! ensure_models; then
    { header; echo; echo "**Not measured**: the models cannot be written yet: $MODELS_NOTE."; echo; echo "- memory read bandwidth (membw, 2 threads, 1 GiB, best of 5): $BW1 GB/s"; } >"$sec"
    results_section engine "$sec"; cat "$sec"; exit 0
fi

# A prompt of exactly N_PROMPT tokens (BOS included), checked with a tokenizer.
count_tokens() { # TEXT -> number of ids with BOS, via uvllm tokenize, else llama-tokenize
    if uvllm_has tokenize; then
        "$UVLLM_BIN" tokenize --model "$(model_path f16)" "$1" | wc -w
    else
        "$LLAMA_BIN/llama-tokenize" -m "$(model_path f16)" -p "$1" --ids --log-disable --no-escape 2>/dev/null | tr -d '[],' | wc -w
    fi
}
N_WORDS=$((N_PROMPT - 1))
PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * int(sys.argv[1])), end="")' "$N_WORDS")"
NTOK=$(count_tokens "$PROMPT")
echo "engine: prompt of $N_WORDS words = $NTOK tokens" >&2
[ "$NTOK" = "$N_PROMPT" ] || echo "engine: WARNING: prompt is $NTOK tokens, not $N_PROMPT" >&2
printf '%s' "$PROMPT" >"$D/prompt.txt"

have_gen=0; uvllm_has generate && have_gen=1
ISAS=($(bench_isas))
declare -A LB
for isa in "${ISAS[@]}"; do LB[$isa]="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"; done
# A slow engine must not hold the whole benchmark hostage: after the first
# round, a side whose runs of one model have used more than BUDGET seconds
# gets no more runs (the table says how many runs each median has).
BUDGET="${ENGINE_BUDGET_S:-240}"
declare -A SPENT
rm -f "$D"/llama-*.json "$D"/uvllm-*.json
for ((r = 1; r <= RUNS; r++)); do
  for isa in "${ISAS[@]}"; do
    for t in "${TYPES[@]}"; do
        M="$(model_path "$t")"
        k="$isa-$t"
        if [ "$r" = 1 ] || [ "${SPENT[llama-$k]:-0}" -lt "$BUDGET" ]; then
            t0=$SECONDS
            "${LB[$isa]}/llama-bench" -m "$M" -p "$N_PROMPT" -n "$N_GEN" -t "$THREADS" -r 1 -o json \
                >"$D/llama-$k-$r.json" 2>"$D/llama-$k-$r.err" || echo "engine: llama-bench $k failed" >&2
            # decode with the 512-token prompt already in the cache, as uvllm's first run
            "${LB[$isa]}/llama-bench" -m "$M" -p 0 -n "$N_GEN" -d "$N_PROMPT" -t "$THREADS" -r 1 -o json \
                >"$D/llama-d-$k-$r.json" 2>"$D/llama-d-$k-$r.err" || echo "engine: llama-bench -d $k failed" >&2
            SPENT[llama-$k]=$(( ${SPENT[llama-$k]:-0} + SECONDS - t0 ))
        fi
        if [ "$have_gen" = 1 ] && { [ "$r" = 1 ] || [ "${SPENT[uvllm-$k]:-0}" -lt "$BUDGET" ]; }; then
            t0=$SECONDS
            UVLLM_ISA=$isa "$UVLLM_BIN" generate --model "$M" --prompt "$PROMPT" --max-tokens "$N_GEN" \
                --threads "$THREADS" --json >"$D/uvllm-$k-$r.json" 2>"$D/uvllm-$k-$r.err" ||
                echo "engine: uvllm generate $k failed (see $D/uvllm-$k-$r.err)" >&2
            # decode from an (almost) empty context, as llama-bench's tg128
            UVLLM_ISA=$isa "$UVLLM_BIN" generate --model "$M" --prompt "hello" --max-tokens "$N_GEN" \
                --threads "$THREADS" --json >"$D/uvllm-s-$k-$r.json" 2>"$D/uvllm-s-$k-$r.err" ||
                echo "engine: uvllm generate (short prompt) $k failed" >&2
            SPENT[uvllm-$k]=$(( ${SPENT[uvllm-$k]:-0} + SECONDS - t0 ))
        fi
        echo "engine: round $r $k done (spent llama ${SPENT[llama-$k]}s, uvllm ${SPENT[uvllm-$k]:-0}s, load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
  done
done
BW2=$("$D/membw" 2 1024)
BW=$(printf '%s\n%s\n' "$BW1" "$BW2" | sort -g | tail -1)

{
    header
    echo "- prompt check: $NTOK tokens (with BOS) for $N_WORDS repetitions of \"hello\""
    echo "- memory read bandwidth (bench/membw.c, 2 threads, 1 GiB, best of 5; measured before and after): $BW1 / $BW2 GB/s, bound uses **$BW GB/s**"
    echo
    python3 - "$D" "$RUNS" "$BW" "$have_gen" "$(uvllm_commit)" "$BENCH_DIR/gguf_bytes.py" "$WORK/$MODEL_PREFIX" "${ISAS[*]}" "${TYPES[@]}" <<'PY'
import json, statistics, subprocess, sys
d, runs, bw, have_gen, commit, gb, work = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
isas = sys.argv[8].split()
types = sys.argv[9:]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
def f(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"
rows, notes = [], []
# uvllm / llama.cpp targets: issue 4 on AVX-512, issue 21 on AVX2.
DEC_TARGET = {"avx512": {"q4_0": 1.5, "q8_0": 1.3, "f16": 1.0},
              "avx2": {"q4_0": 1.1, "q8_0": 1.1, "f16": 1.1}}
PRE_TARGET = {"avx512": 1.5, "avx2": 1.3}
def verdict(r, target):
    if r is None or target is None:
        return ""
    return f" (target {target}: {'met' if r >= target else 'MISSED'})"
print("| ISA | model | file GB | decode reads GB/token | llama.cpp pp512 t/s | uvllm prefill t/s | prefill ratio | llama.cpp tg128 t/s | uvllm decode t/s | decode ratio | llama.cpp decode % of bound | uvllm decode % of bound | llama.cpp tg128 @ depth 512 | uvllm decode @ 512 | ratio @ 512 |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for isa, t in [(i, t) for i in isas for t in types]:
    m = f"{work}-{t}.gguf"
    total, dec = map(int, subprocess.check_output([sys.executable, gb, m]).split())
    import os
    size = os.path.getsize(m)
    lp, lg, lgd, up, ud, udd, ntok, ngen, uisa = [], [], [], [], [], [], set(), set(), set()
    k = f"{isa}-{t}"
    for r in range(1, runs + 1):
        for e in load(f"{d}/llama-{k}-{r}.json") or []:
            if e.get("n_prompt") and not e.get("n_gen"): lp.append(e["avg_ts"])
            if e.get("n_gen") and not e.get("n_prompt"): lg.append(e["avg_ts"])
        for e in load(f"{d}/llama-d-{k}-{r}.json") or []:
            if e.get("n_gen") and not e.get("n_prompt"): lgd.append(e["avg_ts"])
        u = load(f"{d}/uvllm-{k}-{r}.json")
        if u:
            up.append(u.get("prefill_tokens_per_s")); udd.append(u.get("decode_tokens_per_s"))
            ntok.add(len(u.get("prompt_tokens", []))); ngen.add(len(u.get("tokens", [])))
            uisa.add(u.get("isa", "?"))
        u = load(f"{d}/uvllm-s-{k}-{r}.json")
        if u:
            ud.append(u.get("decode_tokens_per_s")); uisa.add(u.get("isa", "?"))
    runs_l, runs_u = len(lp), len(up)
    lp, lg, lgd, up, ud, udd = med(lp), med(lg), med(lgd), med(up), med(ud), med(udd)
    frac = lambda tps: None if tps is None else 100 * dec * tps / (bw * 1e9)
    ratio = lambda a, b: None if a is None or b is None or b == 0 else a / b
    if have_gen != "1":
        up_s = ud_s = "not ready"
    else:
        up_s, ud_s = f(up, 1), f(ud, 2)
        if ntok: notes.append(f"uvllm {k}: prompt_tokens {sorted(ntok)}, generated {sorted(ngen)} tokens")
        if uisa != {isa}: notes.append(f"uvllm {k}: WARNING: the runs reported isa {sorted(uisa)}")
    notes.append(f"{k}: medians over {runs_l} llama-bench run(s) and {runs_u} uvllm run(s)")
    print(f"| {isa} | {t} | {size/1e9:.2f} | {dec/1e9:.3f} | {f(lp,1)} | {up_s} | {f(ratio(up, lp))}{verdict(ratio(up, lp), PRE_TARGET.get(isa))} | {f(lg)} | {ud_s} | {f(ratio(ud, lg))}{verdict(ratio(ud, lg), DEC_TARGET.get(isa, {}).get(t))} | {f(frac(lg),0)} | {f(frac(ud),0)} | {f(lgd)} | {f(udd)} | {f(ratio(udd, lgd))} |")
print()
if have_gen != "1":
    print(f"- uvllm side **not ready**: `uvllm generate` is not implemented in the benchmarked binary (repo HEAD {commit}); only the peer was measured.")
for n in notes:
    print(f"- {n}")
PY
} >"$sec"
results_section engine "$sec"
cat "$sec"
# issue 13: the Qwen2.5-1.5B-shaped Q4_K_M row (its own section)
if [ "${ENGINE_QWEN:-0}" = 1 ]; then bash "$BENCH_DIR/engine_qwen.sh"; fi
