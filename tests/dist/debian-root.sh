#!/usr/bin/env bash
# Runs a script as root inside a fresh Debian bookworm root, the way a new user's machine looks:
#
#   debian-root.sh CACHE_DIR ROOT_DIR SCRIPT [HOST_PATH:ROOT_PATH[:ro]]...
#
# CACHE_DIR/bookworm.tar is made once with mmdebstrap (--variant=apt: essential packages, apt,
# plus a compiler, make, cmake and pkg-config, which every test here needs) from Debian's
# archive, and reused; a changed package list makes a new one. Every call unpacks it into a
# new ROOT_DIR, copies SCRIPT in and runs it with bash under `chroot`, in a private mount
# namespace (unshare): /dev, /proc and the HOST_PATH binds exist there only, and vanish with
# the process, so nothing stays mounted if the test dies. The root resolves names as the host
# does and fetches further packages from Debian's archive itself. ROOT_DIR is removed after a
# successful run and kept for inspection after a failure.
#
# Needs root (chroot, mounts), mmdebstrap, unshare. Environment: TENSO_DEBIAN_MIRROR (default
# http://deb.debian.org/debian).
set -euo pipefail

log() { printf 'debian-root: %s\n' "$*" >&2; }
if (($# < 3)); then
    sed -n '2,17p' "${BASH_SOURCE[0]}" >&2
    exit 2
fi
cache="$1" root="$2" script="$3"
shift 3
if [[ "$(id -u)" != 0 ]]; then
    log "needs root (chroot and mounts)"
    exit 1
fi
for tool in mmdebstrap unshare chroot tar; do
    command -v "$tool" >/dev/null || { log "$tool not found (tests/tools/bootstrap.sh --dist)"; exit 1; }
done

mirror="${TENSO_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
include="gcc,g++,make,cmake,pkg-config"
tarball="$cache/bookworm.tar"
stamp="$tarball.packages"
mkdir -p "$cache"
exec 8>"$cache/.lock"
flock 8  # two tests at once make it once
if [[ ! -f "$tarball" || "$(cat "$stamp" 2>/dev/null)" != "$include $mirror" ]]; then
    log "making the Debian root $tarball (mmdebstrap, once; about 500 MB)"
    rm -rf "$tarball" "$stamp" "$cache/bookworm.tmp.tar"
    # The output's extension chooses the format: .tar
    mmdebstrap --quiet --variant=apt --include="$include" bookworm "$cache/bookworm.tmp.tar" "$mirror"
    mv "$cache/bookworm.tmp.tar" "$tarball"
    printf '%s\n' "$include $mirror" >"$stamp"
fi
flock -u 8

# A stale root of an earlier failed run: never follow mounts out of it (there are none outside
# a namespace, but -xdev costs nothing).
if [[ -e "$root" ]]; then
    find "$root" -xdev -depth -delete
fi
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
cp "$script" "$root/run.sh"

binds=()
for spec in "$@"; do
    IFS=: read -r host inside mode <<<"$spec"
    mkdir -p "$root$inside"
    binds+=("mount --bind '$host' '$root$inside'")
    if [[ "$mode" == ro ]]; then
        binds+=("mount -o remount,bind,ro '$root$inside'")
    fi
done

setup="mount --rbind /dev '$root/dev' && mount -t proc proc '$root/proc'"
for b in "${binds[@]}"; do setup+=" && $b"; done
if unshare --mount --propagation private bash -c "$setup && exec chroot '$root' /usr/bin/env -i \
        HOME=/root TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive bash -euo pipefail /run.sh"; then
    find "$root" -xdev -depth -delete
else
    rc=$?
    log "the script failed ($rc); the root is kept in $root"
    exit "$rc"
fi
