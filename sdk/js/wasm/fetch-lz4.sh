#!/usr/bin/env bash
# Puts liblz4's C sources for the WebAssembly build in DEST (default: ./lz4) and prints the
# lib/ directory on the last line of stdout. They are Debian's own source package of the
# liblz4-dev installed here (the same LZ4 release the native libtenso links), downloaded by
# apt-get from a private source list - nothing of the machine's apt configuration changes -
# and checked by apt against the archive's signed index.
#
#   fetch-lz4.sh [DEST]
#
# A no-op (no network) when DEST already holds that version.
set -euo pipefail

dest="${1:-$PWD/lz4}"
log() { printf 'fetch-lz4.sh: %s\n' "$*" >&2; }

version="$(dpkg-query -W -f='${Version}\n' liblz4-dev 2>/dev/null | head -n1 || true)"
if [[ -z "$version" ]]; then
    log "liblz4-dev is not installed (tests/tools/bootstrap.sh installs it)"
    exit 1
fi
upstream="${version#*:}"
upstream="${upstream%-*}"
lib="$dest/lz4-$upstream/lib"
if [[ -f "$lib/lz4frame.c" && -f "$dest/.debian-version" && "$(cat "$dest/.debian-version")" == "$version" ]]; then
    printf '%s\n' "$lib"
    exit 0
fi

# Debian's source index for the release this machine runs (its own archive and keyring).
codename="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-bookworm}")"
work="$dest/.apt"
rm -rf "$work" "$dest/lz4-$upstream"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$work/src"
cat >"$work/parts/lz4-source.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "Debug::NoLocking=1"
          -o "APT::Sandbox::User=root" -q)
log "downloading Debian's lz4 $version source package"
apt-get "${apt_opts[@]}" update >&2
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only "lz4=$version" >&2)
tar -xzf "$work/src/lz4_$upstream.orig.tar.gz" -C "$dest"
rm -rf "$work"
printf '%s\n' "$version" >"$dest/.debian-version"
printf '%s\n' "$lib"
