#!/usr/bin/env bash
# Throwaway venvs of the tools the Letta tests drive, all installed at once into DIR:
#   DIR/lc     Letta Code (PyPI letta>=0.32.13, Node bundled); DIR/bin/letta links its CLI alone
#              (its venv's python on PATH would shadow ours)
#   DIR/le05   letta-evals 0.5.0 with letta-client 0.1.324 (the newest 0.x: 1.x cannot import it)
#   DIR/le018  letta-evals 0.18.0 (the last with letta_agent targets and gates)
#   DIR/le026  letta-evals 0.26.0 (letta_code target, reward blocks)
# .ci/run starts it in the background while the Letta server starts and its tests run, so the
# installs cost no wall time of their own there. Prints each install's seconds; exits 1 if any
# failed (the pip output of that one is printed).
set -uo pipefail
dir=${1:?usage: install-letta-tools.sh DIR}
mkdir -p "$dir"
export PIP_DISABLE_PIP_VERSION_CHECK=1

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

install lc 'letta>=0.32.13' & lc=$!
install le05 'letta-evals==0.5.0' 'letta-client==0.1.324' & le05=$!
install le018 'letta-evals==0.18.0' & le018=$!
install le026 'letta-evals==0.26.0' & le026=$!
rc=0
for pid in "$lc" "$le05" "$le018" "$le026"; do
  wait "$pid" || rc=1
done
[ "$rc" -ne 0 ] || { mkdir -p "$dir/bin" && ln -sf "$dir/lc/bin/letta" "$dir/bin/letta"; } || rc=1
exit "$rc"
