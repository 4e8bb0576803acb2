#!/usr/bin/env bash
# The README's two set-up commands, as pasted, on a fresh minimal Debian bookworm root.
#
# Proves "two commands set everything up on a fresh machine" somewhere other than the
# developer's already-provisioned host: a Debian bookworm minbase root with python3 (the README's
# stated prerequisite; scripts/debian-base.sh builds it once and caches it under
# $CI_EVALS_CACHE, default ~/.cache/ci-evals) is unpacked into a temporary folder, this checkout's
# files (tracked and untracked, not ignored; no .git, no .venv) are copied in, and inside it, as
# root in a chroot with its own mount and PID namespaces (so every mount and every process it
# started goes away with it):
#   0. the README's one-time prerequisite, `apt-get install python3-venv` (after apt-get update:
#      the cached root has no package lists),
#   0b. the hashed lock (requirements-test-lock.txt) into .venv, which the README's commands then
#      reuse, so the suite runs on the locked versions (unless CI_EVALS_UNLOCKED=1),
#   1. the README's quickstart command (install, then the offline quickstart),
#   2. the README's test command (install scripts, test extras, the whole test suite).
# Both commands are read from README.md (the fenced `sh` lines that create .venv), so the README
# cannot drift from what is proven here. Each step's seconds are printed; the exit code is the
# first failing step's (1 when a command cannot be found in the README).
#
# `--print-commands` prints the two commands it would run and exits.
# Environment:
#   CI_EVALS_SHUFFLE=SEED  run the tests in a random order (pytest-randomly) with that seed,
#                          through PYTEST_ADDOPTS, so the pasted command itself stays unchanged;
#                          "random" picks a seed. The seed is printed either way.
#   CI_EVALS_ARTIFACTS     where the browser tests' screenshots are copied afterwards.
#   CI_EVALS_KEEP_ROOT=1   keep the root folder afterwards (its path is printed).
#   CI_EVALS_UNLOCKED=1    skip the lock: the commands install pyproject's ranges, newest.
# pip's cache (~/.cache/pip) and apt's .deb cache ($CI_EVALS_CACHE/apt-archives) are shared with
# the root, so a second run downloads no .deb and rebuilds no wheel (pip keeps what the registry
# lets it cache); /etc/hosts is written as Debian's installer does. The host's CA bundle is given to pip as
# PIP_CERT (the README's advice behind a TLS-intercepting proxy). Needs root, tar, unshare and
# chroot (util-linux, coreutils) and, for the first run, debootstrap.
set -euo pipefail

started=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CI_EVALS_CACHE:-$HOME/.cache/ci-evals}

say() { printf 'fresh-debian: %s\n' "$*"; }
fail() { printf 'fresh-debian: FAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- the README's commands
# The quickstart: the .venv line that runs the quickstart; the tests: the .venv line that runs pytest.
readme_line() {  # readme_line REGEX: the first line of a ```sh block of README.md matching REGEX
  awk -v re="$1" '/^```/ { if (block) { block = 0; insh = 0 } else { block = 1; insh = ($0 ~ /^```(sh|bash|console)?$/) }; next }
                  insh && $0 ~ re { print; exit }' "$repo/README.md"
}
quickstart=$(readme_line 'python3 -m venv \.venv.*pip install \. .*ci-evals run examples/quickstart/suite\.yaml')
tests=$(readme_line 'python3 -m venv \.venv.*pip install "\.\[test\]".*pytest')
[[ -n $quickstart ]] || fail "README.md has no sh line with the quickstart command (python3 -m venv .venv ... pip install . ... ci-evals run examples/quickstart/suite.yaml)"
[[ -n $tests ]] || fail "README.md has no sh line with the test command (python3 -m venv .venv ... pip install \".[test]\" ... pytest)"

if [[ ${1:-} == --print-commands ]]; then  # what would run (tests/test_docs.py checks it)
  printf '%s\n' "$quickstart" "$tests"
  exit 0
fi
[[ $# -eq 0 ]] || fail "usage: scripts/fresh-debian.sh [--print-commands]"
[[ $(id -u) -eq 0 ]] || fail "needs root (chroot and mounts); run it with sudo"
for tool in unshare chroot tar mount; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing"
done

# ---------------------------------------------------------------- the root
t0=$(date +%s)
tarball=$(bash "$repo/scripts/debian-base.sh")
root=$(mktemp -d "${TMPDIR:-/var/tmp}/ci-evals-fresh.XXXXXX")
cleanup() {
  if [[ ${CI_EVALS_KEEP_ROOT:-} == 1 ]]; then say "root kept in $root"; else rm -rf "$root"; fi
}
trap cleanup EXIT
tar -C "$root" -xf "$tarball"
mkdir -p "$root/work/ci-evals" "$cache/apt-archives/partial" "$HOME/.cache/pip"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
   [[ -e $f ]] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -C "$root/work/ci-evals" -xf -
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# What Debian's installer writes and debootstrap does not: without it `localhost` does not resolve
# (pytest-httpserver binds localhost).
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
say "root unpacked from $tarball and checkout copied in $(( $(date +%s) - t0 ))s"

host_ca=/etc/ssl/certs/ca-certificates.crt
seed=${CI_EVALS_SHUFFLE:-}
[[ $seed != random ]] || seed=$(( RANDOM * 32768 + RANDOM ))
if [[ -n $seed ]]; then
  [[ $seed =~ ^[0-9]+$ ]] || fail "CI_EVALS_SHUFFLE must be a number or 'random', not '$seed'"
  say "tests in a random order: pytest -p randomly --randomly-seed=$seed (rerun with CI_EVALS_SHUFFLE=$seed)"
fi

# ---------------------------------------------------------------- inside: steps, each timed
# Runs as the child of `unshare --mount --pid --fork`: the mounts below are private to it and
# its processes (the browser too) are killed when it exits.
inside=$(cat <<'INSIDE'
set -euo pipefail
root=$1 ca=$2 pipcache=$3 aptcache=$4 seed=$5 quickstart=$6 tests=$7 unlocked=$8
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"; mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
mount -t tmpfs -o mode=1777 tmp "$root/tmp"
mount --rbind /sys "$root/sys"; mount --make-rslave "$root/sys"
mkdir -p "$root/root/.cache/pip" "$root/run/host"
mount --bind "$pipcache" "$root/root/.cache/pip"
mount --bind "$aptcache" "$root/var/cache/apt/archives"
if [[ -f $ca ]]; then touch "$root/run/host/ca.crt"; mount --bind -o ro "$ca" "$root/run/host/ca.crt"; fi
# As on an installed system, apt's download folders belong to its sandbox user (no warnings).
chroot "$root" /bin/sh -c 'mkdir -p /var/lib/apt/lists/partial && chown _apt:root /var/lib/apt/lists/partial /var/cache/apt/archives/partial'
env_=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
      TERM=dumb DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1)
[[ ! -f $ca ]] || env_+=(PIP_CERT=/run/host/ca.crt)
[[ -z $seed ]] || env_+=("PYTEST_ADDOPTS=-p randomly --randomly-seed=$seed")
step() {  # step NAME COMMAND: run COMMAND in the root's checkout with bash, timed
  local t0 rc; t0=$(date +%s)
  printf 'fresh-debian: == %s\nfresh-debian: $ %s\n' "$1" "$2"
  set +e
  chroot "$root" /usr/bin/env -i "${env_[@]}" /bin/bash -c 'cd /work/ci-evals && eval "$1"' bash "$2"
  rc=$?
  set -e
  printf 'fresh-debian: %s: exit %d in %ds\n' "$1" "$rc" "$(( $(date +%s) - t0 ))"
  return "$rc"
}
step "prerequisite (README: once, apt-get install python3-venv)" \
  "apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null"
# The README's commands install with pyproject's ranges (as a user's would); here they find the
# hashed lock already in .venv (they reuse it: "create (or reuse)"), so the suite runs on exactly
# the locked versions and a new release elsewhere cannot turn it red (.ci/run's deps-newest step
# hears about that). CI_EVALS_UNLOCKED=1 runs the commands as pasted on an empty .venv.
if [[ -z $unlocked ]]; then
  step "locked dependencies into .venv (requirements-test-lock.txt, hashes checked)" \
    "python3 -m venv .venv && .venv/bin/python -m pip install -q --require-hashes -r requirements-test-lock.txt"
fi
step "README quickstart command" "$quickstart"
step "README test command" "$tests"
INSIDE
)
set +e
unshare --mount --pid --fork --propagation private bash -c "$inside" bash \
  "$root" "$host_ca" "$HOME/.cache/pip" "$cache/apt-archives" "$seed" "$quickstart" "$tests" "${CI_EVALS_UNLOCKED:+1}"
rc=$?
set -e
if [[ -n ${CI_EVALS_ARTIFACTS:-} && -d $root/work/ci-evals/build/screenshots ]]; then
  mkdir -p "$CI_EVALS_ARTIFACTS" && cp -r "$root/work/ci-evals/build/screenshots/." "$CI_EVALS_ARTIFACTS/"
fi
if [[ $rc -ne 0 ]]; then
  say "FAILED (exit $rc) after $(( $(date +%s) - started ))s"
  exit "$rc"
fi
say "passed in $(( $(date +%s) - started ))s"
