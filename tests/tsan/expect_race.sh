#!/usr/bin/env bash
# expect_race.sh SYMBOL CMD...: runs CMD (a program with a deliberate data race on SYMBOL,
# built with -fsanitize=thread) and passes only if it fails and ThreadSanitizer reported a
# data race naming SYMBOL: proof that the TSan build and TSAN_OPTIONS used by
# `make test-tsan` do catch races, in a plain program and in a criterion test.
set -u
sym=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | head -40
if [ "$rc" -eq 0 ]; then
    echo "expect_race: '$*' exited 0; a race must fail the run" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -q "WARNING: ThreadSanitizer: data race"; then
    echo "expect_race: no ThreadSanitizer data-race report from '$*' (exit $rc)" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -q "$sym"; then
    echo "expect_race: the report does not name $sym" >&2
    exit 1
fi
echo "expect_race: reported as expected (exit $rc)"
