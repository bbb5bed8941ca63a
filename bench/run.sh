#!/usr/bin/env bash
# Runs every benchmark (`make bench`): builds the peer (llama.cpp) if needed,
# then the HTTP, SSE, tokenizer and engine benchmarks, each of which rewrites
# its own section of bench/RESULTS.md. A benchmark that fails is reported and
# the others still run. BENCH_RUNS (default 5) sets the runs per measurement.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x "$UVLLM_BIN" ] || echo "bench: $UVLLM_BIN not found (build first, or set UVLLM_BIN); uvllm rows will say not ready" >&2
bash "$BENCH_DIR/peer.sh" || die "the peer (llama.cpp) could not be built"

sec="$WORK/header.md"
{
    echo "Written by \`bench/run.sh\` (\`make bench\`); each benchmark can be run alone"
    echo "(\`bench/http.sh\`, \`bench/sse.sh\`, \`bench/chat.sh\`, \`bench/tokenizer.sh\`, \`bench/engine.sh\`) and"
    echo "rewrites only its own section. Ratios compare uvllm and the peer measured"
    echo "in the same run, interleaved, on a shared and noisy 2-core machine."
    echo
    echo "- machine: $(machine_line)"
    echo "- uvllm: $(uvllm_commit), binary $UVLLM_BIN"
    echo "- peer: llama.cpp $(peer_commit), from node-llama-cpp@${NLC_VERSION:-3.22.1}'s git bundle, built by bench/peer.sh with -DGGML_NATIVE=ON (CPU only)"
} >"$sec"
results_section header "$sec"

rc=0
for b in http sse chat tokenizer tokenizer-distinct engine batched attn_share decode_bw; do
    echo "bench: === $b ===" >&2
    case $b in
    tokenizer-distinct) TOK_CORPUS=distinct bash "$BENCH_DIR/tokenizer.sh" ;;
    *) bash "$BENCH_DIR/$b.sh" ;;
    esac || { echo "bench: $b failed" >&2; rc=1; }
done
exit $rc
