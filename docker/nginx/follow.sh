#!/bin/sh
# nginx resolves `server uvllm:8080` only when it starts or reloads. Where replicas come and go
# (Kubernetes: scaling, rollouts, rescheduling; the name is a headless Service), this runs nginx
# and reloads it whenever the name's addresses change, checked every UVLLM_RESOLVE_INTERVAL
# seconds (default 5). A reload finishes requests in flight on the old workers; consistent
# hashing moves only the conversations of the replicas that came or went.
# Signals: QUIT/TERM stop nginx gracefully, HUP reloads it.
set -u
name=${UVLLM_UPSTREAM_NAME:-uvllm}
interval=${UVLLM_RESOLVE_INTERVAL:-5}
addrs() { getent ahostsv4 "$name" 2>/dev/null | cut -d' ' -f1 | sort -u | tr '\n' ' '; }

# nginx refuses to start on a name that does not resolve (no replica ready yet)
old=$(addrs)
while [ -z "$old" ]; do
    echo "follow: waiting for '$name' to resolve" >&2
    sleep 1
    old=$(addrs)
done
nginx -g 'daemon off;' &
pid=$!
trap 'kill -QUIT $pid' QUIT TERM
trap 'kill -HUP $pid' HUP
while kill -0 "$pid" 2>/dev/null; do
    sleep "$interval" &
    wait $! 2>/dev/null
    new=$(addrs)
    if [ -n "$new" ] && [ "$new" != "$old" ]; then
        echo "follow: '$name' is now $new: reloading" >&2
        kill -HUP "$pid"
        old=$new
    fi
done
wait "$pid"
