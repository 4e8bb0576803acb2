#!/usr/bin/env bash
# apt-install.sh PACKAGE...: install the Debian packages of the list that are not installed yet.
#
# The install-*.sh scripts use it, so that each runs apt only when something is missing and
# works as root or through sudo: one `apt-get install --no-install-recommends`, after an
# `apt-get update` unless the package lists are less than an hour old (then only when the
# install fails, and once more). Prints what it installed, or nothing; exits non-zero when apt fails.
set -euo pipefail

missing=()
for pkg in "$@"; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] || missing+=("$pkg")
done
((${#missing[@]})) || exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
install() { $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
if find /var/lib/apt/lists -maxdepth 1 -name '*Release' -mmin -60 2>/dev/null | grep -q .; then
  install || { $sudo apt-get update -qq && install; }
else
  $sudo apt-get update -qq && install
fi
echo "apt-install: installed ${missing[*]}"
