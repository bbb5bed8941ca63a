#!/usr/bin/env bash
# gemma3 / phi3 benchmark (issue 13): prefill and decode tokens/s of uvllm's CPU engine vs
# llama.cpp (llama-bench) on random-weight q4_0 models written by `uvllm synth`:
# Gemma-3-1B's shape (n_embd 1152, 26 layers, 4 heads of 256 over 1 KV head, n_ff 6912,
# window 512, GeGLU; $GEMMA3_LAYERS of 26 layers) and Phi-3-mini's (n_embd 3072, 32 heads of
# 96, n_ff 8192, fused qkv and gate|up; $PHI3_LAYERS of 32 layers), both with the
# 32000-token vocabulary of the shared mini model. 128-token prompt, 32 generated tokens, 2 threads, both sides under
# nice -n -15, interleaved (peer then uvllm per round), medians of $RUNS rounds.
# Writes the "arch" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "arch" keep
RUNS="${BENCH_RUNS:-3}"
GEMMA3_LAYERS="${GEMMA3_LAYERS:-26}"
PHI3_LAYERS="${PHI3_LAYERS:-8}"
THREADS=2 N_PROMPT=128 N_GEN=32
need_shared models/mini-f16.gguf
[ -x "$LLAMA_BIN/llama-bench" ] || die "llama-bench missing under $LLAMA_BIN (bench/peer.sh)"
VOCAB="$SHARED/models/mini-f16.gguf"
NICE=(nice -n -15)

declare -A ARGS=([gemma3-1b]="--arch gemma3 --shape gemma3-1b --layers $GEMMA3_LAYERS"
                 [phi3-mini]="--arch phi3 --shape phi3-mini --layers $PHI3_LAYERS")
declare -A FILE=([gemma3-1b]="$D/gemma3-1b-L$GEMMA3_LAYERS-q4_0.gguf"
                 [phi3-mini]="$D/phi3-mini-L$PHI3_LAYERS-q4_0.gguf")
for m in gemma3-1b phi3-mini; do
    f="${FILE[$m]}"
    # shellcheck disable=SC2086
    [ -f "$f" ] || "$UVLLM_BIN" synth ${ARGS[$m]} --type q4_0 --vocab "$VOCAB" "$f" >&2
done

# "hello" repeated: N_PROMPT tokens with BOS
P="hello$(printf ' hello%.0s' $(seq 2 $((N_PROMPT - 1))))"
n=$("$UVLLM_BIN" tokenize --model "${FILE[gemma3-1b]}" "$P" | wc -w)
[ "$n" = "$N_PROMPT" ] || die "prompt is $n tokens, not $N_PROMPT"

sec="$D/section.md"
{
    echo "## gemma3 / phi3: prefill and decode (random weights, q4_0)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit)"
    echo "- models (\`uvllm synth --type q4_0\`, vocabulary of mini-f16.gguf, 32000 tokens): gemma3-1b (Gemma-3-1B shape, $GEMMA3_LAYERS of 26 layers), phi3-mini (Phi-3-mini shape, $PHI3_LAYERS of 32 layers)"
    echo "- peer: \`llama-bench -p $N_PROMPT -n 0\` (pp$N_PROMPT) and \`llama-bench -p 0 -n $N_GEN -d $N_PROMPT\` (tg$N_GEN after $N_PROMPT tokens), \`-t $THREADS -r 1 -o json\`; uvllm: \`uvllm generate --max-tokens $N_GEN --threads $THREADS --json\` on a $N_PROMPT-token prompt; both under \`nice -n -15\`, $RUNS interleaved rounds, medians"
    echo
    echo "| model | llama.cpp pp$N_PROMPT | uvllm prefill | ratio | llama.cpp tg$N_GEN @$N_PROMPT | uvllm decode | ratio |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$sec"
for m in gemma3-1b phi3-mini; do
    f="${FILE[$m]}"
    pp=() tg=() up=() ud=()
    for r in $(seq "$RUNS"); do
        pp+=("$("${NICE[@]}" "$LLAMA_BIN/llama-bench" -m "$f" -p $N_PROMPT -n 0 -t $THREADS -r 1 -o json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')")
        tg+=("$("${NICE[@]}" "$LLAMA_BIN/llama-bench" -m "$f" -p 0 -n $N_GEN -d $N_PROMPT -t $THREADS -r 1 -o json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')")
        j="$("${NICE[@]}" "$UVLLM_BIN" generate --model "$f" --prompt "$P" --max-tokens $N_GEN --threads $THREADS --json 2>/dev/null)"
        up+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["prefill_tokens_per_s"])' "$j")")
        ud+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["decode_tokens_per_s"])' "$j")")
        echo "$m round $r: peer pp ${pp[-1]} tg ${tg[-1]}; uvllm prefill ${up[-1]} decode ${ud[-1]}" >&2
    done
    a=$(median "${pp[@]}") b=$(median "${up[@]}") c=$(median "${tg[@]}") e=$(median "${ud[@]}")
    printf '| %s | %.1f | %.1f | %s | %.2f | %.2f | %s |\n' "$m" "$a" "$b" "$(ratio "$b" "$a")" \
        "$c" "$e" "$(ratio "$e" "$c")" >>"$sec"
done
echo >>"$sec"
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$sec"
results_section arch "$sec"
cat "$sec"
