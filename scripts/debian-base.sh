#!/usr/bin/env bash
# A minimal Debian bookworm root with Python 3 (debootstrap --variant=minbase plus python3), as a
# tarball cached in $CI_EVALS_CACHE (default ~/.cache/ci-evals); prints the tarball's path.
#
# Shared by scripts/container-smoke.sh (imported as the image's base) and scripts/fresh-debian.sh
# (unpacked as the "fresh machine" the README's commands run on). Built once (about a minute),
# then reused; delete the tarball to rebuild it. apt's lists and .deb files are removed, as on a
# freshly installed system that has not run `apt-get update` yet. Needs root; installs debootstrap
# (scripts/apt-install.sh) when it is missing.
set -euo pipefail

cache=${CI_EVALS_CACHE:-$HOME/.cache/ci-evals}
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball="$cache/debian-python3-$suite.tar"

if [[ -s "$tarball" ]]; then
  echo "$tarball"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then  # a fresh machine: installed here (stdout is the path)
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" debootstrap >&2 \
    || { echo "debian-base: debootstrap is not installed and apt-get could not install it" >&2; exit 1; }
fi
mkdir -p "$cache"
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs" "$tarball.$$"' EXIT
echo "debian-base: debootstrap $suite (minbase + python3) from $mirror into $tarball" >&2
debootstrap --variant=minbase --include=python3-minimal,python3 "$suite" "$rootfs" "$mirror" >/dev/null \
  || { echo "debian-base: debootstrap $suite from $mirror failed" >&2; exit 1; }
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -cf "$tarball.$$" .
mv "$tarball.$$" "$tarball"   # atomic: a concurrent run sees the whole tarball or none
echo "$tarball"
