#!/usr/bin/env bash
# Runs every libFuzzer harness found in BUILD_DIR (fuzz_*) for a bounded time, starting
# from its own seed corpus of make_seeds.sh (fuzz_NAME: seeds/NAME); fails on any finding (crash, sanitizer report,
# leak, timeout, out-of-memory). The time budget FUZZ_SECONDS (default 60) is shared by
# all harnesses. Findings are kept in $FUZZ_ARTIFACTS (default BUILD_DIR/fuzz-artifacts).
# usage: run.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: run.sh BUILD_DIR}
total=${FUZZ_SECONDS:-60}
here=$(cd "$(dirname "$0")" && pwd)
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
work=$(mktemp -d /tmp/uvllm-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

harnesses=()
for h in "$build"/fuzz_*; do
    [ -x "$h" ] && [ -f "$h" ] && harnesses+=("$h")
done
if [ ${#harnesses[@]} -eq 0 ]; then
    echo "run.sh: no fuzz_* harness in $build (configure with -DUVLLM_FUZZ=ON, CC=clang)" >&2
    exit 1
fi
bash "$here/make_seeds.sh" "$work/seeds" || exit 1
mkdir -p "$artifacts"
# UBSan only reports by default; make its findings fatal so libFuzzer records them.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
per=$((total / ${#harnesses[@]}))
[ "$per" -lt 1 ] && per=1
# Each libFuzzer process runs on one core: as many harnesses at a time as there are cores,
# so the wall time is about FUZZ_SECONDS / cores for FUZZ_SECONDS of fuzzing.
par=${JOBS:-$(nproc)}
# fuzz HARNESS: one harness for $per seconds; its status in $work/NAME.rc
fuzz() {
    local h=$1 name seeds
    name=$(basename "$h")
    mkdir -p "$work/corpus-$name"
    seeds="$work/seeds/${name#fuzz_}"
    if [ ! -d "$seeds" ]; then
        echo "run.sh: no seed directory for $name (make_seeds.sh writes seeds/${name#fuzz_})" >&2
        echo 1 >"$work/$name.rc"
        return
    fi
    echo "run.sh: $name for ${per}s" >&2
    # -rss_limit_mb bounds what one input may make the reader allocate; -timeout catches hangs.
    if ! "$h" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -max_len=1200000 \
        -print_final_stats=1 -artifact_prefix="$artifacts/$name-" \
        "$work/corpus-$name" "$seeds" >"$work/$name.log" 2>&1; then
        echo "run.sh: $name FOUND A PROBLEM (inputs in $artifacts):" >&2
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/$name.log" | head -20 >&2
        echo 1 >"$work/$name.rc"
    else
        grep -E "stat::number_of_executed_units|stat::new_units_added|^#[0-9]+[[:space:]]+DONE" "$work/$name.log" |
            sed "s/^/run.sh: $name /" >&2
        echo 0 >"$work/$name.rc"
    fi
}
for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
    fuzz "$h" &
done
wait
status=0
for h in "${harnesses[@]}"; do
    name=$(basename "$h")
    [ "$(cat "$work/$name.rc" 2>/dev/null)" = 0 ] || status=1
done
exit $status
