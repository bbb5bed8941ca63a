#!/usr/bin/env bash
# Chat overhead (issue 9): the same prompts sent to /v1/chat/completions (validated,
# rendered by the Qwen2.5 chat template, tokenized with the plain mask, output through the
# chat parser) and to /v1/completions pre-rendered (the text /apply-template returns), by
# wrk with bench/wrk/post.lua, non-streaming, 16 tokens each. Two backends: null (no
# compute: the serving layer's own cost, the strictest case), and the cpu backend on
# aidreams260K (260K parameters) and mini-q4_0 (2 layers, 32000-token vocabulary).
# Interleaved runs, medians of $RUNS. Target: chat >= 0.95x completions.
# Writes the "chat" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "chat"
need_shared models/aidreams260K.gguf
command -v wrk >/dev/null || die "wrk not installed (scripts/deps.sh --bench)"
TMPL="$SHARED/chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
DUR="${CHAT_DURATION:-5}"
WRK_ARGS=(-t1 -c16 -d"${DUR}"s)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

chat_body='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me about a dream I had last night, about the sea."}],"max_tokens":16,"temperature":0}'
declare -A RPS
rows=()
for backend in null ${CHAT_MODELS:-aidreams260K mini-q4_0}; do
    port=$(free_port)
    args=(serve --host 127.0.0.1 --port "$port" --log-level warn --chat-template "$TMPL")
    if [ "$backend" != null ]; then args+=(--model "$SHARED/models/$backend.gguf" --threads 1); else args+=(--backend null); fi
    taskset -c "$CPU_SERVER" "$UVLLM_BIN" "${args[@]}" >"$D/$backend.log" 2>&1 &
    pids+=($!)
    wait_http "$port" /health 20 || die "server ($backend) did not start (see $D/$backend.log)"
    echo "$chat_body" >"$D/chat.json"
    prompt=$(curl -fs "http://127.0.0.1:$port/apply-template" -d @"$D/chat.json")
    python3 -c 'import json,sys; p=json.loads(sys.argv[1])["prompt"]; print(json.dumps({"prompt":p,"max_tokens":16,"temperature":0}))' "$prompt" >"$D/completion.json"
    # the two must be the same work: same prompt tokens, same output tokens
    u1=$(curl -fs "http://127.0.0.1:$port/v1/chat/completions" -d @"$D/chat.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"])')
    u2=$(curl -fs "http://127.0.0.1:$port/v1/completions" -d @"$D/completion.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["usage"])')
    echo "chat: $backend usage chat $u1 / completions $u2" >&2
    for ((r = 1; r <= RUNS; r++)); do
        for kind in chat completion; do
            path=/v1/completions; [ $kind = chat ] && path=/v1/chat/completions
            out="$D/wrk-$backend-$kind-$r.txt"
            WRK_BODY="$D/$kind.json" taskset -c "$CPU_CLIENT" wrk "${WRK_ARGS[@]}" -s "$BENCH_DIR/wrk/post.lua" "http://127.0.0.1:$port$path" >"$out" 2>&1 || true
            rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
            bad=$(awk '/Non-2xx or 3xx responses:/{s+=$NF} END{print s+0}' "$out")
            [ "$bad" = 0 ] || die "$backend $kind run $r: $bad non-2xx answers (see $out)"
            RPS[$backend-$kind]="${RPS[$backend-$kind]:-} $rps"
            echo "chat: $backend run $r $kind: $rps req/s" >&2
        done
    done
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    # shellcheck disable=SC2086
    mc=$(median ${RPS[$backend-chat]}); mp=$(median ${RPS[$backend-completion]})
    rows+=("| $backend | $mc | ${RPS[$backend-chat]# } | $mp | ${RPS[$backend-completion]# } | **$(ratio "$mc" "$mp")** | $u1 |")
done

sec="$D/section.md"
{
    echo "## Chat overhead: /v1/chat/completions vs the same prompt pre-rendered to /v1/completions"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit)"
    echo "- command: \`WRK_BODY=F taskset -c $CPU_CLIENT wrk ${WRK_ARGS[*]} -s bench/wrk/post.lua URL\`, server pinned with \`taskset -c $CPU_SERVER\`, \`--chat-template Qwen-Qwen2.5-7B-Instruct.jinja\`; chat body: system + user message, \`max_tokens\` 16, temperature 0, not streamed; completions body: the prompt \`/apply-template\` rendered for it. $RUNS runs each, interleaved; median."
    echo
    echo "| backend / model | chat req/s (median) | chat runs | completions req/s (median) | completions runs | ratio chat / completions | usage per request |"
    echo "| --- | ---: | --- | ---: | --- | ---: | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "- target: ratio >= 0.95 (chat costs at most 5% of the throughput)."
} >"$sec"
results_section chat "$sec"
cat "$sec"
