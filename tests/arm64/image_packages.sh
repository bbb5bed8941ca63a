#!/usr/bin/env bash
# make test-arm64's check that docker/Dockerfile builds unchanged on an arm64 host, without
# one (no docker daemon, buildx or binfmt here): the C is what tests/arm64/run.sh already
# cross-builds (the same CMakeLists.txt and target uvllm; UVLLM_TESTS=OFF only drops the
# tests), so what is left is the Dockerfile itself:
#  - every package its build stage installs (scripts/deps.sh --image --list) and its
#    runtime stage installs (the apt-get install line) exists for arm64 in apt's lists
#    (Debian bookworm, as the image's base; scripts/deps.sh --arm64 added the arm64 lists),
#    as an arm64 .deb or an Architecture: all one;
#  - no x86-only compiler flag, architecture or platform is written in its instructions.
#   usage: tests/arm64/image_packages.sh [DOCKERFILE]   (default docker/Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/../.."
df="${1:-docker/Dockerfile}"
fail=0
# the runtime stage's packages: the words between `install ... --no-install-recommends` and
# the redirection, over the continuation lines
runtime=$(sed -n '/apt-get install/,/>\/dev\/null/p' "$df" | tr -d '\\' | tr ' ' '\n' |
    sed -n '/--no-install-recommends/,/>\/dev\/null/p' | grep -E '^[a-z0-9][a-z0-9.+-]+$' || true)
[ -n "$runtime" ] || { echo "image_packages: no runtime packages found in $df" >&2; exit 1; }
names=($(bash scripts/deps.sh --image --list) $runtime)
# one apt-cache call for all (each loads apt's whole cache: seconds on a loaded machine);
# names it does not know are left out of its output
known=$(apt-cache show --no-all-versions "${names[@]/%/:arm64}" "${names[@]}" 2>/dev/null |
    awk '/^Package:/ { p = $2 } /^Architecture:/ { print p " " $2 }' || true)
for p in "${names[@]}"; do
    grep -qxE "$p (arm64|all)" <<<"$known" && continue
    echo "image_packages: $p (from $df) has no arm64 or all package in apt's lists" >&2
    fail=1
done
# instructions only (comments may name architectures)
if grep -nvE '^[[:space:]]*#' "$df" |
    grep -E -- '-m(avx|sse|fma|f16c|arch=(x86|native)|tune=native)|amd64|x86[-_]64|--platform' >&2; then
    echo "image_packages: $df's instructions name an x86-only flag, architecture or platform" >&2
    fail=1
fi
[ "$fail" = 0 ] && echo "image_packages: ${#names[@]} packages of $df exist for arm64; no x86-only flags"
exit "$fail"
