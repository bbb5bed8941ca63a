#!/usr/bin/env bash
# Speculative decoding (issue 27): single-stream decode with proposals against the same
# binary without, rounds interleaved, medians. Cases (SPEC_CASES):
#   self   TinyLlama-shaped Q4_0 drafting for itself (every proposal right), K=4 every step
#          (`generate --spec-eager --draft-max 4`): the verification step's own cost, and the
#          draft's (which here is the target's: K draft passes per step)
#   ngram  aidreams260K (trained) writing on after its own text (--spec-ngram 3, the
#          planner deciding K): tokens/s and acceptance
#   never  TinyLlama-shaped Q4_0 with mini-q4_0 as its draft (same vocabulary, other random
#          weights: never right), the planner deciding K: what a useless proposer costs
#   peer   `serve` vs llama-server, target TinyLlama-shaped F16 and its own Q4_0 as the draft,
#          draft max 4 on both, one non-streamed request at a time (64 tokens, ignore_eos);
#          random weights: the Q4_0 draft rarely agrees with its F16 target
#   peerself the same with the Q4_0 file as target and draft: every proposal right on both
#          servers, so what is compared is the speculative machinery itself
# Writes the "spec" section of RESULTS.md (SPEC_SECTION=NAME: another, e.g. for a re-run of
# some cases).  BENCH_RUNS=3 SPEC_CASES="self ngram never peer peerself"
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
own_session "$@"
bench_dir "spec"
RUNS="${BENCH_RUNS:-3}"
CASES="${SPEC_CASES:-self ngram never peer peerself}"
TH="${SPEC_THREADS:-2}"
NT="${SPEC_TOKENS:-64}"
ensure_models || die "models: $MODELS_NOTE"
need_shared models/aidreams260K.gguf
need_shared models/mini-q4_0.gguf
Q4="$(model_path q4_0)"; F16="$(model_path f16)"
# aidreams260K's own greedy continuation of "Once upon a time", then the start again: it is
# asked to write on from a text it has seen (an edit of its own text)
STORY="Once upon a time, pixels unfolding like petals. Classifications unfold, a kaleidoscope of prob Once upon a time"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

gen() { # out args...
    local out="$1"; shift
    "${NICE[@]}" "$UVLLM_BIN" generate --threads "$TH" --json "$@" >"$out" 2>"$out.err" ||
        echo "spec: generate failed: $out.err" >&2
}

case_run() { # case variant round
    local c=$1 v=$2 r=$3 o="$D/$1-$2-$3.json"
    case $c-$v in
    self-off) gen "$o" --model "$Q4" --prompt "Once upon a time" --max-tokens "$NT" ;;
    self-on) gen "$o" --model "$Q4" --model-draft "$Q4" --draft-max 4 --spec-eager \
        --prompt "Once upon a time" --max-tokens "$NT" ;;
    ngram-off) gen "$o" --model "$SHARED/models/aidreams260K.gguf" --prompt "$STORY" \
        --max-tokens 48 ;;
    ngram-on) gen "$o" --model "$SHARED/models/aidreams260K.gguf" --prompt "$STORY" \
        --max-tokens 48 --spec-ngram 3 ;;
    never-off) gen "$o" --model "$Q4" --prompt "Once upon a time" --max-tokens "$NT" ;;
    never-on) gen "$o" --model "$Q4" --model-draft "$SHARED/models/mini-q4_0.gguf" \
        --prompt "Once upon a time" --max-tokens "$NT" ;;
    peer-uvllm | peer-llama) peer_run "$v" "$o" "$F16" "$Q4" ;;
    peerself-uvllm | peerself-llama) peer_run "$v" "$o" "$Q4" "$Q4" ;;
    esac
}

# One server, one request after a warm-up; writes {"tok_s":..} (completion tokens / wall).
peer_run() { # uvllm|llama out target draft
    local port pid
    port=$(free_port)
    if [ "$1" = uvllm ]; then
        "${NICE[@]}" "$UVLLM_BIN" serve --model "$3" --model-draft "$4" --draft-max 4 \
            --threads "$TH" --ctx-size 512 --max-seqs 4 --port "$port" --log-level warn \
            2>"$2.err" &
    else
        # -md alone only loads the draft: this llama.cpp drafts with it only when the
        # type is named (its default type is none; the peer's draft_n says it drafted)
        "${NICE[@]}" "$LLAMA_BIN/llama-server" -m "$3" -md "$4" --spec-type draft-simple \
            --spec-draft-n-max 4 -t "$TH" -td "$TH" -c 512 -np 1 --port "$port" \
            2>"$2.err" >/dev/null &
    fi
    pid=$!
    pids+=("$pid")
    wait_http "$port" /health 300 || { echo "spec: $1 server did not start: $2.err" >&2; return; }
    "${NICE[@]}" python3 - "$port" "$NT" >"$2" <<'PY' || echo "spec: $1 client failed" >&2
import json, re, sys, time, urllib.request
port, n = int(sys.argv[1]), int(sys.argv[2])
def get(path):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60).read().decode()
def spec_counts():  # uvllm's proposals and acceptances so far (/metrics); None elsewhere
    try:
        m = get("/metrics")
    except Exception:
        return None
    v = [re.search(r"^uvllm_spec_%s_tokens_total (\S+)" % k, m, re.M) for k in ("proposed", "accepted")]
    return [float(x.group(1)) if x else 0.0 for x in v]
def ask(m):
    body = json.dumps(dict(prompt="Once upon a time", max_tokens=m, temperature=0,
                           ignore_eos=True)).encode()
    t0 = time.monotonic()
    r = json.load(urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"}),
        timeout=900))
    return r, time.monotonic() - t0
ask(4)
c0 = spec_counts()
r, dt = ask(n)
k = r["usage"]["completion_tokens"]
out = dict(tokens=k, seconds=dt, tok_s=k / dt)
t = r.get("timings") or {}
if "draft_n" in t or c0 is None:  # llama-server: its own count for this request
    out.update(spec_proposed=t.get("draft_n", 0), spec_accepted=t.get("draft_n_accepted", 0))
else:
    c1 = spec_counts()
    out.update(spec_proposed=c1[0] - c0[0], spec_accepted=c1[1] - c0[1])
print(json.dumps(out))
PY
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

variants() { case $1 in peer*) echo "llama uvllm" ;; *) echo "off on" ;; esac; }

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= RUNS; r++)); do
    for c in $CASES; do
        for v in $(variants "$c"); do case_run "$c" "$v" "$r"; done
    done
    echo "spec: round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null || true; }
med() { # case variant field
    local v=() f x
    for f in "$D/$1-$2-"[0-9]*.json; do x=$(field "$f" "$3"); [ -n "$x" ] && v+=("$x"); done
    median "${v[@]}"
}
acc() { # case [variant]: accepted of proposed, summed over the rounds
    local p=0 a=0 f x
    for f in "$D/$1-${2:-on}-"[0-9]*.json; do
        x=$(field "$f" spec_proposed); p=$((p + ${x%.*}))
        x=$(field "$f" spec_accepted); a=$((a + ${x%.*}))
    done
    awk -v a="$a" -v p="$p" 'BEGIN{ if (p) printf "%d of %d (%.0f%%)", a, p, 100*a/p; else print "none proposed" }'
}

# self: the decode rate if drafting were free (decode tokens / (decode time - draft time)),
# against the rate without proposals: what the verification step itself costs
verify_only() {
    local v=() f s d
    for f in "$D/self-on-"[0-9]*.json; do
        s=$(field "$f" decode_s); d=$(field "$f" spec_draft_s)
        [ -n "$s" ] && [ -n "$d" ] && v+=("$(awk -v r="$(field "$f" decode_tokens_per_s)" -v s="$s" -v d="$d" 'BEGIN{ printf "%.3f", r * s / (s - d) }')")
    done
    median "${v[@]}"
}

sec="$D/section.md"
{
    echo "## Speculative decoding (single stream, with proposals against without)"
    echo
    echo "- machine: $(machine_line | sed 's/load average at start: .*//')load average at start: $load_start, at end: $(cut -d' ' -f1-3 /proc/loadavg); ISA $(uvllm_isa "${UVLLM_ISA:-}")"
    echo "- uvllm: $(uvllm_commit); llama.cpp: $(peer_commit); $RUNS rounds, the variants of every case interleaved in each; medians; every process at nice ${BENCH_NICE:--15} in a session of its own; $TH threads"
    echo "- models: $MODELS_SRC; aidreams260K and mini-q4_0 from the shared models"
    echo "- self: \`generate --model tinyllama-q4_0 [--model-draft tinyllama-q4_0 --draft-max 4 --spec-eager]\`, $NT tokens; ngram: \`generate --model aidreams260K --prompt STORY [--spec-ngram 3]\` (STORY: its own greedy continuation of "Once upon a time", then "Once upon a time" again), 48 tokens; never: \`generate --model tinyllama-q4_0 [--model-draft mini-q4_0]\`, $NT tokens (decode tokens/s as generate reports it: after the first token)"
    echo "- peer: \`serve --model tinyllama-f16 --model-draft tinyllama-q4_0 --draft-max 4\` against \`llama-server -m tinyllama-f16 -md tinyllama-q4_0 --spec-type draft-simple --spec-draft-n-max 4\` (this llama.cpp drafts only with a type named: with \`-md\` alone it loads the draft and never proposes); one greedy request of $NT tokens (ignore_eos) after a warm-up; tokens / wall time of the request; proposals: llama-server's timings.draft_n / draft_n_accepted, uvllm's /metrics counters, for that request; peerself: the same with tinyllama-q4_0 as target and draft"
    echo
    echo "| case | without (tok/s) | with (tok/s) | ratio | proposals accepted |"
    echo "|---|---|---|---|---|"
    for c in $CASES; do
        if [[ $c == peer* ]]; then
            a=$(med "$c" llama tok_s); b=$(med "$c" uvllm tok_s)
            printf '| %s: llama-server / uvllm serve, both speculative | %.2f | %.2f | %s | llama-server %s; uvllm %s |\n' \
                "$c" "${a:-0}" "${b:-0}" "$(ratio "$b" "$a")" "$(acc "$c" llama)" "$(acc "$c" uvllm)"
        else
            a=$(med "$c" off decode_tokens_per_s); b=$(med "$c" on decode_tokens_per_s)
            printf '| %s | %.2f | %.2f | %s | %s |\n' "$c" "${a:-0}" "${b:-0}" "$(ratio "$b" "$a")" "$(acc "$c")"
        fi
    done
    if [[ " $CASES " == *" self "* ]]; then
        vo=$(verify_only); b=$(med self off decode_tokens_per_s)
        echo
        echo "self, without the draft's time (stats.spec_draft_us taken out of the decode time): $vo tokens/s, $(ratio "$vo" "$b")x the rate without proposals (K=4, every proposal accepted: the verification step's own cost). With the draft's time in, a draft that is the target cannot pass 1x: it costs a target pass per proposal."
    fi
} >"$sec"
cat "$sec"
results_section "${SPEC_SECTION:-spec}" "$sec"
