#!/usr/bin/env bash
# make test-hostile: tests/hostile/hostile.py (64 connections of each hostile kind for 60 s
# beside 16 honest streams; see its --help), in a session of its own whose autogroup runs at
# nice $BENCH_NICE (default -15, as root; bench/lib.sh own_session) so the shared machine's
# other work disturbs the measurement less; the server and the measuring clients run at that
# priority, the attacker process at nice +10. Writes the "hostile" section of
# bench/RESULTS.md; fails when a bound is missed. HOSTILE_ARGS passes more options
# (e.g. "--seconds 20 --baseline 10" for a quick run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../bench/lib.sh"
own_session "$@"
need_shared models/aidreams260K.gguf
[ -x "$UVLLM_BIN" ] || die "no uvllm binary at $UVLLM_BIN (make build)"
out="$WORK/hostile.md"
rc=0
# shellcheck disable=SC2086
nice -n "${BENCH_NICE:--15}" python3 "$ROOT/tests/hostile/hostile.py" --bin "$UVLLM_BIN" \
    --model "$SHARED/models/aidreams260K.gguf" --report "$out" --log "$WORK/hostile-server.log" \
    ${HOSTILE_ARGS:-} || rc=$?
if [ -s "$out" ]; then
    { cat "$out"; echo; echo "uvllm commit $(uvllm_commit)."; } >"$out.section"
    results_section hostile "$out.section"
fi
exit "$rc"
