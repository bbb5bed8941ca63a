#!/usr/bin/env bash
# The timing tests, RUNS times each, on a host loaded by two busy-looping processes
# (`yes > /dev/null`), as issue 24 asks them to pass: make test-timing-load
# (BUILD=build-tsan for the ThreadSanitizer build). Prints one line per test with its pass
# count and exits non-zero if any run failed. Not part of `make test`: minutes long.
#
#   tests/timing/under_load.sh BUILD_DIR [RUNS] [LOADERS] [NAME_REGEX]
set -uo pipefail
set -f # the criterion filters (budget/*) are not file globs
cd "$(dirname "$0")/../.."
B=${1:?usage: under_load.sh BUILD_DIR [RUNS] [LOADERS]}
RUNS=${2:-20}
LOADERS=${3:-2}
ONLY=${4:-.}
export UVLLM_BIN=$PWD/$B/uvllm UVLLM_SOURCE_DIR=$PWD
case "$B" in *tsan*) export TSAN_OPTIONS=halt_on_error=1:exitcode=66 ;; esac
PIDS=()
stop_load() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_load EXIT INT TERM
for _ in $(seq 1 "$LOADERS"); do
    yes >/dev/null &
    PIDS+=($!)
done

# name, command (run from the source tree)
TESTS=(
    "unit budget|$B/unit_sched --jobs 1 --filter budget/*"
    "unit admit|$B/unit_sched --jobs 1 --filter admit/*"
    "unit overlap|$B/unit_sched --jobs 1 --filter overlap/*"
    "unit pace|$B/unit_api --jobs 1 --filter pace/*"
    "429 retry-after|python3 tests/integration/test_load.py overloaded_429_retry_after_is_honest_and_the_retry_is_served"
    "deadline|python3 tests/integration/test_load.py deadline_ends_with_finish_reason_deadline"
    "paused reader|python3 tests/integration/test_load.py a_paused_reader_does_not_slow_the_others"
    "stall timeout|python3 tests/integration/test_load.py a_stalled_reader_is_dropped_after_the_stall_timeout"
    "http slowloris|python3 tests/integration/test_http.py slowloris_does_not_delay_normal_requests"
    "sigterm grace|python3 tests/integration/test_streams.py sigterm_cuts_streams_after_the_grace_period"
)
LOG=$(mktemp /tmp/under_load.XXXXXX)
fail=0
for t in "${TESTS[@]}"; do
    name=${t%%|*} cmd=${t#*|} ok=0
    [[ $name =~ $ONLY ]] || continue
    for i in $(seq 1 "$RUNS"); do
        if $cmd >>"$LOG" 2>&1; then ok=$((ok + 1)); else echo "  $name: run $i failed (log $LOG)"; fi
    done
    printf '%-16s %d/%d passed (%s, %d loaders, load %s)\n' "$name" "$ok" "$RUNS" "$B" \
        "$LOADERS" "$(cut -d' ' -f1-3 /proc/loadavg)"
    [ "$ok" -eq "$RUNS" ] || fail=1
done
[ "$fail" -eq 0 ] && rm -f "$LOG"
exit "$fail"
