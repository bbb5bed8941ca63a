#!/usr/bin/env bash
# SSE streaming benchmark (issue 2): N concurrent streaming POST
# /v1/completions against `uvllm serve --backend null --null-delay-us 20000`
# (one token per 20 ms step: 50 events/s per stream when the server keeps up),
# driven by bench/sse_client.c (libuv, one thread). Measures delivered events
# per second, p50/p99 gap between consecutive events of one stream, errors,
# and the server's CPU time. N = 500, 1000, 2000 (SSE_STREAMS to change).
# Target: 2000 streams at 50 events/s each with p99 gap < 100 ms.
# Server pinned to core $CPU_SERVER, client to $CPU_CLIENT.
# Writes the "sse" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_dir "sse"
STREAMS=(${SSE_STREAMS:-500 1000 2000})
MAXTOK="${SSE_MAX_TOKENS:-250}"
DELAY_US=20000
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
CLIENT="$D/sse_client"
cc -O2 -Wall -Wextra -o "$CLIENT" "$BENCH_DIR/sse_client.c" -luv -lm || die "cannot compile sse_client.c (needs libuv1-dev)"

sec="$D/section.md"
SERVER_ARGS=(serve --backend null --null-delay-us "$DELAY_US" --host 127.0.0.1 --log-level warn
             --max-conns 10000 --max-batch-tokens 8192)
header() {
    echo "## SSE: concurrent streams (null backend, 50 events/s per stream)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit)"
    echo "- server: \`taskset -c $CPU_SERVER uvllm ${SERVER_ARGS[*]} --port PORT\`; client: \`taskset -c $CPU_CLIENT bench/work/sse/sse_client --streams N --max-tokens $MAXTOK --ramp 128 --pid SERVER_PID\` (bench/sse_client.c, libuv, HTTP/1.1, one socket per stream, connects ramped 128 at a time); $RUNS runs per N, one server for all runs; medians."
    echo "- server behaviour being measured: steps are double-buffered (step N+1 is submitted before step N's SSE frames are built and written), and when the loop is busy for over 85% of a step cycle each stream is written every k-th step (k <= 4, staggered across streams; src/sched/driver.c pace()), so events can share a write: the gap distribution then mixes ~0 ms gaps with k x 20 ms ones."
    echo "- ideal: N x 50 events/s; \"all-live\" rate counts only the window in which every stream had started and none had finished. Last column: p99 gap < 100 ms, per-stream rate >= 47.5 events/s (95% of 50: each step also costs the loop some time on top of the 20 ms delay) and no errors. Server run-queue wait (schedstat, all threads): time the server was runnable while another process held its core, i.e. the machine's noise."
}

if ! uvllm_has serve; then
    { header; echo; echo "**uvllm side not ready**: \`uvllm serve\` is not implemented in the benchmarked binary (repo HEAD $(uvllm_commit)); nothing measured."; } >"$sec"
    results_section sse "$sec"; cat "$sec"; exit 0
fi

PORT=$(free_port)
taskset -c "$CPU_SERVER" "$UVLLM_BIN" "${SERVER_ARGS[@]}" --port "$PORT" >"$D/server.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
wait_http "$PORT" /health 10 || die "uvllm serve did not answer /health (see $D/server.log)"

declare -A J
for ((r = 1; r <= RUNS; r++)); do
    for n in "${STREAMS[@]}"; do
        kill -0 "$SPID" 2>/dev/null || die "uvllm serve died (see $D/server.log)"
        out="$D/run-$n-$r.json"
        taskset -c "$CPU_CLIENT" "$CLIENT" --port "$PORT" --streams "$n" --max-tokens "$MAXTOK" \
            --ramp 128 --pid "$SPID" --timeout 120 >"$out" 2>"$D/run-$n-$r.err" || true
        echo "sse: run $r N=$n: $(cat "$out")" >&2
        sleep 1 # let the server reap the closed connections before the next run
    done
done

py_summary() {
    python3 - "$D" "$RUNS" "$MAXTOK" "${STREAMS[@]}" <<'PY'
import json, statistics, sys
d, runs, maxtok, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
print("| N streams | ok / N (median) | events/s whole run | events/s all-live (ideal N x 50) | per stream ev/s | gap p50 ms | gap p99 ms (runs) | gap max ms | errors (conn/status/closed/timeout/short), sum | server CPU s (% of wall) | server run-queue wait s | p99 < 100 ms and >= 95% of 50 ev/s |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | --- |")
for n in ns:
    rs = []
    for r in range(1, runs + 1):
        try:
            rs.append(json.load(open(f"{d}/run-{n}-{r}.json")))
        except Exception:
            pass
    if not rs:
        print(f"| {n} | no run produced a result (see bench/work/sse/run-{n}-*.err) |"); continue
    med = lambda k: statistics.median(x[k] for x in rs)
    n_i = int(n)
    ok = med("ok"); allv = med("all_live_events_per_s"); per = allv / n_i
    errs = [sum(x[k] for x in rs) for k in ("err_connect","err_status","err_closed","err_timeout","short_streams")]
    p99s = " ".join(f"{x['gap_p99_ms']:.1f}" for x in rs)
    met = med("gap_p99_ms") < 100 and per >= 0.95 * 50 and sum(errs) == 0
    print(f"| {n} | {ok:.0f} / {n} | {med('events_per_s'):.0f} | {allv:.0f} ({n_i*50}) | {per:.1f} | {med('gap_p50_ms'):.1f} | {med('gap_p99_ms'):.1f} ({p99s}) | {med('gap_max_ms'):.1f} | {'/'.join(map(str,errs))} | {med('server_cpu_s'):.2f} ({med('server_cpu_pct'):.0f}%) | {statistics.median(x.get('server_runq_wait_s', -1) for x in rs):.2f} | {'met' if met else 'MISSED'} |")
PY
}
{ header; echo; py_summary; } >"$sec"
results_section sse "$sec"
cat "$sec"
