#!/usr/bin/env bash
# Installs the system packages uvllm needs to build, test and benchmark.
# Idempotent: does nothing when everything is already present.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libuv1-dev node-llhttp libcriterion-dev
      libcjson-dev libpcre2-dev libomp-dev clang clang-format libclang-rt-14-dev python3 nodejs npm)
[ "${1:-}" = "--bench" ] && pkgs+=(nginx-light wrk hyperfine)
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
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
