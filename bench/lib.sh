# Shared helpers for the bench/*.sh scripts (sourced, not run). They locate
# the binaries, pick free loopback ports, take medians, and replace one
# script's section of bench/RESULTS.md between its BEGIN/END markers so each
# benchmark can be re-run alone without losing the others' numbers.
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
WORK="$BENCH_DIR/work"
RESULTS="$BENCH_DIR/RESULTS.md"
SHARED="${UVLLM_SHARED:-$ROOT/../shared}"
LLAMA_BIN="$WORK/llama.cpp/build/bin"
RUNS="${BENCH_RUNS:-5}"
mkdir -p "$WORK"
# What a bench times runs at this priority (own_session puts the session there too).
NICE=(nice -n "${BENCH_NICE:--15}")

# D: this bench's folder $WORK/NAME, emptied first unless "keep" (models and builds it
# caches survive a re-run).
bench_dir() {
    D="$WORK/$1"
    [ "${2:-}" = keep ] || rm -rf "$D"
    mkdir -p "$D"
}

# The uvllm binary: $UVLLM_BIN, else the Makefile's build/, else build-bench/.
if [ -z "${UVLLM_BIN:-}" ]; then
    for c in "$ROOT/build/uvllm" "$ROOT/build-bench/uvllm"; do
        [ -x "$c" ] && { UVLLM_BIN="$c"; break; }
    done
fi
UVLLM_BIN="${UVLLM_BIN:-$ROOT/build/uvllm}"

die() { echo "bench: $*" >&2; exit 1; }

# The kernel ISA uvllm runs on this host (its best, or what UVLLM_ISA=$1 caps it to), as the
# binary itself reports it.
uvllm_isa() {
    UVLLM_ISA="${1:-}" "$UVLLM_BIN" generate --model "$SHARED/models/aidreams260K.gguf" \
        --prompt x --max-tokens 1 --json 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["isa"])' 2>/dev/null || echo unknown
}
# The ISAs an engine benchmark measures: the host's best, and on an AVX-512 host also avx2
# (uvllm with UVLLM_ISA=avx2 against llama.cpp built for AVX2, bench/peer.sh PEER_ISA=avx2),
# so every machine reports its AVX2 column. BENCH_ISAS overrides (e.g. "avx2").
HOST_ISA=""
bench_isas() {
    [ -n "$HOST_ISA" ] || HOST_ISA="$(uvllm_isa)"
    if [ -n "${BENCH_ISAS:-}" ]; then echo "$BENCH_ISAS"; elif [ "$HOST_ISA" = avx512 ]; then
        echo "avx512 avx2"; else echo "$HOST_ISA"; fi
}
# llama.cpp's bin directory for an ISA of bench_isas: the native build for the host's best,
# build-avx2 (built here on first use) for avx2 on an AVX-512 host.
llama_bin_for() {
    [ -n "$HOST_ISA" ] || HOST_ISA="$(uvllm_isa)"
    if [ "$1" = avx2 ] && [ "$HOST_ISA" = avx512 ]; then
        PEER_ISA=avx2 bash "$BENCH_DIR/peer.sh" >&2 || return 1
        echo "$WORK/llama.cpp/build-avx2/bin"
    else
        echo "$LLAMA_BIN"
    fi
}
# How llama.cpp was built for an ISA (for the section headers).
llama_build_note() {
    if [ "$1" = avx2 ] && [ "${HOST_ISA:-}" = avx512 ]; then
        echo "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON, AVX-512 off"
    else
        echo "-DGGML_NATIVE=ON ($1 host)"
    fi
}
need_shared() { [ -e "$SHARED/$1" ] || die "missing shared file $SHARED/$1 (set UVLLM_SHARED)"; }

# Cores: the server side on CPU_SERVER, the load generator on CPU_CLIENT
# (2 cores: one each, so neither steals the other's core).
CPU_SERVER="${BENCH_CPU_SERVER:-0}"
CPU_CLIENT="${BENCH_CPU_CLIENT:-1}"

# uvllm_has CMD: true when the uvllm binary exists and CMD is implemented
# (the placeholders answer "not available in this build").
uvllm_has() {
    [ -x "$UVLLM_BIN" ] || return 1
    local out
    out="$("$UVLLM_BIN" "$1" --help 2>&1)" || true
    ! grep -q 'not available in this build' <<<"$out"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_http PORT PATH SECONDS: wait until GET answers 200.
wait_http() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        curl -fs -o /dev/null "http://127.0.0.1:$1$2" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# median of the numbers given as arguments (empty when none).
median() {
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2 }'
}

# ratio A B with 2 decimals ("n/a" when either is missing or B is 0).
ratio() {
    awk -v a="${1:-}" -v b="${2:-}" 'BEGIN{ if (a=="" || b=="" || b+0==0) print "n/a"; else printf "%.2f\n", a/b }'
}

machine_line() {
    local model cores
    model="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
    cores="$(nproc)"
    echo "$model, $cores cores, $(free -g | awk '/^Mem:/{print $2}') GiB RAM; $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

peer_commit() {
    local tag
    tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$WORK/npm/node_modules/node-llama-cpp/llama/llama.cpp.info.json" 2>/dev/null)
    git -C "$WORK/llama.cpp" log -1 --format="%H (%cs${tag:+, release tag $tag})" 2>/dev/null || echo "not built"
}

# The versions line of a per-ISA section against llama.cpp (the ISAS array): uvllm's commit,
# llama.cpp's (FORMAT: git's --format for it, %h by default) and its build for each ISA.
peer_versions_line() {
    local peer i notes=""
    peer="$(git -C "$WORK/llama.cpp" log -1 --format="${1:-%h}" 2>/dev/null || peer_commit)"
    for i in "${ISAS[@]}"; do notes+="$i: $(llama_build_note "$i"); "; done
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $peer; ISAs: ${ISAS[*]} (uvllm with UVLLM_ISA=ISA, its --json \"isa\" checked; llama.cpp per ISA: $notes)"
}

# The commit of the benchmarked binary: $UVLLM_BIN_COMMIT (set by
# bench/snapshot.sh users), else HEAD when the script started.
UVLLM_COMMIT_CACHED="${UVLLM_BIN_COMMIT:-$(git -C "$ROOT" log -1 --format='%h' 2>/dev/null)}"
uvllm_commit() { echo "$UVLLM_COMMIT_CACHED"; }

# results_section NAME FILE: replace the text between the NAME markers in
# RESULTS.md with the contents of FILE (appending the section if absent).
results_section() {
    python3 - "$RESULTS" "$1" "$2" <<'PY'
import os, sys
path, name, src = sys.argv[1:4]
body = open(src).read().rstrip("\n") + "\n"
begin, end = f"<!-- BEGIN {name} -->\n", f"<!-- END {name} -->\n"
text = open(path).read() if os.path.exists(path) else "# uvllm benchmark results\n\n"
block = begin + body + end
i, j = text.find(begin), text.find(end)
if i >= 0 and j > i:
    text = text[:i] + block + text[j + len(end):]
elif name == "header":  # right under the title
    title, _, rest = text.partition("\n\n")
    text = title + "\n\n" + block + ("\n" + rest if rest else "")
else:
    text = text.rstrip("\n") + "\n\n" + block
open(path, "w").write(text)
PY
}

# ensure_models: the TinyLlama-shaped random-weight models the engine and
# model-open benchmarks use, bench/work/tinyllama-{f16,q8_0,q4_0}.gguf,
# written by uvllm's own `synth` and `quantize`. While those commands are not
# implemented, falls back to bench/synth_fallback.py + llama.cpp's
# llama-quantize --pure (files tinyllama-fb-*.gguf) and says so in
# MODELS_SRC. Returns 1 (reason in MODELS_NOTE) when neither works.
MODELS_NOTE=""
MODELS_SRC=""
MODEL_PREFIX="tinyllama"
model_path() { echo "$WORK/$MODEL_PREFIX-$1.gguf"; }
ensure_models() {
    local vocab="$SHARED/tokenizer/ggml-vocab-llama-spm.gguf" t
    need_shared tokenizer/ggml-vocab-llama-spm.gguf
    if uvllm_has synth && uvllm_has quantize && [ -z "${BENCH_FALLBACK_MODELS:-}" ]; then
        MODEL_PREFIX="tinyllama"
        MODELS_SRC="written by \`uvllm synth --shape tinyllama --vocab ggml-vocab-llama-spm.gguf OUT --type f16\` and \`uvllm quantize F16 OUT q8_0|q4_0\`"
        if [ ! -s "$(model_path f16)" ]; then
            echo "bench: uvllm synth tinyllama f16" >&2
            "$UVLLM_BIN" synth --shape tinyllama --vocab "$vocab" "$(model_path f16).tmp" --type f16 >&2 ||
                { rm -f "$(model_path f16).tmp"; MODELS_NOTE="\`uvllm synth\` failed"; return 1; }
            mv "$(model_path f16).tmp" "$(model_path f16)"
        fi
        for t in q8_0 q4_0; do
            [ -s "$(model_path $t)" ] && continue
            echo "bench: uvllm quantize $t" >&2
            "$UVLLM_BIN" quantize "$(model_path f16)" "$(model_path $t).tmp" "$t" >&2 ||
                { rm -f "$(model_path $t).tmp"; MODELS_NOTE="\`uvllm quantize ... $t\` failed"; return 1; }
            mv "$(model_path $t).tmp" "$(model_path $t)"
        done
        return 0
    fi
    MODEL_PREFIX="tinyllama-fb"
    MODELS_SRC="FALLBACK (\`uvllm synth\`/\`quantize\` not available in the benchmarked binary, repo HEAD $(uvllm_commit)): f16 written by bench/synth_fallback.py (same shape, std 1/sqrt(fan_in), tiled random block), q8_0/q4_0 by llama.cpp's \`llama-quantize --pure\`"
    if [ ! -s "$(model_path f16)" ]; then
        echo "bench: fallback synth tinyllama f16" >&2
        python3 "$BENCH_DIR/synth_fallback.py" "$vocab" "$(model_path f16).tmp" &&
            mv "$(model_path f16).tmp" "$(model_path f16)" || { MODELS_NOTE="synth_fallback.py failed"; return 1; }
    fi
    if [ ! -x "$LLAMA_BIN/llama-quantize" ]; then
        cmake --build "$WORK/llama.cpp/build" --target llama-quantize -j "${BENCH_JOBS:-2}" >&2 ||
            { MODELS_NOTE="llama-quantize could not be built"; return 1; }
    fi
    for t in q8_0 q4_0; do
        [ -s "$(model_path $t)" ] && continue
        "$LLAMA_BIN/llama-quantize" --pure "$(model_path f16)" "$(model_path $t).tmp" "${t^^}" >/dev/null 2>&1 &&
            mv "$(model_path $t).tmp" "$(model_path $t)" || { MODELS_NOTE="llama-quantize $t failed"; return 1; }
    done
    return 0
}

# runq_wait PID: seconds all of PID's threads have spent runnable but not
# running (schedstat), i.e. waiting for a core another process held. Its
# growth over a run measures how much the shared machine got in the way.
runq_wait() {
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s+=$2} END{printf "%.3f\n", s/1e9}'
}

# own_session ARGS...: re-runs the calling script (with ARGS) in a session of its own whose
# autogroup is at nice $BENCH_NICE (default -15, as root): with sched_autogroup, nice orders
# processes only within a session, so this is what puts the benchmark ahead of other
# sessions' jobs. Call it right after sourcing lib.sh, as `own_session "$@"`.
own_session() {
    if [ -z "${BENCH_SESSION:-}" ] && command -v setsid >/dev/null; then
        BENCH_SESSION=1 exec setsid --wait bash "$0" "$@"
    fi
    echo "${BENCH_NICE:--15}" >/proc/self/autogroup 2>/dev/null || true
}

# peer_rounds TAG DIR MODEL THREADS N_PROMPT N_GEN PROMPT PROMPT_MAX_TOKENS: $RUNS
# interleaved rounds of llama.cpp against uvllm on one model file, each process under
# `nice -n -15`. Round r writes
#   DIR/llama-r.json    llama-bench -p N_PROMPT -n N_GEN -t THREADS -r 1 -o json
#                       (from $LLAMA_BIN; pp N_PROMPT and tg N_GEN)
#   DIR/uvllm-p-r.json  uvllm generate --prompt PROMPT --max-tokens PROMPT_MAX_TOKENS
#                       (prefill; decode after the prompt)
#   DIR/uvllm-d-r.json  uvllm generate --prompt hello --max-tokens N_GEN
#                       (decode from an empty context, against tg N_GEN)
# with each one's stderr next to it (.err); bench/peer_runs.py reads them back. With
# PEER_MEMBW set (a bench/membw.c binary), round r also writes DIR/membw-r.txt: the read
# bandwidth of 2 threads (GB/s) measured right before the decode run.
peer_rounds() {
    local tag="$1" d="$2" m="$3" th="$4" np="$5" ng="$6" prompt="$7" pmax="$8" r
    local nice=(nice -n -15)
    rm -f "$d"/llama-*.json "$d"/uvllm-*.json "$d"/membw-*.txt
    for ((r = 1; r <= RUNS; r++)); do
        "${nice[@]}" "$LLAMA_BIN/llama-bench" -m "$m" -p "$np" -n "$ng" -t "$th" -r 1 -o json \
            >"$d/llama-$r.json" 2>"$d/llama-$r.err" || echo "$tag: llama-bench failed" >&2
        "${nice[@]}" "$UVLLM_BIN" generate --model "$m" --prompt "$prompt" --max-tokens "$pmax" \
            --threads "$th" --json >"$d/uvllm-p-$r.json" 2>"$d/uvllm-p-$r.err" ||
            echo "$tag: uvllm generate (prompt) failed, see $d/uvllm-p-$r.err" >&2
        if [ -n "${PEER_MEMBW:-}" ]; then
            "${nice[@]}" "$PEER_MEMBW" "$th" 1024 >"$d/membw-$r.txt" 2>/dev/null ||
                echo "$tag: membw failed" >&2
        fi
        "${nice[@]}" "$UVLLM_BIN" generate --model "$m" --prompt hello --max-tokens "$ng" \
            --threads "$th" --json >"$d/uvllm-d-$r.json" 2>"$d/uvllm-d-$r.err" ||
            echo "$tag: uvllm generate (decode) failed, see $d/uvllm-d-$r.err" >&2
        echo "$tag: round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    done
}
