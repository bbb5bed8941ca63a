#!/usr/bin/env bash
# HTTP benchmark (issue 2): wrk on GET /health against `uvllm serve --backend
# null`, against Debian's nginx (one worker, a fixed `return 200` location,
# access log off) and against llama-server (aidreams260K, --threads 1, one
# slot). One worker each; every server is pinned to core $CPU_SERVER and wrk
# to core $CPU_CLIENT. Runs are interleaved (uvllm, nginx, llama-server, then
# again) so machine noise hits all three alike; medians of $RUNS runs.
# Target: uvllm >= 0.9x nginx. Writes the "http" section of RESULTS.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WRK_ARGS=(-t1 -c64 -d"${HTTP_DURATION:-5}"s --latency)
bench_dir "http"
need_shared models/aidreams260K.gguf
command -v wrk >/dev/null || die "wrk not installed (scripts/deps.sh --bench)"
command -v nginx >/dev/null || die "nginx not installed (scripts/deps.sh --bench)"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

declare -A PORT NOTE SPID
names=()

# --- uvllm -----------------------------------------------------------------
if uvllm_has serve; then
    PORT[uvllm]=$(free_port)
    taskset -c "$CPU_SERVER" "$UVLLM_BIN" serve --backend null --host 127.0.0.1 \
        --port "${PORT[uvllm]}" --log-level warn --max-conns 10000 >"$D/uvllm.log" 2>&1 &
    pids+=($!); SPID[uvllm]=$!
    if wait_http "${PORT[uvllm]}" /health 10; then names+=(uvllm); else
        NOTE[uvllm]="server did not answer /health (see bench/work/http/uvllm.log)"; fi
else
    NOTE[uvllm]="not ready: \`uvllm serve\` is not implemented in the benchmarked binary (repo HEAD $(uvllm_commit))"
fi

# --- nginx -------------------------------------------------------------------
PORT[nginx]=$(free_port)
mkdir -p "$D/nginx/logs" "$D/nginx/tmp"
cat >"$D/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $D/nginx/nginx.pid;
error_log $D/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $D/nginx/tmp/body;
    proxy_temp_path $D/nginx/tmp/proxy;
    fastcgi_temp_path $D/nginx/tmp/fastcgi;
    uwsgi_temp_path $D/nginx/tmp/uwsgi;
    scgi_temp_path $D/nginx/tmp/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:${PORT[nginx]};
        location /health { default_type application/json; return 200 '{"status":"ok"}'; }
    }
}
CONF
taskset -c "$CPU_SERVER" nginx -p "$D/nginx" -c "$D/nginx/nginx.conf" >"$D/nginx.log" 2>&1 &
pids+=($!)
if wait_http "${PORT[nginx]}" /health 10; then names+=(nginx); SPID[nginx]=$(pgrep -P "${pids[-1]}" | head -1); else
    NOTE[nginx]="nginx did not start (see bench/work/http/nginx.log)"; fi

# --- llama-server ------------------------------------------------------------
if [ -x "$LLAMA_BIN/llama-server" ]; then
    PORT[llama]=$(free_port)
    taskset -c "$CPU_SERVER" "$LLAMA_BIN/llama-server" -m "$SHARED/models/aidreams260K.gguf" \
        --host 127.0.0.1 --port "${PORT[llama]}" --threads 1 --threads-batch 1 -np 1 -c 128 \
        --log-disable >"$D/llama.log" 2>&1 &
    pids+=($!); SPID[llama]=$!
    if wait_http "${PORT[llama]}" /health 60; then names+=(llama); else
        NOTE[llama]="llama-server did not answer /health (see bench/work/http/llama.log)"; fi
else
    NOTE[llama]="llama-server not built (run bench/peer.sh)"
fi

# --- interleaved wrk runs ----------------------------------------------------
declare -A RPS P99 ERR WAIT
for ((r = 1; r <= RUNS; r++)); do
    for n in "${names[@]}"; do
        out="$D/wrk-$n-$r.txt"
        w0=$(runq_wait "${SPID[$n]}"); t0=$(date +%s.%N)
        taskset -c "$CPU_CLIENT" wrk "${WRK_ARGS[@]}" "http://127.0.0.1:${PORT[$n]}/health" >"$out" 2>&1 || true
        w=$(awk -v a="$w0" -v b="$(runq_wait "${SPID[$n]}")" -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN{printf "%.0f", 100*(b-a)/(t1-t0)}')
        WAIT[$n]="${WAIT[$n]:-} $w"
        rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
        p99=$(awk '$1=="99%"{print $2}' "$out")
        bad=$(awk '/Non-2xx or 3xx responses:/{s+=$NF} /Socket errors:/{gsub(",","");s+=$4+$6+$8+$10} END{print s+0}' "$out")
        RPS[$n]="${RPS[$n]:-} $rps"; P99[$n]="${P99[$n]:-} $p99"; ERR[$n]=$(( ${ERR[$n]:-0} + bad ))
        echo "http: run $r $n: $rps req/s, p99 $p99, errors $bad, server run-queue wait $w%" >&2
    done
done

# --- report ------------------------------------------------------------------
label() { case $1 in uvllm) echo "uvllm serve --backend null";; nginx) echo "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///')";; llama) echo "llama-server (aidreams260K)";; esac; }
declare -A MED
sec="$D/section.md"
{
    echo "## HTTP: GET /health (wrk)"
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit); peer llama.cpp $(peer_commit)"
    echo "- command: \`taskset -c $CPU_CLIENT wrk ${WRK_ARGS[*]} http://127.0.0.1:PORT/health\`, servers pinned with \`taskset -c $CPU_SERVER\`, $RUNS runs per server, interleaved; median."
    echo "- servers: \`uvllm serve --backend null --log-level warn\` (one loop thread); nginx \`worker_processes 1\`, \`access_log off\`, \`return 200 '{\"status\":\"ok\"}'\`; \`llama-server -m aidreams260K.gguf --threads 1 -np 1\` (its HTTP thread pool left at the default, all of it confined to the one core)."
    echo
    echo "| server | median req/s | runs (req/s) | median p99 latency | non-2xx + socket errors | server run-queue wait, % of run (runs) |"
    echo "| --- | ---: | --- | ---: | ---: | --- |"
    for n in uvllm nginx llama; do
        if [[ " ${names[*]} " == *" $n "* ]]; then
            # shellcheck disable=SC2086
            MED[$n]=$(median ${RPS[$n]})
            # p99 carries units (us/ms/s); report the runs' middle one as printed.
            p=$(printf '%s\n' ${P99[$n]} | awk '{v=$1; if (v~/us$/) x=v+0; else if (v~/ms$/) x=(v+0)*1000; else x=(v+0)*1e6; print x, v}' | sort -g | awk '{a[NR]=$2} END{print a[int((NR+1)/2)]}')
            echo "| $(label $n) | ${MED[$n]} | ${RPS[$n]# } | $p | ${ERR[$n]} | ${WAIT[$n]# } |"
        else
            echo "| $(label $n) | — | ${NOTE[$n]} | — | — | — |"
        fi
    done
    echo
    r1=$(ratio "${MED[uvllm]:-}" "${MED[nginx]:-}"); r2=$(ratio "${MED[uvllm]:-}" "${MED[llama]:-}")
    echo "- ratio uvllm / nginx: **$r1** (target >= 0.90: $(awk -v r="$r1" 'BEGIN{ if (r=="n/a") print "not measured"; else if (r+0 >= 0.9) print "met"; else print "MISSED" }'))"
    echo "- ratio uvllm / llama-server: **$r2**"
    echo "- run-queue wait: time the server threads (summed over threads: llama-server has many, uvllm two, nginx one) were runnable while another process held core $CPU_SERVER (schedstat), as a share of the run; high values mean the shared machine, not the server, set the pace of that run."
    echo "- note: uvllm's /health body carries scheduler and connection counters (about 140 bytes) where nginx returns 15 bytes."
} >"$sec"
results_section http "$sec"
cat "$sec"
