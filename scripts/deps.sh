#!/usr/bin/env bash
# Installs the system packages uvllm needs to build, test and benchmark.
# Idempotent: does nothing when everything is already present.
#   --bench   also the benchmark tools
#   --deploy  also what `make test-deploy` runs: Debian's docker daemon and compose, mmdebstrap
#             (the base image is made locally), python3-kubernetes (manifest validation), kubectl,
#             nginx with its njs module (the routing test runs docker/nginx/nginx.conf on the host)
#   --image   only what compiles the server (no test tools): docker/Dockerfile's build stage;
#             `--image --list` prints those package names instead (tests/arm64/image_packages.sh)
#   --arm64 [DIR]  make test-arm64: the aarch64 cross compiler and qemu-user, and the arm64
#             -dev libraries unpacked into a private sysroot DIR (default build-arm64/sysroot;
#             scripts/arm64_sysroot.sh: apt-get download + dpkg -x, never a multiarch install)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libuv1-dev node-llhttp libcriterion-dev
      libcjson-dev libpcre2-dev libomp-dev clang clang-format libclang-rt-14-dev python3 nodejs npm
      ccache) # ccache: .ci/run's builds reuse the objects of the previous run on the machine
[ "${1:-}" = "--bench" ] && pkgs+=(nginx-light wrk hyperfine)
if [ "${1:-}" = "--deploy" ]; then
    pkgs+=(docker.io docker-compose mmdebstrap python3-kubernetes iproute2 util-linux
           nginx-light libnginx-mod-http-js)
    # kubectl (with kustomize built in) may come with the machine image; Debian's is older.
    command -v kubectl >/dev/null || pkgs+=(kubernetes-client)
fi
if [ "${1:-}" = "--arm64" ]; then
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    missing=()
    for p in gcc-aarch64-linux-gnu qemu-user; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    # apt must know arm64 to download its packages (lists only: nothing arm64 is installed)
    newarch=0
    dpkg --print-foreign-architectures | grep -qx arm64 || { $SUDO dpkg --add-architecture arm64; newarch=1; }
    if [ ${#missing[@]} -gt 0 ] || [ "$newarch" = 1 ]; then
        $SUDO apt-get update -qq
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    exec bash "$(dirname "$0")/arm64_sysroot.sh" "${2:-$(dirname "$0")/../build-arm64/sysroot}"
fi
if [ "${1:-}" = "--image" ]; then
    pkgs=(build-essential cmake pkg-config libuv1-dev libcjson-dev libpcre2-dev)
    # llhttp's C sources: Debian's node-llhttp, unless already copied in (docker/Dockerfile.cuda)
    [ -f /usr/share/llhttp/llhttp.c ] && [ "${2:-}" != --list ] || pkgs+=(node-llhttp)
    [ "${2:-}" = --list ] && { printf '%s\n' "${pkgs[@]}"; exit 0; }
    missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node/npm may come from elsewhere on the image: only ask apt when the commands are absent.
if command -v node >/dev/null && command -v npm >/dev/null; then
    tmp=(); for p in "${missing[@]}"; do [ "$p" = nodejs ] || [ "$p" = npm ] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
command -v python3 >/dev/null && { tmp=(); for p in "${missing[@]+"${missing[@]}"}"; do [ "$p" = python3 ] || tmp+=("$p"); done; missing=("${tmp[@]+"${tmp[@]}"}"); }
# Python Jinja2 is the chat-template oracle of the tests: Debian's when python3 lacks it.
python3 -c 'import jinja2' 2>/dev/null || missing+=(python3-jinja2)
# jsonschema validates structured output independently (tests/integration/test_schema_corpus.py).
python3 -c 'import jsonschema' 2>/dev/null || missing+=(python3-jsonschema)
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The CUDA toolkit (nvcc, cudart, cuBLAS) for src/gpu: this project's machine image ships it
# in /usr/local/cuda (not a Debian package), and CMake's UVLLM_CUDA=AUTO builds the backend
# when it finds nvcc there or on the PATH. Elsewhere, UVLLM_CUDA_DEPS=1 installs Debian's
# nvidia-cuda-toolkit (needs the contrib/non-free components); without either the backend
# is left out and everything else builds and tests as before.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    if [ "${UVLLM_CUDA_DEPS:-0}" = 1 ]; then
        SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            nvidia-cuda-toolkit >/dev/null
    else
        echo "deps: no CUDA toolkit (nvcc): the CUDA backend is not built" >&2
    fi
fi
# The SDKs of the end-to-end tests (OpenAI's, the AI SDK, LangChain, zod), exactly as the lock
# file pins them.
e2e="$(dirname "$0")/../tests/e2e"
if [ ! -d "$e2e/node_modules/openai" ] || [ ! -d "$e2e/node_modules/ai" ] ||
   [ "$e2e/package-lock.json" -nt "$e2e/node_modules/.package-lock.json" ]; then
    (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
