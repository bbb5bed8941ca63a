#!/usr/bin/env bash
# Decode speed next to the memory bandwidth the shared host gives at that
# moment (issue 4). The host's other tenants move the read bandwidth two
# threads get from one minute to the next, and a dense decode reads every
# weight once per token, so a decode ratio measured at one moment says
# little alone. Each round measures, back to back:
# the read bandwidth (bench/membw.c, 2 threads, 1 GiB, best of 5), then
# llama-bench tg$N_GEN, then `uvllm generate` of $N_GEN tokens from a
# 2-token prompt, on the same TinyLlama-shaped file; the table shows every
# round, and the summary the median ratio in the rounds with the lower and
# the higher half of the bandwidth readings.
# Usage: bash bench/decode_bw.sh   (DECODE_BW_TYPES="q4_0 q8_0", BENCH_RUNS=8)
# Writes the "decode-bw" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "decode_bw" keep
TYPES=(${DECODE_BW_TYPES:-q4_0})
ROUNDS="${BENCH_RUNS:-8}"
THREADS=2
N_GEN=64
sec="$D/section.md"

[ -x "$LLAMA_BIN/llama-bench" ] || die "llama-bench not built (bash bench/peer.sh)"
uvllm_has generate || die "uvllm generate not available in $UVLLM_BIN"
ensure_models || die "models: $MODELS_NOTE"
cc -O3 -march=native -Wall -Wextra -pthread -o "$D/membw" "$BENCH_DIR/membw.c" || die "cannot compile membw.c"

rows="$D/rows.tsv"; : >"$rows"
for ((r = 1; r <= ROUNDS; r++)); do
    for t in "${TYPES[@]}"; do
        M="$(model_path "$t")"
        bw=$("$D/membw" 2 1024 2>/dev/null)
        lt=$("$LLAMA_BIN/llama-bench" -m "$M" -p 0 -n "$N_GEN" -t "$THREADS" -r 1 -o json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])' || echo "")
        ut=$("$UVLLM_BIN" generate --model "$M" --prompt hello --max-tokens "$N_GEN" --threads "$THREADS" \
            --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["decode_tokens_per_s"])' || echo "")
        printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$bw" "$lt" "$ut" >>"$rows"
        echo "decode_bw: round $r $t: $bw GB/s, llama.cpp $lt t/s, uvllm $ut t/s" >&2
    done
done

{
    echo "## Decode against the host's momentary memory bandwidth (TinyLlama shape)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit)"
    echo "- command: \`bash bench/decode_bw.sh\`; per round, back to back: \`membw 2 1024\` (bench/membw.c), \`llama-bench -m MODEL -p 0 -n $N_GEN -t $THREADS -r 1\`, \`uvllm generate --model MODEL --prompt hello --max-tokens $N_GEN --threads $THREADS --json\`; $ROUNDS rounds"
    echo
    python3 - "$rows" "$BENCH_DIR/gguf_bytes.py" "$WORK/$MODEL_PREFIX" <<'PY'
import statistics, subprocess, sys
rows_path, gb, work = sys.argv[1:4]
rows = [l.rstrip("\n").split("\t") for l in open(rows_path) if l.strip()]
print("| round | model | read GB/s | llama.cpp t/s | uvllm t/s | ratio | llama.cpp % of bound | uvllm % of bound |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
by_type = {}
for r, t, bw, lt, ut in rows:
    dec = by_type.setdefault(t, {"bytes": int(subprocess.check_output([sys.executable, gb, f"{work}-{t}.gguf"]).split()[1]), "rows": []})
    try:
        bw, lt, ut = float(bw), float(lt), float(ut)
    except ValueError:
        print(f"| {r} | {t} | {bw} | {lt or '—'} | {ut or '—'} | — | — | — |")
        continue
    b = dec["bytes"]
    dec["rows"].append((bw, lt, ut))
    print(f"| {r} | {t} | {bw:.1f} | {lt:.1f} | {ut:.1f} | {ut/lt:.2f} | {100*b*lt/(bw*1e9):.0f} | {100*b*ut/(bw*1e9):.0f} |")
print()
for t, d in by_type.items():
    rs = sorted(d["rows"])
    if len(rs) < 2:
        continue
    h = len(rs) // 2
    for name, part in (("lower", rs[:h]), ("higher", rs[h:])):
        bws = [x[0] for x in part]
        print(f"- {t}, the {len(part)} rounds with the {name} bandwidth ({min(bws):.1f}–{max(bws):.1f} GB/s): "
              f"median llama.cpp {statistics.median(x[1] for x in part):.1f} t/s, uvllm {statistics.median(x[2] for x in part):.1f} t/s, "
              f"median ratio **{statistics.median(x[2]/x[1] for x in part):.2f}**")
    print(f"- {t}: decode reads {d['bytes']/1e9:.3f} GB per token (bench/gguf_bytes.py)")
PY
} >"$sec"
results_section decode-bw "$sec"
cat "$sec"
