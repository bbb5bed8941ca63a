#!/bin/sh
# The nginx image's command: writes one `server ADDRESS:PORT` line per address of the replicas'
# name (UVLLM_UPSTREAM_NAME, default `uvllm`: compose's scaled service, or a Kubernetes headless
# Service) into /etc/nginx/upstream.d/uvllm.conf, which nginx.conf's upstream includes, starts
# nginx, and rewrites the file and reloads nginx whenever the addresses change, checked every
# UVLLM_RESOLVE_INTERVAL seconds (default 5). Addresses rather than the name: nginx's
# consistent hash places servers on its ring by their `server` text, so a name with N
# addresses would be one place. A reload lets the old workers finish their requests; the
# consistent hash moves only the conversations of the replicas that came or went.
# Signals: QUIT/TERM stop nginx gracefully; HUP re-resolves and reloads.
set -u
name=${UVLLM_UPSTREAM_NAME:-uvllm}
port=${UVLLM_UPSTREAM_PORT:-8080}
interval=${UVLLM_RESOLVE_INTERVAL:-5}
conf=/etc/nginx/upstream.d/uvllm.conf
addrs() { getent ahostsv4 "$name" 2>/dev/null | cut -d' ' -f1 | sort -u | tr '\n' ' '; }
write() {
    : >"$conf.new"
    for a in $1; do
        echo "server $a:$port max_fails=1 fail_timeout=5s;" >>"$conf.new"
    done
    mv "$conf.new" "$conf"
}

mkdir -p /etc/nginx/upstream.d
cur=$(addrs)
while [ -z "$cur" ]; do # nginx cannot start without a server
    echo "follow: waiting for '$name' to resolve" >&2
    sleep 1
    cur=$(addrs)
done
write "$cur"
echo "follow: '$name' is $cur" >&2
nginx -g 'daemon off;' &
pid=$!
reload() {
    new=$(addrs)
    if [ -n "$new" ] && { [ "$new" != "$cur" ] || [ "${1:-}" = force ]; }; then
        echo "follow: '$name' is now $new: reloading" >&2
        write "$new"
        cur=$new
        kill -HUP "$pid"
    fi
}
trap 'kill -QUIT $pid' QUIT TERM
trap 'reload force' HUP
while kill -0 "$pid" 2>/dev/null; do
    sleep "$interval" &
    wait $! 2>/dev/null
    reload
done
wait "$pid"
