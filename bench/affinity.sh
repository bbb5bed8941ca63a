#!/usr/bin/env bash
# Prefix-affinity routing (issue 29): the fleet's prefill tokens for one multi-turn chat
# workload behind nginx, routed by conversation (docker/nginx/nginx.conf as shipped: njs key,
# `hash ... consistent`) and by plain `least_conn`. The workload and fleet are
# tests/deploy/affinity_test.py's: 3 replicas of qwen2-tiny-f16 (--threads 1) on loopback
# behind the host's nginx, 30 conversations x 4 turns sharing a ~500-token system prompt,
# turns in shuffled rounds, 6 requests at a time. Prefill tokens = prompt tokens not served by
# the replica's prefix cache, summed over the fleet (from the replicas' /metrics; the
# responses' usage agrees). Affinity's counts are the same every run (the key decides);
# least_conn's depend on which replica is least busy at each moment, hence medians of $RUNS
# runs. Wall time is shown only as a note: the token counts are the result.
# Writes the "affinity" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "affinity"
need_shared models/qwen2-tiny-f16.gguf
command -v nginx >/dev/null || die "nginx not installed (scripts/deps.sh --deploy)"
RUNS="${AFFINITY_RUNS:-3}"
for ((r = 1; r <= RUNS; r++)); do
    UVLLM_BINARY="$UVLLM_BIN" UVLLM_SHARED="$SHARED" \
        python3 "$ROOT/tests/deploy/affinity_test.py" --json "$D/run-$r.json" >"$D/run-$r.log" 2>&1 ||
        { cat "$D/run-$r.log" >&2; die "run $r failed (see $D/run-$r.log)"; }
    echo "affinity: run $r: $(grep -E '^(affinity|least_conn):' "$D/run-$r.log" | cut -c1-160 | tr '\n' ' ')" >&2
done
sec="$D/section.md"
python3 - "$D" "$RUNS" >"$D/rows.md" <<'PY'
import json, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
res = [json.load(open(f"{d}/run-{r}.json")) for r in range(1, runs + 1)]
def med(mode, key):
    return statistics.median(x[mode][key] for x in res)
for mode, label in (("affinity", "prefix affinity (`hash $uvllm_conversation consistent`)"),
                    ("least_conn", "`least_conn`")):
    print(f"| {label} | {med(mode, 'prompt_tokens'):.0f} | {med(mode, 'prefill_tokens_metrics'):.0f} "
          f"| {[x[mode]['prefill_tokens_metrics'] for x in res]} "
          f"| {med(mode, 'hit_own'):.0f} / {med(mode, 'later_turns'):.0f} "
          f"| {med(mode, 'hit_any'):.0f} / {med(mode, 'later_turns'):.0f} | {med(mode, 'seconds'):.1f} |")
a, b = med("affinity", "prefill_tokens_metrics"), med("least_conn", "prefill_tokens_metrics")
print(f"\n- fleet prefill tokens, least_conn / affinity: **{b / a:.2f}x** "
      f"(affinity computes {100 * (1 - a / b):.0f}% fewer)")
k = [x["kill"] for x in res]
print(f"- a replica SIGKILLed after turn 2 (affinity): {[x['ok'] for x in k]} of 120 answered 200 "
      f"per run; the conversations it held ({[x['moved'] for x in k]}) hit again at turn 4: "
      f"{[x['moved_turn4_hits'] for x in k]}; fleet prefill tokens (from the responses) "
      f"{[x['prefill_tokens'] for x in k]}")
PY
{
    echo "## Prefix-affinity routing: fleet prefill tokens with and without affinity"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); nginx $(nginx -v 2>&1 | sed 's|.*/||') with njs (Debian)"
    echo "- command: \`bench/affinity.sh\` (tests/deploy/affinity_test.py --json): 3 replicas of qwen2-tiny-f16 (\`--threads 1 --kv-mem 64M\`) behind nginx on loopback; 30 conversations x 4 turns, one shared system prompt, first turn $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["affinity"]["first_turn_prompt"])' "$D/run-1.json") prompt tokens; chat completions, \`max_tokens\` 8, temperature 0; turns in shuffled rounds, 6 at a time; fresh replicas per run and mode. $RUNS runs; medians."
    echo
    echo "| routing | prompt tokens sent | fleet prefill tokens (median) | runs | later turns that found their own history cached | later turns with cached_tokens > 0 | wall s (note only) |"
    echo "| --- | ---: | ---: | --- | ---: | ---: | ---: |"
    cat "$D/rows.md"
    echo "- \"own history\": cached_tokens >= the previous turn's prompt tokens - 32. cached_tokens > 0 alone is met by the shared system prompt on any warm replica, so it does not tell the routings apart."
} >"$sec"
results_section affinity "$sec"
cat "$sec"
