#!/usr/bin/env bash
# Install Debian's chromium for the report.html browser tests (tests marked `browser`).
#
# Only the distribution's package: nothing downloads a browser build (no `playwright install`).
# The tests drive it with Playwright's Python package at $CI_EVALS_CHROMIUM (default
# /usr/bin/chromium). Safe to run again: does nothing when chromium is already installed.
set -euo pipefail

bin="${CI_EVALS_CHROMIUM:-/usr/bin/chromium}"
if [[ -x "$bin" ]]; then
  echo "install-chromium: $("$bin" --version 2>/dev/null || echo chromium) already at $bin"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null

if [[ ! -x "$bin" ]]; then
  echo "install-chromium: apt installed chromium but $bin is missing" >&2
  exit 1
fi
echo "install-chromium: $("$bin" --version 2>/dev/null || echo chromium) installed at $bin"
