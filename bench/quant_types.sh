#!/usr/bin/env bash
# Packed K-quant / IQ4 kernels against llama.cpp, type by type (issue 22): one 8-layer
# Qwen2.5-1.5B-shaped file per type (random weights, `uvllm synth --arch qwen2 --shape
# qwen2.5-1.5b --layers 8 --vocab aidreams260K.gguf --type T`: the layers' tensors in T or
# its recipe's mix, a 512-token vocabulary so the embedding and output weigh nothing), and
# prefill / decode of uvllm vs llama-bench on each: 256-token prompt, 64 generated tokens,
# 2 threads, interleaved per round (lib.sh's peer_rounds), medians of $RUNS. The types
# llama.cpp repacks on x86 (IQ4_NL: iq4_nl_8x8) and the ones it does not (Q5_K, IQ4_XS).
# QUANT_TYPES overrides the list. Writes the "quant-types" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
bench_dir "quant-types" keep
THREADS=2
N_PROMPT=256
N_GEN=64
TYPES=(${QUANT_TYPES:-iq4_nl iq4_xs q5_k_m})
sec="$D/section.md"
need_shared models/aidreams260K.gguf

for t in "${TYPES[@]}"; do
    M="$WORK/qwen-8l-sv-$t.gguf"
    [ -s "$M" ] && continue
    "$UVLLM_BIN" synth --arch qwen2 --shape qwen2.5-1.5b --layers 8 --type "$t" \
        --vocab "$SHARED/models/aidreams260K.gguf" "$M.tmp" || die "cannot write $M"
    mv "$M.tmp" "$M"
done
M0="$WORK/qwen-8l-sv-${TYPES[0]}.gguf"
# "hello" repeated to N_PROMPT tokens (the SPM vocabulary adds a BOS)
for k in $((N_PROMPT - 1)) $N_PROMPT $((N_PROMPT + 1)); do
    PROMPT="$(python3 -c 'import sys; print(" ".join(["hello"] * int(sys.argv[1])), end="")' "$k")"
    NTOK=$("$UVLLM_BIN" tokenize --model "$M0" "$PROMPT" | wc -w)
    [ "$NTOK" -ge "$N_PROMPT" ] && break
done
MACHINE="$(machine_line)"
ISAS=($(bench_isas))
for isa in "${ISAS[@]}"; do
    LB="$(llama_bin_for "$isa")" || die "no llama.cpp build for $isa"
    for t in "${TYPES[@]}"; do
        mkdir -p "$D/$isa-$t"
        LLAMA_BIN="${PEER_BIN:-$LB}" UVLLM_ISA="$isa" peer_rounds "quant-types $isa $t" \
            "$D/$isa-$t" "$WORK/qwen-8l-sv-$t.gguf" "$THREADS" "$N_PROMPT" "$N_GEN" "$PROMPT" 4
    done
done
LOAD1="$(cut -d' ' -f1-3 /proc/loadavg)"

{
    echo "## Packed K-quant and IQ4 types against llama.cpp (issue 22), 8-layer Qwen2.5-1.5B shape"
    echo
    echo "- machine: $MACHINE; load average at end: $LOAD1"
    peer_versions_line
    echo "- models: \`uvllm synth --arch qwen2 --shape qwen2.5-1.5b --layers 8 --vocab aidreams260K.gguf --type T\` (random weights, n_embd 1536, n_ff 8960, 512-token vocabulary); uvllm: \`uvllm generate --threads $THREADS --json\`, prefill of $NTOK tokens, decode of $N_GEN from \"hello\"; llama.cpp: \`llama-bench -p $N_PROMPT -n $N_GEN -t $THREADS -r 1\`; $RUNS rounds interleaved, in a session of their own at autogroup nice -15; medians"
    echo
    echo "| ISA | type (tensors) | llama.cpp pp t/s | uvllm pp t/s | pp ratio | llama.cpp tg t/s | uvllm tg t/s | tg ratio |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for isa in "${ISAS[@]}"; do
        for t in "${TYPES[@]}"; do
            mix="$("$UVLLM_BIN" info "$WORK/qwen-8l-sv-$t.gguf" | awk '$1 ~ /^(q[0-9]_k|q[0-9]_[01]|iq4_nl|iq4_xs)$/ {printf "%s%s x%s", sep, $1, $2; sep=", "}')"
            python3 - "$BENCH_DIR" "$D/$isa-$t" "$RUNS" "$isa" "$t" "$mix" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from peer_runs import median as med, ratio, runs
v = runs(sys.argv[2], int(sys.argv[3]))
f = lambda x, n=1: "—" if x is None else f"{x:.{n}f}"
lp, lg, up, ud = (med(v[k]) for k in ("llama_pp", "llama_tg", "prefill", "decode"))
print(f"| {sys.argv[4]} | {sys.argv[5]} ({sys.argv[6]}) | {f(lp)} | {f(up)} | {f(ratio(up, lp), 2)} | "
      f"{f(lg, 2)} | {f(ud, 2)} | {f(ratio(ud, lg), 2)} |")
PY
        done
    done
} >"$sec"
results_section quant-types "$sec"
cat "$sec"
