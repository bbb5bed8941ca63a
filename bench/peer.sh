#!/usr/bin/env bash
# Builds the peer, llama.cpp, natively for this CPU so every benchmark can
# compare uvllm with it in the same run. The source comes from the git bundle
# shipped inside the node-llama-cpp npm package (installed with
# --ignore-scripts: no prebuilt binaries are fetched, nothing runs at install).
# Idempotent: each step is skipped when its output already exists.
# Output: bench/work/llama.cpp/build/bin/{llama-bench,llama-batched-bench,
# llama-server,llama-tokenize}. Never commit anything under bench/work.
# PEER_ISA=avx2: a second build for AVX2+FMA+F16C with AVX-512 off, in build-avx2/ (the
# peer of uvllm's UVLLM_ISA=avx2 on an AVX-512 host; on an AVX2 host the native build is
# that already).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$HERE/work"
NLC_VERSION="${NLC_VERSION:-3.22.1}"
JOBS="${BENCH_JOBS:-2}"
LLAMA="$WORK/llama.cpp"
BUILD="$LLAMA/build"
ISA_FLAGS=(-DGGML_NATIVE=ON)
if [ "${PEER_ISA:-native}" = avx2 ]; then
    BUILD="$LLAMA/build-avx2"
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
        -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF)
fi
BIN="$BUILD/bin"
TARGETS=(llama-bench llama-batched-bench llama-server llama-tokenize)
mkdir -p "$WORK"

bundle="$WORK/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
    echo "peer: npm install node-llama-cpp@$NLC_VERSION (--ignore-scripts)" >&2
    npm install --prefix "$WORK/npm" "node-llama-cpp@$NLC_VERSION" --ignore-scripts \
        --no-audit --no-fund >&2
fi
[ -f "$bundle" ] || { echo "peer: $bundle missing after npm install" >&2; exit 1; }

if [ ! -d "$LLAMA/.git" ]; then
    echo "peer: cloning $bundle" >&2
    git clone -q "$bundle" "$LLAMA"
fi

built=1
for t in "${TARGETS[@]}"; do [ -x "$BIN/$t" ] || built=0; done
if [ "$built" = 0 ]; then
    echo "peer: building ${TARGETS[*]} with -j$JOBS" >&2
    cmake -S "$LLAMA" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${ISA_FLAGS[@]}" \
        -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON >/dev/null
    cmake --build "$BUILD" --target "${TARGETS[@]}" -j "$JOBS" >&2
fi
for t in "${TARGETS[@]}"; do [ -x "$BIN/$t" ] || { echo "peer: $BIN/$t not built" >&2; exit 1; }; done
git -C "$LLAMA" log -1 --format='%H %cs %s'
