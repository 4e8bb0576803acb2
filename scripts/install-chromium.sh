#!/usr/bin/env bash
# Install Debian's chromium for the report.html browser tests (tests marked `browser`).
#
# Only the distribution's packages: nothing downloads a browser build (no `playwright install`).
# The tests drive it with Playwright's Python package at $CI_EVALS_CHROMIUM (default
# /usr/bin/chromium). Playwright's driver is a Node binary that needs libatomic.so.1 (Debian's
# libatomic1, absent from minimal installs), so that is installed too, with a font for the
# screenshots. Safe to run again: does nothing when all of it is installed.
set -euo pipefail

bin="${CI_EVALS_CHROMIUM:-/usr/bin/chromium}"
pkgs=(libatomic1 fonts-dejavu-core)
[[ -x "$bin" ]] || pkgs+=(chromium)
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${pkgs[@]}"

if [[ ! -x "$bin" ]]; then
  echo "install-chromium: apt installed chromium but $bin is missing" >&2
  exit 1
fi
echo "install-chromium: $("$bin" --version 2>/dev/null || echo chromium) at $bin, with libatomic1 for Playwright's driver"
