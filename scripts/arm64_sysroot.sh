#!/usr/bin/env bash
# A private arm64 sysroot for the aarch64 cross build (cmake/aarch64-linux-gnu.cmake) and for
# qemu-aarch64 -L: the arm64 .deb files of the -dev libraries and everything they pull in,
# fetched with `apt-get download` and unpacked with `dpkg -x`. Never a multiarch install
# (`apt-get install foo:arm64`): on a shared host that can replace the amd64 -dev packages.
# Needs `dpkg --add-architecture arm64` in apt's lists (scripts/deps.sh --arm64 adds it).
#   usage: scripts/arm64_sysroot.sh DIR   (idempotent: a complete DIR is left as it is)
set -euo pipefail
dir="$(realpath -m "${1:?usage: $0 SYSROOT_DIR}")"
stamp="$dir/.complete"
[ -f "$stamp" ] && exit 0
roots=(libc6-dev libuv1-dev libcriterion-dev libcjson-dev libpcre2-dev)
# every arm64 package the roots depend on, transitively (virtual names <...> left out)
mapfile -t debs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${roots[@]/%/:arm64}" |
    grep -E '^[a-z0-9].*:arm64$' | sort -u)
[ ${#debs[@]} -gt 0 ] || { echo "arm64_sysroot: no arm64 packages (apt lists?)" >&2; exit 1; }
dl="$dir.debs"
mkdir -p "$dl" "$dir"
(cd "$dl" && apt-get download -qq "${debs[@]}" >/dev/null)
for d in "$dl"/*.deb; do dpkg -x "$d" "$dir"; done
# absolute symlinks (libfoo.so -> /lib/aarch64-linux-gnu/libfoo.so.N) must point inside DIR
find "$dir" -type l -lname '/*' | while read -r l; do
    ln -sfn "$dir$(readlink "$l")" "$l"
done
# usrmerge: qemu -L and the linker look in lib/ as well as usr/lib/
for d in lib lib64; do
    if [ -d "$dir/usr/$d" ] && [ ! -e "$dir/$d" ]; then ln -s "usr/$d" "$dir/$d"; fi
done
rm -rf "$dl"
touch "$stamp"
