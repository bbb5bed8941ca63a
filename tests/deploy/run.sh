#!/usr/bin/env bash
# make test-deploy: the container image, nginx in front of replicas and the Kubernetes manifests,
# tested for real on this machine without touching its network.
#
#   daemon A  docker daemon in the host's network namespace, with its own socket, data root,
#             exec root and pidfile, and no bridge, iptables or forwarding: it only builds
#             (with --network host, since no registry is reached: debian:bookworm-slim is made
#             here with mmdebstrap and imported).
#   daemon B  a second daemon inside a network namespace made here (ip netns add; started
#             through nsenter, since `ip netns exec` fails for dockerd): its bridges and
#             iptables rules stay inside that namespace. It runs the compose stack and the
#             containers that tests/deploy/stack_test.py checks (run in the same namespace).
#
# Everything started here (daemons, their containerd shims, mounts, the namespace, the work
# folder) is removed on exit, also on failure or interruption.
# UVLLM_DEPLOY_CACHE=DIR keeps daemon A's data root (the base image and build layers) in DIR
# between local runs; CI leaves it unset and starts from nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
UVLLM_SHARED=${UVLLM_SHARED:-$ROOT/../shared}
[ "$(id -u)" -eq 0 ] || { echo "test-deploy: needs root (docker daemons, a network namespace)" >&2; exit 1; }

T0=$(date +%s)
log() { printf '[deploy %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
W=$(mktemp -d /tmp/uvllm-deploy.XXXXXX)
# The daemons' data roots on a tmpfs: faster layers on a busy disk, and removing them on exit
# is an unmount instead of a long rm -rf (about 2 GB at most while the test runs).
mount -t tmpfs -o size=8g,mode=0700 uvllm-deploy "$W" || { rmdir "$W"; exit 1; }
NS=uvllm-deploy-$$
A_DATA=$W/a-data
CACHED=
if [ -n "${UVLLM_DEPLOY_CACHE:-}" ]; then
    mkdir -p "$UVLLM_DEPLOY_CACHE"
    # One daemon per data root: a second run while one holds the cache starts from nothing.
    exec 9>"$UVLLM_DEPLOY_CACHE/lock"
    if flock -n 9; then
        CACHED=1 A_DATA=$(cd "$UVLLM_DEPLOY_CACHE" && pwd)/docker-data
    else
        echo "test-deploy: $UVLLM_DEPLOY_CACHE is in use by another run: no cache" >&2
    fi
fi
export DOCKER_BUILDKIT=0 # the legacy builder: no buildx plugin is needed

stop_daemon() { # name
    local pidf=$W/$1.pid pid i
    [ -f "$pidf" ] || return 0
    pid=$(cat "$pidf")
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? pid m
    set +e
    trap - EXIT INT TERM
    log "cleaning up (exit $rc)"
    if [ -S "$W/b.sock" ]; then
        export DOCKER_HOST=unix://$W/b.sock
        docker ps -aq | xargs -r docker rm -f >/dev/null 2>&1
    fi
    stop_daemon b
    log "daemon B stopped"
    stop_daemon a
    log "daemon A stopped"
    # containerd shims (and anything else) whose command line names this run's folder
    for pid in $(grep -lsa -- "$W" /proc/[0-9]*/cmdline | cut -d/ -f3); do
        [ "$pid" != $$ ] && kill -KILL "$pid" 2>/dev/null
    done
    # mounts below the work folder, deepest first (data-root overlays, the netns' daemon files)
    for m in $(awk -v w="$W/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r); do
        umount -l "$m" 2>/dev/null
    done
    if [ -n "$CACHED" ]; then
        for m in $(awk -v w="$A_DATA" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r); do
            umount -l "$m" 2>/dev/null
        done
    fi
    ip netns del "$NS" 2>/dev/null
    umount "$W" 2>/dev/null || umount -l "$W"
    rmdir "$W"
    log "done in $(($(date +%s) - T0)) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_daemon() { # name data-root prefix-command... -- dockerd flags...
    local name=$1 data=$2 pre=() i
    shift 2
    while [ "$1" != -- ]; do pre+=("$1"); shift; done
    shift
    "${pre[@]}" dockerd --host "unix://$W/$name.sock" --data-root "$data" \
        --exec-root "$W/$name-exec" --pidfile "$W/$name.pid" "$@" >"$W/$name.log" 2>&1 &
    for i in $(seq 1 600); do # 120 s: a daemon took 35 s to answer at load 17
        DOCKER_HOST=unix://$W/$name.sock docker version >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "test-deploy: dockerd $name did not start:" >&2
    tail -20 "$W/$name.log" >&2
    return 1
}

log "work folder $W, namespace $NS"
start_daemon a "$A_DATA" env -- --bridge=none --iptables=false --ip-forward=false --ip-masq=false
export DOCKER_HOST=unix://$W/a.sock

# Daemon B and the linters in the background while A builds.
(
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    start_daemon b "$W/b-data" nsenter "--net=/var/run/netns/$NS" --
) >"$W/b-start.log" 2>&1 &
b_start=$!
(npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$W/lint" dockerfile-utils@0.16.3) \
    >"$W/lint-install.log" 2>&1 &
lint_install=$!

if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    log "base image debian:bookworm-slim: cached in $A_DATA"
else
    log "base image debian:bookworm-slim: mmdebstrap --variant=minbase bookworm | docker import"
    TMPDIR=$W mmdebstrap --variant=minbase bookworm - 2>"$W/mmdebstrap.log" |
        docker import - debian:bookworm-slim >/dev/null || { tail -20 "$W/mmdebstrap.log"; exit 1; }
fi

log "building uvllm:test (make image) and uvllm-nginx:test"
make --no-print-directory image IMAGE=uvllm:test UVLLM_SHARED="$UVLLM_SHARED" >"$W/build-uvllm.log" 2>&1 &
build_uvllm=$!
docker build --network host -t uvllm-nginx:test docker/nginx >"$W/build-nginx.log" 2>&1 &
build_nginx=$!
wait $build_nginx || { tail -30 "$W/build-nginx.log"; exit 1; }
wait $build_uvllm || { tail -30 "$W/build-uvllm.log"; exit 1; }
log "built: $(docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep ':test' | tr '\n' ' ')"

wait $b_start || { cat "$W/b-start.log"; tail -20 "$W/b.log"; exit 1; }
log "daemon B up in namespace $NS; loading the images into it"
docker save uvllm:test uvllm-nginx:test | DOCKER_HOST=unix://$W/b.sock docker load >/dev/null
wait $lint_install || { cat "$W/lint-install.log"; exit 1; }

log "running tests/deploy/stack_test.py in namespace $NS"
DOCKER_HOST=unix://$W/b.sock UVLLM_SHARED="$UVLLM_SHARED" DEPLOY_WORK="$W" \
    DOCKERFILE_UTILS="$W/lint/node_modules/.bin/dockerfile-utils" \
    nsenter "--net=/var/run/netns/$NS" /usr/bin/python3 tests/deploy/stack_test.py
