#!/usr/bin/env bash
# Throwaway venvs of the tools the Letta tests drive, all installed at once into DIR:
#   DIR/lc     Letta Code; DIR/bin/letta links its CLI alone (its venv's python on PATH would shadow ours)
#   DIR/le05   letta-evals 0.5.0 with letta-client 0.x
#   DIR/le018  letta-evals 0.18.0
#   DIR/le026  letta-evals 0.26.0
# The versions are those of scripts/letta-tools.env, which .ci/run installs too. For running the
# Letta Code and oracle tests by hand (docs/letta-evals-oracle.md). Prints each install's seconds;
# exits 1 if any failed (the pip output of that one is printed).
set -uo pipefail
dir=${1:?usage: install-letta-tools.sh DIR}
mkdir -p "$dir"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# shellcheck source=scripts/letta-tools.env
. "$(dirname "$0")/letta-tools.env"

install() {  # NAME PACKAGE...
  local name=$1 t0
  t0=$(date +%s)
  shift
  if python3 -m venv "$dir/$name" && "$dir/$name/bin/pip" install -q "$@" >"$dir/$name.log" 2>&1; then
    echo "installed $name ($*): $(( $(date +%s) - t0 )) s"
  else
    echo "FAILED to install $name ($*):"
    cat "$dir/$name.log"
    return 1
  fi
}

# shellcheck disable=SC2086  # each *_REQS is a list of requirements
{
  install lc $LETTA_CODE_REQS & lc=$!
  install le05 $LETTA_EVALS_05_REQS & le05=$!
  install le018 $LETTA_EVALS_018_REQS & le018=$!
  install le026 $LETTA_EVALS_026_REQS & le026=$!
}
rc=0
for pid in "$lc" "$le05" "$le018" "$le026"; do
  wait "$pid" || rc=1
done
[ "$rc" -ne 0 ] || { mkdir -p "$dir/bin" && ln -sf "$dir/lc/bin/letta" "$dir/bin/letta"; } || rc=1
exit "$rc"
