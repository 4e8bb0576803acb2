#!/usr/bin/env bash
# Install the command-line tools the tests run, from Debian's packages: curl (the Letta cleanup
# command that ci-evals prints for leftover agents is run for real by tests/test_letta_agents.py)
# and git (`ci-evals init` in a repository: tests/test_init.py checks what `git status` shows).
# Safe to run again: does nothing when they are installed.
set -euo pipefail
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" curl git
echo "install-test-tools: $(curl --version | head -1 | cut -d' ' -f1-2), $(git --version)"
