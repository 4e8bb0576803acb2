#!/usr/bin/env bash
# Container smoke test for the Action's image.
#
# Builds the Dockerfile with podman from a Debian base made with debootstrap (passed as
# BASE_IMAGE; Docker Hub is not reachable here), then inside the image: the quickstart dry run
# (exit 0, files written, the PR comment printed), the failing quickstart (exit 1), the Action
# entrypoint with INPUT_* variables (step summary and outputs written), and METEOR's WordNet.
#
# Prints "SKIPPED: <reason>" and exits 0 when podman or debootstrap cannot be installed; any
# failing build or check exits non-zero. The base rootfs is cached in $CI_EVALS_CACHE
# (default ~/.cache/ci-evals) and the image layers in podman's storage, so a second run only
# rebuilds what changed. The base is scripts/debian-base.sh's (shared with scripts/fresh-debian.sh).
set -euo pipefail

started=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base_image=localhost/ci-evals-base:bookworm
image=${CI_EVALS_IMAGE:-localhost/ci-evals:smoke}   # another tag keeps parallel runs apart

say() { printf 'container-smoke: %s\n' "$*"; }
skip() { printf 'SKIPPED: %s\n' "$*"; exit 0; }
fail() { printf 'container-smoke: FAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- tools
missing=()
for tool in podman debootstrap runc; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null 2>&1 || skip "${missing[*]} missing and no apt-get to install them"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    sudo -n true 2>/dev/null || skip "${missing[*]} missing and no root/sudo to install them"
    sudo="sudo -n"
  fi
  say "installing podman buildah debootstrap runc"
  export DEBIAN_FRONTEND=noninteractive
  apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
  if ! $sudo apt-get "${apt_opts[@]}" install -y podman buildah debootstrap runc >/dev/null 2>&1; then
    $sudo apt-get "${apt_opts[@]}" update >/dev/null 2>&1 || true
    $sudo apt-get "${apt_opts[@]}" install -y podman buildah debootstrap runc >/dev/null 2>&1 \
      || skip "apt-get could not install podman/debootstrap/runc"
  fi
fi
podman info >/dev/null 2>&1 || skip "podman is installed but cannot run here ($(podman info 2>&1 | tail -1))"

# ---------------------------------------------------------------- base image (cached)
if podman image exists "$base_image"; then
  say "base image $base_image: cached"
else
  tarball=$(bash "$repo/scripts/debian-base.sh") || fail "scripts/debian-base.sh (debootstrap)"
  podman import -q "$tarball" "$base_image" >/dev/null || fail "podman import $tarball"
fi

# ---------------------------------------------------------------- build
build_t0=$(date +%s)
ca_mount=()
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  # The host's CA bundle for pip, in case TLS goes through a proxy only the host trusts. Not on
  # the image's own bundle path: Debian's ca-certificates package rewrites that file.
  ca_mount=(-v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt)
fi
build_log=$(mktemp)
build() {  # build [extra podman build flags]: the Dockerfile on the debootstrap base
  podman build --pull=never --isolation chroot --layers \
    --build-arg BASE_IMAGE="$base_image" "${ca_mount[@]}" -f "$repo/Dockerfile" "$@" "$repo" >>"$build_log" 2>&1 \
    || { tail -40 "$build_log" >&2; fail "podman build $*"; }
}
# The build stage gets a tag of its own so that pruning old images below keeps its layer cache.
build --target build -t "$image-build"
build -t "$image"
podman image prune -f >/dev/null 2>&1 || true
rm -f "$build_log"
build_s=$(( $(date +%s) - build_t0 ))
size=$(podman image inspect --format '{{.Size}}' "$image")
say "image $image built in ${build_s}s, $(( size / 1000000 )) MB ($(( size / 1048576 )) MiB)"
# The image's size is a feature (issue 25: 453 MB before the slimming, 302 MB / 288 MiB after, on
# this debootstrap base; 335 MB / 320 MiB since the bytecode of every module a run of any kind
# imports is in it, 12 MB gzipped, for 0.1-0.5 s a run: docs/containers.md): a change that makes it
# grow past the limit fails here.
max_mib=${CI_EVALS_IMAGE_MAX_MIB:-330}
(( size / 1048576 <= max_mib )) || fail "image is $(( size / 1048576 )) MiB, more than $max_mib MiB"

# ---------------------------------------------------------------- run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$repo/examples/quickstart" "$work/ws"
mkdir -p "$work/out"

run() {  # run IMAGE with the workspace mounted, no network, the flags that work here
  podman --runtime runc run --pull=never --rm --network none \
    --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    -v "$work/ws:/github/workspace" -v "$work/out:/out" -w /github/workspace "$@"
}

check_files() {  # check_files DIR: the four files every run writes
  for f in summary.json results.jsonl summary.md junit.xml; do
    [[ -s "$1/$f" ]] || fail "$1/$f was not written"
  done
}

gate_passed() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gate"]["passed"])' "$1"; }

set +e
run "$image" run suite.yaml --output /out/pass --dry-run >"$work/pass.log" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$work/pass.log" >&2; fail "quickstart dry run exited $rc, expected 0"; }
check_files "$work/out/pass"
[[ $(gate_passed "$work/out/pass/summary.json") == True ]] || fail "quickstart gate did not pass"
grep -q '^<!-- ci-evals:quickstart' "$work/pass.log" || fail "the dry run did not print the PR comment"
say "quickstart dry run: exit 0, gate passed, files written, comment printed"

set +e
run "$image" run failing-suite.yaml --output /out/fail --dry-run >"$work/fail.log" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$work/fail.log" >&2; fail "failing quickstart exited $rc, expected 1"; }
check_files "$work/out/fail"
[[ $(gate_passed "$work/out/fail/summary.json") == False ]] || fail "failing quickstart gate passed"
say "failing quickstart: exit 1, gate failed, files written"

: >"$work/out/step-summary.md"
: >"$work/out/github-output.txt"
set +e
run -e INPUT_SUITE=suite.yaml -e "INPUT_OUTPUT-DIR=/out/action" -e INPUT_COMMENT=auto \
  -e "INPUT_FAIL-ON-GATE=true" -e GITHUB_EVENT_NAME=push \
  -e GITHUB_STEP_SUMMARY=/out/step-summary.md -e GITHUB_OUTPUT=/out/github-output.txt \
  "$image" >"$work/action.log" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$work/action.log" >&2; fail "action mode exited $rc, expected 0"; }
check_files "$work/out/action"
grep -q '^## ✅ ci-evals · quickstart: passed' "$work/out/step-summary.md" || fail "step summary not written"
grep -q '^passed<<ghadelimiter_' "$work/out/github-output.txt" || fail "outputs not written"
say "action mode: exit 0, step summary and outputs written"

run --entrypoint python "$image" -c '
from nltk.corpus import wordnet as wn
from nltk.translate.meteor_score import meteor_score
assert wn.get_version() == "3.0", wn.get_version()
score = meteor_score([["the", "cat", "sat", "on", "the", "mat"]], ["the", "feline", "sat", "on", "the", "mat"])
assert 0.5 < score < 1.0, score
print(f"WordNet {wn.get_version()}, METEOR {score:.3f}")
' >"$work/wordnet.log" 2>&1 || { cat "$work/wordnet.log" >&2; fail "WordNet/METEOR check"; }
say "$(cat "$work/wordnet.log")"

run --entrypoint python "$image" -c '
import jinja2
def refuse(*a, **k):
    raise AssertionError("report.html compiled again: the image has no compiled template for it")
jinja2.Environment.compile = refuse
from ci_evals.reports import html
html.template()
print(f"report.html template loaded compiled from {html.cache_dir()}")
' >"$work/template.log" 2>&1 || { cat "$work/template.log" >&2; fail "the compiled template in the image"; }
say "$(cat "$work/template.log")"

# Every module a run of any built-in kind imports has its bytecode in the image (the image runs
# with PYTHONDONTWRITEBYTECODE=1 on a fresh container: a module without it compiles on every run).
run --entrypoint python -v "$repo/scripts/warm-bytecode.py:/warm-bytecode.py:ro" "$image" \
  /warm-bytecode.py --check >"$work/bytecode.log" 2>&1 \
  || { cat "$work/bytecode.log" >&2; fail "modules without bytecode in the image"; }
say "$(cat "$work/bytecode.log")"

say "passed in $(( $(date +%s) - started ))s (image $(( size / 1000000 )) MB)"
