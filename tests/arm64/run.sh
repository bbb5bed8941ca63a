#!/usr/bin/env bash
# make test-arm64: the aarch64 cross build (cmake/aarch64-linux-gnu.cmake, against the
# private sysroot of scripts/arm64_sysroot.sh) run under qemu-user, no ARM hardware needed:
#  - unit_cpu's kernel, quantiser and ISA tests (every kernel against the scalar reference)
#    under three CPU models: cortex-a72 (NEON only), neoverse-n1 (+dotprod), max (+i8mm);
#  - every shared golden (unit_cpu golden/*) on the arm64 binary, at the best ISA (max);
#  - unit_base and unit_model, once (max);
#  - `uvllm serve` answering a chat request (tests/arm64/serve_chat.py) under each model;
#  - docker/Dockerfile's packages exist for arm64, its instructions name nothing x86-only
#    (tests/arm64/image_packages.sh, one apt-cache call: no arm64 image is built here).
# qemu is 10-50x slower than the host: the slow forward-pass suites (batching, pipelines,
# MoE, long-context) stay in `make test` on x86, where the same C runs natively.
#   usage: tests/arm64/run.sh [BUILD_DIR]   (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
out="$(realpath -m "${1:-build-arm64}")"
sysroot="${UVLLM_ARM64_SYSROOT:-$out/sysroot}"
bash scripts/deps.sh --arm64 "$sysroot"
export UVLLM_ARM64_SYSROOT="$sysroot"
cmake -S . -B "$out/build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out/build" -j "${JOBS:-$(nproc)}"
shim="$out/qemu_exec.so"
aarch64-linux-gnu-gcc --sysroot="$sysroot" -O2 -shared -fPIC -o "$shim" tests/arm64/qemu_exec.c -ldl
qemu="$(command -v qemu-aarch64)"
export UVLLM_QEMU="$qemu" UVLLM_QEMU_SHIM="$shim" QEMU_LD_PREFIX="$sysroot" UVLLM_SOURCE_DIR="$src"
# the server binary as the integration harness starts it
wrap="$out/uvllm-qemu"
printf '#!/bin/sh\nexec %s -E LD_PRELOAD=%s %s "$@"\n' "$qemu" "$shim" "$out/build/uvllm" >"$wrap"
chmod +x "$wrap"

fail=0
T0=$(date +%s)
step() { echo "=== test-arm64: $1 ($(($(date +%s) - T0)) s)"; }
bash tests/arm64/image_packages.sh || fail=1
# Each qemu process emulates one core, so the runs below go side by side, as many at a time
# as there are cores (longest first); each writes its own log, printed when it ends.
par=${JOBS:-$(nproc)}
logs="$out/logs"
rm -rf "$logs" && mkdir -p "$logs"
n_jobs=0
# job NAME CPU COMMAND...: COMMAND under CPU model CPU in the background; NAME's log and status
job() {
    local name=$1 cpu=$2
    shift 2
    while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
    step "start $name"
    n_jobs=$((n_jobs + 1))
    (
        export QEMU_CPU=$cpu
        if "$@" >"$logs/$name.log" 2>&1; then echo 0; else echo 1; fi >"$logs/$name.rc"
        echo "=== test-arm64: $name ended ($(($(date +%s) - T0)) s, status $(cat "$logs/$name.rc"))"
    ) &
}
# crit BINARY ARGS...: one criterion binary under qemu
crit() {
    local bin=$1
    shift
    "$qemu" -E LD_PRELOAD="$shim" "$out/build/$bin" --jobs 1 "$@"
}
# per CPU model: that model's kernel table against the f64 reference, the AArch64 products
# against the scalar ones bit for bit, the stacked and packed matrices (test_pack.c; Q8_0
# and Q4_0 are packed on every model, quads for NEON and SDOT, row pairs for SMMLA;
# test_kernels_arm.c holds them to the row kernels' bits), the ops table (expf, SwiGLU, GeGLU, top-k, the tiled attention:
# test_neon_ops.c, test_attn.c's *_neon_*), the ISA detection, the activation
# converters and products through a pool; under max also the fp16/quant edge cases,
# every shared golden (test_golden.c) and the MoE golden (test_moe.c: the router's
# top-k in the forward pass, about a second), at the best ISA
declare -A isa=([cortex-a72]=neon [neoverse-n1]=dotprod [max]=i8mm)
for cpu in max cortex-a72 neoverse-n1; do
    i=${isa[$cpu]}
    f="kernels/${i}_*|kernels/activation_*|kernels/matmul_*|kernels_arm/*|attn/*_neon_*|isa/*|ops_isa/*|pack/*"
    [ "$cpu" = max ] && f="$f|fp16/*|bf16/*|quant/*|golden/*|moe/golden_llama_cpp"
    UVLLM_WANT_ISA=$i job "unit_cpu-$cpu" "$cpu" crit unit_cpu --filter "@($f)"
done
for cpu in cortex-a72 neoverse-n1 max; do
    UVLLM_WANT_ISA=${isa[$cpu]} UVLLM_BIN="$wrap" job "serve_chat-$cpu" "$cpu" \
        python3 tests/arm64/serve_chat.py
done
# GGUF parsing and loading, and the base library (alignment, atomics, timers), once;
# unit_engine and unit_chat (portable C, minutes under qemu) stay with `make test`
for b in unit_base unit_model; do UVLLM_WANT_ISA=i8mm job "$b-max" max crit "$b"; done
wait
for rc in "$logs"/*.rc; do
    name=$(basename "$rc" .rc)
    if [ "$(cat "$rc")" != 0 ]; then
        fail=1
        echo "=== test-arm64: $name FAILED; its log:"
        cat "$logs/$name.log"
    else
        tail -3 "$logs/$name.log" | sed "s/^/[$name] /"
    fi
done
[ "$(ls "$logs"/*.rc | wc -l)" -eq "$n_jobs" ] || { echo "test-arm64: a run left no status" >&2; fail=1; }
step "done"
if [ "$fail" -ne 0 ]; then
    echo "test-arm64: FAILED" >&2
    exit 1
fi
echo "test-arm64: passed"
