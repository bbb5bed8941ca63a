#!/usr/bin/env bash
# Embeddings throughput (issue 26): inputs per second with 16 concurrent clients, each input
# 64 random token ids (the same inputs for both servers: the same work; never cached), on
# /v1/embeddings, against llama-server --embedding on the same GGUF, both servers pinned to
# CPU_SERVER with 1 thread, both able to batch all 16 inputs in one step (1024 tokens), the
# load (bench/embed_load.py) on CPU_CLIENT. Interleaved rounds, medians of $RUNS.
# Target: uvllm >= 1.5x.
# Models (EMBED_MODELS, default the qwen3 pair):
#   qwen3-tiny-f16, qwen3-small  decoder models with last-token pooling, as Qwen3-Embedding
#                                is served (the shared qwen3-tiny-f16 and a bge-base-sized one)
#   bge-small    a synthetic `bert` of bge-small-en-v1.5's shape (384 wide, 12 layers, 12
#                heads, FFN 1536, 30522-token WordPiece vocabulary, 512 positions, F16, CLS
#                pooling), tools/gguf_bert.py
#   nomic-embed  a synthetic `nomic-bert` of nomic-embed-text-v1.5's shape (768 wide, 12
#                layers, 12 heads, SwiGLU FFN 3072, RoPE, 30522 tokens, F16, mean pooling)
# EMBED_ISAS: the ISAs to measure (e.g. "avx512 avx2"): UVLLM_ISA caps uvllm, and llama-server
# is the build for that ISA (bench/lib.sh llama_bin_for: on an AVX-512 host the avx2 rows run
# llama.cpp built without AVX-512, bench/peer.sh PEER_ISA=avx2); default: the host's best.
# EMBED_SECTION: the RESULTS.md section written (default "embed"; the BERT rows: "embed-bert").
# LLAMA_SERVER: one llama-server binary for every row (default: the ISA's build, above).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@" # a session of its own at autogroup nice -15, as the other bench scripts
bench_dir "embed"
need_shared models/qwen3-tiny-f16.gguf
[ -n "${LLAMA_SERVER:-}" ] || [ -x "$LLAMA_BIN/llama-server" ] || bash "$BENCH_DIR/peer.sh" >&2
# seconds of load per round: a round stops sending then and waits for the answers in flight,
# so it spans whole batches; qwen3-small's batch of 16 takes ~10 s here, hence its longer rounds
SECS="${EMBED_SECONDS:-10}" SECS_SMALL="${EMBED_SECONDS_SMALL:-40}"
SECTION="${EMBED_SECTION:-embed}"
CLIENTS=16 TOKENS=64
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# model_file NAME: a shared model, or a synthetic one written once into bench/work:
# "qwen3-small": uvllm synth's GPT-2-small-sized shape (768 wide, 12 layers) as qwen3 with
# qwen3-tiny's 50257-token vocabulary, f16: the size of the common embedders (bge-base,
# gte-base), whose layers outweigh the vocabulary projection, where qwen3-tiny is mostly
# vocabulary; "bge-small", "nomic-embed": tools/gguf_bert.py (see the top).
model_file() {
    local f="$WORK/embed-$1-f16.gguf"
    case "$1" in
    qwen3-small)
        [ -s "$f" ] || "$UVLLM_BIN" synth --shape small --arch qwen3 --type f16 --seed 7 \
            --vocab "$SHARED/models/qwen3-tiny-f16.gguf" "$f" >&2 ;;
    bge-small)
        [ -s "$f" ] || { python3 "$ROOT/tools/gguf_bert.py" "$f.tmp" --seed 7 --pooling cls \
            --embd 384 --layers 12 --heads 12 --ff 1536 --ctx 512 --vocab 30522 >&2 &&
            mv "$f.tmp" "$f"; } ;;
    nomic-embed)
        [ -s "$f" ] || { python3 "$ROOT/tools/gguf_bert.py" "$f.tmp" --arch nomic-bert --seed 7 \
            --pooling mean --embd 768 --layers 12 --heads 12 --ff 3072 --ctx 2048 \
            --vocab 30522 >&2 && mv "$f.tmp" "$f"; } ;;
    *) f="$SHARED/models/$1.gguf" ;;
    esac
    echo "$f"
}
# pooling NAME: the model's own (bge: CLS, nomic-embed: mean, Qwen3-Embedding: last)
pooling() { case "$1" in bge-small) echo cls ;; nomic-embed) echo mean ;; *) echo last ;; esac; }
# seconds NAME: a round's load; a round stops sending then and waits for the answers in
# flight, so it spans whole batches: qwen3-small's batch of 16 takes ~10 s here, nomic-embed's
# a few, hence their longer rounds
seconds() { case "$1" in qwen3-small | nomic-embed) echo "$SECS_SMALL" ;; *) echo "$SECS" ;; esac; }

# cpu_ticks PID: the process's user + system CPU time, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

rows=()
declare -A COS=()
HOST_ISA="$(uvllm_isa)" # llama_bin_for and llama_build_note read it (set here: they run in $(...))
ISAS="${EMBED_ISAS:-$HOST_ISA}"
declare -A LS=() # the llama-server of each ISA
for isa in $ISAS; do
    LS[$isa]="${LLAMA_SERVER:-$(llama_bin_for "$isa")/llama-server}" || die "no llama.cpp build for $isa"
    [ -x "${LS[$isa]}" ] || die "no llama-server for $isa (${LS[$isa]})"
done
# the peer build named in the header, per ISA
peer_note() { if [ -n "${LLAMA_SERVER:-}" ]; then echo "LLAMA_SERVER=$LLAMA_SERVER"; else llama_build_note "$1"; fi; }
for name in ${EMBED_MODELS:-qwen3-tiny-f16 qwen3-small}; do
  for isa in $ISAS; do
    MODEL=$(model_file "$name") pool=$(pooling "$name") secs=$(seconds "$name")
    ctx=2048; [ "$name" = bge-small ] && ctx=512 # uvllm refuses more than the 512 positions
    pu=$(free_port)
    UVLLM_ISA="$isa" taskset -c "$CPU_SERVER" "$UVLLM_BIN" serve --model "$MODEL" --model-alias m \
        --threads 1 --pooling "$pool" --ctx-size "$ctx" --max-batch-tokens 1024 --host 127.0.0.1 \
        --port "$pu" --log-level warn >"$D/uvllm-$name-$isa.log" 2>&1 &
    pids+=($!)
    pl=$(free_port)
    taskset -c "$CPU_SERVER" "${LS[$isa]}" -m "$MODEL" --embedding --pooling "$pool" -t 1 -tb 1 \
        -c 2048 -np "$CLIENTS" -b 1024 -ub 1024 --host 127.0.0.1 --port "$pl" \
        >"$D/llama-$name-$isa.log" 2>&1 &
    pids+=($!)
    wait_http "$pu" /health 30 || die "uvllm did not start (see $D/uvllm-$name-$isa.log)"
    wait_http "$pl" /health 60 || die "llama-server did not start (see $D/llama-$name-$isa.log)"
    # the same model on both sides: the worst cosine of a few inputs' vectors (the goldens'
    # bound, tests/unit/cpu/test_embed_golden.c)
    cos=$(python3 "$BENCH_DIR/embed_cos.py" "$pu" "$pl" --tokens $TOKENS)
    python3 -c 'import json,sys; sys.exit(json.loads(sys.argv[1])["worst_cos"] < 0.9999)' "$cos" ||
        die "$name $isa: the two servers' embeddings differ ($cos)"
    echo "embed: $name $isa: $cos" >&2
    COS[$name-$isa]=$(python3 -c 'import json,sys; print("%.7f" % json.loads(sys.argv[1])["worst_cos"])' "$cos")
    declare -A R=() C=()
    for ((r = 1; r <= RUNS; r++)); do
        for who in uvllm llama; do
            port=$pu; [ $who = llama ] && port=$pl
            pid=${pids[-2]}; [ $who = llama ] && pid=${pids[-1]}
            c0=$(cpu_ticks "$pid")
            out=$(taskset -c "$CPU_CLIENT" python3 "$BENCH_DIR/embed_load.py" --port "$port" \
                --clients $CLIENTS --tokens $TOKENS --seconds "$secs")
            c1=$(cpu_ticks "$pid")
            errs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["errors"])' "$out")
            [ "$errs" = 0 ] || die "$name $who round $r: $errs errors ($out)"
            v=$(python3 -c 'import json,sys; print("%.2f" % json.loads(sys.argv[1])["inputs_s"])' "$out")
            R[$who]="${R[$who]:-} $v"
            C[$who]="${C[$who]:-} $(python3 -c 'import json,sys,os; print("%.2f" % (json.loads(sys.argv[1])["n"] / ((int(sys.argv[3]) - int(sys.argv[2])) / os.sysconf("SC_CLK_TCK"))))' "$out" "$c0" "$c1")"
            echo "embed: $name $isa round $r $who: $v inputs/s" >&2
        done
    done
    kill "${pids[-1]}" "${pids[-2]}"; wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
    # shellcheck disable=SC2086
    mu=$(median ${R[uvllm]}); ml=$(median ${R[llama]})
    cu=$(median ${C[uvllm]}); cl=$(median ${C[llama]})
    rows+=("| $name | $pool | $isa | ${COS[$name-$isa]} | $mu | ${R[uvllm]# } | $ml | ${R[llama]# } | **$(ratio "$mu" "$ml")** | $cu | $cl | $(ratio "$cu" "$cl") |")
    unset R C
  done
done

sec="$D/section.md"
{
    echo "## Embeddings: /v1/embeddings inputs/s, 16 clients, 64-token inputs, vs llama-server --embedding"
    echo
    echo "- machine: $(machine_line); ISAs: $ISAS (uvllm with \`UVLLM_ISA\`, llama-server built for the same ISA)"
    echo "- uvllm: $(uvllm_commit); llama.cpp: $(git -C "$WORK/llama.cpp" log -1 --format='%h (%cs)' 2>/dev/null || echo unknown); llama.cpp per ISA: $(for i in $ISAS; do printf '%s: %s; ' "$i" "$(peer_note "$i")"; done)"
    echo "- models: ${EMBED_MODELS:-qwen3-tiny-f16 qwen3-small} (see the script), each with its own pooling on both servers (\`--pooling\`); each input 64 random token ids (the same sequence of inputs for both); both servers pinned with \`taskset -c $CPU_SERVER\`, 1 thread, steps of up to 1024 tokens (uvllm \`--max-batch-tokens 1024 --ctx-size 2048\`, bge-small 512, its positions; llama-server \`-np 16 -c 2048 -b 1024 -ub 1024\`); load: \`bench/embed_load.py --clients 16 --tokens 64 --seconds S\` on CPU $CPU_CLIENT (S: $SECS_SMALL for qwen3-small and nomic-embed, $SECS for the others; the answers in flight at S are waited for and counted). $RUNS rounds, interleaved; median."
    echo
    echo "| model | pooling | ISA | worst cos | uvllm inputs/s (median) | uvllm rounds | llama-server inputs/s (median) | llama-server rounds | ratio | uvllm inputs per CPU s | llama-server inputs per CPU s | ratio per CPU s |"
    echo "| --- | --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "- inputs per CPU s: the same rounds' inputs over the server process's CPU time (utime + stime, /proc/PID/stat): what a server gets done per second of its one core, which other sessions' load on a shared host moves much less than the wall-clock rate (medians)."
    echo "- worst cos: the lowest cosine between the two servers' vectors for 4 of the inputs (bench/embed_cos.py), checked >= 0.9999 before the rounds: both serve the same model."
    echo "- target: ratio uvllm / llama-server >= 1.5. For the qwen3 models, llama-server computes the vocabulary projection (logits) of every token of an embedding input of a decoder model as well; uvllm computes only the pooled hidden state. On qwen3-tiny (128 wide, 50257-token vocabulary) that projection is most of the work, on qwen3-small much less of it."
} >"$sec"
results_section "$SECTION" "$sec"
cat "$sec"
