#!/usr/bin/env bash
# Refresh the hashed locks from pyproject.toml's ranges, newest versions that fit (one command:
# `bash scripts/lock.sh`; `--check` fails when a lock no longer matches pyproject.toml):
#   requirements-lock.txt       the runtime dependencies with the anthropic, google and text extras:
#                           what the Docker image installs (pip install --require-hashes);
#   requirements-test-lock.txt  the same plus the test extra: what .ci/run's host venv and the fresh
#                           Debian root install before the README's commands.
# Both are universal (every platform, Python >= 3.11: python:3.12-slim and Debian's 3.11 alike)
# and carry the sha256 of every file of every pinned version, so an install from them is the
# same on every machine or fails. uv resolves them; it comes from the test extra (uv on PATH), or
# is installed into a throwaway venv under $CI_EVALS_CACHE (default ~/.cache/ci-evals).
# Users who `pip install` the package still get pyproject.toml's ranges.
# Dependabot (.github/dependabot.yml) proposes the same refresh weekly.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=0
case ${1:-} in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/lock.sh [--check]" >&2; exit 2 ;;
esac

uv=$(command -v uv || true)
if [[ -z $uv ]]; then
  tools=${CI_EVALS_CACHE:-$HOME/.cache/ci-evals}/uv-venv
  [[ -x $tools/bin/uv ]] || { python3 -m venv "$tools" && "$tools/bin/python" -m pip install -q uv; }
  uv=$tools/bin/uv
fi

compile() {  # compile OUTPUT EXTRA...: uv pip compile pyproject.toml with those extras, in $PWD
  local out=$1 args=()
  shift
  for extra in "$@"; do args+=(--extra "$extra"); done
  "$uv" pip compile -q pyproject.toml "${args[@]}" --universal --python-version 3.11 \
    --generate-hashes --index-url https://pypi.org/simple -o "$out"
}
lock() {  # lock OUTPUT EXTRA...: refresh OUTPUT, or with --check compare it with a fresh resolve
  local out=$1
  if ((check)); then
    # Resolve again in a scratch copy, keeping every pin the lock has (uv upgrades nothing that
    # still fits): a lock that pyproject's ranges no longer allow, or that misses a dependency,
    # then differs.
    local scratch
    scratch=$(mktemp -d)
    cp pyproject.toml README.md "$out" "$scratch/"
    (cd "$scratch" && compile "$@")
    if ! diff -u "$out" "$scratch/$out"; then
      rm -rf "$scratch"
      echo "lock: $out does not match pyproject.toml: run bash scripts/lock.sh" >&2
      return 1
    fi
    rm -rf "$scratch"
  else
    compile "$@"
  fi
  echo "lock: $out: $(grep -c '^[A-Za-z0-9].*==' "$out") packages"
}
lock requirements-lock.txt anthropic google text
lock requirements-test-lock.txt anthropic google text test
